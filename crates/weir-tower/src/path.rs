//! A request path as backends resolve it, so that no spelling of a path walks around a
//! limit on it: the tower layer matches its path conditions and keys `KeyBy::path` on it,
//! and `weir proxy` builds its path descriptor from it. Pure; no I/O.
//!
//! What it does, each a reading every common backend makes (RFC 3986 §6.2.2):
//! - percent-encoded **unreserved** characters (`A-Z a-z 0-9 - . _ ~`) are decoded
//!   (`/%6Cogin` is `/login`); other escapes are kept, their hex digits in upper case
//!   (`%2f` is `%2F`, never a `/`);
//! - empty and `.` segments are dropped, `..` goes up one segment (never above the root);
//! - a trailing slash is kept; the result always starts with `/`.

/// The path `path` names for a backend.
///
/// ```
/// use weir_tower::normalise_path;
/// assert_eq!(normalise_path("/x/./././y"), "/x/y");
/// assert_eq!(normalise_path("//a/b/../c/"), "/a/c/");
/// assert_eq!(normalise_path("/a/%2e%2E/../b"), "/b");
/// assert_eq!(normalise_path("/%6Cogin"), "/login");
/// assert_eq!(normalise_path("/a%2fb"), "/a%2Fb");
/// assert_eq!(normalise_path(""), "/");
/// ```
pub fn normalise_path(path: &str) -> String {
    let decoded = decode_unreserved(path);
    let mut segments: Vec<&str> = Vec::new();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            _ => segments.push(segment),
        }
    }
    let mut out = String::with_capacity(decoded.len().max(1));
    for segment in &segments {
        out.push('/');
        out.push_str(segment);
    }
    if out.is_empty() || (decoded.ends_with('/') && !segments.is_empty()) {
        out.push('/');
    }
    out
}

/// `path` with escapes of unreserved characters decoded and the others' hex in upper case.
fn decode_unreserved(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escape = (b == b'%')
            .then(|| Some((hex(*bytes.get(i + 1)?)?, hex(*bytes.get(i + 2)?)?)))
            .flatten();
        match escape {
            Some((hi, lo)) => {
                let c = char::from(hi << 4 | lo);
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~') {
                    out.push(c);
                } else {
                    out.push('%');
                    out.push(upper_hex(hi));
                    out.push(upper_hex(lo));
                }
                i += 3;
            }
            None => {
                // Whole UTF-8 sequences are copied as they are (a path is a &str).
                let len = utf8_len(b);
                out.push_str(path.get(i..i + len).unwrap_or_default());
                i += len.max(1);
            }
        }
    }
    out
}

fn hex(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

fn upper_hex(nibble: u8) -> char {
    char::from_digit(u32::from(nibble), 16)
        .unwrap_or('0')
        .to_ascii_uppercase()
}

/// The length of the UTF-8 sequence a leading byte starts.
fn utf8_len(b: u8) -> usize {
    match b {
        0xf0.. => 4,
        0xe0.. => 3,
        0xc0.. => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_one_path_is_one_path() {
        for spelling in [
            "/login",
            "//login",
            "/./login",
            "/login/.",
            "/x/../login",
            "/%6cogin",
            "/%6C%6F%67%69%6E",
            "/%2e/login",
            "/a/%2E%2e/login",
        ] {
            assert_eq!(normalise_path(spelling), "/login", "{spelling}");
        }
        assert_eq!(normalise_path("/login/"), "/login/");
    }

    #[test]
    fn reserved_escapes_stay_escaped_and_text_stays_text() {
        assert_eq!(normalise_path("/a%2Fb/c"), "/a%2Fb/c");
        assert_eq!(normalise_path("/a%2fb"), "/a%2Fb");
        assert_eq!(normalise_path("/%zz/%4"), "/%zz/%4");
        assert_eq!(normalise_path("/ünï/%41"), "/ünï/A");
        assert_eq!(normalise_path("/../.."), "/");
    }

    #[test]
    fn normalising_is_idempotent() {
        for path in ["/a/%2e%2e/%2e/b", "/%252e/x", "//%7E/", "/a%2f..%2fb"] {
            let once = normalise_path(path);
            assert_eq!(normalise_path(&once), once, "{path}");
        }
    }
}
