//! `THROTTLE` answers as throttlecrab: the cases of its RESP transport tests
//! (`throttlecrab-server/src/transport/redis_test.rs`) and its core tests
//! (`throttlecrab/src/core/tests.rs`), with its argument errors word for word, through a
//! real socket and the `redis` crate's client.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{ints, start};

#[tokio::test]
async fn throttlecrabs_transport_tests() {
    let server = start().await;
    let mut con = server.client(false).await;
    // test_redis_throttle_allowed: [allowed, limit, remaining, reset_after, retry_after]
    assert_eq!(
        ints(&mut con, &["THROTTLE", "test_key", "10", "100", "60"]).await,
        [1, 10, 9, 5, 0]
    );
    // test_redis_throttle_with_quantity
    assert_eq!(
        ints(&mut con, &["THROTTLE", "test_key2", "10", "100", "60", "5"]).await,
        [1, 10, 5, 7, 0]
    );
    server.stop().await;
}

#[tokio::test]
async fn throttlecrabs_core_tests() {
    let server = start().await;
    let mut con = server.client(false).await;
    // test_basic_rate_limiting
    assert_eq!(
        ints(&mut con, &["THROTTLE", "test", "5", "10", "60"]).await[..3],
        [1, 5, 4]
    );
    // test_burst_capacity: 5 pass, the 6th is denied with a retry above 0 s.
    for left in (0..5).rev() {
        let got = ints(&mut con, &["THROTTLE", "burst_test", "5", "10", "60"]).await;
        assert_eq!(got[..3], [1, 5, left]);
    }
    let denied = ints(&mut con, &["THROTTLE", "burst_test", "5", "10", "60"]).await;
    assert_eq!(denied[..3], [0, 5, 0]);
    assert_eq!(denied[4], 6, "retry after one interval (6 s)");
    // test_rate_replenishment: 2 per 60 s burst 2; denied, then one more a second later.
    let replenish = ["THROTTLE", "replenish_test", "2", "60", "60"];
    assert_eq!(ints(&mut con, &replenish).await[0], 1);
    assert_eq!(ints(&mut con, &replenish).await[0], 1);
    assert_eq!(ints(&mut con, &replenish).await[0], 0);
    server.advance(Duration::from_secs(1));
    assert_eq!(ints(&mut con, &replenish).await[0], 1);
    // test_different_keys
    for (key, allowed) in [
        ("key1", 1),
        ("key2", 1),
        ("key1", 1),
        ("key1", 0),
        ("key2", 1),
        ("key2", 0),
    ] {
        assert_eq!(
            ints(&mut con, &["THROTTLE", key, "2", "2", "60"]).await[0],
            allowed,
            "{key}"
        );
    }
    // test_quantity_parameter
    assert_eq!(
        ints(
            &mut con,
            &["THROTTLE", "quantity_test", "10", "10", "60", "5"]
        )
        .await[..3],
        [1, 10, 5]
    );
    assert_eq!(
        ints(
            &mut con,
            &["THROTTLE", "quantity_test", "10", "10", "60", "6"]
        )
        .await[..3],
        [0, 10, 5]
    );
    assert_eq!(
        ints(
            &mut con,
            &["THROTTLE", "quantity_test", "10", "10", "60", "5"]
        )
        .await[..3],
        [1, 10, 0]
    );
    // test_large_quantity_overflow_protection: denied, not an error.
    let huge = (i64::MAX / 2).to_string();
    assert_eq!(
        ints(
            &mut con,
            &["THROTTLE", "overflow_test", "10", "10", "60", &huge]
        )
        .await[0],
        0
    );
    // A zero quantity peeks; throttlecrab's reset_after of a fresh key is (max_burst - 2) × T.
    assert_eq!(
        ints(&mut con, &["THROTTLE", "peek", "3", "3", "3", "0"]).await,
        [1, 3, 3, 1, 0]
    );
    server.stop().await;
}

#[tokio::test]
async fn errors_are_throttlecrabs_word_for_word() {
    let server = start().await;
    let mut raw = server.raw().await;
    let arity = "-ERR wrong number of arguments for 'throttle' command";
    assert_eq!(raw.call(&["THROTTLE", "test_key"]).await, arity);
    assert_eq!(
        raw.call(&["THROTTLE", "k", "1", "1", "1", "1", "1"]).await,
        arity
    );
    assert_eq!(
        raw.call(&["THROTTLE", "k", "x", "1", "1"]).await,
        "-ERR invalid max_burst"
    );
    assert_eq!(
        raw.call(&["THROTTLE", "k", "1", "x", "1"]).await,
        "-ERR invalid count_per_period"
    );
    assert_eq!(
        raw.call(&["THROTTLE", "k", "1", "1", "x"]).await,
        "-ERR invalid period"
    );
    assert_eq!(
        raw.call(&["THROTTLE", "k", "1", "1", "1", "x"]).await,
        "-ERR invalid quantity"
    );
    assert_eq!(
        raw.call(&["THROTTLE", "k", "1", "1", "1", "-1"]).await,
        "-ERR negative quantity: -1"
    );
    for args in [["0", "10", "60"], ["10", "0", "60"], ["10", "10", "0"]] {
        let cmd = ["THROTTLE", "test", args[0], args[1], args[2]];
        assert_eq!(raw.call(&cmd).await, "-ERR invalid rate limit parameters");
    }
    server.stop().await;
}
