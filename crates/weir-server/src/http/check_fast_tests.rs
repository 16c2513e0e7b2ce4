//! The hand reader against `serde_json`: whatever it reads, `serde_json` reads the same;
//! the plain bodies clients send, it reads; the rest it leaves to `serde_json`.

use proptest::prelude::*;

use super::read;
use crate::http::check::CheckBody;
use weir_listen::http::parse;

/// What `serde_json` makes of `body` (the path every body took before the hand reader).
fn by_serde(body: &[u8]) -> Result<CheckRequest<Cow<'_, str>>, String> {
    parse::<CheckBody>(body)
        .and_then(CheckBody::into_request)
        .map_err(|e| e.message)
}

use std::borrow::Cow;
use weir_engine::CheckRequest;

/// `read` answered only what `serde_json` answers the same.
fn agrees(body: &[u8]) -> Result<(), TestCaseError> {
    if let Some(fast) = read(body) {
        match by_serde(body) {
            Ok(slow) => prop_assert_eq!(fast, slow, "{}", String::from_utf8_lossy(body)),
            Err(e) => prop_assert!(
                false,
                "read accepted what serde refuses ({e}): {}",
                String::from_utf8_lossy(body)
            ),
        }
    }
    Ok(())
}

#[test]
fn reads_the_plain_bodies_clients_send() {
    let bench = br#"{"domain":"api","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.3.7"}]}]}"#;
    let request = read(bench).expect("the bench's body is plain");
    assert_eq!(request.domain, "api");
    assert_eq!(request.hits_addend, 1);
    assert_eq!(
        request.descriptors[0].entries,
        [(Cow::Borrowed("remote_address"), Cow::Borrowed("10.0.3.7"))]
    );
    let spaced = b" {\n \"hits\" : 3 ,\"domain\":\"d\",\t\"descriptors\":[ {\"hits_addend\":2,\"entries\":[{\"value\":\"v\",\"key\":\"k\"},{\"key\":\"\xc3\xa9\",\"value\":\"\"}]},{\"entries\":[]}]}\r\n";
    let request = read(spaced).expect("whitespace, field order, UTF-8 and empty lists");
    assert_eq!(request.hits_addend, 3);
    assert_eq!(request.descriptors[0].hits_addend, Some(2));
    assert_eq!(request.descriptors.len(), 2);
    for body in [&bench[..], &spaced[..]] {
        assert_eq!(read(body), by_serde(body).ok());
    }
}

#[test]
fn leaves_everything_else_to_serde() {
    for body in [
        &br#"{"domain":"a\"b","descriptors":[]}"#[..],
        br#"{"domain":"a","descriptors":[],"hits":null}"#,
        br#"{"domain":"a","descriptors":[],"hits":1.0}"#,
        br#"{"domain":"a","descriptors":[],"hits":1e2}"#,
        br#"{"domain":"a","descriptors":[],"hits":-1}"#,
        br#"{"domain":"a","descriptors":[],"hits":01}"#,
        br#"{"domain":"a","descriptors":[],"hits":18446744073709551616}"#,
        br#"{"domain":"a","descriptors":[],"hits":1,"hits_addend":1}"#,
        br#"{"domain":"a","domain":"b","descriptors":[]}"#,
        br#"{"domain":"a","descriptors":[],"extra":1}"#,
        br#"{"descriptors":[]}"#,
        br#"{"domain":"a"}"#,
        br#"{"domain":"a","descriptors":[{}]}"#,
        br#"{"domain":"a","descriptors":[{"entries":[{"key":"k"}]}]}"#,
        br#"{"domain":"a","descriptors":[{"entries":[],"limit":{"requests_per_unit":1,"unit":"second"}}]}"#,
        br#"{"domain":"a","descriptors":[],}"#,
        br#"{"domain":"a","descriptors":[{"entries":[],}]}"#,
        br#"{"domain":"a","descriptors":[]} x"#,
        br#"{"domain":"a","descriptors":[]}{}"#,
        b"{\"domain\":\"a\tb\",\"descriptors\":[]}",
        b"{\"domain\":\"\xff\",\"descriptors\":[]}",
        b"\xef\xbb\xbf{\"domain\":\"a\",\"descriptors\":[]}",
        b"",
        b"[]",
    ] {
        assert_eq!(read(body), None, "{}", String::from_utf8_lossy(body));
    }
}

/// A JSON token of the body's grammar, often plain, sometimes what only serde reads or
/// nobody does.
fn string_token() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9._-]{0,8}".prop_map(|s| format!("\"{s}\"")),
        1 => Just("\"a\\\"b\"".to_string()),
        1 => Just("\"\\u00e9\"".to_string()),
        1 => Just("\"\u{e9}\u{1F600}\"".to_string()),
        1 => Just("\"a\tb\"".to_string()),
        1 => Just("null".to_string()),
        1 => Just("7".to_string()),
        1 => Just("\"unterminated".to_string()),
    ]
}

fn number_token() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<u64>().prop_map(|n| n.to_string()),
        2 => (0u64..5).prop_map(|n| n.to_string()),
        1 => Just("null".to_string()),
        1 => Just("-1".to_string()),
        1 => Just("-0".to_string()),
        1 => Just("01".to_string()),
        1 => Just("1.0".to_string()),
        1 => Just("1e3".to_string()),
        1 => Just("18446744073709551616".to_string()),
        1 => Just("\"1\"".to_string()),
    ]
}

fn ws() -> impl Strategy<Value = &'static str> {
    prop_oneof![6 => Just(""), 1 => Just(" "), 1 => Just("\n\t "), 1 => Just("\r")]
}

/// An object of `members` (name, value), shuffled, each with optional whitespace.
fn object(members: Vec<(String, String)>) -> impl Strategy<Value = String> {
    let n = members.len();
    (
        Just(members).prop_shuffle(),
        prop::collection::vec((ws(), ws()), n + 1),
    )
        .prop_map(|(members, spaces)| {
            let mut out = String::from("{");
            for (i, ((name, value), (a, b))) in members.iter().zip(&spaces).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&format!("{a}\"{name}\"{b}:{b}{value}{a}"));
            }
            out.push('}');
            out
        })
}

/// A member name: the right one mostly, sometimes an unknown one or none (dropped).
fn name(right: &'static str) -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        12 => Just(Some(right.to_string())),
        1 => Just(Some(format!("{right}x"))),
        1 => Just(None),
    ]
}

fn entry() -> impl Strategy<Value = String> {
    (name("key"), string_token(), name("value"), string_token())
        .prop_map(|(k, kv, v, vv)| {
            [(k, kv), (v, vv)]
                .into_iter()
                .filter_map(|(n, value)| Some((n?, value)))
                .collect::<Vec<_>>()
        })
        .prop_flat_map(object)
}

fn list(item: BoxedStrategy<String>, max: usize) -> impl Strategy<Value = String> {
    (prop::collection::vec(item, 0..max), ws())
        .prop_map(|(items, w)| format!("[{w}{}]", items.join(",")))
}

fn descriptor() -> impl Strategy<Value = String> {
    (
        name("entries"),
        list(entry().boxed(), 3),
        prop::option::of(number_token()),
        prop::option::weighted(
            0.1,
            Just("{\"requests_per_unit\":1,\"unit\":\"second\"}".to_string()),
        ),
    )
        .prop_map(|(e, entries, hits, limit)| {
            let mut members: Vec<(String, String)> = e.map(|e| (e, entries)).into_iter().collect();
            members.extend(hits.map(|h| ("hits_addend".to_string(), h)));
            members.extend(limit.map(|l| ("limit".to_string(), l)));
            members
        })
        .prop_flat_map(object)
}

fn body() -> impl Strategy<Value = String> {
    (
        name("domain"),
        string_token(),
        name("descriptors"),
        list(descriptor().boxed(), 3),
        prop::option::of((
            prop_oneof![Just("hits"), Just("hits_addend")],
            number_token(),
        )),
        prop::option::weighted(0.05, Just(("domain".to_string(), "\"twice\"".to_string()))),
        ws(),
        prop::option::weighted(0.05, prop_oneof![Just("x"), Just("{}"), Just(",")]),
    )
        .prop_flat_map(|(d, domain, l, descriptors, hits, twice, w, tail)| {
            let mut members: Vec<(String, String)> = d.map(|d| (d, domain)).into_iter().collect();
            members.extend(l.map(|l| (l, descriptors)));
            members.extend(hits.map(|(n, h)| (n.to_string(), h)));
            members.extend(twice);
            (object(members), Just(w), Just(tail))
        })
        .prop_map(|(object, w, tail)| format!("{w}{object}{w}{}", tail.unwrap_or("")))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Generated bodies, plain or not: what the reader answers, serde answers the same.
    #[test]
    fn agrees_with_serde_on_generated_bodies(body in body()) {
        agrees(body.as_bytes())?;
    }

    /// A plain body with one byte changed, inserted or removed: still no disagreement.
    #[test]
    fn agrees_with_serde_on_mutated_bodies(
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        how in 0u8..3,
    ) {
        let mut body = br#"{"domain":"api","hits":2,"descriptors":[{"entries":[{"key":"remote_address","value":"10.0.3.7"},{"key":"path","value":"/a"}],"hits_addend":1}]}"#.to_vec();
        let i = at.index(body.len());
        match how {
            0 => body[i] = byte,
            1 => body.insert(i, byte),
            _ => { body.remove(i); }
        }
        agrees(&body)?;
    }
}

proptest! {
    /// Any request without escapes or overrides, as `serde_json` writes it, is read, and
    /// read right.
    #[test]
    fn reads_what_serde_json_writes(
        domain in "[a-z0-9._/-]{1,12}",
        descriptors in prop::collection::vec(
            (prop::collection::vec(("[a-z_]{1,10}", "[ -!#-\\[\\]-~]{0,16}"), 1..4), prop::option::of(0u64..100)),
            1..4,
        ),
        hits in prop::option::of(any::<u64>()),
    ) {
        let mut body = serde_json::json!({
            "domain": domain,
            "descriptors": descriptors.iter().map(|(entries, hits_addend)| {
                let mut d = serde_json::json!({
                    "entries": entries.iter().map(|(k, v)| serde_json::json!({"key": k, "value": v})).collect::<Vec<_>>(),
                });
                if let Some(h) = hits_addend {
                    d["hits_addend"] = serde_json::json!(h);
                }
                d
            }).collect::<Vec<_>>(),
        });
        if let Some(h) = hits {
            body["hits"] = serde_json::json!(h);
        }
        let text = serde_json::to_vec(&body).unwrap();
        let fast = read(&text);
        prop_assert!(fast.is_some(), "{}", String::from_utf8_lossy(&text));
        prop_assert_eq!(fast, by_serde(&text).ok());
    }
}
