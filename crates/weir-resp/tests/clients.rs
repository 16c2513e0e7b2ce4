//! Issue 27's client matrix, the Rust part: the `redis` crate's `ConnectionManager` (the
//! reconnecting connection services use) in its default configuration connects, pipelines
//! atomically (MULTI … EXEC) and gets redis-cell's answers. The other clients (redis-py,
//! ioredis, node-redis, redis-cli, redis-benchmark) run in `scripts/resp-clients`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::start;

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
