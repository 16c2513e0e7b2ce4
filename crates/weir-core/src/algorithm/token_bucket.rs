//! Token bucket. Pure: maps (state, now, cost) to (decision, next state). Equivalent Lua and
//! memcached steps must agree with it (checked by `weir-testkit`).

use crate::decision::Decision;
use crate::time::until;

use super::{Meter, Ramped, WarmUp};

/// A bucket of `capacity` tokens refilled with one token every `interval_ns`; a request
/// takes `cost` tokens or is denied.
///
/// State: `tokens` and `last_ns`, the instant the last whole token was added. Refill adds
/// `⌊(now − last)/T⌋` tokens and advances `last` by that many intervals, so no fraction of
/// a token is ever lost or invented. A penalty beyond zero tokens pushes `last` into the
/// future (a debt that must refill first).
///
/// A key starts with `initial` tokens (default: full). A full bucket is forgotten once it
/// has been full for one more refill period (`capacity × T`), so a key idle that long comes
/// back with `initial` tokens: `initial` is the cold-start allowance. (With `initial =
/// capacity`, a full bucket is forgotten at once, as it equals a fresh one.)
///
/// Over any interval of length `t` it allows at most `capacity + t / T` tokens.
/// `retry_after` is exact: `last + (cost − tokens)·T − now`.
///
/// Rule change: the token count carries over, capped at the new capacity. Adding or
/// removing warm-up ([`WarmUp`]) is a change of state: the key starts fresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenBucket {
    pub(crate) capacity: u64,
    pub(crate) interval_ns: u64,
    pub(crate) initial: u64,
    pub(crate) warmup: Option<WarmUp>,
}

/// Token bucket state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenBucketState {
    /// Whole tokens in the bucket at `last_ns`.
    pub tokens: u64,
    /// When the last whole token was added (may be in the future after a penalty).
    pub last_ns: u64,
}

impl TokenBucket {
    /// The interval between two units, in nanoseconds.
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }
}

impl TokenBucket {
    /// Tokens and refill instant at `now_ns`.
    fn refill(&self, state: &TokenBucketState, now_ns: u64) -> TokenBucketState {
        let mut tokens = state.tokens.min(self.capacity);
        let mut last_ns = state.last_ns;
        if now_ns > last_ns {
            let added = (now_ns - last_ns) / self.interval_ns;
            tokens = tokens.saturating_add(added).min(self.capacity);
            last_ns = if tokens == self.capacity {
                now_ns
            } else {
                last_ns + added * self.interval_ns
            };
        }
        TokenBucketState { tokens, last_ns }
    }

    fn full_at_ns(&self, s: &TokenBucketState) -> u64 {
        s.last_ns.saturating_add(
            (self.capacity.saturating_sub(s.tokens)).saturating_mul(self.interval_ns),
        )
    }
}

impl Meter for TokenBucket {
    type State = TokenBucketState;

    fn fresh(&self, now_ns: u64) -> TokenBucketState {
        TokenBucketState {
            tokens: self.initial,
            last_ns: now_ns,
        }
    }

    fn check(&self, state: &mut TokenBucketState, now_ns: u64, cost: u64) -> Decision {
        let mut s = self.refill(state, now_ns);
        let want = cost.max(1);
        if s.tokens >= want {
            if cost > 0 {
                s.tokens -= cost;
                *state = s;
            }
            Decision::allow(self.capacity, s.tokens, until(self.full_at_ns(&s), now_ns))
        } else {
            let ready_ns = s
                .last_ns
                .saturating_add((want - s.tokens).saturating_mul(self.interval_ns));
            Decision::deny(
                self.capacity,
                s.tokens,
                until(self.full_at_ns(&s), now_ns),
                until(ready_ns, now_ns),
            )
        }
    }

    fn penalize(&self, state: &mut TokenBucketState, now_ns: u64, n: u64) {
        let mut s = self.refill(state, now_ns);
        if n <= s.tokens {
            s.tokens -= n;
        } else {
            let debt = n - s.tokens;
            s.tokens = 0;
            s.last_ns = s
                .last_ns
                .saturating_add(debt.saturating_mul(self.interval_ns));
        }
        *state = s;
    }

    fn reward(&self, state: &mut TokenBucketState, now_ns: u64, n: u64) {
        let mut s = self.refill(state, now_ns);
        let mut n = n;
        if s.last_ns > now_ns {
            let debt = (s.last_ns - now_ns).div_ceil(self.interval_ns);
            let paid = debt.min(n);
            s.last_ns = s
                .last_ns
                .saturating_sub(paid.saturating_mul(self.interval_ns))
                .max(now_ns);
            n -= paid;
        }
        s.tokens = s.tokens.saturating_add(n).min(self.capacity);
        if s.tokens == self.capacity {
            s.last_ns = s.last_ns.max(now_ns);
        }
        *state = s;
    }

    fn used(&self, state: &TokenBucketState, now_ns: u64) -> u64 {
        let s = self.refill(state, now_ns);
        let debt = crate::time::div_ceil(s.last_ns.saturating_sub(now_ns), self.interval_ns);
        (self.capacity - s.tokens).saturating_add(debt)
    }

    fn fresh_at_ns(&self, state: &TokenBucketState) -> u64 {
        let full_ns = self.full_at_ns(&TokenBucketState {
            tokens: state.tokens.min(self.capacity),
            last_ns: state.last_ns,
        });
        if self.initial < self.capacity {
            // A full bucket is more than a fresh one here; keep it one more refill period
            // so a client waiting for a full bucket gets it, then forget it.
            full_ns.saturating_add(self.capacity.saturating_mul(self.interval_ns))
        } else {
            full_ns
        }
    }
}

impl Ramped for TokenBucket {
    fn warmup(&self) -> Option<WarmUp> {
        self.warmup
    }

    fn unit_ns(&self) -> u64 {
        self.interval_ns
    }

    fn full_at_ns(&self, state: &TokenBucketState) -> u64 {
        self.full_at_ns(&TokenBucketState {
            tokens: state.tokens.min(self.capacity),
            last_ns: state.last_ns,
        })
    }

    /// `ns` as whole tokens taken (a debt past zero, as a penalty), the part of the last one
    /// not owed given back as refill progress: the bucket's full instant moves by `ns`.
    fn charge(&self, state: &mut TokenBucketState, now_ns: u64, ns: u64) {
        let tokens = crate::time::div_ceil(ns, self.interval_ns);
        self.penalize(state, now_ns, tokens);
        let over_ns = tokens.saturating_mul(self.interval_ns).saturating_sub(ns);
        state.last_ns = state.last_ns.saturating_sub(over_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refill_keeps_the_fraction_of_a_token() {
        let tb = TokenBucket {
            capacity: 2,
            interval_ns: 10,
            initial: 2,
            warmup: None,
        };
        let mut s = tb.fresh(0);
        assert!(tb.check(&mut s, 0, 2).allowed);
        // 15 ns later: one token, and 5 ns towards the next.
        assert!(tb.check(&mut s, 15, 1).allowed);
        let d = tb.check(&mut s, 15, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after.as_nanos(), 5);
        assert!(tb.check(&mut s, 20, 1).allowed);
    }

    #[test]
    fn initial_tokens_below_capacity() {
        let tb = TokenBucket {
            capacity: 10,
            interval_ns: 100,
            initial: 1,
            warmup: None,
        };
        let mut s = tb.fresh(1_000);
        assert!(tb.check(&mut s, 1_000, 1).allowed);
        assert!(!tb.check(&mut s, 1_000, 1).allowed);
    }

    #[test]
    fn a_penalty_beyond_zero_is_a_debt() {
        let tb = TokenBucket {
            capacity: 1,
            interval_ns: 100,
            initial: 1,
            warmup: None,
        };
        let mut s = tb.fresh(0);
        tb.penalize(&mut s, 0, 3);
        assert_eq!(tb.used(&s, 0), 3);
        let d = tb.check(&mut s, 0, 1);
        assert_eq!(d.retry_after.as_nanos(), 300);
        tb.reward(&mut s, 0, 2);
        assert_eq!(tb.check(&mut s, 0, 1).retry_after.as_nanos(), 100);
    }
}
