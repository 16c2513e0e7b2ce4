//! [`LeaseConfig`]: how long a slice lives and how large it may grow, per rule. Read by the
//! slice sizing in `slice.rs`; the bounds in the [`LeasedStore`](crate::LeasedStore) docs are
//! stated in these terms.

use std::time::Duration;

use weir_core::Rule;

/// How a [`LeasedStore`](crate::LeasedStore) sizes and ages the slices it claims.
///
/// A slice of rule `R` lives `ttl(R) = min(max_ttl, max(min_ttl, window(R) / window_fraction))`
/// (`window` is [`Rule::window`]: the window, or the time a bucket takes to fill), so with
/// the defaults a 1 s rule's slices live 100 ms and a 1 min rule's 6 s. A slice holds at most
/// `cap(R) = min(max_slice, limit(R) / limit_fraction)` units (at least the request's cost),
/// or up to `min(max_slice, limit(R) / instances)` when the instance denied the key since
/// its last slice ([`overload_cap`](Self::overload_cap)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// A slice lives this fraction of its rule's window: `window / window_fraction`
    /// (default 10). The over-admission bound grows with it.
    pub window_fraction: u32,
    /// The shortest slice lifetime (default 1 ms).
    pub min_ttl: Duration,
    /// The longest slice lifetime, whatever the window (default 10 s).
    pub max_ttl: Duration,
    /// The most units one slice holds (default 1000).
    pub max_slice: u64,
    /// A slice holds at most `limit / limit_fraction` units (default 4), so a key near its
    /// limit cannot sit idle in one instance's slice.
    pub limit_fraction: u64,
    /// How many instances share each limit (default 1; `weir serve --instances`): an
    /// instance turning a key's checks away claims at most its share of the limit, so
    /// instances at overload split it instead of one taking it all.
    pub instances: u64,
    /// The most keys whose slices are held at once (default 100 000). Beyond it, expired
    /// slices go first, then any; a dropped slice's units are lost (under-admission, never
    /// over-admission).
    pub capacity: usize,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            window_fraction: 10,
            min_ttl: Duration::from_millis(1),
            max_ttl: Duration::from_secs(10),
            max_slice: 1000,
            limit_fraction: 4,
            instances: 1,
            capacity: 100_000,
        }
    }
}

impl LeaseConfig {
    /// How long a slice of `rule` lives, in nanoseconds.
    pub fn ttl_ns(&self, rule: &Rule) -> u64 {
        let window = rule.window();
        let share = window / self.window_fraction.max(1);
        let ttl = share.clamp(self.min_ttl, self.max_ttl.max(self.min_ttl));
        u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX).max(1)
    }

    /// The most units one slice of `rule` may hold for a request of `cost`.
    pub fn cap(&self, rule: &Rule, cost: u64) -> u64 {
        let share = rule.limit() / self.limit_fraction.max(1);
        self.max_slice.min(share).max(cost)
    }

    /// The units `rule` gives back over one slice lifetime `ttl_ns` (its limit over its
    /// window, or its rate), at least `cost`: what an overloaded instance waits for after
    /// a claim that left the store short, so that no key goes longer than one lifetime
    /// without a unit while the exact rule would admit one.
    pub fn per_lifetime(&self, rule: &Rule, cost: u64, ttl_ns: u64) -> u64 {
        let window_ns = rule.window().as_nanos().max(1);
        let units = u128::from(rule.limit()) * u128::from(ttl_ns) / window_ns;
        u64::try_from(units).unwrap_or(u64::MAX).max(cost).max(1)
    }

    /// The most units a slice may hold when this instance has been denying the key since
    /// its last slice (its demand is above what it gets): its share of the limit
    /// (`limit / instances`), since units claimed by an instance turning requests away are
    /// spent, not left idle.
    pub fn overload_cap(&self, rule: &Rule, cost: u64) -> u64 {
        let share = rule.limit() / self.instances.max(1);
        self.max_slice.min(share).max(cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_lives_a_tenth_of_its_window_within_the_bounds() {
        let c = LeaseConfig::default();
        let second = Rule::fixed_window(100, Duration::from_secs(1)).unwrap();
        assert_eq!(c.ttl_ns(&second), 100_000_000);
        let minute = Rule::fixed_window(100, Duration::from_secs(60)).unwrap();
        assert_eq!(c.ttl_ns(&minute), 6_000_000_000);
        let day = Rule::fixed_window(100, Duration::from_secs(86_400)).unwrap();
        assert_eq!(c.ttl_ns(&day), 10_000_000_000);
        let tiny = Rule::fixed_window(100, Duration::from_micros(10)).unwrap();
        assert_eq!(c.ttl_ns(&tiny), 1_000_000);
    }

    #[test]
    fn a_slice_holds_at_most_a_quarter_of_the_limit_and_at_least_the_cost() {
        let c = LeaseConfig::default();
        let rule = Rule::gcra(100, Duration::from_secs(1), 100).unwrap();
        assert_eq!(c.cap(&rule, 1), 25);
        let small = Rule::gcra(2, Duration::from_secs(1), 2).unwrap();
        assert_eq!(c.cap(&small, 1), 1);
        assert_eq!(c.cap(&small, 2), 2);
        let huge = Rule::gcra(1_000_000, Duration::from_secs(1), 1_000_000).unwrap();
        assert_eq!(c.cap(&huge, 1), 1000);
    }
}
