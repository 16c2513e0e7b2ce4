//! Errors at the store's edges: [`BuildError`] when a store is built from a URL and
//! options, and the mapping of every Redis failure to [`StoreError`] (timeouts,
//! unavailability with passwords scrubbed, unreadable records).

use std::time::Duration;

use weir_core::StoreError;

use crate::redact::Redactor;

/// A store could not be built: a bad URL or option. Messages never contain a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The deployment URL cannot be used.
    #[error("{url}: {reason}")]
    Url {
        /// The URL, password replaced by `***`.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An option is out of range.
    #[error("{option}: {reason}")]
    Option {
        /// The option's name.
        option: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// A store call that did not finish within `timeout`.
pub(crate) fn timeout(timeout: Duration) -> StoreError {
    StoreError::Timeout {
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
    }
}

/// A Redis failure as a store error.
pub(crate) fn store(err: &redis::RedisError, redactor: &Redactor, limit: Duration) -> StoreError {
    if err.is_timeout() {
        return timeout(limit);
    }
    StoreError::Unavailable(format!(
        "{}: {}",
        redactor.label,
        redactor.scrub(&err.to_string())
    ))
}
