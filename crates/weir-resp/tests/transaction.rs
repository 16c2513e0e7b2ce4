//! Issue 27: what clients send on their own. `MULTI` / `EXEC` / `DISCARD` (redis-py's default
//! `pipeline()` and the `redis` crate's atomic pipeline are MULTI … EXEC), `WATCH`
//! refused, `INFO` (redis-py's `info()`, ioredis's ready check), with Redis's own error
//! texts; and a batch with a bad command in it never half-applied.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{request, start};

/// The attack: redis-py's default pipeline of 20 `CL.THROTTLE` on one key was charged
/// command by command, then `EXEC` was `unknown command` (remaining 16 → 7, an exception).
/// Now: 20 replies, exactly 16 allowed (burst 15 + 1).
#[tokio::test]
async fn an_atomic_pipeline_of_20_gets_20_replies_16_allowed() {
    let server = start().await;
    let mut con = server.client(false).await;
    let mut pipe = redis::pipe();
    pipe.atomic();
    for _ in 0..20 {
        pipe.cmd("CL.THROTTLE")
            .arg("user123")
            .arg(15)
            .arg(30)
            .arg(60);
    }
    let replies: Vec<Vec<i64>> = pipe.query_async(&mut con).await.unwrap();
    assert_eq!(replies.len(), 20);
    let allowed = replies.iter().filter(|r| r[0] == 0).count();
    assert_eq!(allowed, 16, "{replies:?}");
    assert_eq!(replies[0], [0, 16, 15, -1, 2]);
    assert_eq!(replies[15][..3], [0, 16, 0]);
    assert_eq!(replies[16][..4], [1, 16, 0, 2]);
    server.stop().await;
}

#[tokio::test]
async fn transaction_errors_are_redis_words() {
    let server = start().await;
    let mut raw = server.raw().await;
    assert_eq!(raw.call(&["EXEC"]).await, "-ERR EXEC without MULTI");
    assert_eq!(raw.call(&["DISCARD"]).await, "-ERR DISCARD without MULTI");
    assert_eq!(raw.call(&["MULTI"]).await, "+OK");
    assert_eq!(
        raw.call(&["MULTI"]).await,
        "-ERR MULTI calls can not be nested"
    );
    assert_eq!(
        raw.call(&["WATCH", "k"]).await,
        "-ERR WATCH inside MULTI is not allowed"
    );
    assert_eq!(raw.call(&["PING"]).await, "+QUEUED");
    assert_eq!(raw.call(&["ECHO", "hi"]).await, "+QUEUED");
    // Neither the nested MULTI nor WATCH inside MULTI aborts the batch, as in Redis.
    assert_eq!(raw.call(&["EXEC"]).await, "*2");
    assert_eq!(raw.line().await, "+PONG");
    assert_eq!(raw.line().await, "$2");
    assert_eq!(raw.line().await, "hi");
    // WATCH is refused outside a transaction too, with what to do instead.
    let watch = raw.call(&["WATCH", "k"]).await;
    assert!(watch.starts_with("-ERR WATCH is not supported"), "{watch}");
    assert_eq!(raw.call(&["UNWATCH"]).await, "+OK");
    // DISCARD drops the queue: nothing of it is charged.
    assert_eq!(raw.call(&["MULTI"]).await, "+OK");
    assert_eq!(
        raw.call(&["CL.THROTTLE", "d", "0", "1", "60"]).await,
        "+QUEUED"
    );
    assert_eq!(raw.call(&["DISCARD"]).await, "+OK");
    assert_eq!(raw.call(&["CL.THROTTLE", "d", "0", "1", "60"]).await, "*5");
    assert_eq!(raw.line().await, ":0", "the discarded call took nothing");
    server.stop().await;
}

/// A queued command that is unknown, has the wrong arity or arguments that cannot run
/// makes `EXEC` answer `-EXECABORT` and run nothing: never a half-applied batch.
#[tokio::test]
async fn a_bad_command_in_a_transaction_aborts_it_whole() {
    let server = start().await;
    let mut raw = server.raw().await;
    let long_key = "k".repeat(512);
    for bad in [
        vec!["NOSUCH", "x"],
        vec!["ECHO"],
        vec!["CL.THROTTLE", "k", "0", "1", "abc"],
        vec!["CL.THROTTLE", &long_key, "0", "1", "60"],
        vec!["CL.THROTTLE", "k", "0", "1", "315360000"],
        vec!["THROTTLE", "k", "0", "1", "60"],
        vec!["WEIR.CHECK", "api", "remote_address"],
    ] {
        assert_eq!(raw.call(&["MULTI"]).await, "+OK");
        assert_eq!(
            raw.call(&["CL.THROTTLE", "k", "0", "1", "60"]).await,
            "+QUEUED"
        );
        let refused = raw.call(&bad).await;
        assert!(refused.starts_with('-'), "{bad:?}: {refused}");
        assert_eq!(
            raw.call(&["EXEC"]).await,
            "-EXECABORT Transaction discarded because of previous errors.",
            "{bad:?}"
        );
    }
    // Nothing ran: the key's one request is still there.
    assert_eq!(raw.call(&["CL.THROTTLE", "k", "0", "1", "60"]).await, "*5");
    assert_eq!(raw.line().await, ":0");
    for _ in 0..4 {
        raw.line().await;
    }
    // And the whole pipeline as one write, as redis-py sends it.
    let mut batch = request(&["MULTI"]);
    batch.extend(request(&["CL.THROTTLE", "p", "0", "1", "60"]));
    batch.extend(request(&["EXEC", "extra"]));
    batch.extend(request(&["EXEC"]));
    raw.send(&batch).await;
    assert_eq!(raw.line().await, "+OK");
    assert_eq!(raw.line().await, "+QUEUED");
    assert_eq!(
        raw.line().await,
        "-ERR wrong number of arguments for 'exec' command"
    );
    assert_eq!(
        raw.line().await,
        "-EXECABORT Transaction discarded because of previous errors."
    );
    server.stop().await;
}

/// `INFO` in Redis's format: what redis-py's `info()` parses and ioredis's ready check
/// reads (`loading:0`).
#[tokio::test]
async fn info_has_redis_sections() {
    let server = start().await;
    let mut con = server.client(false).await;
    let info: redis::InfoDict = redis::cmd("INFO").query_async(&mut con).await.unwrap();
    assert_eq!(info.get::<String>("redis_mode").unwrap(), "standalone");
    assert!(info.get::<String>("redis_version").is_some());
    assert_eq!(info.get::<i64>("loading"), Some(0));
    assert_eq!(info.get::<i64>("connected_clients"), Some(1));
    assert_eq!(info.get::<i64>("maxclients"), Some(4096));
    assert!(info.get::<i64>("total_commands_processed").unwrap() >= 1);
    let mut raw = server.raw().await;
    raw.send(&request(&["INFO", "persistence"])).await;
    let len = raw.line().await;
    assert_eq!(len, "$26");
    assert_eq!(raw.line().await, "# Persistence");
    assert_eq!(raw.line().await, "loading:0");
    server.stop().await;
}
