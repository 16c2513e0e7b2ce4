//! A [`Policy`]: which requests a limit applies to (path, method, header patterns), what it
//! counts by ([`KeyBy`]), the [`Rule`], and what happens when it is hit ([`OnLimit`]).
//! Matching a request against the policies is the layer's first step; the keys of the
//! matching ones go to the limiter together.
//!
//! What a policy counts by is always chosen, never defaulted: [`Policy::new`] gives a
//! `Policy<KeyUnset>`, which no layer accepts until [`Policy::key`] made it a [`Policy`]
//! (`KeyBy::global()` for one limit shared by every client). A forgotten key is a compile
//! error, not a silent global limit.

use crate::path::normalise_path;
use std::sync::Arc;
use std::time::Duration;

use aho_corasick::AhoCorasick;
use http::request::Parts;
use http::{HeaderName, Method};
use weir_core::{Algorithm, Rule};

use crate::key_by::{HeaderNameError, KeyBy};

/// What the layer does with a request a policy denies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnLimit {
    /// Answer `429 Too Many Requests` with `Retry-After` and the rate-limit headers.
    Reject,
    /// Hold the request until the limits allow it, then send it on; reject when that would
    /// take longer than `max_wait`, or when `max_queued` requests of the same key already
    /// wait.
    Queue {
        /// The longest a request waits.
        max_wait: Duration,
        /// How many requests of one key may wait at once.
        max_queued: usize,
    },
    /// Send the request to the fallback service (see [`Fallback`](crate::Fallback)), marked
    /// [`Degraded`](crate::Degraded); without a fallback the inner service sees the mark.
    Degrade,
}

/// A header condition: the header is present and its value contains one of the patterns,
/// compared without regard to ASCII case (e.g. crawler User-Agents).
///
/// ```
/// use weir_tower::HeaderPattern;
///
/// let bots = HeaderPattern::new("user-agent", ["googlebot", "bingbot"])?;
/// let request = http::Request::builder().header("user-agent", "Googlebot/2.1").body(())?;
/// assert!(bots.matches(&request.into_parts().0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct HeaderPattern {
    name: HeaderName,
    patterns_lower: Vec<String>,
    /// The patterns compiled once (ASCII case ignored): a request's header is read in one
    /// pass, without lowering a copy of it; `None` when there is no pattern (or the
    /// patterns could not be compiled: then `patterns_lower` is searched as before).
    automaton: Option<Arc<AhoCorasick>>,
}

impl PartialEq for HeaderPattern {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.patterns_lower == other.patterns_lower
    }
}

impl Eq for HeaderPattern {}

impl HeaderPattern {
    /// Header `name` containing one of `patterns` (empty patterns are ignored).
    pub fn new<P: AsRef<str>>(
        name: &str,
        patterns: impl IntoIterator<Item = P>,
    ) -> Result<Self, HeaderNameError> {
        let name = HeaderName::try_from(name).map_err(|_| HeaderNameError(name.to_string()))?;
        Ok(Self::for_header(name, patterns))
    }

    /// Header `name` containing one of `patterns`.
    pub fn for_header<P: AsRef<str>>(
        name: HeaderName,
        patterns: impl IntoIterator<Item = P>,
    ) -> Self {
        let patterns_lower: Vec<String> = patterns
            .into_iter()
            .map(|p| p.as_ref().trim().to_ascii_lowercase())
            .filter(|p| !p.is_empty())
            .collect();
        let automaton = (!patterns_lower.is_empty())
            .then(|| {
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .build(&patterns_lower)
                    .ok()
            })
            .flatten()
            .map(Arc::new);
        Self {
            name,
            patterns_lower,
            automaton,
        }
    }

    /// Whether there is any pattern to match.
    pub fn is_empty(&self) -> bool {
        self.patterns_lower.is_empty()
    }

    /// Whether a request's header matches.
    pub fn matches(&self, parts: &Parts) -> bool {
        self.matches_headers(&parts.headers)
    }

    /// Whether the header in `headers` matches (for a caller holding only the headers).
    pub fn matches_headers(&self, headers: &http::HeaderMap) -> bool {
        if self.patterns_lower.is_empty() {
            return false;
        }
        headers.get_all(&self.name).iter().any(|value| {
            let bytes = value.as_bytes();
            if let Some(automaton) = &self.automaton {
                return automaton.is_match(bytes);
            }
            let value = String::from_utf8_lossy(bytes).to_ascii_lowercase();
            self.patterns_lower
                .iter()
                .any(|p| value.contains(p.as_str()))
        })
    }
}

/// Why a policy could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The rule is a concurrency rule; in-flight limits are the layer's `max_in_flight`.
    #[error("policy {0}: a concurrency rule counts leases, not requests; use RateLimitLayer::max_in_flight for an in-flight limit")]
    Concurrency(String),
    /// A header name is not valid.
    #[error("policy {policy}: {source}")]
    Header {
        /// The policy.
        policy: String,
        /// What was wrong.
        source: HeaderNameError,
    },
    /// A rule id the rule set does not have (or one without a rule to check).
    #[error("no rule '{0}' with a limit in the rule files")]
    UnknownRule(String),
    /// A queue that can never hold a request.
    #[error("policy {0}: a queue needs max_queued >= 1")]
    EmptyQueue(String),
    /// Two policies of one layer share a name (their keys would collide).
    #[error(
        "two policies are named {0}: a policy's name is its keys' namespace, so names must differ"
    )]
    DuplicateName(String),
}

/// The mark of a [`Policy`] whose key is not chosen yet: call [`Policy::key`] (e.g.
/// `.key(KeyBy::peer_ip())`, or `.key(KeyBy::global())` for one limit shared by every
/// client). A layer takes only policies with a key.
///
/// ```compile_fail
/// use weir_core::{Limiter, Rule};
/// use weir_tower::{Policy, RateLimitLayer};
///
/// // No key: does not compile (expected `Policy`, found `Policy<KeyUnset>`).
/// let unkeyed = Policy::new("api", Rule::per_second(10)?)?;
/// let layer = RateLimitLayer::new(Limiter::default(), vec![unkeyed])?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyUnset;

/// One limit of the layer. Built by [`Policy::new`] (or `Policy::from_rules`, feature `rules`), then
/// [`Policy::key`]: until it has a key it is a `Policy<KeyUnset>`, which no layer takes.
///
/// ```
/// use std::time::Duration;
/// use weir_core::Rule;
/// use weir_tower::{KeyBy, OnLimit, Policy};
///
/// // At most 5 login attempts per minute per client IP, on POST /login only.
/// let login = Policy::new("login", Rule::sliding_log(5, Duration::from_secs(60))?)?
///     .key(KeyBy::peer_ip())
///     .path("/login")
///     .method(http::Method::POST);
/// // Crawlers: 1 per second all together, queued up to 2 s.
/// let crawlers = Policy::new("crawlers", Rule::gcra(1, Duration::from_secs(1), 1)?)?
///     .when_header("user-agent", ["bot", "crawler", "spider"])?
///     .key(KeyBy::global())
///     .on_limit(OnLimit::Queue { max_wait: Duration::from_secs(2), max_queued: 8 })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Policy<K = KeyBy> {
    pub(crate) name: Arc<str>,
    pub(crate) rule: Rule,
    pub(crate) key: K,
    pub(crate) on_limit: OnLimit,
    path_exact: Option<String>,
    path_prefix: Option<String>,
    methods: Vec<Method>,
    headers: Vec<HeaderPattern>,
}

impl Policy<KeyUnset> {
    /// A policy named `name` (it names the limit in headers, metrics and keys, and the
    /// rule's records: see [`Rule::named`]) applying `rule` to every request, rejecting when
    /// hit; choose its key with [`Policy::key`] before giving it to a layer. A new build of
    /// the policy with other parameters under the same name keeps its keys' usage.
    pub fn new(name: impl Into<Arc<str>>, rule: Rule) -> Result<Self, PolicyError> {
        let name = name.into();
        if matches!(rule.algorithm(), Algorithm::Concurrency(_)) {
            return Err(PolicyError::Concurrency(name.to_string()));
        }
        Ok(Self {
            rule: rule.named(&format!("weir-tower/{name}")),
            name,
            key: KeyUnset,
            on_limit: OnLimit::Reject,
            path_exact: None,
            path_prefix: None,
            methods: Vec::new(),
            headers: Vec::new(),
        })
    }

    /// A policy for the rule with id `rule_id` in Weir's YAML rule files (e.g.
    /// `api.remote_address`, as `weir check-config` lists them), named after it. Needs the
    /// `rules` feature (the YAML rule files of `weir-config`).
    ///
    /// ```
    /// use weir_config::RuleSet;
    /// use weir_tower::{KeyBy, Policy};
    ///
    /// let rules = RuleSet::parse("api.yaml", r#"
    /// domain: api
    /// descriptors:
    ///   - key: remote_address
    ///     rule: {algorithm: gcra, rate: 20, per: 1s, burst: 40}
    /// "#)?;
    /// let per_ip = Policy::from_rules(&rules, "api.remote_address")?.key(KeyBy::peer_ip());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "rules")]
    pub fn from_rules(rules: &weir_config::RuleSet, rule_id: &str) -> Result<Self, PolicyError> {
        let rule = rules
            .rule(rule_id)
            .and_then(|info| info.rule().copied())
            .ok_or_else(|| PolicyError::UnknownRule(rule_id.to_string()))?;
        Self::new(rule_id, rule)
    }
}

impl Policy {
    /// What the policy counts requests by.
    pub fn key_by(&self) -> &KeyBy {
        &self.key
    }
}

impl<K> Policy<K> {
    /// Counts requests by `key` (e.g. `KeyBy::peer_ip()`; `KeyBy::global()` for one budget
    /// shared by every client). Required: a policy without a key is no layer's.
    pub fn key(self, key: KeyBy) -> Policy {
        Policy {
            name: self.name,
            rule: self.rule,
            key,
            on_limit: self.on_limit,
            path_exact: self.path_exact,
            path_prefix: self.path_prefix,
            methods: self.methods,
            headers: self.headers,
        }
    }

    /// Applies only to this exact path.
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path_exact = Some(normalise_path(&path.into()).into_owned());
        self
    }

    /// Applies only to paths under `prefix` (`/api` covers `/api` and `/api/x`, not `/apix`).
    pub fn path_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.path_prefix = Some(
            normalise_path(&prefix.into())
                .trim_end_matches('/')
                .to_string(),
        );
        self
    }

    /// Applies only to this method (call again to add more).
    pub fn method(mut self, method: Method) -> Self {
        self.methods.push(method);
        self
    }

    /// Applies only when header `name` contains one of `patterns`, ignoring ASCII case
    /// (call again to require more headers).
    pub fn when_header<P: AsRef<str>>(
        mut self,
        name: &str,
        patterns: impl IntoIterator<Item = P>,
    ) -> Result<Self, PolicyError> {
        let pattern = HeaderPattern::new(name, patterns).map_err(|source| PolicyError::Header {
            policy: self.name.to_string(),
            source,
        })?;
        self.headers.push(pattern);
        Ok(self)
    }

    /// What to do when this policy denies (default: reject).
    pub fn on_limit(mut self, on_limit: OnLimit) -> Result<Self, PolicyError> {
        if let OnLimit::Queue { max_queued: 0, .. } = on_limit {
            return Err(PolicyError::EmptyQueue(self.name.to_string()));
        }
        self.on_limit = on_limit;
        Ok(self)
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The rule.
    pub fn rule(&self) -> &Rule {
        &self.rule
    }

    /// Whether the policy applies to a request (its key aside).
    /// Path conditions see the path as backends resolve it ([`normalise_path`]): no
    /// spelling (`//login`, `/./login`, `/%6Cogin`) walks around a limit on `/login`.
    pub fn applies(&self, parts: &Parts) -> bool {
        let normalised;
        let path = if self.path_exact.is_some() || self.path_prefix.is_some() {
            normalised = normalise_path(parts.uri.path());
            normalised.as_ref()
        } else {
            parts.uri.path()
        };
        if self.path_exact.as_deref().is_some_and(|p| p != path) {
            return false;
        }
        if let Some(prefix) = &self.path_prefix {
            let under = path
                .strip_prefix(prefix.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
            if !under {
                return false;
            }
        }
        if !self.methods.is_empty() && !self.methods.contains(&parts.method) {
            return false;
        }
        self.headers.iter().all(|h| h.matches(parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, uri: &str, ua: Option<&str>) -> Parts {
        let mut b = http::Request::builder().method(method).uri(uri);
        if let Some(ua) = ua {
            b = b.header("user-agent", ua);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn conditions_select_requests() {
        let rule = Rule::per_second(1).unwrap();
        let p = Policy::new("p", rule)
            .unwrap()
            .path_prefix("/api/")
            .method(Method::GET)
            .when_header("User-Agent", ["Googlebot", "bingbot"])
            .unwrap();
        assert!(p.applies(&parts(
            "GET",
            "/api/x",
            Some("Mozilla/5.0 (compatible; googlebot/2.1)")
        )));
        assert!(p.applies(&parts("GET", "/api", Some("BingBot"))));
        assert!(!p.applies(&parts("GET", "/apix", Some("bingbot"))));
        assert!(!p.applies(&parts("POST", "/api/x", Some("bingbot"))));
        assert!(!p.applies(&parts("GET", "/api/x", Some("Firefox"))));
        assert!(!p.applies(&parts("GET", "/api/x", None)));
        let exact = Policy::new("e", rule).unwrap().path("/login");
        assert!(exact.applies(&parts("POST", "/login?next=/", None)));
        assert!(!exact.applies(&parts("POST", "/login/x", None)));
    }

    #[test]
    fn bad_policies_say_why() {
        let lease = Rule::concurrency(3).unwrap();
        assert!(matches!(
            Policy::new("c", lease),
            Err(PolicyError::Concurrency(name)) if name == "c"
        ));
        let rule = Rule::per_second(1).unwrap();
        let e = Policy::new("q", rule)
            .unwrap()
            .on_limit(OnLimit::Queue {
                max_wait: Duration::from_secs(1),
                max_queued: 0,
            })
            .unwrap_err();
        assert_eq!(e.to_string(), "policy q: a queue needs max_queued >= 1");
    }

    #[cfg(feature = "rules")]
    #[test]
    fn an_unknown_rule_id_is_an_error_that_names_it() {
        let rules = weir_config::RuleSet::example();
        assert_eq!(
            Policy::from_rules(&rules, "nope").unwrap_err().to_string(),
            "no rule 'nope' with a limit in the rule files"
        );
    }

    /// The compiled patterns decide as the patterns searched one by one in a lowered copy
    /// of the value did (the reading before they were compiled), on values of any case,
    /// several values of one header, non-ASCII and invalid UTF-8 bytes.
    #[test]
    fn compiled_header_patterns_match_as_the_lowered_search_did() {
        let patterns = ["GoogleBot", " spider ", "bot/", "+http", "", "é-agent"];
        let pattern = HeaderPattern::new("user-agent", patterns).unwrap();
        let lowered: Vec<String> = patterns
            .iter()
            .map(|p| p.trim().to_ascii_lowercase())
            .filter(|p| !p.is_empty())
            .collect();
        let reference = |values: &[&[u8]]| {
            values.iter().any(|v| {
                let v = String::from_utf8_lossy(v).to_ascii_lowercase();
                lowered.iter().any(|p| v.contains(p.as_str()))
            })
        };
        let cases: [&[&[u8]]; 12] = [
            &[b"Mozilla/5.0 (compatible; Googlebot/2.1)"],
            &[b"mozilla/5.0 GOOGLEBOT"],
            &[b"Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0"],
            &[b"Baiduspider+(+http://www.baidu.com/search/spider.htm)"],
            &[b"curl/8.0", b"SomeBot/1.0"],
            &[b"curl/8.0", b"wget"],
            &[b"googlebo", b"t"],
            &["\u{e9}-AGENT/1".as_bytes()],
            &["\u{c9}-agent/1".as_bytes()],
            &[b"\xff\xfebot/2 \xc3"],
            &[b"\xff\xfe"],
            &[b""],
        ];
        for values in cases {
            let mut headers = http::HeaderMap::new();
            for v in values {
                headers.append("user-agent", http::HeaderValue::from_bytes(v).unwrap());
            }
            assert_eq!(
                pattern.matches_headers(&headers),
                reference(values),
                "{values:?}"
            );
        }
        assert!(!HeaderPattern::new("user-agent", [""])
            .unwrap()
            .matches_headers(&http::HeaderMap::new()));
    }
}
