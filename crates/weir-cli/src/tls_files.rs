//! The TLS files a listener's `--*-tls-*` options name, as `weir_server::TlsFiles`: one
//! builder for every listener of `weir serve` (HTTP, gRPC, envoyproxy/ratelimit's gRPC
//! variables) and its RESP front end. Reads nothing: the listener loads the files when it
//! starts, and an unreadable one stops the start there.

use std::path::Path;

use weir_server::TlsFiles;

/// TLS with `cert` and `key`; mutual TLS with `client_ca`; client certificates valid for
/// `client_name` only, if given.
pub(crate) fn tls_files(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
    client_name: Option<&str>,
) -> TlsFiles {
    let mut files = TlsFiles::new(cert, key);
    if let Some(ca) = client_ca {
        files = files.require_client_cert(ca);
    }
    if let Some(name) = client_name {
        files = files.require_client_name(name);
    }
    files
}
