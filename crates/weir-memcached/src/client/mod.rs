//! A small async memcached client of Weir's own: the text protocol's `gets`, `add`, `cas`,
//! `incr`, `decr` and `version` (no `delete`: it has no CAS form, so a record is deleted
//! with a `cas` to an empty tombstone instead), over a few tokio TCP connections that
//! every call shares (pipelined), every round trip under a timeout. It moves bytes; what
//! they mean for a decision is decided in `plan.rs` and `apply.rs`.

mod conn;
mod pool;
pub(crate) mod protocol;

pub(crate) use pool::Pool;
pub(crate) use protocol::{parse_number, Command, Reply, Value};
