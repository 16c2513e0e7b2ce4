//! Why an engine could not be built. Request-time errors are not here: they are
//! [`DecideError`](crate::DecideError) answers (400 / 503 / `INVALID_ARGUMENT`, …).

use weir_config::ConfigError;

use crate::store_url::StoreUrlError;

/// The engine could not be built. The message already holds the cause's, so no `source()`
/// is exposed: a report that prints the chain (`anyhow`'s `{:#}`) says it once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The rules could not be loaded (names file, place and reason).
    #[error("rules: {0}")]
    Config(ConfigError),
    /// The store URL cannot be used.
    #[error("store: {0}")]
    Store(StoreUrlError),
    /// The state file cannot be used (`EngineSettings::state_file`): with a network
    /// store, or in a directory that does not exist.
    #[error("state file: {0}")]
    StateFile(String),
}

impl From<ConfigError> for EngineError {
    fn from(error: ConfigError) -> Self {
        Self::Config(error)
    }
}

impl From<StoreUrlError> for EngineError {
    fn from(error: StoreUrlError) -> Self {
        Self::Store(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_said_once() {
        let error = EngineError::from(StoreUrlError::Invalid("rediss://h:1: no TLS".into()));
        assert_eq!(error.to_string(), "store: rediss://h:1: no TLS");
        assert!(std::error::Error::source(&error).is_none());
    }
}
