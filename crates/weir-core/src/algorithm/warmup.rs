//! Warm-up: the option of the rate-based meters (GCRA, the token bucket) that makes a cold
//! key earn its full rate (Guava's `SmoothWarmingUp`, Sentinel's warm-up controller). The
//! step (`step.rs`) runs a warm-up rule's meter through [`Warmed`], which wraps the plain
//! meter's check: the check admits exactly as without warm-up, then charges the admitted
//! units' warm-up surcharge to the key's time debt. Integer nanoseconds only; the Redis
//! script `lua/warmup.lua` computes the same formula.
//!
//! # Semantics
//!
//! Parameters: the warm-up period `W` and the cold factor `c` (an integer, 2 to 100,
//! default 3); the rule's interval `T` (one unit per `T`) and burst or capacity `B`.
//!
//! - **Warmth.** A key carries its ramp position `x`: the full-rate time (`units × T`) it
//!   has been admitted since it was last cold, capped at `X = ⌊2W / (c + 1)⌋`. A key never
//!   seen is cold (`x = 0`).
//! - **Idle.** A key is idle once it has been full (nothing owed: GCRA's TAT, the bucket's
//!   full instant) for at least `W`; an idle key is cold again. So a warm record lives until
//!   `full + W` and is then equivalent to a fresh one (the store forgets it).
//! - **The ramp.** Admitting units from position `x` to `y` costs `G(y) − G(x)` ns of the
//!   key's time instead of `y − x`, with, for `0 ≤ x ≤ X`,
//!   `G(x) = x + H(x)`, `H(x) = (c − 1) · (x − ⌊x² / 2X⌋)`, and `G` of slope 1 past `X`.
//!   The interval per unit falls linearly with the units admitted, from `c·T` (the cold
//!   rate, `rate / c`) to `T` at `X`: Guava's trapezoid. A key used at its full rate reaches
//!   `X` after `G(X) = X + (c − 1)·⌈X/2⌉ ≈ W`; a key used less warms more slowly, with use,
//!   not with time.
//! - **The check** admits exactly when the rule without warm-up would, on the key's
//!   current state; an admitted check then adds the surcharge `H(y) − H(x)` to the key's
//!   debt (GCRA: the TAT moves on; token bucket: tokens and refill progress are taken), so
//!   the next checks wait for it. Penalties and rewards move the debt as without warm-up
//!   and do not warm the key. `retry_after` stays exact.
//! - **Guarantee.** After a cold start at `s`, a check of `n` admitted at `s + τ` had at
//!   most `G⁻¹(τ + (B − n)·T) / T` units admitted before it; so over `[s, s + τ]` the key
//!   admits at most `B + G⁻¹(τ) / T` units, the burst plus the integral of the ramp at full
//!   use. As `G(x) ≥ x`, that is never more than the rule without warm-up admits
//!   (`B + τ / T`), over any interval. A cold key's burst is about `1 + (B − 1) / c`.

use crate::decision::Decision;
use crate::error::RuleError;

use super::Meter;

/// A rule's warm-up: its period and cold factor, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WarmUp {
    pub(crate) period_ns: u64,
    pub(crate) cold_factor: u64,
    pub(crate) ramp_ns: u64,
}

impl WarmUp {
    /// The cold factor when none is given: a cold key gets a third of the rate (Guava's).
    pub const DEFAULT_COLD_FACTOR: u64 = 3;
    /// The largest cold factor.
    pub const MAX_COLD_FACTOR: u64 = 100;

    /// A warm-up over `period_ns` from `rate / cold_factor` (2 to [`Self::MAX_COLD_FACTOR`]).
    pub(crate) fn new(period_ns: u64, cold_factor: u64) -> Result<Self, RuleError> {
        if cold_factor < 2 {
            return Err(RuleError::Inconsistent {
                param: "cold_factor",
                reason: "must be at least 2 (the cold rate is rate / cold_factor)",
            });
        }
        if cold_factor > Self::MAX_COLD_FACTOR {
            return Err(RuleError::TooLarge {
                param: "cold_factor",
                value: cold_factor,
                max: Self::MAX_COLD_FACTOR,
            });
        }
        let ramp_ns = period_ns.saturating_mul(2) / (cold_factor + 1);
        if ramp_ns == 0 {
            return Err(RuleError::Inconsistent {
                param: "warmup",
                reason: "is too short for its cold factor",
            });
        }
        Ok(Self {
            period_ns,
            cold_factor,
            ramp_ns,
        })
    }

    /// The warm-up period `W` in nanoseconds.
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// The cold factor `c`: a cold key gets `rate / c`.
    pub fn cold_factor(&self) -> u64 {
        self.cold_factor
    }

    /// The ramp's length `X` in full-rate nanoseconds (`⌊2W / (c + 1)⌋`).
    pub fn ramp_ns(&self) -> u64 {
        self.ramp_ns
    }

    /// `H(x)`: the surcharge of the ramp from 0 to `x` (`x ≤ X`).
    fn surcharge_to(&self, x: u64) -> u64 {
        let x = u128::from(x.min(self.ramp_ns));
        let square = x * x / (2 * u128::from(self.ramp_ns));
        let h = u128::from(self.cold_factor - 1) * (x - square);
        u64::try_from(h).unwrap_or(u64::MAX)
    }

    /// Admits `add_ns` of full-rate time at position `x`: the surcharge to charge, and the
    /// new position.
    pub fn advance(&self, x: u64, add_ns: u64) -> (u64, u64) {
        let x = x.min(self.ramp_ns);
        let y = x.saturating_add(add_ns).min(self.ramp_ns);
        (self.surcharge_to(y) - self.surcharge_to(x), y)
    }

    /// `G(x)`: the key's time the ramp takes from 0 to full-rate time `x` (any `x`).
    pub fn ramp_time_ns(&self, x: u64) -> u64 {
        x.saturating_add(self.surcharge_to(x))
    }
}

/// A rate-based meter that can warm up: its unit interval, when its state is full, and how
/// to charge extra time to it.
pub(crate) trait Ramped: Meter + Sized {
    /// The rule's warm-up, if it has one.
    fn warmup(&self) -> Option<WarmUp>;
    /// The meter with its warm-up, if it has one.
    fn warmed(&self) -> Option<Warmed<'_, Self>> {
        self.warmup().map(|warmup| Warmed {
            meter: self,
            warmup,
        })
    }
    /// The interval `T` between two units.
    fn unit_ns(&self) -> u64;
    /// From this instant on the state owes nothing (a full bucket).
    fn full_at_ns(&self, state: &Self::State) -> u64;
    /// Adds `ns` of debt, as if `ns / T` more units had been used.
    fn charge(&self, state: &mut Self::State, now_ns: u64, ns: u64);
}

/// A warm-up rule's state: the meter's own, and the ramp position `x` (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Warm<S> {
    /// The meter's state.
    pub state: S,
    /// Full-rate time admitted since the key was last cold, at most the ramp's length.
    pub warm_ns: u64,
}

/// A meter run with its warm-up.
pub(crate) struct Warmed<'a, M> {
    pub(crate) meter: &'a M,
    pub(crate) warmup: WarmUp,
}

impl<M: Ramped> Warmed<'_, M> {
    /// The ramp position at `now_ns`: zero once the key is idle.
    fn warmth(&self, s: &Warm<M::State>, now_ns: u64) -> u64 {
        let idle_at = self
            .meter
            .full_at_ns(&s.state)
            .saturating_add(self.warmup.period_ns);
        if now_ns >= idle_at {
            0
        } else {
            s.warm_ns
        }
    }
}

impl<M: Ramped> Meter for Warmed<'_, M>
where
    M::State: Copy,
{
    type State = Warm<M::State>;

    fn fresh(&self, now_ns: u64) -> Self::State {
        Warm {
            state: self.meter.fresh(now_ns),
            warm_ns: 0,
        }
    }

    fn check(&self, s: &mut Self::State, now_ns: u64, cost: u64) -> Decision {
        let warmth = self.warmth(s, now_ns);
        let decision = self.meter.check(&mut s.state, now_ns, cost);
        if !decision.allowed || cost == 0 {
            return decision;
        }
        let used_ns = cost.saturating_mul(self.meter.unit_ns());
        let (extra_ns, warm_ns) = self.warmup.advance(warmth, used_ns);
        s.warm_ns = warm_ns;
        if extra_ns == 0 {
            return decision;
        }
        self.meter.charge(&mut s.state, now_ns, extra_ns);
        let mut after = s.state;
        let peek = self.meter.check(&mut after, now_ns, 0);
        Decision::allow(peek.limit, peek.remaining, peek.reset_after)
    }

    fn penalize(&self, s: &mut Self::State, now_ns: u64, n: u64) {
        s.warm_ns = self.warmth(s, now_ns);
        self.meter.penalize(&mut s.state, now_ns, n);
    }

    fn reward(&self, s: &mut Self::State, now_ns: u64, n: u64) {
        s.warm_ns = self.warmth(s, now_ns);
        self.meter.reward(&mut s.state, now_ns, n);
    }

    fn used(&self, s: &Self::State, now_ns: u64) -> u64 {
        self.meter.used(&s.state, now_ns)
    }

    fn fresh_at_ns(&self, s: &Self::State) -> u64 {
        let fresh_ns = self.meter.fresh_at_ns(&s.state);
        if s.warm_ns == 0 {
            fresh_ns
        } else {
            let idle_ns = self
                .meter
                .full_at_ns(&s.state)
                .saturating_add(self.warmup.period_ns);
            fresh_ns.max(idle_ns)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Gcra, GcraState, Ramped};

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000 * MS;

    fn gcra(burst: u64, interval_ns: u64, period_ns: u64) -> Gcra {
        let mut g = Gcra::new(burst, interval_ns);
        g.warmup = Some(WarmUp::new(period_ns, 3).unwrap());
        g
    }

    #[test]
    fn the_ramp_goes_from_the_cold_interval_to_the_full_one() {
        let w = WarmUp::new(30 * S, 3).unwrap();
        assert_eq!(w.ramp_ns(), 15 * S);
        // The first unit costs c·T, the last T; the whole ramp takes W.
        assert_eq!(w.ramp_time_ns(MS), 3 * MS - 66);
        let last = w.ramp_time_ns(15 * S) - w.ramp_time_ns(15 * S - MS);
        assert_eq!(last, MS + 66);
        assert_eq!(w.ramp_time_ns(15 * S), 30 * S);
        assert_eq!(w.advance(15 * S, S), (0, 15 * S));
        assert!(WarmUp::new(S, 1).is_err());
        assert!(WarmUp::new(S, 101).is_err());
        assert!(WarmUp::new(1, 3).is_err());
    }

    #[test]
    fn a_cold_key_gets_a_third_of_the_rate_and_warms_with_use() {
        // 10 per second, burst 1, warm-up 3 s (X = 1.5 s).
        let g = gcra(1, 100 * MS, 3 * S);
        let w = g.warmed().unwrap();
        let mut s = Warm::<GcraState>::default();
        let now = 1_000 * S;
        assert!(w.check(&mut s, now, 1).allowed);
        // The first unit cost about 3 intervals.
        let d = w.check(&mut s, now, 1);
        assert!(!d.allowed);
        assert!(d.retry_after.as_nanos() > 250 * u128::from(MS));
        // Used at its full rate, the key is warm after W: then one per 100 ms.
        let mut t = now;
        while s.warm_ns < w.warmup.ramp_ns() {
            let d = w.check(&mut s, t, 1);
            t += crate::time::duration_ns(d.retry_after);
        }
        assert!(t - now <= 3 * S + 300 * MS, "{}", t - now);
        let tat = s.state.tat_ns;
        assert!(w.check(&mut s, tat, 1).allowed);
        assert_eq!(s.state.tat_ns, tat + 100 * MS);
    }

    #[test]
    fn an_idle_key_is_cold_again() {
        let g = gcra(5, 100 * MS, S);
        let w = g.warmed().unwrap();
        let mut s = w.fresh(0);
        let now = 10 * S;
        w.check(&mut s, now, 1);
        assert!(s.warm_ns > 0);
        let idle = w.fresh_at_ns(&s);
        assert_eq!(idle, s.state.tat_ns + S);
        let mut warm = s;
        let mut cold = s;
        let before = w.check(&mut warm, idle - 1, 1);
        let after = w.check(&mut cold, idle, 1);
        assert!(before.reset_after < after.reset_after);
        assert_eq!(cold, {
            let mut fresh = w.fresh(0);
            w.check(&mut fresh, idle, 1);
            fresh
        });
    }
}
