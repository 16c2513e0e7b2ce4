//! The adaptive concurrency limit against a modelled backend that collapses past its knee
//! (`weir_core::adaptive::Knee`), driven by closed-loop clients on simulated time
//! (`simulate`: deterministic, no clock, no sleeps). What it must show: it settles near
//! the knee, it follows a capacity that halves mid-run within a stated time, and it
//! climbs back when the capacity returns.

use std::time::Duration;

use weir_core::adaptive::{simulate, AdaptiveSettings, Gate, Knee, Phase};

const CLIENTS: usize = 64;

fn knee(k: usize) -> Knee {
    Knee {
        knee: k,
        base: Duration::from_millis(20),
    }
}

fn steady(k: usize) -> Vec<Phase> {
    vec![Phase {
        from: Duration::ZERO,
        backend: knee(k),
    }]
}

#[test]
fn against_64_clients_it_settles_near_the_knee_and_beats_no_limit() {
    let length = Duration::from_secs(30);
    let auto = simulate(
        &Gate::Adaptive(AdaptiveSettings::default()),
        &steady(8),
        CLIENTS,
        length,
    )
    .unwrap();
    let none = simulate(&Gate::None, &steady(8), CLIENTS, length).unwrap();
    let fixed = simulate(&Gate::Static(8), &steady(8), CLIENTS, length).unwrap();
    // After the first seconds, the limit stays within a few of the knee.
    for (i, s) in auto.seconds.iter().enumerate().skip(3) {
        assert!((6..=16).contains(&s.limit), "second {i}: limit {}", s.limit);
    }
    assert!(auto.goodput >= 320.0, "adaptive goodput {}", auto.goodput);
    assert!(
        auto.p99 <= Duration::from_millis(250),
        "adaptive p99 {:?}",
        auto.p99
    );
    assert!(none.goodput < 220.0, "no limit collapses: {}", none.goodput);
    assert!(auto.goodput > none.goodput * 1.4);
    assert!(
        fixed.goodput >= 390.0,
        "the hand-tuned 8 is the best: {}",
        fixed.goodput
    );
}

#[test]
fn a_capacity_that_halves_is_followed_within_two_seconds_and_recovered_within_five() {
    let phases = vec![
        Phase {
            from: Duration::ZERO,
            backend: knee(8),
        },
        Phase {
            from: Duration::from_secs(20),
            backend: knee(4),
        },
        Phase {
            from: Duration::from_secs(40),
            backend: knee(8),
        },
    ];
    let run = simulate(
        &Gate::Adaptive(AdaptiveSettings::default()),
        &phases,
        CLIENTS,
        Duration::from_secs(60),
    )
    .unwrap();
    let s = &run.seconds;
    let before = s[19].limit;
    assert!((6..=16).contains(&before), "before the drop: {before}");
    // Within 2 s of the halving (in practice 1: seconds 20..22 are the third second's figures), the limit is near the new knee, and stays there.
    for (i, second) in s.iter().enumerate().take(40).skip(22) {
        assert!(
            (3..=9).contains(&second.limit),
            "second {i}: limit {}",
            second.limit
        );
        // And the halved backend still gets at least 80 % of its best (200/s).
        assert!(
            second.goodput >= 160,
            "second {i}: goodput {}",
            second.goodput
        );
    }
    // Within 5 s of the recovery, the backend gets 80 % of its restored best again.
    for (i, second) in s.iter().enumerate().skip(45) {
        assert!(
            second.goodput >= 320,
            "second {i}: goodput {}",
            second.goodput
        );
        assert!(
            (6..=16).contains(&second.limit),
            "second {i}: limit {}",
            second.limit
        );
    }
}

#[test]
fn a_slower_backend_is_found_when_the_floor_is_measured_again() {
    // The base latency doubles at 10 s (the knee stays): the next measurement of the
    // minimum RTT (every 30 s + up to 10 %) finds the new floor, and goodput is back
    // near the new best (200/s) after it.
    let slow = Knee {
        knee: 8,
        base: Duration::from_millis(40),
    };
    let phases = vec![
        Phase {
            from: Duration::ZERO,
            backend: knee(8),
        },
        Phase {
            from: Duration::from_secs(10),
            backend: slow,
        },
    ];
    let run = simulate(
        &Gate::Adaptive(AdaptiveSettings::default()),
        &phases,
        CLIENTS,
        Duration::from_secs(60),
    )
    .unwrap();
    for (i, second) in run.seconds.iter().enumerate().skip(40) {
        assert!(
            second.goodput >= 160,
            "second {i}: goodput {}",
            second.goodput
        );
        assert!(
            (5..=16).contains(&second.limit),
            "second {i}: limit {}",
            second.limit
        );
    }
}

#[test]
fn the_same_run_gives_the_same_figures() {
    let gate = Gate::Adaptive(AdaptiveSettings::default());
    let a = simulate(&gate, &steady(8), CLIENTS, Duration::from_secs(10)).unwrap();
    let b = simulate(&gate, &steady(8), CLIENTS, Duration::from_secs(10)).unwrap();
    assert_eq!(a, b);
}
