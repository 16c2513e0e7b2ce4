//! The client matrix, the Rust part: the `redis` crate's `ConnectionManager` (the
//! reconnecting connection services use) and `fred`'s client, each in its default
//! configuration, connect, pipeline atomically (MULTI … EXEC; `fred` also without a
//! transaction) and get redis-cell's answers. The other clients (redis-py, ioredis,
//! node-redis, redis-cli, redis-benchmark) run in `scripts/resp-clients`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::start;
use fred::prelude::{Builder, ClientLike, Config, TransactionInterface};
use fred::types::CustomCommand;

#[tokio::test]
async fn the_redis_crates_connection_manager_with_its_defaults() {
    let server = start().await;
    let client = redis::Client::open(format!("redis://{}/", server.addr)).unwrap();
    let mut con = redis::aio::ConnectionManager::new(client).await.unwrap();
    let one: Vec<i64> = redis::cmd("CL.THROTTLE")
        .arg("cm")
        .arg(15)
        .arg(30)
        .arg(60)
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(one, [0, 16, 15, -1, 2]);
    let mut pipe = redis::pipe();
    pipe.atomic();
    for _ in 0..19 {
        pipe.cmd("CL.THROTTLE").arg("cm").arg(15).arg(30).arg(60);
    }
    let replies: Vec<Vec<i64>> = pipe.query_async(&mut con).await.unwrap();
    assert_eq!(replies.len(), 19);
    assert_eq!(replies.iter().filter(|r| r[0] == 0).count(), 15);
    let info: redis::InfoDict = redis::cmd("INFO").query_async(&mut con).await.unwrap();
    assert_eq!(info.get::<i64>("loading"), Some(0));
    server.stop().await;
}

/// `CL.THROTTLE key 15 30 60` as `fred` sends a command it does not know.
fn cl_throttle() -> CustomCommand {
    CustomCommand::new_static("CL.THROTTLE", None, false)
}

#[tokio::test]
async fn fred_with_its_defaults() {
    let server = start().await;
    let config = Config::from_url(&format!("redis://{}/", server.addr)).unwrap();
    let client = Builder::from_config(config).build().unwrap();
    client.init().await.unwrap();
    let args = || vec!["fred", "15", "30", "60"];
    let one: Vec<i64> = client.custom(cl_throttle(), args()).await.unwrap();
    assert_eq!(one, [0, 16, 15, -1, 2]);
    // A transaction (MULTI … EXEC) of 10, then a plain pipeline of 9: 19 replies, 15
    // allowed (16 in all with the first).
    let transaction = client.multi();
    for _ in 0..10 {
        let _: () = transaction.custom(cl_throttle(), args()).await.unwrap();
    }
    let mut replies: Vec<Vec<i64>> = transaction.exec(true).await.unwrap();
    let pipeline = client.pipeline();
    for _ in 0..9 {
        let _: () = pipeline.custom(cl_throttle(), args()).await.unwrap();
    }
    replies.extend(pipeline.all::<Vec<Vec<i64>>>().await.unwrap());
    assert_eq!(replies.len(), 19);
    assert_eq!(
        replies.iter().filter(|r| r[0] == 0).count(),
        15,
        "{replies:?}"
    );
    client.quit().await.unwrap();
    server.stop().await;
}
