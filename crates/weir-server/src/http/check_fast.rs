//! `POST /v1/check`'s body in its common shape, read by hand: the first step of a decision
//! on Weir's JSON API, before the engine (`check.rs` calls [`read`] and falls back to
//! `serde_json` for anything else).
//!
//! Nearly every body a client sends is plain: `domain`, `descriptors` of `entries` with
//! `key` and `value`, maybe `hits` / `hits_addend`, strings with nothing escaped, integers
//! without sign, fraction or exponent. Reading that shape by hand costs a fifth of what
//! `serde_json`'s derived visitor does (issue 31: 3.7k instructions of a request's 29k).
//!
//! The reader is *exact or silent*: it answers only a body `serde_json` would read into
//! the same [`CheckRequest`], and declines (`None`) everything else: an escape, a control
//! character, `null`, a float, a sign, a leading zero, an overflow, an unknown or repeated
//! field, a missing required one, a `limit` override, trailing bytes, invalid UTF-8. The
//! declined body goes to `serde_json`, which reads it or answers the 400 that names what
//! is wrong, so no body is read differently, accepted more readily, or refused with a
//! vaguer message than before. The property tests below and the `check_body` fuzz target
//! (`fuzzing.rs`) check that agreement on generated and mutated bodies.

use std::borrow::Cow;

use weir_config::Descriptor;
use weir_engine::CheckRequest;

/// The request in `body`, when it has the common shape; `None` sends it to `serde_json`.
pub(crate) fn read(body: &[u8]) -> Option<CheckRequest<Cow<'_, str>>> {
    // The whole body checked once (a JSON text is UTF-8; `serde_json` refuses it
    // otherwise): each string is then a slice of it, not a check of its own.
    let text = std::str::from_utf8(body).ok()?;
    let mut at = Cursor { text, at: 0 };
    let (mut domain, mut descriptors, mut hits) = (None, None, None);
    at.object(|at, field| match field {
        b"domain" => set(&mut domain, Cow::Borrowed(at.string()?)),
        b"descriptors" => set(&mut descriptors, at.list(descriptor)?),
        // One field under two names: both present is a repeated field.
        b"hits" | b"hits_addend" => set(&mut hits, at.u64()?),
        _ => None,
    })?;
    at.end()?;
    Some(CheckRequest {
        domain: domain?,
        descriptors: descriptors?,
        hits_addend: hits.unwrap_or(1),
    })
}

/// One descriptor: `entries` (required) and `hits_addend`; a `limit` declines.
fn descriptor<'a>(at: &mut Cursor<'a>) -> Option<Descriptor<Cow<'a, str>>> {
    let (mut entries, mut hits_addend) = (None, None);
    at.object(|at, field| match field {
        b"entries" => set(&mut entries, at.list(entry)?),
        b"hits_addend" => set(&mut hits_addend, at.u64()?),
        _ => None,
    })?;
    Some(Descriptor {
        entries: entries?,
        hits_addend,
        limit: None,
    })
}

/// One entry: `key` and `value`, both required.
fn entry<'a>(at: &mut Cursor<'a>) -> Option<(Cow<'a, str>, Cow<'a, str>)> {
    let (mut key, mut value) = (None, None);
    at.object(|at, field| match field {
        b"key" => set(&mut key, at.string()?),
        b"value" => set(&mut value, at.string()?),
        _ => None,
    })?;
    Some((Cow::Borrowed(key?), Cow::Borrowed(value?)))
}

/// Sets a field seen for the first time; a repeated one declines (`serde_json` refuses it).
fn set<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value);
    Some(())
}

/// A position in the body. Every method skips the JSON whitespace before its token and
/// declines (`None`) on anything outside the common shape.
struct Cursor<'a> {
    /// The body, valid UTF-8.
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    /// The body's bytes.
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The next byte after whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.at) {
            self.at += 1;
        }
        self.bytes().get(self.at).copied()
    }

    /// Consumes `byte` as the next token.
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Only whitespace left.
    fn end(&mut self) -> Option<()> {
        self.peek().is_none().then_some(())
    }

    /// Where a string's bytes are in the body (after its opening quote, before its
    /// closing one), with no escape and no control character.
    fn string_at(&mut self) -> Option<std::ops::Range<usize>> {
        self.eat(b'"')?;
        let start = self.at;
        let rest = self.bytes().get(start..)?;
        let len = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest.get(len) != Some(&b'"') {
            return None;
        }
        self.at += len + 1;
        Some(start..start + len)
    }

    /// A string's bytes, with no escape and no control character.
    fn raw_string(&mut self) -> Option<&'a [u8]> {
        let at = self.string_at()?;
        self.bytes().get(at)
    }

    /// A string with no escape and no control character (a slice of the body, which is
    /// UTF-8, between two quotes: always on character boundaries).
    fn string(&mut self) -> Option<&'a str> {
        let at = self.string_at()?;
        self.text.get(at)
    }

    /// An unsigned integer as JSON writes it (no sign, fraction, exponent or leading zero)
    /// that fits in a `u64`.
    fn u64(&mut self) -> Option<u64> {
        self.peek()?;
        let rest = self.bytes().get(self.at..)?;
        let len = rest
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(rest.len());
        let digits = rest.get(..len)?;
        if digits.is_empty() || (len > 1 && digits.first() == Some(&b'0')) {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = rest.get(len) {
            return None;
        }
        let mut n: u64 = 0;
        for &d in digits {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        self.at += len;
        Some(n)
    }

    /// An object: each member's name (its bytes: a name with an escape or outside ASCII is
    /// no name the reader knows, and declines there), then `member` reads its value.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.sequence(b'{', b'}', |at| {
            let name = at.raw_string()?;
            at.eat(b':')?;
            member(at, name)
        })
    }

    /// An array, each element read by `item`.
    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let mut list = Vec::with_capacity(1);
        self.array(|at| {
            list.push(item(at)?);
            Some(())
        })?;
        Some(list)
    }

    /// An array: `item` reads each element.
    fn array(&mut self, item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.sequence(b'[', b']', item)
    }

    /// `open`, then elements read by `each` separated by commas, then `close`; nothing
    /// else (a trailing comma declines).
    fn sequence(
        &mut self,
        open: u8,
        close: u8,
        mut each: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.eat(open)?;
        if self.peek()? == close {
            self.at += 1;
            return Some(());
        }
        loop {
            each(self)?;
            match self.peek()? {
                b',' => self.at += 1,
                b if b == close => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
#[path = "check_fast_tests.rs"]
mod tests;
