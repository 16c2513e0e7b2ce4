//! The lock-free tables of one store, one per scope (rule), up to [`MAX_TABLES`], each
//! made at its scope's first lock-free check and sized then for the rule's share of the
//! capacity. Where a decision finds its table: `routing.rs` asks [`Tables::table`], then
//! the table itself (`compact.rs`) decides.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::compact::{Table, MAX_TABLES};
use super::word::WordMeter;

/// The tables of a store, one per scope (rule), made at a scope's first check.
pub(super) struct Tables {
    scopes: [AtomicU64; MAX_TABLES],
    tables: [OnceLock<Table>; MAX_TABLES],
    /// Serialises making a table.
    making: Mutex<()>,
    /// Records each table is sized for.
    records: usize,
}

impl Tables {
    pub(super) fn new(records: usize) -> Self {
        Self {
            scopes: Default::default(),
            tables: Default::default(),
            making: Mutex::new(()),
            records,
        }
    }

    /// The scope's table, if it has one.
    #[inline(always)]
    pub(super) fn find(&self, scope: u64) -> Option<&Table> {
        for (table, s) in self.tables.iter().zip(&self.scopes) {
            let table = table.get()?;
            if s.load(Ordering::Relaxed) == scope {
                return Some(table);
            }
        }
        None
    }

    /// The scope's table, made (for `meter`) if there is room for one more; none when the
    /// scope's table reads its words under another meter.
    #[inline(always)]
    pub(super) fn table(&self, scope: u64, meter: &WordMeter) -> Option<&Table> {
        // Written out, not `Option::filter`, which the compiler left out of line: a call
        // on every check.
        let table = match self.find(scope) {
            Some(table) => table,
            None => self.make(scope, meter)?,
        };
        if table.meter.reads_alike(meter) {
            Some(table)
        } else {
            None
        }
    }

    #[cold]
    fn make(&self, scope: u64, meter: &WordMeter) -> Option<&Table> {
        let _making = self.making.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(table) = self.find(scope) {
            return Some(table);
        }
        let i = self.tables.iter().position(|t| t.get().is_none())?;
        // The scope is written before the table is published (OnceLock releases it).
        self.scopes[i].store(scope, Ordering::Relaxed);
        Some(self.tables[i].get_or_init(|| Table::new(self.records, *meter)))
    }

    fn each(&self) -> impl Iterator<Item = &Table> {
        self.tables.iter().map_while(OnceLock::get)
    }

    pub(super) fn live(&self, now_ns: u64) -> usize {
        self.each().map(|t| t.live(now_ns)).sum()
    }

    pub(super) fn held(&self) -> usize {
        self.each().map(Table::occupied).sum()
    }

    pub(super) fn sweep(&self, now_ns: u64) -> usize {
        self.each().map(|t| t.sweep(now_ns)).sum()
    }

    pub(super) fn evictions(&self) -> u64 {
        self.each()
            .map(|t| t.evictions.load(Ordering::Relaxed))
            .sum()
    }

    pub(super) fn moves(&self) -> u64 {
        self.each().map(|t| t.moves.load(Ordering::Relaxed)).sum()
    }

    pub(super) fn bytes(&self) -> usize {
        self.each().map(Table::bytes).sum()
    }

    /// The records the tables made so far are sized for.
    pub(super) fn sized_for(&self) -> usize {
        self.each().map(|t| t.records).sum()
    }

    /// Every record held, as (scope, the table's meter, key, word): what a state snapshot
    /// reads (`snapshot.rs`).
    pub(super) fn records(&self) -> impl Iterator<Item = (u64, &WordMeter, u64, u64)> + '_ {
        let scoped = self.scopes.iter().zip(&self.tables);
        scoped
            .map_while(|(scope, table)| Some((scope.load(Ordering::Relaxed), table.get()?)))
            .flat_map(|(scope, table)| {
                let held = table.slots().filter(|(_, word)| *word != 0);
                held.map(move |(key, word)| (scope, &table.meter, key, word))
            })
    }
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tables")
            .field("tables", &self.each().count())
            .field("records_each", &self.records)
            .finish()
    }
}
