//! Writing the decision APIs' JSON answers straight into one buffer (`check.rs` for
//! `/v1/check`, `json.rs` for `/json`): on every decision's path, without building a
//! `serde_json::Value` or a struct to serialise first. Field names are the callers'
//! constants (plain ASCII, no escaping needed); string values are escaped by `serde_json`.
//! The writers are inlined: each field's name is then a constant the compiler copies in
//! place (called, they took a sixth of `/v1/check`'s answer, issue 31).

/// A JSON object being written: `{`, then fields separated by commas, then `}`.
pub(crate) struct JsonObject<'a> {
    out: &'a mut Vec<u8>,
    empty: bool,
}

impl<'a> JsonObject<'a> {
    #[inline]
    pub(crate) fn open(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Self { out, empty: true }
    }

    /// Starts field `name`; its value is written next into the returned buffer.
    #[inline]
    pub(crate) fn field(&mut self, name: &str) -> &mut Vec<u8> {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        self.out.push(b'"');
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    #[inline]
    pub(crate) fn str_field(&mut self, name: &str, value: &str) {
        write_str(self.field(name), value);
    }

    #[inline]
    pub(crate) fn u64_field(&mut self, name: &str, value: u64) {
        let out = self.field(name);
        out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    /// `"name":true`.
    #[inline]
    pub(crate) fn true_field(&mut self, name: &str) {
        self.field(name).extend_from_slice(b"true");
    }

    #[inline]
    pub(crate) fn close(self) {
        self.out.push(b'}');
    }
}

/// A JSON string, escaped as JSON requires (rule ids and names are the operator's text).
#[inline]
pub(crate) fn write_str(out: &mut Vec<u8>, value: &str) {
    // The common string (no quote, backslash or control character: every code and most
    // rule ids) is copied whole; the test folds without an early exit, so that it runs
    // over many bytes at once.
    let plain = value.bytes().fold(true, |plain, b| {
        plain & (b >= 0x20) & (b != b'"') & (b != b'\\')
    });
    if plain {
        out.reserve(value.len() + 2);
        out.push(b'"');
        out.extend_from_slice(value.as_bytes());
        out.push(b'"');
        return;
    }
    // Writing a `str` into a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// `[item, item, …]`, each written by `write`.
pub(crate) fn write_array<T>(
    out: &mut Vec<u8>,
    items: &[T],
    mut write: impl FnMut(&mut Vec<u8>, &T),
) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(out, item);
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// Plain or not, a string is written as `serde_json` writes it.
        #[test]
        fn strings_are_written_as_serde_json_writes_them(value in "\\PC*|[ -~]*|[\\x00-\\x7f]*") {
            let mut out = Vec::new();
            super::write_str(&mut out, &value);
            prop_assert_eq!(out, serde_json::to_vec(&value).unwrap());
        }
    }
}
