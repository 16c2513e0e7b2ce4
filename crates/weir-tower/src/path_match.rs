//! How `weir proxy` reads a request path for its `path` descriptor ([`PathMatch`]), on
//! `path.rs`'s pieces: the one segment resolution and escape parser. Pure; no I/O; the
//! screen refuses what it refuses (`400`) and the limits key on what it reads.
//!
//! [`PathMatch::Exact`] is [`normalise_path`]'s reading (RFC 3986 §6.2.2), refusing only
//! control bytes.
//!
//! [`PathMatch::Normalized`] (the default) reads it as the common routers do
//! by default, so that no spelling one of them sends to the same handler gets a budget of
//! its own, and refuses ([`PathRefusal`]) the spellings routers disagree on:
//! - `;params` are cut from each segment (Tomcat, Jetty and Spring's `UrlPathHelper` route
//!   `/login;jsessionid=1` to `/login`);
//! - a trailing slash is dropped (Express's non-strict routing, the default, and Spring
//!   MVC before 6.0 route `/login/` to `/login`; so does ASP.NET Core);
//! - letters are lower-cased (Express routes case-insensitively by default, as do ASP.NET
//!   Core and IIS; Spring and most others are case-sensitive, where lower-casing only
//!   makes `/Login` share `/login`'s budget: stricter, never looser);
//! - every escape is decoded, so `/log%69n` is `/login`;
//! - refused: an encoded `/` or `\` (`%2F`, `%5C`: a separator to some, not to others), a
//!   raw `\` (IIS reads it as `/`), control bytes (`%00`–`%1F`, `%7F`: truncation in C
//!   backends), `%25` (decoded twice, a second path), `%3B` (a `;` to some), a `%` not
//!   followed by two hex digits, escapes that are not UTF-8 (the overlong `%C0%AF`), and a
//!   `;` after `.`, `..` or an empty segment (Tomcat reads `/a/..;/b` as `/b`, others as a
//!   segment named `..;`). Spring Security's `StrictHttpFirewall` refuses much the same.

use std::borrow::Cow;

use crate::path::{escape_at, join, normalise_path, resolve};

/// How a request path is read for matching and keying: the reading a limit on a path is
/// kept under (see the module's header for what each does and why).
///
/// ```
/// use weir_tower::{PathMatch, PathRefusal};
/// let normalized = PathMatch::default();
/// for spelling in ["/login", "/LOGIN", "/login/", "/login;a=1", "//log%69n/./"] {
///     assert_eq!(normalized.normalise(spelling)?, "/login");
/// }
/// assert_eq!(normalized.normalise("/login%2f"), Err(PathRefusal::EncodedSeparator));
/// assert_eq!(normalized.normalise("/x/..;/login"), Err(PathRefusal::ParamsOnDotSegment));
/// assert_eq!(PathMatch::Exact.normalise("/LOGIN/")?, "/LOGIN/");
/// assert_eq!(PathMatch::Exact.normalise("/login%00"), Err(PathRefusal::ControlByte));
/// # Ok::<(), PathRefusal>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathMatch {
    /// RFC 3986's reading only ([`normalise_path`]): `/LOGIN`, `/login/` and `/login;a=1`
    /// are paths of their own, and escapes other than unreserved ones stay as they are
    /// (`%2F` is not `/`). Only control bytes are refused. For backends that tell those
    /// spellings apart (a rule on `/login` then limits `/login` alone).
    Exact,
    /// What common routers read as one path is one path: `;params` cut, no trailing
    /// slash, lower case, every escape decoded; ambiguous spellings refused. The default.
    #[default]
    Normalized,
}

/// A path spelling that backends read differently, refused rather than guessed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathRefusal {
    /// `%2F` or `%5C`.
    #[error("an encoded slash or backslash (%2F, %5C): some servers read it as a separator, others do not")]
    EncodedSeparator,
    /// A raw `\`.
    #[error("a backslash: some servers (IIS) read it as a slash")]
    Backslash,
    /// A control byte, raw or encoded (`%00`–`%1F`, `%7F`).
    #[error("a control byte (%00-%1F, %7F): a C backend stops reading at %00")]
    ControlByte,
    /// `%25`.
    #[error("an encoded percent sign (%25): decoded twice, it names another path")]
    EncodedPercent,
    /// `%3B`.
    #[error("an encoded semicolon (%3B): some servers read it as a path parameter")]
    EncodedSemicolon,
    /// A `%` not followed by two hex digits.
    #[error("a '%' not followed by two hex digits")]
    BadEscape,
    /// Escapes that decode to bytes that are not UTF-8.
    #[error("escapes that are not UTF-8 (an overlong %C0%AF is a slash to some decoders)")]
    NotUtf8,
    /// `;` after a `.`, `..` or empty segment.
    #[error("a ';' after '.', '..' or an empty segment: Tomcat reads /a/..;/b as /b, other servers as a segment named '..;'")]
    ParamsOnDotSegment,
}

impl PathMatch {
    /// The path `path` names under this reading (borrowed when it is already normal, as
    /// most are), or why it is refused.
    pub fn normalise(self, path: &str) -> Result<Cow<'_, str>, PathRefusal> {
        match self {
            Self::Exact => {
                refuse_control_bytes(path)?;
                Ok(normalise_path(path))
            }
            Self::Normalized if is_plain(path) => Ok(Cow::Borrowed(path)),
            Self::Normalized => normalised(path).map(Cow::Owned),
        }
    }

    /// Whether a rule's path `value` can match under this reading: it is its own normal
    /// form (a value ending in `*`, a prefix, when its head can begin one). A value that
    /// cannot never matches, leaving the path it was written for unlimited.
    pub fn can_match(self, value: &str) -> bool {
        match value.strip_suffix('*') {
            Some("") => true,
            Some(prefix) => {
                let path = format!("{prefix}x");
                matches!(self.normalise(&path), Ok(normal) if normal == path)
            }
            None => matches!(self.normalise(value), Ok(normal) if normal == value),
        }
    }
}

/// Whether `path` is already normal under [`PathMatch::Normalized`]: `/`, or from `/`,
/// printable ASCII without upper case, `%`, `;` or `\`, no empty, `.` or `..` segment and
/// no trailing slash.
fn is_plain(path: &str) -> bool {
    if path == "/" {
        return true;
    }
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    !path.bytes().any(|b| {
        !b.is_ascii_graphic() || b.is_ascii_uppercase() || matches!(b, b'%' | b';' | b'\\')
    }) && rest.split('/').all(|s| !matches!(s, "" | "." | ".."))
}

/// [`PathMatch::Normalized`]'s reading of a path that is not plain.
fn normalised(path: &str) -> Result<String, PathRefusal> {
    let decoded = decode_all(path)?;
    let mut names = Vec::new();
    for segment in decoded.split('/') {
        let name = match segment.split_once(';') {
            Some(("" | "." | "..", _)) => return Err(PathRefusal::ParamsOnDotSegment),
            Some((name, _params)) => name,
            None => segment,
        };
        names.push(name);
    }
    let segments = resolve(names.into_iter());
    Ok(join(&segments, false, |out, segment| {
        if segment
            .bytes()
            .any(|b| b.is_ascii_uppercase() || !b.is_ascii())
        {
            out.push_str(&segment.to_lowercase());
        } else {
            out.push_str(segment);
        }
    }))
}

/// `path` with every escape decoded, or the refusal of the first byte routers read
/// differently.
fn decode_all(path: &str) -> Result<String, PathRefusal> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let byte = if b == b'%' {
            let byte = escape_at(bytes, i).ok_or(PathRefusal::BadEscape)?;
            i += 3;
            match byte {
                b'/' | b'\\' => return Err(PathRefusal::EncodedSeparator),
                b'%' => return Err(PathRefusal::EncodedPercent),
                b';' => return Err(PathRefusal::EncodedSemicolon),
                _ => byte,
            }
        } else {
            i += 1;
            if b == b'\\' {
                return Err(PathRefusal::Backslash);
            }
            b
        };
        if byte < 0x20 || byte == 0x7f {
            return Err(PathRefusal::ControlByte);
        }
        out.push(byte);
    }
    String::from_utf8(out).map_err(|_| PathRefusal::NotUtf8)
}

/// [`PathMatch::Exact`]'s one refusal: a control byte, raw or encoded.
fn refuse_control_bytes(path: &str) -> Result<(), PathRefusal> {
    let bytes = path.as_bytes();
    let control = |b: u8| b < 0x20 || b == 0x7f;
    for (i, &b) in bytes.iter().enumerate() {
        if control(b) || (b == b'%' && escape_at(bytes, i).is_some_and(control)) {
            return Err(PathRefusal::ControlByte);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalized_reads_every_spelling_a_common_router_sends_to_login_as_login() {
        for spelling in [
            "/login",
            "/LOGIN",
            "/Login/",
            "/login/",
            "/login//",
            "/login;a=1",
            "/login;jsessionid=ABC/",
            "/LOGIN;A=1/",
            "//log%69n/./",
            "/x/../login",
            "/%4C%4F%47%49%4E",
            "/a/%2E%2e/login",
        ] {
            assert_eq!(
                PathMatch::Normalized.normalise(spelling).unwrap(),
                "/login",
                "{spelling}"
            );
        }
        assert_eq!(PathMatch::Normalized.normalise("/").unwrap(), "/");
        assert_eq!(PathMatch::Normalized.normalise("").unwrap(), "/");
        assert_eq!(
            PathMatch::Normalized.normalise("/a;b=c/D;e").unwrap(),
            "/a/d"
        );
        assert_eq!(
            PathMatch::Normalized.normalise("/Caf%C3%89").unwrap(),
            "/café"
        );
        assert_eq!(
            PathMatch::Normalized.normalise("/a%20b%3Fc").unwrap(),
            "/a b?c"
        );
    }

    #[test]
    fn normalized_refuses_what_routers_disagree_on() {
        use PathRefusal::*;
        for (spelling, why) in [
            ("/login%2f", EncodedSeparator),
            ("/login%2F", EncodedSeparator),
            ("/a%5clogin", EncodedSeparator),
            ("/a\\login", Backslash),
            ("/login%00", ControlByte),
            ("/login%0a", ControlByte),
            ("/login%7F", ControlByte),
            ("/login\u{1}", ControlByte),
            ("/login%252f", EncodedPercent),
            ("/login%3Ba=1", EncodedSemicolon),
            ("/login%", BadEscape),
            ("/login%4", BadEscape),
            ("/login%zz", BadEscape),
            ("/%C0%AF", NotUtf8),
            ("/login%ff", NotUtf8),
            ("/login/..;/login", ParamsOnDotSegment),
            ("/x/.;a/login", ParamsOnDotSegment),
            ("/;a/login", ParamsOnDotSegment),
            ("/login/;jsessionid=1", ParamsOnDotSegment),
            ("/x/%2e%2e;/login", ParamsOnDotSegment),
        ] {
            assert_eq!(
                PathMatch::Normalized.normalise(spelling),
                Err(why),
                "{spelling}"
            );
        }
    }

    #[test]
    fn exact_is_rfc_3986_alone_and_refuses_only_control_bytes() {
        for path in [
            "/LOGIN",
            "/login/",
            "/login;a=1",
            "/login%2f",
            "/a/./b",
            "/%zz",
            "/a%25",
        ] {
            assert_eq!(
                PathMatch::Exact.normalise(path).unwrap(),
                normalise_path(path),
                "{path}"
            );
        }
        for path in ["/login%00", "/login%1f", "/a\u{7f}"] {
            assert_eq!(
                PathMatch::Exact.normalise(path),
                Err(PathRefusal::ControlByte),
                "{path}"
            );
        }
    }

    #[test]
    fn a_rule_value_can_match_only_in_its_normal_form() {
        let n = PathMatch::Normalized;
        for value in ["/login", "/", "/api/*", "/api*", "*", "/café"] {
            assert!(n.can_match(value), "{value}");
        }
        for value in [
            "/Login", "/login/", "/API/*", "/a/./b", "/a;b", "/a%2fb", "login",
        ] {
            assert!(!n.can_match(value), "{value}");
        }
        assert!(PathMatch::Exact.can_match("/Login/"));
        assert!(!PathMatch::Exact.can_match("/a/./b"));
    }

    /// Over every path of up to 6 characters from `/ a A . % 2 f ;`: a normalised path is
    /// its own normal form, and the fast path agrees with the full reading.
    #[test]
    fn normalized_is_idempotent_and_its_fast_path_changes_nothing() {
        let alphabet = ['/', 'a', 'A', '.', '%', '2', 'f', ';'];
        let mut paths = vec![String::new()];
        let mut plain = 0;
        for _ in 0..6 {
            paths = paths
                .iter()
                .flat_map(|p| alphabet.iter().map(move |c| format!("{p}{c}")))
                .collect();
            for path in &paths {
                if let Ok(once) = PathMatch::Normalized.normalise(path) {
                    assert_eq!(
                        PathMatch::Normalized.normalise(&once).unwrap(),
                        once,
                        "{path}"
                    );
                }
                if is_plain(path) {
                    assert_eq!(normalised(path).unwrap(), *path, "{path}");
                    plain += 1;
                }
            }
        }
        assert!(plain > 500, "{plain}");
    }
}
