//! What every handler needs of its arguments: integers parsed as redis-cell and
//! throttlecrab parse them, text for messages, and Redis's arity error. A leaf: it uses no
//! other command module.

use weir_core::Key;

use crate::protocol::Reply;

/// The record key of a command that names its own key (`CL.THROTTLE`, `THROTTLE`): `=`
/// then the key's bytes, built on the stack (no heap copy per command); `None` when it is
/// longer than a [`Key`] may be.
pub(crate) fn own_key(key: &[u8]) -> Option<Key> {
    let mut buf = [0u8; Key::MAX_LEN];
    let (first, rest) = buf.split_first_mut()?;
    *first = b'=';
    rest.get_mut(..key.len())?.copy_from_slice(key);
    Key::new(buf.get(..=key.len())?).ok()
}

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
