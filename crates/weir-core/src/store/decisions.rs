//! [`Decisions`]: the answer to several limits checked together, all-or-nothing
//! ([`Store::check_all`](super::Store::check_all)), and the one decision that stands for
//! them in `RateLimit` headers. What every store returns; decided by none of them here.

use crate::decision::Decision;

/// The decisions of several limits checked together (e.g. 10/s and 1000/h for one user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decisions {
    /// True iff every limit allowed; only then was anything consumed.
    pub allowed: bool,
    /// One decision per limit, in the order given. When `allowed` is false, the limits
    /// that would have allowed show `allowed: true` but consumed nothing.
    pub each: Vec<Decision>,
}

impl Decisions {
    /// One decision standing for all: the overall `allowed`, the smallest `remaining` (with
    /// its limit), and the longest `retry_after`, `reset_after` and `delay`. This is what
    /// goes into `RateLimit` headers.
    pub fn most_restrictive(&self) -> Option<Decision> {
        let tightest = self.each.iter().min_by_key(|d| (d.allowed, d.remaining))?;
        Some(Decision {
            allowed: self.allowed,
            limit: tightest.limit,
            remaining: tightest.remaining,
            reset_after: self.each.iter().map(|d| d.reset_after).max()?,
            retry_after: self
                .each
                .iter()
                .filter(|d| !d.allowed)
                .map(|d| d.retry_after)
                .max()
                .unwrap_or_default(),
            delay: self.each.iter().map(|d| d.delay).max()?,
        })
    }
}
