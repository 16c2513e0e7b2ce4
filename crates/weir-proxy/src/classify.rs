//! Request classes: which kind of client a request comes from, by its headers — known
//! crawlers by their User-Agent, or any class of your own by any header. The class is the
//! first entry of every descriptor the proxy sends to the rules, so each class gets its own
//! limits (and may get its own upstream); requests of no class are `reader`s, and rules
//! written for crawlers never touch them. The first step of the proxy's decision path.

use std::str::FromStr;

use http::request::Parts;
use weir_tower::HeaderPattern;

/// The class of requests that match no other.
pub const DEFAULT_CLASS: &str = "reader";

/// User-Agent fragments of well-known crawlers and bots (compared ignoring ASCII case): the
/// built-in `crawler` class.
pub const KNOWN_CRAWLERS: &[&str] = &[
    "googlebot",
    "bingbot",
    "slurp",
    "duckduckbot",
    "baiduspider",
    "yandexbot",
    "sogou",
    "exabot",
    "facebookexternalhit",
    "applebot",
    "gptbot",
    "ccbot",
    "claudebot",
    "anthropic-ai",
    "bytespider",
    "amazonbot",
    "petalbot",
    "ahrefsbot",
    "semrushbot",
    "mj12bot",
    "dotbot",
    "crawler",
    "spider",
    "bot/",
    "bot;",
    "+http",
];

/// A class: a name and the header patterns that put a request in it.
///
/// ```
/// use weir_proxy::Class;
///
/// let internal: Class = "internal=x-team:search,ads".parse()?;
/// assert_eq!(internal.name(), "internal");
/// let crawler = Class::known_crawlers();
/// # Ok::<(), weir_proxy::ClassError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    name: String,
    pattern: HeaderPattern,
}

/// A class that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("class '{text}': {reason} (write NAME=HEADER:PATTERN[,PATTERN…], e.g. crawler=user-agent:bot,spider)")]
pub struct ClassError {
    text: String,
    reason: &'static str,
}

impl Class {
    /// The built-in `crawler` class: User-Agents of [`KNOWN_CRAWLERS`].
    pub fn known_crawlers() -> Self {
        Self {
            name: "crawler".to_string(),
            pattern: HeaderPattern::for_header(http::header::USER_AGENT, KNOWN_CRAWLERS),
        }
    }

    /// The class's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether a request belongs to the class.
    pub fn matches(&self, parts: &Parts) -> bool {
        self.pattern.matches(parts)
    }

    /// Whether a request with these headers belongs to the class (classes look at headers
    /// only).
    pub fn matches_headers(&self, headers: &http::HeaderMap) -> bool {
        self.pattern.matches_headers(headers)
    }
}

impl FromStr for Class {
    type Err = ClassError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |reason| ClassError {
            text: text.to_string(),
            reason,
        };
        let (name, rest) = text.split_once('=').ok_or_else(|| error("no '='"))?;
        let (header, patterns) = rest
            .split_once(':')
            .ok_or_else(|| error("no ':' after the header"))?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(error("the name must be letters, digits, '_' or '-'"));
        }
        let pattern = HeaderPattern::new(header.trim(), patterns.split(','))
            .map_err(|_| error("not a valid header name"))?;
        if pattern.is_empty() {
            return Err(error("no pattern"));
        }
        Ok(Self {
            name: name.to_string(),
            pattern,
        })
    }
}

/// The class of a request: the first class it matches, else [`DEFAULT_CLASS`].
pub fn classify<'a>(classes: &'a [Class], parts: &Parts) -> &'a str {
    classify_headers(classes, &parts.headers)
}

/// The class of a request with these headers, as [`classify`].
pub fn classify_headers<'a>(classes: &'a [Class], headers: &http::HeaderMap) -> &'a str {
    classes
        .iter()
        .find(|c| c.matches_headers(headers))
        .map_or(DEFAULT_CLASS, |c| c.name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(headers: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::builder();
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn requests_are_classified_by_headers() {
        let classes = vec![
            "partner=x-partner-key:acme".parse::<Class>().unwrap(),
            Class::known_crawlers(),
        ];
        let google = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
        assert_eq!(
            classify(&classes, &parts(&[("user-agent", google)])),
            "crawler"
        );
        assert_eq!(
            classify(&classes, &parts(&[("user-agent", "GPTBot/1.0")])),
            "crawler"
        );
        let firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";
        assert_eq!(
            classify(&classes, &parts(&[("user-agent", firefox)])),
            "reader"
        );
        assert_eq!(classify(&classes, &parts(&[])), "reader");
        assert_eq!(
            classify(
                &classes,
                &parts(&[("x-partner-key", "ACME-1"), ("user-agent", google)])
            ),
            "partner",
            "first match wins"
        );
    }

    #[test]
    fn bad_classes_say_how_to_write_them() {
        let e = "crawler".parse::<Class>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "class 'crawler': no '=' (write NAME=HEADER:PATTERN[,PATTERN…], e.g. crawler=user-agent:bot,spider)"
        );
        assert!("c=user agent:x".parse::<Class>().is_err());
        assert!("c=user-agent:".parse::<Class>().is_err());
        assert!("c d=user-agent:x".parse::<Class>().is_err());
    }
}
