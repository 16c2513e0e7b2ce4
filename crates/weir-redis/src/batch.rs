//! Batching: concurrent [`Store::apply`](weir_core::Store::apply) calls coalesced into one
//! call of `lua/batch.lua`, which runs them one after another exactly as one call
//! each would. A collector task takes the first waiting decision, gathers more for up to
//! `max_wait` or until `max_decisions` (and, while earlier batches are in flight, whatever
//! queues up meanwhile), groups them by Cluster slot (a script's keys must share one), and
//! sends each group as one script call while it gathers the next. With no `max_wait`, a
//! decision that finds nothing in flight and nothing queued skips the collector and goes at once as one call of
//! its algorithm's single script (as an unbatched store sends it), from the caller's own
//! task: a lone caller pays no hop to the collector and back.
//!
//! Each caller still waits at most the store's timeout. The collector lives in the Tokio
//! runtime of the first batched call and stops when the last clone of the store is
//! dropped; if that runtime has shut down, the next call starts a new one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::cluster_routing::Slot;
use redis::Value;
use tokio::sync::{mpsc, oneshot, Semaphore};
use weir_core::StoreError;

use crate::encode::Args;
use crate::exec::Exec;
use crate::scripts::{Entry, Tag};

/// How concurrent decisions are coalesced (see [`RedisStoreBuilder::batch`](crate::RedisStoreBuilder::batch)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Batching {
    pub(crate) max_decisions: usize,
    pub(crate) max_wait: Duration,
}

/// One decision waiting for its batch.
struct Job {
    name: Vec<u8>,
    slot: Option<Slot>,
    /// Seconds, nanoseconds, then the operation block (`S.one`).
    block: Args,
    reply: oneshot::Sender<Result<Value, StoreError>>,
}

pub(crate) struct Batcher {
    config: Batching,
    exec: Arc<Exec>,
    cluster: bool,
    sender: Mutex<Option<mpsc::Sender<Job>>>,
    /// Calls in flight: batches, and decisions sent directly.
    in_flight: Arc<Semaphore>,
}

impl Batcher {
    pub(crate) fn new(config: Batching, exec: Arc<Exec>, cluster: bool) -> Self {
        Self {
            config,
            exec,
            cluster,
            sender: Mutex::new(None),
            in_flight: Arc::new(Semaphore::new(IN_FLIGHT)),
        }
    }

    /// The collector's queue, starting a collector if there is none (or it has stopped).
    fn sender(&self) -> mpsc::Sender<Job> {
        let mut sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        match &*sender {
            Some(tx) if !tx.is_closed() => tx.clone(),
            _ => {
                let (tx, rx) = mpsc::channel(self.config.max_decisions.saturating_mul(64));
                tokio::spawn(collect(
                    rx,
                    self.exec.clone(),
                    self.config,
                    self.in_flight.clone(),
                ));
                *sender = Some(tx.clone());
                tx
            }
        }
    }

    /// Queues one decision and waits for its reply (the caller bounds the wait); or, when
    /// nothing is in flight or queued, sends it at once as one call of the single script
    /// of its algorithm (`tag`).
    pub(crate) async fn submit(
        &self,
        name: Vec<u8>,
        tag: Tag,
        block: Args,
    ) -> Result<Value, StoreError> {
        crate::exec::in_runtime()?;
        if let Some(permit) = self.idle() {
            // The caller (store.rs) bounds this wait; no second timer.
            let result = self
                .exec
                .invoke(&self.exec.single(tag, &name, &block))
                .await;
            drop(permit);
            return result;
        }
        let (reply, answer) = oneshot::channel();
        let slot = self.cluster.then(|| crate::keys::slot(&name));
        let job = Job {
            name,
            slot,
            block,
            reply,
        };
        if let Err(mpsc::error::SendError(job)) = self.sender().send(job).await {
            // The collector's runtime has shut down: start another in this one.
            *self.sender.lock().unwrap_or_else(PoisonError::into_inner) = None;
            self.sender()
                .send(job)
                .await
                .map_err(|_| StoreError::Unavailable("the batch collector stopped".into()))?;
        }
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the batch was dropped".into()))?
    }

    /// A slot to send one decision directly, when no call is in flight and no decision
    /// waits for the collector (the queue is empty, or there is no collector yet), and
    /// batches take only what is already waiting (`max_wait` zero): then a batch would
    /// hold this decision alone. With a `max_wait`, the collector waits for company.
    fn idle(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if !self.config.max_wait.is_zero() || self.in_flight.available_permits() < IN_FLIGHT {
            return None;
        }
        let queued = {
            let sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
            sender
                .as_ref()
                .is_some_and(|tx| !tx.is_closed() && tx.capacity() < tx.max_capacity())
        };
        if queued {
            return None;
        }
        self.in_flight.clone().try_acquire_owned().ok()
    }
}

/// Calls in flight at once (batches, or decisions sent directly). While they are, new
/// decisions queue up and form the next batch: under load batches grow towards
/// `max_decisions` with no added wait, and a lone decision goes at once, directly.
const IN_FLIGHT: usize = 2;

/// Gathers jobs into batches until every sender is gone.
async fn collect(
    mut rx: mpsc::Receiver<Job>,
    exec: Arc<Exec>,
    config: Batching,
    in_flight: Arc<Semaphore>,
) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        if !config.max_wait.is_zero() {
            let deadline = tokio::time::sleep(config.max_wait);
            tokio::pin!(deadline);
            while jobs.len() < config.max_decisions {
                tokio::select! {
                    biased;
                    job = rx.recv() => match job {
                        Some(job) => jobs.push(job),
                        None => break,
                    },
                    () = &mut deadline => break,
                }
            }
        }
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            return;
        };
        while jobs.len() < config.max_decisions {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let exec = exec.clone();
        tokio::spawn(async move {
            let mut groups = by_slot(jobs);
            if groups.len() == 1 {
                if let Some(group) = groups.pop() {
                    run(exec, group).await;
                }
            } else {
                let mut running = tokio::task::JoinSet::new();
                for group in groups {
                    running.spawn(run(exec.clone(), group));
                }
                while running.join_next().await.is_some() {}
            }
            drop(permit);
        });
    }
}

/// Splits jobs into groups whose keys share a slot (one group off a Cluster).
fn by_slot(jobs: Vec<Job>) -> Vec<Vec<Job>> {
    let mut groups: Vec<(Option<Slot>, Vec<Job>)> = Vec::new();
    for job in jobs {
        match groups.iter_mut().find(|(slot, _)| *slot == job.slot) {
            Some((_, group)) => group.push(job),
            None => groups.push((job.slot, vec![job])),
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

/// The fields of a job's block before its rule: seconds, nanoseconds, operation, number,
/// holder; the rule's one field follows (`S.rule`).
const HEAD: usize = 5;

/// Runs one batch and hands each job its reply.
async fn run(exec: Arc<Exec>, jobs: Vec<Job>) {
    // Distinct keys and distinct rules, each sent once; each operation points at its own
    // (1-based, as Lua counts). Keys are found by hash (a batch may hold 1000); rules,
    // usually one or two, by comparison.
    let mut names: HashMap<&[u8], usize> = HashMap::with_capacity(jobs.len());
    let mut keys: Vec<&[u8]> = Vec::with_capacity(jobs.len());
    let mut rules: Vec<&[u8]> = Vec::new();
    let mut refs: Vec<(usize, usize)> = Vec::with_capacity(jobs.len());
    for job in &jobs {
        let next = names.len() + 1;
        let name = *names.entry(job.name.as_slice()).or_insert_with(|| {
            keys.push(job.name.as_slice());
            next
        });
        let rule = job.block.0.get(HEAD).map_or(&[][..], Vec::as_slice);
        let rule = match rules.iter().position(|r| *r == rule) {
            Some(i) => i + 1,
            None => {
                rules.push(rule);
                rules.len()
            }
        };
        refs.push((name, rule));
    }
    let mut call = exec.prepare(Entry::Batch, keys.len());
    for key in keys {
        call.key(key);
    }
    call.arg(exec.grace_ms).arg(jobs.len()).arg(rules.len());
    for rule in &rules {
        call.arg(*rule);
    }
    for (job, (name, rule)) in jobs.iter().zip(&refs) {
        call.arg(*name).arg(*rule);
        for field in job.block.0.iter().take(HEAD) {
            call.arg(field.as_slice());
        }
    }
    let result = exec.call(&call).await;
    drop(call);
    let replies = match result {
        Ok(Value::Array(flat)) => split(flat, jobs.len())
            .ok_or_else(|| StoreError::Corrupt("the batch reply does not match the batch".into())),
        Ok(_) => Err(StoreError::Corrupt(
            "the batch reply does not match the batch".into(),
        )),
        Err(e) => Err(e),
    };
    match replies {
        Ok(replies) => {
            for (job, reply) in jobs.into_iter().zip(replies) {
                let _ = job.reply.send(Ok(reply));
            }
        }
        Err(e) => {
            for job in jobs {
                let _ = job.reply.send(Err(e.clone()));
            }
        }
    }
}

/// The batch script's flat reply (per operation: its length, then its items) as one reply
/// array per operation; `None` unless it holds exactly `count`.
fn split(flat: Vec<Value>, count: usize) -> Option<Vec<Value>> {
    let mut replies = Vec::with_capacity(count);
    let mut items = flat.into_iter();
    while let Some(len) = items.next() {
        let Value::Int(len) = len else {
            return None;
        };
        let len = usize::try_from(len).ok()?;
        let reply: Vec<Value> = items.by_ref().take(len).collect();
        if reply.len() != len {
            return None;
        }
        replies.push(Value::Array(reply));
    }
    (replies.len() == count).then_some(replies)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_reply_splits_per_operation_or_not_at_all() {
        let flat = vec![
            Value::Int(2),
            Value::Int(3),
            Value::Int(1),
            Value::Int(1),
            Value::Int(4),
        ];
        assert_eq!(
            split(flat.clone(), 2),
            Some(vec![
                Value::Array(vec![Value::Int(3), Value::Int(1)]),
                Value::Array(vec![Value::Int(4)]),
            ])
        );
        assert_eq!(split(flat.clone(), 3), None);
        assert_eq!(split(flat[..4].to_vec(), 2), None);
        assert_eq!(split(vec![Value::Nil], 1), None);
    }
}
