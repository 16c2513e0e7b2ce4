//! A request path as backends resolve it, so that no spelling of a path walks around a
//! limit on it: the tower layer matches its path conditions and keys `KeyBy::path` on it,
//! and `weir proxy` builds its path descriptor from it. Pure; no I/O.
//!
//! [`normalise_path`] (and [`PathMatch::Exact`](crate::PathMatch::Exact)) reads a path as RFC 3986 §6.2.2 does, a
//! reading every common backend makes:
//! - percent-encoded **unreserved** characters (`A-Z a-z 0-9 - . _ ~`) are decoded
//!   (`/%6Cogin` is `/login`); other escapes are kept, their hex digits in upper case
//!   (`%2f` is `%2F`, never a `/`);
//! - empty and `.` segments are dropped, `..` goes up one segment (never above the root);
//! - a trailing slash is kept; the result always starts with `/`.
//!
//! [`PathMatch`](crate::PathMatch) (`path_match.rs`) is the proxy's choice of reading,
//! built on this one's pieces (segment resolution, escapes).

use std::borrow::Cow;

/// The path `path` names for a backend: `path` itself, borrowed, when it is already normal
/// (most are), else the rebuilt path.
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
pub fn normalise_path(path: &str) -> Cow<'_, str> {
    if is_normal(path) {
        return Cow::Borrowed(path);
    }
    Cow::Owned(rebuild(path))
}

/// Whether `path` is already its normal form: from `/`, no escape, no empty, `.` or `..`
/// segment (a last empty one, a trailing `/`, is kept). Most paths are: they skip the
/// decoding and the rebuilding (on every request of `weir proxy` and of a path key).
fn is_normal(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    if path.contains('%') {
        return false;
    }
    let mut segments = rest.split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        match segment {
            "" if last => {}
            "" | "." | ".." => return false,
            _ => {}
        }
    }
    true
}

/// The normal form of any path: escapes decoded, segments resolved.
fn rebuild(path: &str) -> String {
    let decoded = decode_unreserved(path);
    let segments = resolve(decoded.split('/'));
    let trailing = decoded.ends_with('/') && !segments.is_empty();
    join(&segments, trailing, |out, segment| out.push_str(segment))
}

/// Segments with empty and `.` ones dropped and each `..` taking one off (never above the
/// root): the one resolution both readings share.
pub(crate) fn resolve<'a>(segments: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut resolved = Vec::new();
    for segment in segments {
        match segment {
            "" | "." => {}
            ".." => {
                resolved.pop();
            }
            _ => resolved.push(segment),
        }
    }
    resolved
}

/// `/a/b` from `[a, b]` (each written by `write`), `/` for none, with a trailing `/` if
/// asked.
pub(crate) fn join(segments: &[&str], trailing: bool, write: impl Fn(&mut String, &str)) -> String {
    let mut out = String::with_capacity(segments.iter().map(|s| s.len() + 1).sum::<usize>() + 1);
    for segment in segments {
        out.push('/');
        write(&mut out, segment);
    }
    if out.is_empty() || trailing {
        out.push('/');
    }
    out
}

/// The byte the escape at `bytes[i]` (a `%`) encodes, if two hex digits follow it.
pub(crate) fn escape_at(bytes: &[u8], i: usize) -> Option<u8> {
    let hi = hex(*bytes.get(i + 1)?)?;
    let lo = hex(*bytes.get(i + 2)?)?;
    Some(hi << 4 | lo)
}

/// `path` with escapes of unreserved characters decoded and the others' hex in upper case.
fn decode_unreserved(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escape = (b == b'%').then(|| escape_at(bytes, i)).flatten();
        match escape {
            Some(byte) => {
                let c = char::from(byte);
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~') {
                    out.push(c);
                } else {
                    out.push('%');
                    out.push(upper_hex(byte >> 4));
                    out.push(upper_hex(byte & 0xf));
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

    /// The fast path changes nothing: every path of up to 6 characters over `/ a . % 2 f F`
    /// (every segment kind, escapes whole and broken) normalises as the full rebuild does.
    #[test]
    fn a_path_taken_as_normal_is_its_own_normal_form() {
        for path in ["/", "/a", "/a/", "/a/b.c/..d", "/x/y/z/"] {
            assert!(is_normal(path), "{path}");
        }
        for path in [
            "", "a", "//", "/a//b", "/./a", "/a/..", "/a/.", "/%6C", "/a%2fb",
        ] {
            assert!(!is_normal(path), "{path}");
        }
        let alphabet = ['/', 'a', '.', '%', '2', 'f', 'F'];
        let mut paths = vec![String::new()];
        let mut checked = 0;
        for _ in 0..6 {
            paths = paths
                .iter()
                .flat_map(|p| alphabet.iter().map(move |c| format!("{p}{c}")))
                .collect();
            for path in &paths {
                if is_normal(path) {
                    assert_eq!(rebuild(path), *path, "{path}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 1000, "{checked}");
    }

    #[test]
    fn normalising_is_idempotent() {
        for path in ["/a/%2e%2e/%2e/b", "/%252e/x", "//%7E/", "/a%2f..%2fb"] {
            let once = normalise_path(path);
            assert_eq!(normalise_path(&once), once, "{path}");
        }
    }
}
