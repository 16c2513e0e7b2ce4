//! The lock-free tables of one store, one per scope (rule), up to [`MAX_TABLES`], each
//! made at its scope's first lock-free check and sized then for the rule's share of the
//! capacity: one set for 8-byte keys (`compact.rs`), one for string keys (`strings.rs`).
//! Where a decision finds its table: `routing.rs` asks [`Tables::table`], then the table
//! itself decides.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::compact::{self, MAX_TABLES};
use super::strings;
use super::word::WordMeter;

/// What [`Tables`] asks of one scope's lock-free table, of either kind.
pub(super) trait ScopeTable {
    /// A table sized for `records`, reading its words under `meter`.
    fn new(records: usize, meter: WordMeter) -> Self;
    /// The meter of the rule that made it.
    fn meter(&self) -> &WordMeter;
    /// The records it is sized for.
    fn records(&self) -> usize;
    /// Live records at `now_ns`.
    fn live(&self, now_ns: u64) -> usize;
    /// Records held (live or not yet swept).
    fn occupied(&self) -> usize;
    /// Vacates expired records; how many.
    fn sweep(&self, now_ns: u64) -> usize;
    /// Records evicted to make room.
    fn evictions(&self) -> u64;
    /// Records moved between a key's buckets.
    fn moves(&self) -> u64;
    /// Bytes it takes.
    fn bytes(&self) -> usize;
}

impl ScopeTable for compact::Table {
    fn new(records: usize, meter: WordMeter) -> Self {
        compact::Table::new(records, meter)
    }
    fn meter(&self) -> &WordMeter {
        &self.meter
    }
    fn records(&self) -> usize {
        self.records
    }
    fn live(&self, now_ns: u64) -> usize {
        compact::Table::live(self, now_ns)
    }
    fn occupied(&self) -> usize {
        compact::Table::occupied(self)
    }
    fn sweep(&self, now_ns: u64) -> usize {
        compact::Table::sweep(self, now_ns)
    }
    fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }
    fn moves(&self) -> u64 {
        self.moves.load(Ordering::Relaxed)
    }
    fn bytes(&self) -> usize {
        compact::Table::bytes(self)
    }
}

impl ScopeTable for strings::Table {
    fn new(records: usize, meter: WordMeter) -> Self {
        strings::Table::new(records, meter)
    }
    fn meter(&self) -> &WordMeter {
        &self.meter
    }
    fn records(&self) -> usize {
        self.records
    }
    fn live(&self, now_ns: u64) -> usize {
        strings::Table::live(self, now_ns)
    }
    fn occupied(&self) -> usize {
        strings::Table::occupied(self)
    }
    fn sweep(&self, now_ns: u64) -> usize {
        strings::Table::sweep(self, now_ns)
    }
    fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }
    fn moves(&self) -> u64 {
        0
    }
    fn bytes(&self) -> usize {
        strings::Table::bytes(self)
    }
}

/// The tables of a store, one per scope (rule), made at a scope's first check.
pub(super) struct Tables<T> {
    scopes: [AtomicU64; MAX_TABLES],
    tables: [OnceLock<T>; MAX_TABLES],
    /// Serialises making a table.
    making: Mutex<()>,
    /// Records each table is sized for.
    records: usize,
}

impl<T: ScopeTable> Tables<T> {
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
    pub(super) fn find(&self, scope: u64) -> Option<&T> {
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
    pub(super) fn table(&self, scope: u64, meter: &WordMeter) -> Option<&T> {
        // Written out, not `Option::filter`, which the compiler left out of line: a call
        // on every check.
        let table = match self.find(scope) {
            Some(table) => table,
            None => self.make(scope, meter)?,
        };
        if table.meter().reads_alike(meter) {
            Some(table)
        } else {
            None
        }
    }

    #[cold]
    fn make(&self, scope: u64, meter: &WordMeter) -> Option<&T> {
        let _making = self.making.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(table) = self.find(scope) {
            return Some(table);
        }
        let i = self.tables.iter().position(|t| t.get().is_none())?;
        // The scope is written before the table is published (OnceLock releases it).
        self.scopes[i].store(scope, Ordering::Relaxed);
        Some(self.tables[i].get_or_init(|| T::new(self.records, *meter)))
    }

    fn each(&self) -> impl Iterator<Item = &T> {
        self.tables.iter().map_while(OnceLock::get)
    }

    pub(super) fn live(&self, now_ns: u64) -> usize {
        self.each().map(|t| t.live(now_ns)).sum()
    }

    pub(super) fn held(&self) -> usize {
        self.each().map(T::occupied).sum()
    }

    pub(super) fn sweep(&self, now_ns: u64) -> usize {
        self.each().map(|t| t.sweep(now_ns)).sum()
    }

    pub(super) fn evictions(&self) -> u64 {
        self.each().map(T::evictions).sum()
    }

    pub(super) fn moves(&self) -> u64 {
        self.each().map(T::moves).sum()
    }

    pub(super) fn bytes(&self) -> usize {
        self.each().map(T::bytes).sum()
    }

    /// The records the tables made so far are sized for.
    pub(super) fn sized_for(&self) -> usize {
        self.each().map(T::records).sum()
    }

    /// Each table made so far with its scope.
    fn scoped(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        let scoped = self.scopes.iter().zip(&self.tables);
        scoped.map_while(|(scope, table)| Some((scope.load(Ordering::Relaxed), table.get()?)))
    }
}

impl Tables<compact::Table> {
    /// Every record held, as (scope, the table's meter, key, word): what a state snapshot
    /// reads (`snapshot.rs`).
    pub(super) fn records(&self) -> impl Iterator<Item = (u64, &WordMeter, Vec<u8>, u64)> + '_ {
        self.scoped().flat_map(|(scope, table)| {
            let held = table.slots().filter(|(_, word)| *word != 0);
            held.map(move |(key, word)| (scope, &table.meter, key.to_le_bytes().to_vec(), word))
        })
    }
}

impl Tables<strings::Table> {
    /// Every record held, as (scope, the table's meter, key, word).
    pub(super) fn records(&self) -> impl Iterator<Item = (u64, &WordMeter, Vec<u8>, u64)> + '_ {
        self.scoped().flat_map(|(scope, table)| {
            table
                .slots()
                .map(move |(key, word)| (scope, &table.meter, key, word))
        })
    }
}

impl<T: ScopeTable> std::fmt::Debug for Tables<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tables")
            .field("tables", &self.each().count())
            .field("records_each", &self.records)
            .finish()
    }
}
