//! [`Call`]: one script call being built, its keys then its arguments, as an `FCALL` or the
//! same as an `EVALSHA`. A leaf: `encode.rs` writes arguments into it, `exec.rs` runs it.

use redis::{Arg, Cmd};

use crate::scripts::Entry;

/// One script call being built: its entry point, and its keys and arguments as an `FCALL`
/// (`FCALL <function> <number of keys> <keys> <arguments>`; an `EVALSHA` takes the same
/// after the script's hash).
pub(crate) struct Call {
    pub(crate) entry: Entry,
    pub(crate) cmd: Cmd,
}

impl Call {
    /// Appends a key (all keys come before the arguments).
    pub(crate) fn key(&mut self, key: &[u8]) -> &mut Self {
        self.cmd.arg(key);
        self
    }

    /// Appends an argument.
    pub(crate) fn arg(&mut self, arg: impl redis::ToRedisArgs) -> &mut Self {
        self.cmd.arg(arg);
        self
    }

    /// The same call as an `EVALSHA` of `hash`.
    pub(crate) fn evalsha(&self, hash: &str) -> Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(hash);
        for arg in self.cmd.args_iter().skip(2) {
            if let Arg::Simple(bytes) = arg {
                cmd.arg(bytes);
            }
        }
        cmd
    }
}
