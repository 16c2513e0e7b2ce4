//! Text helpers of the store's URLs: [`Redactor`], which keeps passwords out of every
//! message, and [`decode`], percent-decoding of URL parts. A leaf: the URL parser, the TLS
//! options and the errors use it.

/// Scrubs secrets (passwords from the URL) out of messages.
#[derive(Debug, Clone, Default)]
pub(crate) struct Redactor {
    pub(crate) secrets: Vec<String>,
    /// The URL with its password replaced, to say which Redis failed.
    pub(crate) label: String,
}

impl Redactor {
    /// `message` with every secret replaced by `***`.
    pub(crate) fn scrub(&self, message: &str) -> String {
        let mut out = message.to_owned();
        for secret in &self.secrets {
            if !secret.is_empty() {
                out = out.replace(secret.as_str(), "***");
            }
        }
        out
    }
}

/// Percent-decodes a URL component (user names, passwords and paths may be encoded).
pub(crate) fn decode(part: &str) -> String {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(v) = hex {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
