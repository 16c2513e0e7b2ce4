//! Tests of `serve.rs`: how `weir serve`'s flags, its `WEIR_*` variables and
//! envoyproxy/ratelimit's variables become settings (kept apart to keep `serve.rs` short).

use std::collections::HashMap;

use clap::Parser as _;

use super::*;

fn args(flags: &[&str]) -> ServeArgs {
    let words = ["weir", "serve"].iter().chain(flags).copied();
    match crate::Cli::try_parse_from(words).unwrap().command {
        crate::Command::Serve(args) => *args,
        other => panic!("weir serve parsed as {other:?}"),
    }
}

fn rl(pairs: &[(&str, &str)]) -> RatelimitEnv {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ratelimit_env::read(&move |name: &str| map.get(name).cloned()).unwrap()
}

/// Issue 15: a bare `weir serve` stays on loopback; ratelimit's variables move it;
/// Weir's own flags win over them.
#[test]
fn flags_win_over_ratelimits_variables_which_win_over_weirs_defaults() {
    let addrs = |a: &ServeArgs, env: &RatelimitEnv| {
        let (http, grpc) = a.listeners(env).unwrap();
        (http.to_string(), grpc.to_string())
    };
    let none = rl(&[]);
    let env = rl(&[
        ("PORT", "9080"),
        ("GRPC_PORT", "9081"),
        ("REDIS_URL", "redis:6379"),
        ("RUNTIME_ROOT", "/data"),
    ]);
    let bare = args(&[]);
    assert_eq!(
        addrs(&bare, &none),
        ("127.0.0.1:8080".into(), "127.0.0.1:8081".into())
    );
    assert_eq!(
        addrs(&bare, &env),
        ("0.0.0.0:9080".into(), "0.0.0.0:9081".into())
    );
    let flagged = args(&[
        "--http",
        "127.0.0.1:1",
        "--store",
        "memory",
        "--config",
        "config",
    ]);
    assert_eq!(addrs(&flagged, &env).0, "127.0.0.1:1");
    assert_eq!(addrs(&flagged, &env).1, "0.0.0.0:9081");

    let from_env = bare.settings(&env).unwrap();
    assert_eq!(from_env.engine.store.to_string(), "redis://redis:6379");
    assert_eq!(
        from_env.engine.rules,
        RuleSource::Runtime {
            dir: PathBuf::from("/data/config"),
            ignore_dotfiles: false,
            merge_domains: false,
        }
    );
    let from_flags = flagged.settings(&env).unwrap();
    assert_eq!(from_flags.engine.store.kind(), "memory");
    assert_eq!(
        from_flags.engine.rules,
        RuleSource::Path(PathBuf::from("config"))
    );
    assert_eq!(bare.settings(&none).unwrap().engine.store.kind(), "memory");
    assert_eq!(
        bare.settings(&none).unwrap().envoy_headers,
        ResponseHeaders::NONE
    );
}

#[test]
fn envoy_headers_come_from_the_flag_or_limit_response_headers_enabled() {
    let env = rl(&[
        ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
        ("LIMIT_LIMIT_HEADER", "X-Limit"),
    ]);
    let legacy = args(&[])
        .settings(&env)
        .unwrap()
        .envoy_headers
        .legacy
        .unwrap();
    assert_eq!(legacy.limit(), "X-Limit");
    let off = args(&["--grpc-headers", "none"]).settings(&env).unwrap();
    assert_eq!(off.envoy_headers, ResponseHeaders::NONE);
    let renamed = args(&[
        "--grpc-headers",
        "ratelimit",
        "--limit-reset-header",
        "X-Reset",
    ])
    .settings(&rl(&[]))
    .unwrap()
    .envoy_headers
    .legacy
    .unwrap();
    assert_eq!(
        (renamed.limit(), renamed.reset()),
        ("RateLimit-Limit", "X-Reset")
    );
}

/// Issue 12: batching, its size, outage reconciliation and the leases' sizing are
/// options of the programs (the same in `weir proxy`: they live in the engine's args).
#[test]
fn batching_reconciliation_and_leases_are_options() {
    let none = rl(&[]);
    let plain = args(&[]).settings(&none).unwrap();
    assert_eq!(plain.engine.redis_batch_wait, None);
    assert_eq!(plain.engine.redis_batch_size, 100);
    assert!(!plain.engine.failover.reconcile);
    assert_eq!(plain.engine.lease, weir_engine::LeaseConfig::default());
    let set = args(&[
        "--redis-batch-wait",
        "2ms",
        "--redis-batch-size",
        "32",
        "--reconcile",
        "--lease-window-fraction",
        "20",
        "--lease-max-ttl",
        "1s",
        "--lease-max-slice",
        "50",
    ])
    .settings(&none)
    .unwrap();
    assert_eq!(set.engine.redis_batch_wait, Some(Duration::from_millis(2)));
    assert_eq!(set.engine.redis_batch_size, 32);
    assert!(set.engine.failover.reconcile);
    assert_eq!(set.engine.lease.window_fraction, 20);
    assert_eq!(set.engine.lease.max_ttl, Duration::from_secs(1));
    assert_eq!(set.engine.lease.max_slice, 50);
    // ratelimit's REDIS_PIPELINE_WINDOW is the batch window when the flag is not given.
    let window = rl(&[
        ("REDIS_URL", "127.0.0.1:6379"),
        ("REDIS_PIPELINE_WINDOW", "150us"),
    ]);
    let from_env = args(&[]).settings(&window).unwrap();
    assert_eq!(
        from_env.engine.redis_batch_wait,
        Some(Duration::from_micros(150))
    );
    let zero = ["weir", "serve", "--redis-batch-size", "0"];
    assert!(
        crate::Cli::try_parse_from(zero).is_err(),
        "a batch holds one at least"
    );
}

/// `--state-interval 0s` would write the whole state file without pause: refused,
/// saying what the shortest is.
#[test]
fn a_state_interval_below_the_minimum_is_refused() {
    for short in ["0s", "5ms"] {
        let error = crate::Cli::try_parse_from(["weir", "serve", "--state-interval", short])
            .unwrap_err()
            .to_string();
        assert!(error.contains("shorter than 10 ms"), "{error}");
    }
    let settings = args(&["--state-interval", "100ms"])
        .settings(&rl(&[]))
        .unwrap();
    assert_eq!(settings.engine.state_interval, Duration::from_millis(100));
}
