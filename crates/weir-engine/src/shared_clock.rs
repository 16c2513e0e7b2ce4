//! [`SharedClock`]: the engine's one clock, chosen in [`EngineSettings`](crate::EngineSettings) (the
//! system clock in production, a `ManualClock` in tests) and shared by the limiter, the
//! store sweeper, latency metrics and reload timestamps. It never reads time itself; it
//! delegates to the `weir_core::Clock` it wraps.

use std::fmt;
use std::sync::Arc;

use weir_core::{Clock, Sleep, SystemClock};

/// A cloneable, type-erased [`Clock`].
///
/// ```
/// use std::time::Duration;
/// use weir_core::{Clock, ManualClock};
/// use weir_engine::SharedClock;
///
/// let manual = ManualClock::new(1_000);
/// let clock = SharedClock::new(manual.clone());
/// manual.advance(Duration::from_nanos(5));
/// assert_eq!(clock.now_ns(), 1_005);
/// ```
#[derive(Clone)]
pub struct SharedClock(Arc<dyn Clock>);

impl SharedClock {
    /// Wraps `clock`.
    pub fn new(clock: impl Clock) -> Self {
        Self(Arc::new(clock))
    }
}

impl Default for SharedClock {
    /// The system clock.
    fn default() -> Self {
        Self::new(SystemClock::new())
    }
}

impl fmt::Debug for SharedClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedClock")
    }
}

impl Clock for SharedClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.0.now_ns()
    }

    fn sleep_until(&self, deadline_ns: u64) -> Sleep {
        self.0.sleep_until(deadline_ns)
    }
}
