//! The longest block an operator can set on a key ([`MAX_BLOCK`]), written once for the
//! two places that need it: the admin API's `POST /admin/keys/block` (weir-server) applies
//! at most this, and a state file read back at start (`state_file.rs`) holds no block but
//! a rule's own lockout longer than this from the restart. Not on the path of a decision.

use std::time::Duration;

/// The longest block an operator can set: 365 days. A key to keep out for longer belongs in
/// a rule (a `requests_per_unit: 0` descriptor), not in the memory store, which never
/// evicts a blocked key. A longer block asked of the admin API is refused (`400`, nothing
/// applied; the answer to an accepted one says the duration applied); a longer one read
/// from a state file is clamped to this.
pub const MAX_BLOCK: Duration = Duration::from_secs(365 * 24 * 3600);
