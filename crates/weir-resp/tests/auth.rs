//! Issue 27: the password (`--resp-password-file`) and the longest window one caller may
//! set. Before, anyone who reached the port could lock any key for ten years
//! (`CL.THROTTLE tenantA:user2 0 1 315360000 1`), read anyone's usage and spend any rule's
//! budget (`WEIR.CHECK … HITS 5`), with no way to require a password.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{start_with, Server};
use weir_engine::RuleSource;
use weir_listen::AdminToken;
use weir_resp::Settings;

const PASSWORD: &str = "a-long-enough-resp-password";
const NOAUTH: &str = "-NOAUTH Authentication required.";
const WRONGPASS: &str = "-WRONGPASS invalid username-password pair or user is disabled.";

async fn guarded() -> Server {
    let settings = Settings::default().password(AdminToken::new(PASSWORD).unwrap());
    start_with(RuleSource::Example, settings).await
}

#[tokio::test]
async fn before_auth_only_auth_hello_ping_and_quit_answer() {
    let server = guarded().await;
    let mut raw = server.raw().await;
    for command in [
        vec!["CL.THROTTLE", "tenantA:user2", "0", "1", "60", "1"],
        vec!["THROTTLE", "k", "1", "1", "60"],
        vec![
            "WEIR.CHECK",
            "api",
            "remote_address",
            "10.0.0.1",
            "HITS",
            "5",
        ],
        vec!["INFO"],
        vec!["CLIENT", "ID"],
        vec!["ECHO", "x"],
        vec!["SELECT", "0"],
    ] {
        assert_eq!(raw.call(&command).await, NOAUTH, "{command:?}");
    }
    assert_eq!(raw.call(&["PING"]).await, "+PONG");
    // A transaction of refused commands runs nothing.
    assert_eq!(raw.call(&["MULTI"]).await, NOAUTH);
    assert_eq!(
        raw.call(&["HELLO", "3"]).await,
        "-NOAUTH HELLO must be called with the client already authenticated, otherwise the \
         HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
         select the RESP protocol version at the same time"
    );
    assert_eq!(
        raw.call(&["AUTH", "wrong-password-of-some-length"]).await,
        WRONGPASS
    );
    assert_eq!(raw.call(&["AUTH", "someone", PASSWORD]).await, WRONGPASS);
    assert_eq!(
        raw.call(&["CL.THROTTLE", "k", "0", "1", "60"]).await,
        NOAUTH,
        "a wrong password authenticates nothing"
    );
    assert_eq!(raw.call(&["AUTH", PASSWORD]).await, "+OK");
    assert_eq!(raw.call(&["CL.THROTTLE", "k", "0", "1", "60"]).await, "*5");
    assert_eq!(raw.line().await, ":0");
    for _ in 0..4 {
        raw.line().await;
    }
    // RESET goes back to the default user, who must authenticate again.
    assert_eq!(raw.call(&["RESET"]).await, "+RESET");
    assert_eq!(raw.call(&["ECHO", "x"]).await, NOAUTH);
    assert_eq!(raw.call(&["AUTH", "default", PASSWORD]).await, "+OK");
    assert_eq!(raw.call(&["QUIT"]).await, "+OK");

    // HELLO … AUTH, as RESP3 clients authenticate.
    let mut hello = server.raw().await;
    assert_eq!(
        hello
            .call(&["HELLO", "3", "AUTH", "default", "not-the-password-at-all"])
            .await,
        WRONGPASS
    );
    assert_eq!(
        hello
            .call(&["HELLO", "3", "AUTH", "default", PASSWORD])
            .await,
        "%7"
    );
    server.stop().await;
}

/// The `redis` crate, with the password in its URL as clients configure it.
#[tokio::test]
async fn a_client_with_the_password_works_and_one_without_is_refused() {
    let server = guarded().await;
    let url = format!("redis://:{PASSWORD}@{}/", server.addr);
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let got: Vec<i64> = redis::cmd("CL.THROTTLE")
        .arg("user123")
        .arg(15)
        .arg(30)
        .arg(60)
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(got, [0, 16, 15, -1, 2]);
    let mut anonymous = server.client(false).await;
    let refused: redis::RedisResult<Vec<i64>> = redis::cmd("CL.THROTTLE")
        .arg("user123")
        .arg(15)
        .arg(30)
        .arg(60)
        .query_async(&mut anonymous)
        .await;
    let error = refused.unwrap_err();
    assert_eq!(error.code(), Some("NOAUTH"), "{error}");
    server.stop().await;
}

/// The attack: one call put another client's key under a ten-year lockout. Now parameters
/// whose window (`(max_burst + 1) × period / count`) is beyond the server's longest (a
/// day by default) are refused, and the key is untouched.
#[tokio::test]
async fn a_decade_long_lockout_is_refused() {
    let server = common::start().await;
    let mut raw = server.raw().await;
    let refused = raw
        .call(&["CL.THROTTLE", "tenantA:user2", "0", "1", "315360000", "1"])
        .await;
    assert_eq!(
        refused,
        "-Cell error: Store error: (max_burst + 1) × period / count is above this server's \
         longest window, 86400 s (weir serve --resp-max-window)"
    );
    let refused = raw
        .call(&["CL.THROTTLE", "tenantA:user2", "86400", "1", "1"])
        .await;
    assert!(refused.contains("longest window"), "{refused}");
    let refused = raw
        .call(&["THROTTLE", "tenantA:user2", "1", "1", "315360000"])
        .await;
    assert!(
        refused.starts_with("-ERR invalid rate limit parameters"),
        "{refused}"
    );
    assert!(refused.contains("longest window, 86400 s"), "{refused}");
    // A day exactly is allowed (a daily quota of 1000).
    assert_eq!(
        raw.call(&["CL.THROTTLE", "daily", "999", "1000", "86400"])
            .await,
        "*5"
    );
    for _ in 0..5 {
        raw.line().await;
    }
    // The victim's key was never touched.
    assert_eq!(
        raw.call(&["CL.THROTTLE", "tenantA:user2", "0", "1", "60"])
            .await,
        "*5"
    );
    assert_eq!(raw.line().await, ":0");
    server.stop().await;

    // An operator may allow longer windows.
    let week = std::time::Duration::from_secs(7 * 86_400);
    let server = start_with(RuleSource::Example, Settings::default().max_window(week)).await;
    let mut raw = server.raw().await;
    assert_eq!(
        raw.call(&["CL.THROTTLE", "weekly", "0", "1", "604800"])
            .await,
        "*5"
    );
    server.stop().await;
}
