//! `CL.THROTTLE` answers as redis-cell: its unit test table (`src/cell/mod.rs`,
//! `it_rate_limits`), its end-to-end test (`tests/e2e.rs`, the 2 s wait made a clock
//! advance), its README example, its errors word for word, and the edge cases its
//! arithmetic produces, all through a real socket and the `redis` crate's client.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{ints, start};

#[tokio::test]
async fn redis_cells_rate_limit_table() {
    let server = start().await;
    let mut con = server.client(false).await;
    let cases = common::CELL_TABLE;
    let mut at = 0;
    for (i, (offset_ms, quantity, expected)) in cases.into_iter().enumerate() {
        server.advance(Duration::from_millis(offset_ms - at));
        at = offset_ms;
        let got = ints(&mut con, &["CL.THROTTLE", "foo", "4", "1", "1", quantity]).await;
        assert_eq!(got, expected, "case {i}");
    }
    server.stop().await;
}

#[tokio::test]
async fn redis_cells_end_to_end_test() {
    let server = start().await;
    let mut con = server.client(false).await;
    let cmd = ["CL.THROTTLE", "user123", "0", "1", "2", "1"];
    assert_eq!(ints(&mut con, &cmd).await, [0, 1, 0, -1, 2]);
    assert_eq!(ints(&mut con, &cmd).await, [1, 1, 0, 2, 2]);
    server.advance(Duration::from_secs(2));
    assert_eq!(ints(&mut con, &cmd).await, [0, 1, 0, -1, 2]);
    server.stop().await;
}

#[tokio::test]
async fn redis_cells_readme_example() {
    let server = start().await;
    let mut con = server.client(false).await;
    let got = ints(&mut con, &["CL.THROTTLE", "user123", "15", "30", "60"]).await;
    assert_eq!(got, [0, 16, 15, -1, 2]);
    server.stop().await;
}

#[tokio::test]
async fn errors_are_redis_cells_word_for_word() {
    let server = start().await;
    let mut raw = server.raw().await;
    let usage = "-Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]";
    assert_eq!(raw.call(&["CL.THROTTLE", "k", "1", "2"]).await, usage);
    assert_eq!(
        raw.call(&["cl.throttle", "k", "1", "2", "3", "4", "5"])
            .await,
        usage
    );
    assert_eq!(raw.call(&["CL.THROTTLE"]).await, usage);
    assert_eq!(
        raw.call(&["CL.THROTTLE", "k", "x", "1", "1"]).await,
        "-Cell error: Store error: Couldn't parse as integer: x"
    );
    assert_eq!(
        raw.call(&["CL.THROTTLE", "k", "1", "1", " 1"]).await,
        "-Cell error: Store error: Couldn't parse as integer:  1"
    );
    assert_eq!(
        raw.call(&["CL.THROTTLE", "k", "1", "1", "1", "1.5"]).await,
        "-Cell error: Store error: Couldn't parse as integer: 1.5"
    );
    for (count, period) in [("0", "60"), ("10", "0"), ("2000000000", "1")] {
        assert_eq!(
            raw.call(&["CL.THROTTLE", "k", "1", count, period]).await,
            "-Cell error: Store error: Zero rates are not supported",
            "{count} per {period}"
        );
    }
    // Where redis-cell's arithmetic breaks, an error in its form.
    assert_eq!(
        raw.call(&["CL.THROTTLE", "k", "1", "-1", "60"]).await,
        "-Cell error: Store error: Negative rates are not supported"
    );
    assert_eq!(
        raw.call(&["CL.THROTTLE", "k", "1", "1", "60", "-1"]).await,
        "-Cell error: Store error: Negative quantities are not supported"
    );
    assert_eq!(
        raw.call(&["CL.THROTTLE", "k", "9223372036854775807", "1", "1"])
            .await,
        "-Cell error: Store error: max_burst is too large"
    );
    let long_key = "k".repeat(512);
    assert_eq!(
        raw.call(&["CL.THROTTLE", &long_key, "1", "1", "1"]).await,
        "-Cell error: Store error: key is longer than 511 bytes"
    );
    server.stop().await;
}

#[tokio::test]
async fn edge_cases_answer_what_redis_cells_arithmetic_answers() {
    let server = start().await;
    let mut con = server.client(false).await;
    // `+` signs parse (Rust's i64 parser); both signs negative is a positive rate.
    assert_eq!(
        ints(&mut con, &["CL.THROTTLE", "signs", "+1", "-1", "-1"]).await,
        [0, 2, 1, -1, 1]
    );
    // max_burst -1: a limit of 0. Nothing passes; a zero quantity does.
    assert_eq!(
        ints(&mut con, &["CL.THROTTLE", "zero", "-1", "1", "1"]).await,
        [1, 0, 0, -1, 0]
    );
    assert_eq!(
        ints(&mut con, &["CL.THROTTLE", "zero", "-1", "1", "1", "0"]).await,
        [0, 0, 0, -1, 0]
    );
    // A negative limit is reported as such, and everything is limited.
    assert_eq!(
        ints(&mut con, &["CL.THROTTLE", "neg", "-5", "1", "1", "0"]).await,
        [1, -4, 0, -1, 0]
    );
    // Faster than one per microsecond: redis-cell divides whole microseconds by zero, an
    // infinite remaining that saturates to i64::MAX.
    let got = ints(&mut con, &["CL.THROTTLE", "fast", "9", "2000000", "1"]).await;
    assert_eq!(got, [0, 10, i64::MAX, -1, 0]);
    // Rounding: a fraction under one millisecond rounds down, even to a retry of 0.
    assert_eq!(
        ints(&mut con, &["CL.THROTTLE", "round", "0", "1", "1"]).await,
        [0, 1, 0, -1, 1]
    );
    server.advance(Duration::from_micros(999_500));
    assert_eq!(
        ints(&mut con, &["CL.THROTTLE", "round", "0", "1", "1"]).await,
        [1, 1, 0, 0, 0]
    );
    server.advance(Duration::from_micros(500));
    assert_eq!(
        ints(&mut con, &["CL.THROTTLE", "round", "0", "1", "1"]).await,
        [0, 1, 0, -1, 1]
    );
    // A third of a second rounds up to 1 s.
    assert_eq!(
        ints(&mut con, &["CL.THROTTLE", "third", "0", "3", "1"]).await,
        [0, 1, 0, -1, 1]
    );
    assert_eq!(
        ints(&mut con, &["CL.THROTTLE", "third", "0", "3", "1"]).await,
        [1, 1, 0, 1, 1]
    );
    // A huge quantity is a denial with no retry, never an error.
    let got = ints(
        &mut con,
        &["CL.THROTTLE", "huge", "4", "1", "1", "1000000000"],
    )
    .await;
    assert_eq!(got, [1, 5, 5, -1, 0]);
    server.stop().await;
}

#[tokio::test]
async fn new_parameters_reread_the_same_key_as_redis_cell_does() {
    let server = start().await;
    let mut con = server.client(false).await;
    assert_eq!(
        ints(&mut con, &["CL.THROTTLE", "k", "0", "1", "10"]).await,
        [0, 1, 0, -1, 10]
    );
    // The TAT (10 s ahead) is kept: with a limit of 6 there is room for 4 more.
    assert_eq!(
        ints(&mut con, &["CL.THROTTLE", "k", "5", "1", "10"]).await,
        [0, 6, 4, -1, 20]
    );
    // THROTTLE keeps its own records: the same key is fresh there.
    assert_eq!(
        ints(&mut con, &["THROTTLE", "k", "1", "1", "10"]).await,
        [1, 1, 0, 0, 0]
    );
    server.stop().await;
}
