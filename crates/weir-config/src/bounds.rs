//! The documented limits on one request, checked by [`RuleSet::matches`] before any lookup,
//! and on one rule file, checked by [`RuleSet::load`] and [`RuleSet::parse`]. A request over a
//! limit is a [`MatchError`] (a 400 / `INVALID_ARGUMENT` that names the limit), never a panic,
//! a hang or unbounded memory.
//!
//! [`RuleSet::matches`]: crate::RuleSet::matches
//! [`RuleSet::load`]: crate::RuleSet::load
//! [`RuleSet::parse`]: crate::RuleSet::parse
//! [`MatchError`]: crate::MatchError

use crate::MatchError;

/// The longest domain accepted in a request, in bytes.
pub const MAX_DOMAIN_LEN: usize = 256;
/// The most descriptors one request may carry.
pub const MAX_DESCRIPTORS: usize = 64;
/// The most entries one descriptor may carry.
pub const MAX_ENTRIES: usize = 16;
/// The longest entry key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 256;
/// The longest entry value accepted, in bytes.
pub const MAX_VALUE_LEN: usize = 1024;
/// The largest hits addend accepted, per request or per descriptor (a cost above a rule's
/// limit is refused later by the limiter; this bound only keeps `addend × cost` sane).
pub const MAX_HITS_ADDEND: u64 = 1_000_000_000;

/// The largest rule file read, in bytes.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// The most rule files read from one directory.
pub const MAX_FILES: usize = 10_000;
/// The deepest descriptor nesting accepted in a rule file: a deeper rule could never match a
/// request (at most [`MAX_ENTRIES`] entries).
pub const MAX_DEPTH: usize = MAX_ENTRIES;

/// Checks a request-level hits addend (per-descriptor ones are checked by
/// [`RuleSet::matches`](crate::RuleSet::matches)).
///
/// ```
/// use weir_config::bounds::{check_hits_addend, MAX_HITS_ADDEND};
/// assert!(check_hits_addend(MAX_HITS_ADDEND).is_ok());
/// assert_eq!(
///     check_hits_addend(MAX_HITS_ADDEND + 1).unwrap_err().to_string(),
///     "hits_addend is 1000000001, above the maximum of 1000000000"
/// );
/// ```
pub fn check_hits_addend(hits_addend: u64) -> Result<(), MatchError> {
    if hits_addend > MAX_HITS_ADDEND {
        return Err(MatchError::HitsAddendTooLarge {
            place: String::new(),
            value: hits_addend,
            max: MAX_HITS_ADDEND,
        });
    }
    Ok(())
}

/// A descriptor value bounded to [`MAX_VALUE_LEN`] bytes: unchanged when it fits, else its
/// head and `#` and the first 128 bits of the SHA-256 of the whole value in hex, exactly
/// as over-long keys are shortened ([`weir_names::shorten_to`]). Two different long values
/// stay different (infeasible to collide on purpose) and the same value always gives the
/// same result, so a front end that builds descriptors from request data (a path, a
/// header) can limit every request on a value the matcher accepts instead of failing the
/// match.
///
/// ```
/// let long = "/a".repeat(1000);
/// let bounded = weir_config::bounded_value(&long);
/// assert!(bounded.len() <= weir_config::bounds::MAX_VALUE_LEN);
/// assert_ne!(bounded, weir_config::bounded_value(&format!("{long}b")));
/// assert_eq!(weir_config::bounded_value("/short"), "/short");
/// ```
pub fn bounded_value(value: &str) -> std::borrow::Cow<'_, str> {
    if value.len() <= MAX_VALUE_LEN {
        std::borrow::Cow::Borrowed(value)
    } else {
        std::borrow::Cow::Owned(weir_names::shorten_to(value, MAX_VALUE_LEN))
    }
}
