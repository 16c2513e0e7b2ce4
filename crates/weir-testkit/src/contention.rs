//! Contention against the reference model: many threads checking one budget at a frozen
//! instant must admit exactly what the model admits sequentially, phase after phase as time
//! moves. The lock-free paths' (the direct limiter's word, the keyed limiter's slot) proof
//! that no update is lost or doubled under concurrent compare-and-swaps.

use std::sync::Barrier;
use std::time::Duration;

use weir_core::{Clock as _, Key, ManualClock, Op, Outcome, Rule};

use crate::{Model, T0_NS};

/// Threads checking at once.
pub const THREADS: u64 = 8;
/// Checks per thread and phase.
pub const PER_THREAD: u64 = 500;

/// The rules whose state is one word (each admitting fewer than `THREADS × PER_THREAD` in a
/// phase, so every phase ends with denials).
pub fn one_word_rules() -> [Rule; 3] {
    let s = Duration::from_secs(1);
    [
        Rule::gcra(1000, s, 1000).unwrap_or_else(|e| panic!("{e}")),
        Rule::token_bucket(1000, 1000, s).unwrap_or_else(|e| panic!("{e}")),
        Rule::fixed_window(1000, s).unwrap_or_else(|e| panic!("{e}")),
    ]
}

/// Runs four phases, 400 ms apart on `clock` (starting at [`T0_NS`]): in each, `THREADS`
/// threads call `check` (one check of cost 1 on one budget under `rule`, `true` when
/// admitted) `PER_THREAD` times each, at once. Panics unless every phase admits exactly
/// what the model admits for the same checks made one after another.
pub fn admits_as_the_model(rule: &Rule, clock: &ManualClock, check: impl Fn() -> bool + Sync) {
    let mut model = Model::new();
    let threads = usize::try_from(THREADS).unwrap_or(usize::MAX);
    for phase in 0..4u64 {
        clock.set_ns(T0_NS + phase * 400_000_000);
        let now = clock.now_ns();
        let barrier = Barrier::new(threads);
        let admitted: u64 = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    let (check, barrier) = (&check, &barrier);
                    scope.spawn(move || {
                        barrier.wait();
                        (0..PER_THREAD).map(|_| u64::from(check())).sum::<u64>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| panic!("a checking thread panicked"))
                })
                .sum()
        });
        let expected = (0..THREADS * PER_THREAD)
            .map(
                |_| match model.apply(&Key::from(0u64), rule, Op::Check { cost: 1 }, now) {
                    Ok(Outcome::Decision(d)) => u64::from(d.allowed),
                    other => panic!("the model answered {other:?}"),
                },
            )
            .sum::<u64>();
        assert_eq!(
            admitted,
            expected,
            "{} phase {phase}: {admitted} admitted under contention, {expected} sequentially",
            rule.algorithm().name()
        );
    }
}
