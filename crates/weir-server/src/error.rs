//! Why the server could not start or stopped with an error. Request-time errors are not
//! here: they are `DecideError` answers (400 / 503 / `INVALID_ARGUMENT`, …).

use weir_config::ConfigError;

use crate::store_url::StoreUrlError;

/// The server could not start, or a listener failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The rules could not be loaded at startup (names file, place and reason).
    #[error("rules: {0}")]
    Config(#[from] ConfigError),
    /// The store URL cannot be used.
    #[error("store: {0}")]
    Store(#[from] StoreUrlError),
    /// The HTTP listener failed.
    #[error("http server: {0}")]
    Http(#[source] std::io::Error),
    /// The gRPC server failed.
    #[error("grpc server: {0}")]
    Grpc(#[source] tonic::transport::Error),
}
