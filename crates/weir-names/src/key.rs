//! The store key of a matched descriptor: `{domain}/{key}={value}/{key}={value}…`, each part
//! percent-escaped (`%` → `%25`, `/` → `%2F`, `=` → `%3D`) so that no two requests that
//! differ map to the same key. One snapshot sends a given list of entries to one rule, so the
//! domain and the entries name the counter; the same entries keep their counter across a
//! reload that changes the rule (the core defines what carries over).
//!
//! A key longer than [`Key::MAX_LEN`] keeps its first bytes (cut on a character boundary)
//! and ends with `#` and the first 128 bits of the SHA-256 of the *whole* key in hex: stable
//! across processes and versions, and infeasible to collide on purpose. The last step of
//! matching, before the engine calls the limiter, and of the tower layer's policies.

use std::fmt::Write;

use sha2::{Digest, Sha256};
use weir_core::Key;

/// Hex digits of the digest kept in a shortened key (128 bits).
const DIGEST_HEX: usize = 32;

/// Builds the key of `entries` under `domain`: `{domain}/{key}={value}/…`, escaped, and
/// shortened with a digest past [`Key::MAX_LEN`]. The tower layer builds its keys with it
/// too, so one naming scheme (and one bound on key length) holds everywhere.
///
/// ```
/// let key = weir_names::descriptor_key("login", &[("user", "a/b")]);
/// assert_eq!(key.to_string(), "login/user=a%2Fb");
/// ```
/// The entries' strings may be owned or borrowed (`String`, `&str`, `Cow<str>`).
pub fn descriptor_key<S: AsRef<str>>(domain: &str, entries: &[(S, S)]) -> Key {
    if let Some(key) = plain_key(domain, entries) {
        return key;
    }
    let mut escaped = String::with_capacity(
        domain.len()
            + entries
                .iter()
                .map(|(k, v)| k.as_ref().len() + v.as_ref().len() + 2)
                .sum::<usize>(),
    );
    escape_into(&mut escaped, domain);
    build_escaped(escaped, entries)
}

/// Bytes of a key built on the stack ([`plain_key`]): an IP or a user id under a domain
/// and a key or two.
const STACK_KEY: usize = 128;

/// The common key, built on the stack and copied once, into the [`Key`]: every part
/// plain (nothing to escape) and the whole at most [`STACK_KEY`] bytes. `None` otherwise
/// (the general build then escapes and shortens). The same bytes as the general build.
fn plain_key<S: AsRef<str>>(domain: &str, entries: &[(S, S)]) -> Option<Key> {
    let mut bytes = [0u8; STACK_KEY];
    let mut len = 0;
    let mut put = |piece: &[u8]| {
        let room = bytes.get_mut(len..len + piece.len())?;
        room.copy_from_slice(piece);
        len += piece.len();
        Some(())
    };
    let plain = |text: &str| !needs_escape(text);
    if !plain(domain) {
        return None;
    }
    put(domain.as_bytes())?;
    for (key, value) in entries {
        let (key, value) = (key.as_ref(), value.as_ref());
        if !plain(key) || !plain(value) {
            return None;
        }
        put(b"/")?;
        put(key.as_bytes())?;
        put(b"=")?;
        put(value.as_bytes())?;
    }
    Key::new(bytes.get(..len)?).ok()
}

/// The key of a caller's limit override on `entries` under `domain`: the configured key
/// with `%!override` after the domain. Escaping turns every `%` of a domain, key or value
/// into `%25`, so `%!` never appears in a configured rule's key: the two key spaces are
/// disjoint, and an override can never touch a configured rule's record.
pub fn override_key<S: AsRef<str>>(domain: &str, entries: &[(S, S)]) -> Key {
    let mut marked = String::with_capacity(domain.len() + 10);
    escape_into(&mut marked, domain);
    // The marker's `%` stays raw (unescaped): that is what sets the key space apart.
    marked.push_str("%!override");
    build_escaped(marked, entries)
}

/// Appends the escaped entries to an already escaped domain, shortening past
/// [`Key::MAX_LEN`].
fn build_escaped<S: AsRef<str>>(mut full: String, entries: &[(S, S)]) -> Key {
    for (key, value) in entries {
        full.push('/');
        escape_into(&mut full, key.as_ref());
        full.push('=');
        escape_into(&mut full, value.as_ref());
    }
    let text = if full.len() > Key::MAX_LEN {
        shorten(&full)
    } else {
        full
    };
    Key::new(text.as_bytes()).unwrap_or_else(|_| Key::from(0))
}

/// Whether `text` holds a byte the key escapes (`%`, `/`, `=`).
fn needs_escape(text: &str) -> bool {
    text.bytes().any(|b| matches!(b, b'%' | b'/' | b'='))
}

fn escape_into(out: &mut String, text: &str) {
    // Most keys and values (IPs, user ids) need no escape: copied whole.
    if !needs_escape(text) {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '/' => out.push_str("%2F"),
            '=' => out.push_str("%3D"),
            c => out.push(c),
        }
    }
}

/// `head#digest`, exactly `Key::MAX_LEN` bytes or less.
fn shorten(full: &str) -> String {
    shorten_to(full, Key::MAX_LEN)
}

/// `full` shortened to at most `max` bytes (`max` > 33) when longer: its head, cut on a
/// character boundary, then `#` and the first 128 bits of the SHA-256 of the whole in hex.
/// Stable across processes and versions; infeasible to collide on purpose.
///
/// ```
/// let long = "/a".repeat(1000);
/// let short = weir_names::shorten_to(&long, 100);
/// assert!(short.len() <= 100 && short.starts_with("/a/a"));
/// assert_ne!(short, weir_names::shorten_to(&format!("{long}b"), 100));
/// ```
pub fn shorten_to(full: &str, max: usize) -> String {
    if full.len() <= max {
        return full.to_string();
    }
    let digest = Sha256::digest(full.as_bytes());
    let mut cut = max - 1 - DIGEST_HEX;
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out = String::with_capacity(max);
    out.push_str(full.get(..cut).unwrap_or_default());
    out.push('#');
    for byte in digest.iter().take(DIGEST_HEX / 2) {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn separators_are_escaped_so_keys_never_collide() {
        let a = descriptor_key("d", &entries(&[("a", "b/c=d")]));
        let b = descriptor_key("d", &entries(&[("a", "b"), ("c", "d")]));
        assert_ne!(a, b);
        assert_eq!(a.to_string(), "d/a=b%2Fc%3Dd");
        assert_eq!(b.to_string(), "d/a=b/c=d");
        assert_eq!(descriptor_key::<&str>("d/x", &[]).to_string(), "d%2Fx");
        assert_eq!(
            descriptor_key("d", &entries(&[("k", "100%")])).to_string(),
            "d/k=100%25"
        );
    }

    #[test]
    fn override_keys_never_equal_a_configured_key() {
        let e = entries(&[("user", "alice")]);
        let key = override_key("login", &e);
        assert_eq!(key.to_string(), "login%!override/user=alice");
        assert_ne!(key, descriptor_key("login", &e));
        // Whatever a request writes into a domain or value, its `%` is escaped.
        assert_ne!(key, descriptor_key("login%!override", &e));
        assert_ne!(
            key,
            descriptor_key("login", &entries(&[("user", "alice")])),
            "same entries, other space"
        );
    }

    #[test]
    fn long_keys_keep_their_head_and_hash_the_rest() {
        let long = "é".repeat(400);
        let one = descriptor_key("d", &entries(&[("k", &long)]));
        let two = descriptor_key("d", &entries(&[("k", &format!("{long}x"))]));
        assert!(one.as_bytes().len() <= Key::MAX_LEN);
        assert_ne!(one, two);
        let text = one.to_string();
        assert!(text.starts_with("d/k=éé"));
        let (_, digest) = text.rsplit_once('#').unwrap();
        assert_eq!(digest.len(), DIGEST_HEX);
        // Stable: the same input always gives the same key.
        assert_eq!(one, descriptor_key("d", &entries(&[("k", &long)])));
    }

    /// The key as the general build makes it (escaped into one `String`), which the
    /// stack build must equal at every length around its buffer's edge; past it and past
    /// the key bound, the general build is the one used.
    fn reference(domain: &str, entries: &[(String, String)]) -> Key {
        let mut full = String::new();
        escape_into(&mut full, domain);
        build_escaped(full, entries)
    }

    #[test]
    fn keys_built_on_the_stack_equal_the_general_build_at_every_length() {
        for len in (0..140).chain([500, 512, 600, 2_000]) {
            for value in ["a".repeat(len), "a/%=é".repeat(len / 5 + 1)] {
                let e = entries(&[("remote_address", "10.0.0.1"), ("path", &value)]);
                assert_eq!(descriptor_key("proxy", &e), reference("proxy", &e), "{len}");
            }
        }
    }
}
