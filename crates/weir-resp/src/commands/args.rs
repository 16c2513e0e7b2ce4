//! What every handler needs of its arguments: integers parsed as redis-cell and
//! throttlecrab parse them, text for messages, and Redis's arity error. A leaf: it uses no
//! other command module.

use crate::protocol::Reply;

/// Redis's arity error, word for word (`name` as `COMMAND` lists it).
pub(crate) fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// An argument as text, for messages.
pub(crate) fn lossy(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

/// An argument as Rust parses an `i64` (`+5` and `-5` included, spaces not): what both
/// redis-cell and throttlecrab accept.
pub(crate) fn int(arg: &[u8]) -> Option<i64> {
    std::str::from_utf8(arg).ok()?.parse().ok()
}
