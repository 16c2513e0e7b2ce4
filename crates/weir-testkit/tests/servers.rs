//! The throwaway servers start, answer, survive a restart, and go away.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use weir_testkit::servers::{Memcached, RedisCluster, RedisServer};

#[test]
fn a_redis_server_answers_dies_and_comes_back() {
    let mut redis = RedisServer::start();
    assert_eq!(redis.raw("PING").as_deref(), Some("+PONG\r\n"));
    redis.kill();
    assert_eq!(redis.raw("PING"), None);
    redis.restart();
    assert_eq!(redis.raw("PING").as_deref(), Some("+PONG\r\n"));
}

#[test]
fn a_cluster_of_three_primaries_and_three_replicas_is_ready() {
    let cluster = RedisCluster::start();
    assert_eq!(cluster.nodes().len(), 6);
    let info = cluster.nodes()[0].raw("CLUSTER INFO").unwrap();
    assert!(info.contains("cluster_known_nodes:6"), "{info}");
}

#[test]
fn memcached_answers() {
    let mc = Memcached::start();
    assert!(mc.url().starts_with("memcached://127.0.0.1:"));
}
