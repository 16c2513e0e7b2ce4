//! The instance count a [`LeasedStore`] divides by: the larger of the stated
//! [`LeaseConfig::instances`] (`--instances`) and the count the failover guard below learns
//! from the store's presence key (`presence.rs`), so leased rules and the local fallback
//! always use the same count. Read where an overloaded instance sizes its claim and where
//! a refused claim decides how long to answer locally (`mod.rs`, `take`).

use weir_core::Store;

use super::{LeaseConfig, LeasedStore};
use crate::presence::InstanceCount;

impl<S: Store> LeasedStore<S> {
    /// Divides by `count` too (the failover guard's: [`FailoverStore::instance_count`]),
    /// so an overloaded instance's claims follow the instance count learned from the
    /// store's presence key when it is larger than [`LeaseConfig::instances`].
    ///
    /// [`FailoverStore::instance_count`]: crate::FailoverStore::instance_count
    pub fn with_instance_count(mut self, count: InstanceCount) -> Self {
        self.count = Some(count);
        self
    }

    /// The instance count in force: the larger of [`LeaseConfig::instances`] and the
    /// count handed in by [`with_instance_count`](Self::with_instance_count).
    pub fn instances(&self) -> u64 {
        let learned = self.count.as_ref().map_or(1, |c| c.share().instances);
        self.config.instances.max(learned).max(1)
    }

    /// The configuration with the instance count in force.
    pub(super) fn in_force(&self) -> LeaseConfig {
        LeaseConfig {
            instances: self.instances(),
            ..self.config
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use weir_core::{MemoryStore, Rule};

    use super::*;

    #[test]
    fn the_larger_count_sizes_an_overloaded_claim() {
        let rule = Rule::fixed_window(100, Duration::from_secs(10)).unwrap();
        let alone = LeasedStore::new(MemoryStore::default(), LeaseConfig::default());
        assert_eq!(alone.instances(), 1);
        assert_eq!(alone.in_force().overload_cap(&rule, 1), 100);
        let shared = LeasedStore::new(MemoryStore::default(), LeaseConfig::default())
            .with_instance_count(InstanceCount::stated(4));
        assert_eq!(shared.instances(), 4);
        assert_eq!(shared.in_force().overload_cap(&rule, 1), 25);
        let stated = LeaseConfig {
            instances: 5,
            ..LeaseConfig::default()
        };
        let larger = LeasedStore::new(MemoryStore::default(), stated)
            .with_instance_count(InstanceCount::stated(4));
        assert_eq!(larger.instances(), 5);
    }
}
