//! # weir-config
//!
//! Rule files in, a validated and immutable [`RuleSet`] out, and the matching of a request's
//! descriptors against it. Pure apart from reading files ([`RuleSet::load`], through
//! [`file::read_regular`], the one safe reader every operator file goes through): no clock, no
//! store, no network. The server (`weir serve`) holds one `RuleSet` snapshot at a time and
//! swaps it whole on reload.
//!
//! Two formats share one tree (see `config/README.md` at the repository root):
//!
//! - **envoyproxy/ratelimit's format, unchanged**: `domain`, nested `descriptors` with `key`
//!   and an optional `value` (a `*` anywhere in it is a wildcard, several allowed, matched as
//!   ratelimit matches), `rate_limit` {`unit`, `requests_per_unit`, `unit_multiplier`,
//!   `name`, `replaces`, `unlimited`}, `shadow_mode`, `quota_mode`, `detailed_metric`,
//!   `value_to_metric` (metrics only), `share_threshold` (one counter per wildcard),
//!   `metadata` (accepted, never limits); [`RuleSet::merge_domains`] is ratelimit's
//!   `MERGE_DOMAIN_CONFIG`. A `rate_limit` becomes an epoch-aligned fixed window;
//!   `quota_mode` is carried to the server on each match ([`Matched::quota_mode`]), which
//!   combines the descriptors' answers as ratelimit does.
//! - **Weir's own**: the same tree with a `rule:` block on a node instead of `rate_limit:`,
//!   choosing any Weir algorithm, a cost, a lockout, a failure policy, shadow mode and an
//!   enforcement percentage.
//!
//! Two tables are shared with the rest of Weir: [`params`], each algorithm's parameters
//! (name, required or optional, count or duration, the `Rule` constructor they feed), read
//! by the `rule:` block and by `weir simulate --rule`; and [`parse_duration`], the one
//! duration grammar (`250ms`, `1.5s`, `1m30s`) of rule files and every command-line option.
//!
//! The path of one decision through this crate: the server receives `(domain, descriptors)`
//! → [`RuleSet::matches`] checks the request [`bounds`], finds the domain, walks
//! each descriptor's entries down the tree ([`Matched`] or `None` per descriptor), applies
//! `replaces`, and builds each match's namespaced [`Key`](weir_core::Key) → the server asks
//! the limiter with `(key, rule, hits)`.
//!
//! ```
//! use weir_config::{Descriptor, RuleSet};
//!
//! let rules = RuleSet::parse("inline.yaml", r#"
//! domain: mongo_cps
//! descriptors:
//!   - key: database
//!     value: users
//!     rate_limit:
//!       unit: second
//!       requests_per_unit: 500
//! "#)?;
//! let matched = rules.matches("mongo_cps", &[Descriptor::new([("database", "users")])])?;
//! let users = matched[0].as_ref().unwrap();
//! assert_eq!(users.rule_id.as_ref(), "mongo_cps.database_users");
//! assert_eq!(users.rule().unwrap().limit(), 500);
//! assert_eq!(users.key.to_string(), "mongo_cps/database=users");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod block;
pub mod bounds;
mod compile;
mod duration;
mod error;
pub mod file;
mod info;
mod matcher;
pub mod params;
mod place;
mod raw;
mod request;
mod ruleset;
mod tree;
mod unit;
mod yaml;

pub use bounds::bounded_value;
pub use duration::{parse_duration, DurationError};
pub use error::{ConfigError, MatchError};
pub use info::{Format, RuleInfo};
pub use request::{limit_override_scope, LIMIT_OVERRIDE_RULE};
pub use request::{Descriptor, Limit, LimitOverride, Matched, RateLimitSpec};
pub use ruleset::RuleSet;
pub use unit::Unit;
/// The store key of a descriptor (`weir-names`: one naming scheme for every way in).
pub use weir_names::descriptor_key;

// The README's examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
