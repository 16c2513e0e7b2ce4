//! Sends planned writes: the fifth step of a decision. Stops at the first conflict (a `cas`
//! that finds the value changed, an `add` that finds it present, an `incr` on a vanished
//! or deleted counter) and reports what was done so the caller can undo it and retry, or, for an
//! `incr`, what it found, so the caller can decide again on that (`apply.rs`). Each write
//! goes to the server that holds its key (`context.rs`), so the writes of `check_all` may
//! reach several servers, one after another.

use weir_core::StoreError;

use crate::client::{Command, Reply};
use crate::context::Inner;
use crate::plan::{Action, Write};

/// A write that took effect, and how to take it back.
#[derive(Debug, Clone)]
pub(crate) enum Undo {
    /// An `incr`: `decr` it again (exact even if others wrote since).
    Decr { name: String, delta: u64 },
    /// A stored value: put `previous` back if the value is still ours.
    Restore {
        name: String,
        ours: Vec<u8>,
        previous: Vec<u8>,
        ttl_s: u32,
    },
}

/// How a run of writes ended.
#[derive(Debug)]
pub(crate) enum Ran {
    /// Every write took effect.
    Done,
    /// An `incr` took effect but found a value other than the one read: someone else wrote
    /// in between. `done` includes this `incr`.
    Raced {
        name: String,
        delta: u64,
        found: u64,
        done: Vec<Undo>,
    },
    /// A write did not take effect because the value changed since the read.
    Conflict(Vec<Undo>),
}

/// Sends `writes` in order, one round trip each (so a conflict stops the rest).
pub(crate) async fn run(inner: &Inner, writes: Vec<Write>) -> Result<Ran, StoreError> {
    let mut done = Vec::with_capacity(writes.len());
    for Write { name, action } in writes {
        match action {
            Action::Incr { delta, expect } => {
                let reply = inner
                    .pool_of(&name)?
                    .one(Command::Incr {
                        key: name.clone(),
                        delta,
                    })
                    .await?;
                match reply {
                    Reply::Number(n) => {
                        done.push(Undo::Decr {
                            name: name.clone(),
                            delta,
                        });
                        if n != expect {
                            let found = n.saturating_sub(delta);
                            return Ok(Ran::Raced {
                                name,
                                delta,
                                found,
                                done,
                            });
                        }
                    }
                    // Gone or deleted since the read: nothing was counted.
                    Reply::NotFound | Reply::NonNumeric => return Ok(Ran::Conflict(done)),
                    other => return Err(unexpected("incr", &other)),
                }
            }
            Action::Store {
                data,
                ttl_s,
                unique,
                previous,
                previous_ttl_s,
            } => {
                let command = match unique {
                    Some(unique) => Command::Cas {
                        key: name.clone(),
                        ttl_s,
                        data: data.clone(),
                        unique,
                    },
                    None => Command::Add {
                        key: name.clone(),
                        ttl_s,
                        data: data.clone(),
                    },
                };
                match inner.pool_of(&name)?.one(command).await? {
                    Reply::Stored => done.push(Undo::Restore {
                        name,
                        ours: data,
                        previous,
                        ttl_s: previous_ttl_s,
                    }),
                    Reply::NotStored | Reply::Exists | Reply::NotFound => {
                        return Ok(Ran::Conflict(done))
                    }
                    other => return Err(unexpected("store", &other)),
                }
            }
        }
    }
    Ok(Ran::Done)
}

/// Takes back `done`, newest first. Best effort for stored values: one that someone else
/// changed since is left as they wrote it.
pub(crate) async fn undo(inner: &Inner, done: Vec<Undo>) -> Result<(), StoreError> {
    for undo in done.into_iter().rev() {
        match undo {
            Undo::Decr { name, delta } => {
                inner
                    .pool_of(&name)?
                    .one(Command::Decr { key: name, delta })
                    .await?;
            }
            Undo::Restore {
                name,
                ours,
                previous,
                ttl_s,
            } => {
                let pool = inner.pool_of(&name)?;
                let Reply::Values(values) = pool.one(Command::Gets(vec![name.clone()])).await?
                else {
                    continue;
                };
                let Some(value) = values.into_iter().find(|v| v.key == name) else {
                    continue;
                };
                if value.data == ours {
                    pool.one(Command::Cas {
                        key: name,
                        ttl_s,
                        data: previous,
                        unique: value.unique,
                    })
                    .await?;
                }
            }
        }
    }
    Ok(())
}

fn unexpected(what: &str, reply: &Reply) -> StoreError {
    StoreError::Unavailable(format!("memcached: unexpected reply to {what}: {reply:?}"))
}
