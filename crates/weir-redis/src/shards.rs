//! Health per Cluster primary: which part of a Cluster store (one circuit of
//! `weir-resilience`'s `FailoverStore` each, through `Store::parts` / `part_of` /
//! `ping_part`) a key's hash slot belongs to, and whether that part answers. Not the route
//! of a decision (redis-rs's Cluster connection routes those); only what a failure guard
//! needs to send a dead primary's keys, and only those, to their rule's failure policy.
//!
//! A part is one shard: the slots one primary owns. Parts are numbered when the slot map
//! is read (`CLUSTER SLOTS`, asked directly of any node that answers, so a dead node or a
//! stale redis-rs map is no obstacle), and a shard keeps its number while its slots move
//! to another node: a replica promoted in a failover, or the primary restarted, takes over
//! the part of the slots it now serves, so the open circuit of a dead primary closes when
//! the node serving its slots now answers PING. Until the map is first read every key is
//! in part 0, so a Cluster that cannot be reached at all fails as a whole. There are at
//! most [`PARTS`] parts; a larger Cluster's primaries share them (a dead primary then takes
//! its part's other keys with it).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use redis::{
    AsyncConnectionConfig, ConnectionAddr, IntoConnectionInfo, RedisConnectionInfo, Value,
};
use weir_core::StoreError;

use crate::error;
use crate::redact::Redactor;

/// The most parts (circuits) a Cluster store has: one per primary up to this many.
pub(crate) const PARTS: usize = 64;

/// Hash slots in a Redis Cluster.
const SLOTS: usize = 16_384;

/// A node's address, as `CLUSTER SLOTS` names it.
type Addr = (String, u16);

/// How to reach a Cluster's nodes one by one: the seeds of its URL and its credentials.
#[derive(Clone)]
pub(crate) struct Access {
    pub(crate) seeds: Vec<Addr>,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
}

/// The slot → part table of a Cluster store and each part's current primary.
pub(crate) struct Shards {
    /// The part of each slot (0 until the map is read).
    slot_part: Box<[AtomicU8]>,
    /// Each part's primary (none: no slot is in that part).
    owners: Mutex<Vec<Option<Addr>>>,
    /// Whether each part's last PING failed.
    down: Box<[AtomicBool]>,
    access: Access,
    /// The bound of one attempt on one node.
    timeout: Duration,
    redactor: Redactor,
}

impl Shards {
    pub(crate) fn new(access: Access, timeout: Duration, redactor: Redactor) -> Self {
        Self {
            slot_part: (0..SLOTS).map(|_| AtomicU8::new(0)).collect(),
            owners: Mutex::new(vec![None; PARTS]),
            down: (0..PARTS).map(|_| AtomicBool::new(false)).collect(),
            access,
            timeout,
            redactor,
        }
    }

    /// The part of hash slot `slot`.
    pub(crate) fn part_of_slot(&self, slot: u16) -> usize {
        self.slot_part
            .get(usize::from(slot))
            .map_or(0, |p| usize::from(p.load(Ordering::Relaxed)))
    }

    fn owners(&self) -> Vec<Option<Addr>> {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether part `part` answers: the slot map read again (a failover moves the part to
    /// the promoted replica), then a PING of the node that serves the part now. `Ok(true)`
    /// when it answers after its last PING failed: it has come back (restarted, or
    /// replaced), and the Cluster connection should be made anew to reach it at once.
    pub(crate) async fn ping(&self, part: usize) -> Result<bool, StoreError> {
        let suspect = self.owners().get(part).cloned().flatten();
        let read = self.refresh(suspect.as_ref()).await;
        let answer = match self.owners().get(part).cloned().flatten() {
            Some(addr) => self.ping_node(&addr).await,
            // No slot is in this part: nothing of it can be down, once the map is known.
            None => read,
        };
        let was_down = self
            .down
            .get(part)
            .is_some_and(|d| d.swap(answer.is_err(), Ordering::Relaxed));
        answer.map(|()| was_down)
    }

    /// Reads the slot map from the first node that answers (`last` tried last) and
    /// renumbers the parts.
    pub(crate) async fn refresh(&self, last: Option<&Addr>) -> Result<(), StoreError> {
        let mut candidates: Vec<Addr> = self.owners().into_iter().flatten().collect();
        candidates.extend(self.access.seeds.iter().cloned());
        let mut seen = Vec::with_capacity(candidates.len());
        for addr in candidates {
            if !seen.contains(&addr) && Some(&addr) != last {
                seen.push(addr);
            }
        }
        seen.extend(last.cloned());
        let mut failure = StoreError::Unavailable(format!(
            "{}: no Cluster node to read the slot map from",
            self.redactor.label
        ));
        for addr in &seen {
            match self.slots_from(addr).await {
                Ok(ranges) if !ranges.is_empty() => {
                    self.renumber(&ranges);
                    return Ok(());
                }
                Ok(_) => {}
                Err(e) => failure = e,
            }
        }
        Err(failure)
    }

    /// One connection to `addr`, under the timeout.
    async fn node(&self, addr: &Addr) -> Result<redis::aio::MultiplexedConnection, StoreError> {
        let mut settings = RedisConnectionInfo::default();
        if let Some(u) = &self.access.username {
            settings = settings.set_username(u);
        }
        if let Some(p) = &self.access.password {
            settings = settings.set_password(p);
        }
        let fail = |e: redis::RedisError| error::store(&e, &self.redactor, self.timeout);
        let info = ConnectionAddr::Tcp(addr.0.clone(), addr.1)
            .into_connection_info()
            .map_err(fail)?
            .set_redis_settings(settings);
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        let client = redis::Client::open(info).map_err(fail)?;
        match tokio::time::timeout(
            self.timeout,
            client.get_multiplexed_async_connection_with_config(&config),
        )
        .await
        {
            Ok(conn) => conn.map_err(fail),
            Err(_) => Err(error::timeout(self.timeout)),
        }
    }

    async fn ask(&self, addr: &Addr, cmd: &redis::Cmd) -> Result<Value, StoreError> {
        let mut conn = self.node(addr).await?;
        match tokio::time::timeout(self.timeout, cmd.query_async::<Value>(&mut conn)).await {
            Ok(reply) => reply.map_err(|e| error::store(&e, &self.redactor, self.timeout)),
            Err(_) => Err(error::timeout(self.timeout)),
        }
    }

    async fn ping_node(&self, addr: &Addr) -> Result<(), StoreError> {
        self.ask(addr, &redis::cmd("PING")).await.map(|_| ())
    }

    /// `CLUSTER SLOTS` of `addr`: (first slot, last slot, primary) per range.
    async fn slots_from(&self, addr: &Addr) -> Result<Vec<(u16, u16, Addr)>, StoreError> {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SLOTS");
        let reply = self.ask(addr, &cmd).await?;
        Ok(parse_slots(&reply, addr))
    }

    /// Numbers the primaries of `ranges`: each keeps the part its lowest slot was in, if
    /// that part had a primary and no other took it; the rest take free parts in order.
    fn renumber(&self, ranges: &[(u16, u16, Addr)]) {
        let mut primaries: Vec<(u16, Addr)> = Vec::new();
        for (start, _, addr) in ranges {
            match primaries.iter_mut().find(|(_, a)| a == addr) {
                Some((lowest, _)) => *lowest = (*lowest).min(*start),
                None => primaries.push((*start, addr.clone())),
            }
        }
        primaries.sort();
        let mut owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next: Vec<Option<Addr>> = vec![None; PARTS];
        let mut part_of: Vec<Option<usize>> = vec![None; primaries.len()];
        for (i, (lowest, addr)) in primaries.iter().enumerate() {
            let old = self.part_of_slot(*lowest);
            if owners.get(old).is_some_and(Option::is_some) && next[old].is_none() {
                next[old] = Some(addr.clone());
                part_of[i] = Some(old);
            }
        }
        for (i, (_, addr)) in primaries.iter().enumerate() {
            if part_of[i].is_some() {
                continue;
            }
            let part = next.iter().position(Option::is_none).unwrap_or(i % PARTS);
            if next[part].is_none() {
                next[part] = Some(addr.clone());
            }
            part_of[i] = Some(part);
        }
        let mut table = vec![0u8; SLOTS];
        for (start, end, addr) in ranges {
            let part = primaries
                .iter()
                .position(|(_, a)| a == addr)
                .and_then(|i| part_of[i])
                .and_then(|p| u8::try_from(p).ok())
                .unwrap_or(0);
            let end = usize::from(*end).min(SLOTS - 1);
            if let Some(cells) = table.get_mut(usize::from(*start)..=end) {
                cells.fill(part);
            }
        }
        for (cell, part) in self.slot_part.iter().zip(table) {
            cell.store(part, Ordering::Relaxed);
        }
        *owners = next;
    }
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// A `CLUSTER SLOTS` reply as (first slot, last slot, primary); a primary whose address
/// is empty or `?` (the node does not know its own) is `asked`, the node that answered.
fn parse_slots(reply: &Value, asked: &Addr) -> Vec<(u16, u16, Addr)> {
    let Value::Array(entries) = reply else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            let Value::Array(fields) = entry else {
                return None;
            };
            let start = u16::try_from(int(fields.first()?)?).ok()?;
            let end = u16::try_from(int(fields.get(1)?)?).ok()?;
            let Value::Array(primary) = fields.get(2)? else {
                return None;
            };
            let host = match primary.first()? {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::SimpleString(s) => s.clone(),
                _ => return None,
            };
            let port = u16::try_from(int(primary.get(1)?)?).ok()?;
            let host = if host.is_empty() || host == "?" {
                asked.0.clone()
            } else {
                host
            };
            Some((start, end, (host, port)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shards() -> Shards {
        let access = Access {
            seeds: Vec::new(),
            username: None,
            password: None,
        };
        Shards::new(access, Duration::from_millis(100), Redactor::default())
    }

    fn node(port: u16) -> Addr {
        ("127.0.0.1".to_owned(), port)
    }

    #[test]
    fn a_promoted_replica_takes_over_the_part_of_the_slots_it_now_serves() {
        let s = shards();
        assert_eq!(
            s.part_of_slot(9_000),
            0,
            "every key in part 0 until the map is read"
        );
        s.renumber(&[
            (10_923, 16_383, node(3)),
            (0, 5_460, node(1)),
            (5_461, 10_922, node(2)),
        ]);
        let parts: Vec<usize> = [0, 5_460, 5_461, 10_922, 10_923, 16_383]
            .map(|slot| s.part_of_slot(slot))
            .to_vec();
        assert_eq!(
            parts,
            [0, 0, 1, 1, 2, 2],
            "one part per primary, by lowest slot"
        );
        // Node 2 died; its replica (node 4) serves its slots now: same part.
        s.renumber(&[
            (0, 5_460, node(1)),
            (5_461, 10_922, node(4)),
            (10_923, 16_383, node(3)),
        ]);
        assert_eq!(s.part_of_slot(6_000), 1);
        assert_eq!(s.owners()[1], Some(node(4)));
        assert_eq!(s.owners()[3], None);
    }

    #[test]
    fn slot_ranges_are_read_from_a_cluster_slots_reply() {
        let range = |a: i64, b: i64, host: &str, port: i64| {
            Value::Array(vec![
                Value::Int(a),
                Value::Int(b),
                Value::Array(vec![
                    Value::BulkString(host.as_bytes().to_vec()),
                    Value::Int(port),
                    Value::BulkString(b"id".to_vec()),
                ]),
            ])
        };
        let reply = Value::Array(vec![
            range(0, 100, "10.0.0.1", 7000),
            range(101, 16_383, "", 7001),
            Value::Nil,
            range(0, 99_999, "x", 1),
        ]);
        assert_eq!(
            parse_slots(&reply, &node(9)),
            [
                (0, 100, ("10.0.0.1".to_owned(), 7000)),
                (101, 16_383, node(7001)),
            ]
        );
    }
}
