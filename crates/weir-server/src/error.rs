//! Why the server could not start or stopped with an error. Request-time errors are not
//! here: they are `DecideError` answers (400 / 503 / `INVALID_ARGUMENT`, …).

use weir_engine::EngineError;

use weir_listen::TlsError;

/// The server could not start, or a listener failed. The message already holds the
/// cause's, so no `source()` is exposed: a report that prints the chain (`anyhow`'s `{:#}`)
/// says it once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The engine could not be built: the rules or the store URL (names which and why).
    #[error(transparent)]
    Engine(EngineError),
    /// The HTTP listener failed.
    #[error("http server: {0}")]
    Http(std::io::Error),
    /// The gRPC listener failed.
    #[error("grpc server: {0}")]
    Grpc(std::io::Error),
    /// An admin listener was given without an admin token: it would serve nothing.
    #[error("an admin listener needs an admin token (without one there is no admin API)")]
    AdminWithoutToken,
    /// A listener's TLS cannot be set up (names the listener and the file).
    #[error("{listener} TLS: {error}")]
    Tls {
        /// `gRPC` or `HTTP`.
        listener: &'static str,
        /// Why.
        error: TlsError,
    },
}

impl From<EngineError> for ServerError {
    fn from(error: EngineError) -> Self {
        Self::Engine(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_said_once() {
        let error = ServerError::from(EngineError::Store(weir_engine::StoreUrlError::Invalid(
            "rediss://h:1: no TLS".into(),
        )));
        assert_eq!(error.to_string(), "store: rediss://h:1: no TLS");
        assert!(std::error::Error::source(&error).is_none());
    }
}
