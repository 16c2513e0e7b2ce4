//! `MULTI`, `EXEC`, `DISCARD` and `WATCH`, as Redis answers them: after `MULTI` every
//! command is checked (known, its arity, authenticated, and for a decision command its
//! arguments, parsed as it will run) and queued (`+QUEUED`) or refused with its error; at
//! `EXEC` the queue runs in order and the replies come back as one array, unless a
//! command was refused, in which case nothing runs (`-EXECABORT …`): a batch is never
//! half-applied. The queue is bounded ([`MAX_QUEUED_BYTES`]); a command past the bound
//! is refused, so the batch aborts. `WATCH` is refused: Weir keeps no values a client could
//! watch.
//!
//! One difference from Redis: Redis checks a queued command's arguments only at `EXEC`
//! (a bad `CL.THROTTLE` fails there alone, the others still run); here a decision
//! command whose arguments would fail is refused when queued and aborts the whole batch.

use bytes::Bytes;

use crate::protocol::Reply;

/// The most bytes of arguments one transaction may queue (16 commands of the largest
/// size, or about 20 000 `CL.THROTTLE` calls).
pub(crate) const MAX_QUEUED_BYTES: usize = 1024 * 1024;

/// The commands queued since `MULTI`.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    pub(crate) commands: Vec<Vec<Bytes>>,
    bytes: usize,
    /// A command was refused: `EXEC` runs nothing.
    pub(crate) aborted: bool,
}

impl Queue {
    /// Queues `args` (`+QUEUED`), or refuses them when the queue is full.
    pub(crate) fn push(&mut self, args: &[Bytes]) -> Reply {
        let size: usize = args.iter().map(Bytes::len).sum();
        let total = self.bytes.saturating_add(size);
        if total > MAX_QUEUED_BYTES {
            self.aborted = true;
            return Reply::error(format!(
                "ERR transaction too large: more than {MAX_QUEUED_BYTES} bytes queued \
                 (EXEC in smaller batches)"
            ));
        }
        self.bytes = total;
        self.commands.push(args.to_vec());
        Reply::Simple("QUEUED")
    }
}

/// `MULTI`.
pub(crate) fn multi(transaction: &mut Option<Queue>) -> Reply {
    if transaction.is_some() {
        return Reply::error("ERR MULTI calls can not be nested");
    }
    *transaction = Some(Queue::default());
    Reply::OK
}

/// `DISCARD`.
pub(crate) fn discard(transaction: &mut Option<Queue>) -> Reply {
    match transaction.take() {
        Some(_) => Reply::OK,
        None => Reply::error("ERR DISCARD without MULTI"),
    }
}

/// `EXEC`'s refusals: no `MULTI`, or a command refused while queuing. `Ok` holds the
/// commands to run.
pub(crate) fn take(transaction: &mut Option<Queue>) -> Result<Vec<Vec<Bytes>>, Reply> {
    match transaction.take() {
        None => Err(Reply::error("ERR EXEC without MULTI")),
        Some(queue) if queue.aborted => Err(Reply::error(
            "EXECABORT Transaction discarded because of previous errors.",
        )),
        Some(queue) => Ok(queue.commands),
    }
}

/// `WATCH`: refused, inside a transaction with Redis's own words.
pub(crate) fn watch(in_transaction: bool) -> Reply {
    if in_transaction {
        return Reply::error("ERR WATCH inside MULTI is not allowed");
    }
    Reply::error(
        "ERR WATCH is not supported: Weir keeps no values to watch (MULTI / EXEC run the \
         queued commands in order without it)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_refuses_and_aborts() {
        let mut queue = Queue::default();
        let big = vec![Bytes::from(vec![b'x'; MAX_QUEUED_BYTES / 2])];
        assert_eq!(queue.push(&big), Reply::Simple("QUEUED"));
        assert_eq!(queue.push(&big), Reply::Simple("QUEUED"));
        assert!(matches!(queue.push(&big), Reply::Error(_)));
        let mut transaction = Some(queue);
        assert_eq!(
            take(&mut transaction),
            Err(Reply::error(
                "EXECABORT Transaction discarded because of previous errors."
            ))
        );
        assert!(transaction.is_none());
    }
}
