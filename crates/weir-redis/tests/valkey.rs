//! The conformance suite against a real `valkey-server`, when one is installed: Valkey
//! is a store Weir names (the crate docs, "Deployments"). Debian 12 ships none, so
//! without the binary the test passes after printing a visible skip line (written to the
//! terminal directly, not to the captured test output), never silently.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use weir_redis::{RedisStore, TimeSource};
use weir_testkit::conformance::{self, Suite};
use weir_testkit::servers::RedisServer;

const VALKEY: &str = "valkey-server";

fn installed() -> bool {
    Command::new(VALKEY)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valkey_passes_the_conformance_suite_when_installed() {
    if !installed() {
        // Not `eprintln!`: libtest captures that, and a skip must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED valkey_passes_the_conformance_suite_when_installed: no `{VALKEY}` on PATH \
             (Debian 12 has no package; install Valkey to run the suite against it)"
        );
        return;
    }
    let valkey = RedisServer::start_program(VALKEY, &[]);
    for (batch, prefix) in [(false, "valkey"), (true, "valkey-batched")] {
        let mut builder = RedisStore::builder(valkey.url())
            .time_source(TimeSource::Process)
            .ttl_grace(Duration::from_secs(600))
            .timeout(Duration::from_secs(5));
        if batch {
            builder = builder.batch(64, Duration::from_micros(1));
        }
        let store = builder.build().unwrap();
        let suite = Suite {
            cases: 100,
            seed: 0x7a1c,
            prefix,
        };
        conformance::run(&store, suite).await;
    }
}
