//! The gate's own tests: priorities in line, pushing out, the max wait, a waiter that
//! leaves, and an adaptive limit that learns from finished requests. All on the manual
//! clock.

use std::time::Duration;

use weir_core::adaptive::AdaptiveSettings;
use weir_core::ManualClock;

use super::*;

fn gate(limit: usize, queued: usize) -> Arc<Gate> {
    Arc::new(Gate::new(InFlightLimit::fixed(
        limit,
        queued,
        Duration::from_secs(5),
    )))
}

/// Waits until `n` requests are in line.
async fn until_queued(gate: &Gate, n: usize) {
    while gate.stats().queued < n {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn higher_priorities_go_first_and_a_full_line_sheds_its_lowest() {
    let clock = ManualClock::default();
    let gate = gate(1, 2);
    let inside = gate.acquire(1, &clock).await.unwrap();
    let (g, c) = (Arc::clone(&gate), clock.clone());
    let crawler_a = tokio::spawn(async move { g.acquire(0, &c).await.map(|_| ()) });
    until_queued(&gate, 1).await;
    let (g, c) = (Arc::clone(&gate), clock.clone());
    let crawler_b = tokio::spawn(async move { g.acquire(0, &c).await.map(|_| ()) });
    until_queued(&gate, 2).await;
    // The line is full: a reader pushes out the newest crawler.
    let (g, c) = (Arc::clone(&gate), clock.clone());
    let reader = tokio::spawn(async move { g.acquire(1, &c).await });
    assert!(crawler_b.await.unwrap().is_none(), "pushed out");
    until_queued(&gate, 2).await;
    // Another crawler finds nobody lower in a full line: shed at once.
    assert!(gate.acquire(0, &clock).await.is_none());
    // A slot frees: the reader, though it came last, goes first.
    inside.finish(clock.now_ns(), false);
    let reader = reader.await.unwrap().unwrap();
    assert_eq!(gate.stats().queued, 1);
    drop(reader);
    assert!(crawler_a.await.unwrap().is_some());
    let stats = gate.stats();
    assert_eq!(stats.shed, vec![(0, 2)]);
    assert_eq!(stats.admitted, vec![(0, 1), (1, 2)]);
    assert_eq!(stats.in_flight, 0);
}

#[tokio::test]
async fn a_waiter_gives_up_at_the_max_wait_and_one_that_leaves_frees_its_place() {
    let clock = ManualClock::default();
    let gate = gate(1, 1);
    let _inside = gate.acquire(0, &clock).await.unwrap();
    let (g, c) = (Arc::clone(&gate), clock.clone());
    let waiter = tokio::spawn(async move { g.acquire(0, &c).await.map(|_| ()) });
    until_queued(&gate, 1).await;
    while clock.sleepers() < 1 {
        tokio::task::yield_now().await;
    }
    clock.advance(Duration::from_secs(5));
    assert!(waiter.await.unwrap().is_none());
    assert_eq!(gate.stats().queued, 0);
    // A waiter whose caller went away leaves the line.
    let (g, c) = (Arc::clone(&gate), clock.clone());
    let waiter = tokio::spawn(async move { g.acquire(0, &c).await.map(|_| ()) });
    until_queued(&gate, 1).await;
    waiter.abort();
    let _ = waiter.await;
    assert_eq!(gate.stats().queued, 0);
}

#[tokio::test]
async fn an_adaptive_gate_measures_the_floor_then_moves_the_limit() {
    let clock = ManualClock::default();
    let settings = AdaptiveSettings {
        min_rtt_requests: 3,
        ..AdaptiveSettings::default()
    };
    let gate = Arc::new(Gate::new(
        InFlightLimit::adaptive(settings, 8, Duration::from_secs(5)).unwrap(),
    ));
    assert_eq!(gate.stats().limit, 3, "min concurrency while measuring");
    for _ in 0..3 {
        let slot = gate.acquire(0, &clock).await.unwrap();
        clock.advance(Duration::from_millis(20));
        slot.finish(clock.now_ns(), false);
    }
    let stats = gate.stats();
    assert_eq!(stats.min_rtt, Some(Duration::from_millis(20)));
    assert_eq!(stats.limit, 8, "the initial limit");
    assert!(!stats.measuring);
    // A window of answers four times slower halves the limit, plus headroom.
    let slots: Vec<_> = futures_slots(&gate, &clock, 8).await;
    clock.advance(Duration::from_millis(150));
    for slot in slots {
        slot.finish(clock.now_ns(), false);
    }
    // The window (100 ms from its first answer) closes with the next answer.
    let slot = gate.acquire(0, &clock).await.unwrap();
    clock.advance(Duration::from_millis(120));
    slot.finish(clock.now_ns(), false);
    assert_eq!(gate.stats().limit, 6, "8 x 0.5 + sqrt(4)");
    assert_eq!(gate.stats().sample_rtt, Some(Duration::from_millis(150)));
}

async fn futures_slots(gate: &Arc<Gate>, clock: &ManualClock, n: usize) -> Vec<Slot> {
    let mut slots = Vec::new();
    for _ in 0..n {
        slots.push(gate.acquire(0, clock).await.unwrap());
    }
    slots
}

#[test]
fn bad_adaptive_knobs_built_by_hand_fall_back_to_the_floor() {
    let settings = AdaptiveSettings {
        tolerance: 0.0,
        min_limit: 2,
        ..AdaptiveSettings::default()
    };
    let gate = Gate::new(InFlightLimit {
        max_in_flight: 100,
        max_queued: 0,
        max_wait: Duration::ZERO,
        adaptive: Some(settings),
    });
    assert_eq!(gate.stats().limit, 2);
}
