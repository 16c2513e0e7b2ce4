//! Fault injection for the wrappers that guard a store (`weir-resilience`): a real
//! [`MemoryStore`] behind a switch that can make it fail or hang, and that counts calls. The
//! network stores are tested against real servers that are killed and paused; this is for
//! the wrapper's own logic, with exact control of when the store fails.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use weir_core::{
    CheckError, Decisions, MemoryStore, Op, Outcome, Rule, ScopedKey, ScopedLimits, Store,
    StoreError,
};

/// How a [`FaultyStore`] behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Fault {
    /// Answers normally.
    None = 0,
    /// Fails at once with `StoreError::Unavailable`.
    Down = 1,
    /// Never answers (the caller's timeout must fire).
    Hang = 2,
    /// Decisions never answer, but PING does: a store slow for a moment, not down.
    HangCalls = 3,
}

/// A memory store with a fault switch and a call counter. Clones share both.
#[derive(Debug, Clone, Default)]
pub struct FaultyStore {
    store: MemoryStore,
    fault: Arc<AtomicU8>,
    calls: Arc<AtomicU64>,
}

impl FaultyStore {
    /// A healthy store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Switches the fault.
    pub fn set(&self, fault: Fault) {
        self.fault.store(fault as u8, Ordering::SeqCst);
    }

    /// Calls received (including failed ones and pings).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// The memory store behind the switch.
    pub fn store(&self) -> &MemoryStore {
        &self.store
    }

    async fn gate(&self) -> Result<(), StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.fault.load(Ordering::SeqCst) {
            0 => Ok(()),
            3 => std::future::pending().await,
            1 => Err(StoreError::Unavailable(
                "connection refused (injected)".into(),
            )),
            _ => std::future::pending().await,
        }
    }
}

impl Store for FaultyStore {
    async fn apply(
        &self,
        key: ScopedKey<'_>,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        self.gate().await?;
        self.store.apply(key, rule, op, now_ns).await
    }

    async fn check_all(
        &self,
        limits: ScopedLimits<'_>,
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        self.gate().await?;
        self.store.check_all(limits, cost, now_ns).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        if self.fault.load(Ordering::SeqCst) == Fault::HangCalls as u8 {
            self.calls.fetch_add(1, Ordering::SeqCst);
            return Ok(());
        }
        self.gate().await
    }
}
