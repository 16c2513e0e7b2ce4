//! Weir keys that memcached could not take as they are: longer than 250 bytes, with spaces,
//! line breaks, NUL or bytes that are not UTF-8. Each must get its own budget, on a counter
//! and on a record.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::{Decision, Key, Op, Outcome, Rule, Store};
use weir_memcached::MemcachedStore;
use weir_testkit::servers::Memcached;
use weir_testkit::T0_NS;

async fn allowed(store: &MemcachedStore, key: &Key, rule: &Rule) -> bool {
    match store
        .apply(
            weir_core::ScopedKey::plain(key),
            rule,
            Op::Check { cost: 1 },
            T0_NS,
        )
        .await
    {
        Ok(Outcome::Decision(Decision { allowed, .. })) => allowed,
        other => panic!("check of {key:?}: {other:?}"),
    }
}

#[tokio::test]
async fn long_and_unsafe_keys_each_get_their_own_budget() {
    let server = Memcached::start();
    let store = MemcachedStore::builder(&server.url())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let long = "x".repeat(300);
    let keys: Vec<Key> = [
        format!("{long}1").into_bytes(),
        format!("{long}2").into_bytes(),
        vec![b'k'; Key::MAX_LEN],
        b"user name with spaces".to_vec(),
        b"user_name_with_spaces".to_vec(),
        b"line\r\nbreak".to_vec(),
        b"nul\0byte".to_vec(),
        vec![0xff, 0xfe, b' ', 0x80],
    ]
    .into_iter()
    .map(|k| Key::new(k).unwrap())
    .collect();
    let s = Duration::from_secs(1);
    let rules = [
        Rule::fixed_window(2, s).unwrap(),
        Rule::sliding_window(2, s, Duration::from_millis(250)).unwrap(),
        Rule::gcra(2, s, 2).unwrap(),
    ];
    let run = async {
        for (i, rule) in rules.iter().enumerate() {
            for key in &keys {
                // Namespaced per rule, as callers do.
                let mut bytes = format!("{i}:").into_bytes();
                bytes.extend_from_slice(key.as_bytes());
                bytes.truncate(Key::MAX_LEN);
                let key = Key::new(bytes).unwrap();
                assert!(allowed(&store, &key, rule).await, "{key:?} first");
                assert!(allowed(&store, &key, rule).await, "{key:?} second");
                assert!(!allowed(&store, &key, rule).await, "{key:?} third");
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("bounded in time");
}
