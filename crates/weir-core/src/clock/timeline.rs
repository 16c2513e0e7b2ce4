//! The process's time line: what [`SystemClock::now_ns`](super::SystemClock) reads. One per
//! process, started by the first `SystemClock`.
//!
//! **The reference** is a monotonic clock (`std::time::Instant`) anchored once to the wall
//! clock: nanoseconds since the Unix epoch that an NTP or operator step never moves. It
//! costs a `clock_gettime` (about 35 ns on a virtual machine), too much for every decision.
//!
//! **The fast reading** is the CPU's time stamp counter through `quanta` (the clock governor
//! uses), calibrated once against the monotonic clock: about 10 ns. Calibration is only
//! nearly right, and the kernel slews the monotonic clock (NTP, up to 0.05 %), so the
//! counter alone would drift away from the reference, by seconds a day. So:
//!
//! - The counter's nanoseconds are slowed by 1/1024 (0.1 %, more than calibration error and
//!   NTP slew together), so between anchorings the time line runs behind the reference,
//!   never ahead.
//! - Every millisecond of counter time, the next reader re-anchors: it reads the reference
//!   and moves the offset *forward* to meet it (`fetch_max`; a correction is never a step
//!   back). Behind the reference by at most about 1 µs (0.1 % of a millisecond) plus the
//!   time the reader took to anchor, in practice a few microseconds.
//! - A ceiling, the reference at the last anchoring plus 2 ms, bounds it from above: if the
//!   counter ran fast anyway (a hypervisor's doing), the time line stops at the ceiling
//!   until the next anchoring lifts it. It is never more than 2 ms ahead of the reference.
//!
//! Never backwards: a reading is `min(offset + slowed counter, ceiling)`, three
//! non-decreasing terms (the offset and ceiling only ever grow by `fetch_max`, the counter is
//! monotonic), so one thread's readings never decrease, nor does a reading that happens after
//! another (through a lock, a channel). A counter that jumps back (a suspend on hardware that
//! resets it) or stops is caught: the time line then re-anchors on every read, which is the
//! reference itself, still never backwards. Every reader that finds the anchoring due anchors
//! (no lock), so a reader preempted mid-anchoring holds nobody up.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::time::duration_ns;

/// Counter time between anchorings.
const ANCHOR_EVERY_NS: u64 = 1_000_000;
/// The counter's nanoseconds are slowed by `1 / 2^SLOW_SHIFT`.
const SLOW_SHIFT: u32 = 10;
/// How far ahead of the reference at the last anchoring the time line may read.
pub(super) const CEILING_NS: u64 = 2 * ANCHOR_EVERY_NS;

/// The time line: `now = min(offset + slow(counter ns since start), ceiling)`.
#[derive(Debug)]
pub(super) struct Timeline {
    counter: quanta::Clock,
    /// The raw counter when the time line started.
    counter_start: u64,
    /// Counter ticks to slowed nanoseconds in one multiplication: `ticks × scale >>
    /// SCALE_SHIFT` is `slow(quanta's nanoseconds for ticks)`, to about a nanosecond a
    /// second (the slowing folded into quanta's calibration, so a reading scales once).
    scale: u64,
    /// The reference: the monotonic clock and the wall clock when the time line started.
    start: Instant,
    start_unix_ns: u64,
    offset_ns: AtomicU64,
    ceiling_ns: AtomicU64,
    /// Slowed counter ns (since start) at the last anchoring.
    anchored_at: AtomicU64,
}

static TIMELINE: OnceLock<Timeline> = OnceLock::new();

/// The process's time line, started (and the counter calibrated: usually 10 to 20 ms, at most
/// 200 ms) on first use.
pub(super) fn timeline() -> &'static Timeline {
    TIMELINE.get_or_init(Timeline::start)
}

/// The fixed point of [`Timeline::scale`]: ticks are multiplied by `scale`, then shifted
/// right by this.
const SCALE_SHIFT: u32 = 32;

/// Counter ns slowed by 1/1024: non-decreasing in `ns`.
#[inline]
fn slow(ns: u64) -> u64 {
    ns - (ns >> SLOW_SHIFT)
}

impl Timeline {
    #[allow(clippy::disallowed_methods)] // the one place that reads the machine's clock
    fn start() -> Self {
        let counter = quanta::Clock::new();
        let start_unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(duration_ns)
            .unwrap_or(0);
        let start = Instant::now();
        let counter_start = counter.raw();
        // quanta's nanoseconds for 2^SCALE_SHIFT ticks, slowed: the slowed nanoseconds a
        // tick, in fixed point (scaling a delta reads no clock).
        let scale = slow(counter.delta_as_nanos(0, 1 << SCALE_SHIFT));
        Self {
            counter,
            counter_start,
            scale,
            start,
            start_unix_ns,
            offset_ns: AtomicU64::new(start_unix_ns),
            ceiling_ns: AtomicU64::new(start_unix_ns.saturating_add(CEILING_NS)),
            anchored_at: AtomicU64::new(0),
        }
    }

    /// Nanoseconds since the Unix epoch, never less than a reading that happened before.
    #[inline]
    pub(super) fn now_ns(&self) -> u64 {
        let elapsed = self.elapsed_ns();
        // Also due when the counter is behind the last anchoring (it jumped back).
        if elapsed.wrapping_sub(self.anchored_at.load(Relaxed)) >= ANCHOR_EVERY_NS {
            return self.anchor();
        }
        self.read(elapsed)
    }

    /// The reference: the monotonic clock, anchored to the wall clock once.
    pub(super) fn reference_ns(&self) -> u64 {
        self.start_unix_ns
            .saturating_add(duration_ns(self.start.elapsed()))
    }

    /// Slowed counter nanoseconds since start (0 if the counter reads before its start):
    /// one multiplication and a shift.
    #[inline]
    fn elapsed_ns(&self) -> u64 {
        let ticks = self.counter.raw().saturating_sub(self.counter_start);
        let ns = (u128::from(ticks) * u128::from(self.scale)) >> SCALE_SHIFT;
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// `min(offset + elapsed, ceiling)`, written so that the reading's chain after the
    /// counter is a `min` and an add (the headroom is worked out from the two loads
    /// meanwhile), and never overflows. When an anchoring is half seen (a new offset, the
    /// old ceiling), the reading is the offset: still never backwards (each term only grows).
    #[inline]
    fn read(&self, elapsed: u64) -> u64 {
        let offset = self.offset_ns.load(Relaxed);
        let headroom = self.ceiling_ns.load(Relaxed).saturating_sub(offset);
        offset + elapsed.min(headroom)
    }

    /// Moves the offset and the ceiling forward to the reference, then reads.
    #[cold]
    #[inline(never)]
    fn anchor(&self) -> u64 {
        // The reference first: the counter read after it maps to it, so the new offset errs
        // behind, never ahead.
        let reference = self.reference_ns();
        let elapsed = self.elapsed_ns();
        self.offset_ns
            .fetch_max(reference.saturating_sub(elapsed), Relaxed);
        self.ceiling_ns
            .fetch_max(reference.saturating_add(CEILING_NS), Relaxed);
        self.anchored_at.store(elapsed, Relaxed);
        self.read(elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slowing_keeps_the_order() {
        let low = 0..5000;
        let high = u64::MAX - 5000..=u64::MAX;
        for ns in low.chain(high).filter(|ns| *ns != u64::MAX) {
            assert!(slow(ns + 1) >= slow(ns), "{ns}");
        }
        assert_eq!(slow(1024), 1023);
        assert_eq!(slow(2048), 2046);
    }

    #[test]
    fn never_backwards_and_close_to_the_reference() {
        let timeline = timeline();
        let mut last = timeline.now_ns();
        // About 20 ms of readings, so that many anchorings happen on the way.
        for _ in 0..200 {
            for _ in 0..10_000 {
                let now = timeline.now_ns();
                assert!(now >= last, "{now} < {last}");
                last = now;
            }
            // The time line is never more than the ceiling ahead of the reference; behind
            // it only by the slowing since the last anchoring (bounded here by a margin
            // that a preempted test thread cannot exceed in practice).
            let before = timeline.reference_ns();
            let now = timeline.now_ns();
            let after = timeline.reference_ns();
            assert!(now <= after + CEILING_NS, "{now} ahead of {after}");
            assert!(now + 50_000_000 >= before, "{now} far behind {before}");
        }
    }
}
