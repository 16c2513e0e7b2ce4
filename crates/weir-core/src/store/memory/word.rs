//! Rules whose state fits one 64-bit word, and how that word is read and written: what the
//! lock-free paths run. The memory store's lock-free table (`compact.rs`) keeps one word per
//! key beside the key; the keyless [`DirectLimiter`](crate::DirectLimiter) keeps one word.
//!
//! Where this sits in a decision: the caller asks [`WordMeter::of`] whether its rule has a
//! one-word state, then runs [`WordMeter::check`] on the word it loaded and writes the word
//! it gets back with a compare-and-swap (unchanged: a denial or a peek, nothing to write).
//!
//! The decision is always the algorithm's own step (`Meter::check`, the one Rust copy every
//! store runs) on the state the word decodes to; the word is only an encoding:
//! - **GCRA**: the word is the TAT.
//! - **Token bucket that starts full** (`initial == capacity`, the default): the same
//!   decisions as GCRA with burst = capacity and the same interval (the word is the instant
//!   the bucket is full again; tokens = capacity − ⌈(word − now) / T⌉), so it runs as GCRA.
//!   A bucket with fewer initial tokens remembers a full bucket for one more refill period:
//!   not one word, it takes the general path.
//! - **Fixed window**: the word is `(window index + 1) << count_bits | count`, where
//!   `count_bits` holds 0 ..= limit; rules whose window index could overflow the rest (a
//!   tiny window with a huge limit) take the general path.
//! - **Two-window weighted estimate** (the window counter with two counts): the word is
//!   `(window index + 1) << 2·count_bits | previous << count_bits | current`, each count in
//!   `count_bits` (0 ..= limit: a check never counts past the limit, so nothing is lost or
//!   rounded: the encoding is exact); rules whose window index could overflow the rest (a
//!   limit of about 2^14 or more with a 1 s window, 2^17 with a minute) take the general
//!   path. A packed word, not a 16-byte state: the lock-free tables compare-and-swap the
//!   key's tag with the word in one 16-byte CAS, which leaves one word for the state.
//!
//! Word 0 is "no state" (a fresh key); every state a check writes is non-zero.

use crate::algorithm::{
    FixedWindow, FixedWindowState, Gcra, GcraState, Meter, TokenBucket, TokenBucketState,
    WeightedWindow, WeightedWindowState,
};
use crate::decision::Decision;
use crate::rule::{Algorithm, Rule};
use crate::state::{Record, State};

/// A rule whose state is one word: its algorithm, as the lock-free paths run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WordMeter {
    /// GCRA, or (`bucket` set) a token bucket that starts full, run as GCRA.
    Gcra {
        gcra: Gcra,
        bucket: Option<TokenBucket>,
    },
    /// A fixed window; the count takes the low `count_bits` bits of the word.
    FixedWindow {
        window: FixedWindow,
        count_bits: u32,
    },
    /// The two-window weighted estimate; each count takes `count_bits` bits of the word.
    Weighted {
        window: WeightedWindow,
        count_bits: u32,
    },
}

impl WordMeter {
    /// The rule's one-word meter, if it has one: GCRA, a token bucket that starts full, or
    /// a fixed window whose window index fits, without a lockout (a lockout's strikes and
    /// block need a second word).
    #[inline(always)]
    pub(crate) fn of(rule: &Rule) -> Option<Self> {
        if rule.lockout.is_some() || rule.warmup().is_some() {
            return None;
        }
        match rule.algorithm {
            Algorithm::Gcra(gcra) => Some(Self::Gcra { gcra, bucket: None }),
            Algorithm::TokenBucket(tb) => Self::token_bucket(tb),
            Algorithm::FixedWindow(window) => Self::fixed_window(window),
            Algorithm::WeightedWindow(window) => Self::weighted(window),
            _ => None,
        }
    }

    fn token_bucket(tb: TokenBucket) -> Option<Self> {
        // `capacity × T` must not saturate, as GCRA's tolerance would then differ.
        let fits = tb.capacity.checked_mul(tb.interval_ns).is_some();
        (tb.initial == tb.capacity && fits).then(|| Self::Gcra {
            gcra: Gcra::new(tb.capacity, tb.interval_ns),
            bucket: Some(tb),
        })
    }

    fn fixed_window(window: FixedWindow) -> Option<Self> {
        let count_bits = u64::BITS - window.limit.leading_zeros();
        index_fits(count_bits, window.window_ns).then_some(Self::FixedWindow { window, count_bits })
    }

    fn weighted(window: WeightedWindow) -> Option<Self> {
        let count_bits = u64::BITS - window.limit.leading_zeros();
        index_fits(count_bits.checked_mul(2)?, window.window_ns)
            .then_some(Self::Weighted { window, count_bits })
    }

    /// Whether records written under `self` can be read by `other` on the lock-free path:
    /// any two GCRA rules (a TAT means the same under any parameters: a named rule's change
    /// carries it over, as the pure step does), otherwise only the same parameters.
    #[inline(always)]
    pub(crate) fn reads_alike(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Gcra { bucket: None, .. }, Self::Gcra { bucket: None, .. }) => true,
            _ => self == other,
        }
    }

    /// Decides a check of `cost` (0: a peek) on `word` at `now_ns`; returns the decision
    /// and the word to write (`word` itself when nothing changes).
    #[inline(always)]
    pub(crate) fn check(&self, word: u64, now_ns: u64, cost: u64) -> (Decision, u64) {
        match self {
            Self::Gcra { gcra, .. } => {
                let mut state = GcraState { tat_ns: word };
                let decision = gcra.check(&mut state, now_ns, cost);
                (decision, state.tat_ns)
            }
            Self::FixedWindow { window, count_bits } => {
                let mut state = self.fixed_state(window, *count_bits, word);
                let before = state;
                let decision = window.check(&mut state, now_ns, cost);
                let next = if state == before {
                    word
                } else {
                    Self::fixed_word(window, *count_bits, &state)
                };
                (decision, next)
            }
            Self::Weighted { window, count_bits } => {
                let mut state = weighted_state(window, *count_bits, word);
                let before = state;
                let decision = window.check(&mut state, now_ns, cost);
                let next = if state == before {
                    word
                } else {
                    weighted_word(window, *count_bits, &state)
                };
                (decision, next)
            }
        }
    }

    /// The instant from which `word` is equivalent to no state (0 for no state): a slot
    /// whose word expired is free.
    #[inline]
    pub(crate) fn expires_ns(&self, word: u64) -> u64 {
        match self {
            Self::Gcra { .. } => word,
            Self::FixedWindow { window, count_bits } => {
                window.fresh_at_ns(&self.fixed_state(window, *count_bits, word))
            }
            Self::Weighted { window, count_bits } => {
                window.fresh_at_ns(&weighted_state(window, *count_bits, word))
            }
        }
    }

    /// Whether a check of cost 1 would pass now (the record is not limited: it may be
    /// evicted).
    #[inline]
    pub(crate) fn allows_one_more(&self, word: u64, now_ns: u64) -> bool {
        match self {
            Self::Gcra { gcra, .. } => gcra.allows_one_more(word, now_ns),
            Self::FixedWindow { .. } | Self::Weighted { .. } => {
                self.check(word, now_ns, 0).0.allowed
            }
        }
    }

    /// The general path's record for `word`, read at `now_ns` (when a record moves there).
    pub(crate) fn record(&self, word: u64, now_ns: u64) -> Record {
        let state = match self {
            Self::Gcra { bucket: None, .. } => State::Gcra(GcraState { tat_ns: word }),
            Self::Gcra {
                bucket: Some(tb),
                gcra,
            } => State::TokenBucket(bucket_state(gcra, tb, word, now_ns)),
            Self::FixedWindow { window, count_bits } => {
                State::FixedWindow(self.fixed_state(window, *count_bits, word))
            }
            Self::Weighted { window, count_bits } => {
                State::Weighted(Box::new(weighted_state(window, *count_bits, word)))
            }
        };
        Record {
            expires_ns: self.expires_ns(word),
            state,
            guard: None,
        }
    }

    #[inline]
    fn fixed_state(&self, window: &FixedWindow, count_bits: u32, word: u64) -> FixedWindowState {
        if word == 0 {
            return FixedWindowState::default();
        }
        let index = (word >> count_bits) - 1;
        FixedWindowState {
            window_start_ns: index * window.window_ns,
            count: word & ((1u64 << count_bits) - 1),
        }
    }

    #[inline]
    fn fixed_word(window: &FixedWindow, count_bits: u32, state: &FixedWindowState) -> u64 {
        let index = state.window_start_ns / window.window_ns;
        ((index + 1) << count_bits) | state.count.min((1u64 << count_bits) - 1)
    }
}

/// Whether the index + 1 of any instant's window fits in the bits above `count_bits`: the
/// last index, u64::MAX / window, is below 2^index_bits - 1, i.e. (2^index_bits - 1) ×
/// window overflows (a multiplication, not a division, on every check).
fn index_fits(count_bits: u32, window_ns: u64) -> bool {
    let Some(index_bits) = u64::BITS.checked_sub(count_bits) else {
        return false;
    };
    index_bits > 0 && ((1u64 << index_bits) - 1).checked_mul(window_ns).is_none()
}

/// The weighted window's state that `word` encodes (the default for word 0).
#[inline]
fn weighted_state(window: &WeightedWindow, count_bits: u32, word: u64) -> WeightedWindowState {
    if word == 0 {
        return WeightedWindowState::default();
    }
    let mask = (1u64 << count_bits) - 1;
    WeightedWindowState {
        window_start_ns: ((word >> (2 * count_bits)) - 1) * window.window_ns,
        previous: (word >> count_bits) & mask,
        current: word & mask,
    }
}

/// The word of a weighted window's state (its counts never exceed the limit on the
/// lock-free path: only checks run there).
#[inline]
fn weighted_word(window: &WeightedWindow, count_bits: u32, state: &WeightedWindowState) -> u64 {
    let mask = (1u64 << count_bits) - 1;
    let index = state.window_start_ns / window.window_ns;
    ((index + 1) << (2 * count_bits))
        | (state.previous.min(mask) << count_bits)
        | state.current.min(mask)
}

/// The token bucket's state that decides as GCRA does on `tat_ns` (when the bucket is
/// full again) at `now_ns`: whole tokens, and the instant the last one was added.
fn bucket_state(gcra: &Gcra, tb: &TokenBucket, tat_ns: u64, now_ns: u64) -> TokenBucketState {
    if tat_ns <= now_ns {
        return TokenBucketState {
            tokens: tb.capacity,
            last_ns: now_ns,
        };
    }
    let missing = crate::time::div_ceil(tat_ns - now_ns, gcra.interval_ns).min(tb.capacity);
    TokenBucketState {
        tokens: tb.capacity - missing,
        last_ns: tat_ns.saturating_sub(missing.saturating_mul(gcra.interval_ns)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::{apply, Op, Outcome};
    use std::time::Duration;

    const T0: u64 = 1_700_000_000_123_456_789;

    /// Every check on the word decides as the pure step on the record, and the record the
    /// word converts to decides the rest of the run alike.
    fn same_as_the_step(rule: &Rule, gaps: &[(u64, u64)]) {
        let meter = WordMeter::of(rule).unwrap();
        let (mut word, mut record, mut now) = (0u64, Record::fresh(rule, T0), T0);
        for (i, &(gap, cost)) in gaps.iter().enumerate() {
            now += gap;
            let (ours, next) = meter.check(word, now, cost);
            let Ok(Outcome::Decision(theirs)) = apply(rule, &mut record, &Op::Check { cost }, now)
            else {
                panic!("not a decision")
            };
            assert_eq!(ours, theirs, "check {i} at +{} ns, cost {cost}", now - T0);
            word = next;
            if next != 0 && meter.expires_ns(next) > now {
                assert_eq!(meter.expires_ns(next), record.expires_ns, "expiry {i}");
                // The moved record decides a peek as the word does.
                let mut moved = meter.record(next, now);
                let peek = apply(rule, &mut moved, &Op::Check { cost: 0 }, now).unwrap();
                assert_eq!(peek, Outcome::Decision(meter.check(next, now, 0).0), "{i}");
            }
        }
    }

    fn gaps(seed: u64, step_ns: u64) -> Vec<(u64, u64)> {
        let mut x = seed | 1;
        (0..3000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let gap = match x % 4 {
                    0 => 0,
                    1 => x % step_ns,
                    2 => x % (step_ns * 10),
                    _ => x % (step_ns * 1000),
                };
                (gap, (x >> 32) % 4)
            })
            .collect()
    }

    #[test]
    fn one_word_decides_as_the_pure_step() {
        let ms = Duration::from_millis(1);
        let rules = [
            Rule::gcra(7, Duration::from_millis(70), 4).unwrap(),
            Rule::token_bucket(5, 3, Duration::from_millis(10)).unwrap(),
            Rule::token_bucket(3, 1, ms).unwrap(),
            Rule::fixed_window(5, Duration::from_millis(20)).unwrap(),
            Rule::fixed_window(3, ms).unwrap(),
            Rule::weighted_window(5, Duration::from_millis(20)).unwrap(),
            Rule::weighted_window(3, ms).unwrap(),
            Rule::weighted_window(1000, Duration::from_millis(7)).unwrap(),
        ];
        for (i, rule) in rules.iter().enumerate() {
            for seed in [1, 42, 0xDEAD_BEEF] {
                same_as_the_step(rule, &gaps(seed + i as u64, 300_000));
            }
        }
    }

    #[test]
    fn rules_that_need_more_than_a_word_have_no_word_meter() {
        let s = Duration::from_secs(1);
        let lockout = crate::rule::Lockout::new(s).unwrap();
        assert!(WordMeter::of(&Rule::per_second(5).unwrap().with_lockout(lockout)).is_none());
        let partial = Rule::token_bucket(5, 1, s)
            .unwrap()
            .with_initial_tokens(2)
            .unwrap();
        assert!(WordMeter::of(&partial).is_none());
        assert!(WordMeter::of(&Rule::sliding_log(5, s).unwrap()).is_none());
        // A 1 ns window and a limit of 2^40: the window index does not fit above the count.
        let tiny = Rule::fixed_window(1 << 40, Duration::from_nanos(1)).unwrap();
        assert!(WordMeter::of(&tiny).is_none());
        assert!(WordMeter::of(&Rule::fixed_window(u64::MAX, s).unwrap()).is_none());
        // Two counts of 15 bits leave 34 for the index of a 1 s window: too few.
        assert!(WordMeter::of(&Rule::weighted_window(1 << 14, s).unwrap()).is_none());
        assert!(WordMeter::of(&Rule::weighted_window((1 << 14) - 1, s).unwrap()).is_some());
    }
}
