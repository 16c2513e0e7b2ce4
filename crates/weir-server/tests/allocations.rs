//! What one `POST /v1/check` allocates once its body has arrived: parsing, the decision on
//! the memory store and the answer (body and headers), for the bench's request (one
//! descriptor, a client IP under the example rules' per-IP GCRA). An upper bound, counted
//! by `stats_alloc`'s instrumented system allocator (the only test in this binary, on a
//! current-thread runtime, so nothing else allocates meanwhile); deterministic: no clock
//! race, no timing. A change that adds a per-request allocation on the path fails here.

use std::alloc::System;

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use weir_server::{App, Engine, EngineSettings, Settings};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The most allocations one answered request may make: parsing (the descriptors' and
/// entries' vectors, the engine's request), matching and deciding (the matches, the
/// statuses, the namespaced key), the answer (its body, once; the two rate-limit header
/// values and their list; the header map). 17 before the body was written at its exact
/// size and a one-limit verdict's headers were rendered without a list of one.
const MOST: usize = 15;

#[test]
fn a_check_allocates_at_most_its_budget() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let engine = Engine::open(EngineSettings::default()).await.unwrap();
        let app = App::with_engine(engine, Settings::default());
        let body = br#"{"domain":"api","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}"#;
        // The first answer makes the key's record (a new key allocates its entry).
        let first = weir_server::fuzzing::check_response(&app, body).await;
        assert_eq!(first.status(), 200);
        let mut most = 0;
        for _ in 0..20 {
            let region = Region::new(GLOBAL);
            let response = weir_server::fuzzing::check_response(&app, body).await;
            let change = region.change();
            let made = change.allocations + change.reallocations;
            assert_eq!(response.status(), 200);
            assert!(response.headers().contains_key("ratelimit-policy"));
            drop(response);
            most = most.max(made);
        }
        println!("most allocations in one request: {most}");
        assert!(
            most <= MOST,
            "one /v1/check request made {most} allocations, above its budget of {MOST}"
        );
    });
}
