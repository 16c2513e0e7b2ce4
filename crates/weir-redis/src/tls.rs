//! TLS for `rediss://`: which CA to trust and which client certificate to show, from the
//! URL's query (`?ca=…&cert=…&key=…`) or the builder ([`tls_ca`], [`tls_client_cert`]),
//! read and checked when the store is built. The handshake itself is redis-rs's, over
//! rustls with the ring provider (no system OpenSSL); without a CA file the system's
//! roots are trusted. Not here: parsing the rest of the URL (`url.rs`).
//!
//! [`tls_ca`]: crate::RedisStoreBuilder::tls_ca
//! [`tls_client_cert`]: crate::RedisStoreBuilder::tls_client_cert

use std::path::{Path, PathBuf};

use redis::{ClientTlsConfig, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use crate::error::BuildError;

/// Certificate files for `rediss://`, from the builder or the URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsFiles {
    /// PEM file of the CA (or CAs) the server's certificate must chain to.
    pub(crate) ca: Option<PathBuf>,
    /// PEM file of the client certificate chain (mutual TLS).
    pub(crate) cert: Option<PathBuf>,
    /// PEM file of the client certificate's private key.
    pub(crate) key: Option<PathBuf>,
}

impl TlsFiles {
    fn is_empty(&self) -> bool {
        self.ca.is_none() && self.cert.is_none() && self.key.is_none()
    }
}

/// The URL without Weir's TLS options (`ca`, `cert`, `key`), and those options. Other
/// query parameters (`protocol`, a socket's `db`) stay for redis-rs.
pub(crate) fn split_options(url: &str) -> (String, TlsFiles) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), TlsFiles::default());
    };
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    let mut files = TlsFiles::default();
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let path = || Some(PathBuf::from(crate::redact::decode(value)));
        match name {
            "ca" => files.ca = path(),
            "cert" => files.cert = path(),
            "key" => files.key = path(),
            _ => kept.push(pair),
        }
    }
    let mut out = base.to_owned();
    if !kept.is_empty() {
        out.push('?');
        out.push_str(&kept.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    (out, files)
}

/// The builder's files and the URL's together; one given in both places is refused.
pub(crate) fn merge(
    builder: &TlsFiles,
    from_url: TlsFiles,
    redacted: &str,
) -> Result<TlsFiles, BuildError> {
    let twice = |what: &str| BuildError::Url {
        url: redacted.to_owned(),
        reason: format!("the TLS {what} is given both in the URL and by the builder"),
    };
    let pick = |a: &Option<PathBuf>, b: Option<PathBuf>, what: &str| match (a, b) {
        (Some(_), Some(_)) => Err(twice(what)),
        (a, b) => Ok(b.or_else(|| a.clone())),
    };
    Ok(TlsFiles {
        ca: pick(&builder.ca, from_url.ca, "CA file")?,
        cert: pick(&builder.cert, from_url.cert, "client certificate")?,
        key: pick(&builder.key, from_url.key, "client key")?,
    })
}

/// Refuses TLS files on a URL that does not use TLS (they would be ignored silently).
pub(crate) fn refuse_without_tls(files: &TlsFiles, redacted: &str) -> Result<(), BuildError> {
    if files.is_empty() {
        return Ok(());
    }
    Err(BuildError::Url {
        url: redacted.to_owned(),
        reason: "TLS options (ca, cert, key) need a rediss:// URL".to_owned(),
    })
}

/// A client for a `rediss://` URL (already without Weir's options), trusting `files.ca`
/// (or the system's roots) and showing `files.cert` / `files.key` if given.
pub(crate) fn client(
    url: &str,
    files: &TlsFiles,
    redacted: &str,
    scrub: impl Fn(&str) -> String,
) -> Result<redis::Client, BuildError> {
    let bad = |reason: String| BuildError::Url {
        url: redacted.to_owned(),
        reason,
    };
    if url.contains('#') {
        return Err(bad(
            "a URL fragment (#insecure) is not supported: trust the server's CA with ?ca=/path"
                .to_owned(),
        ));
    }
    install_provider();
    let read = |path: &Path, what: &str| {
        std::fs::read(path)
            .map_err(|e| bad(format!("cannot read the {what} {}: {e}", path.display())))
    };
    let root_cert = match &files.ca {
        Some(path) => {
            let pem = read(path, "CA file")?;
            let certs = CertificateDer::pem_slice_iter(&pem).count();
            if certs == 0 {
                return Err(bad(format!("no PEM certificate in {}", path.display())));
            }
            Some(pem)
        }
        None => None,
    };
    let client_tls = match (&files.cert, &files.key) {
        (Some(cert), Some(key)) => Some(ClientTlsConfig {
            client_cert: read(cert, "client certificate")?,
            client_key: read(key, "client key")?,
        }),
        (None, None) => None,
        _ => {
            return Err(bad(
                "a client certificate needs both cert and key (tls_client_cert)".to_owned(),
            ))
        }
    };
    let certs = TlsCertificates {
        client_tls,
        root_cert,
    };
    redis::Client::build_with_tls(url, certs).map_err(|e| bad(scrub(&e.to_string())))
}

/// Makes ring rustls's process-wide provider unless the application chose one: redis-rs
/// asks rustls for the default, which is ambiguous when several providers are compiled in.
fn install_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err: another thread installed one meanwhile, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weirs_options_leave_the_url_and_the_rest_stay() {
        let (url, files) =
            split_options("rediss://h:6380/2?ca=/etc/ca.pem&protocol=resp3&cert=%2Fc.pem&key=k");
        assert_eq!(url, "rediss://h:6380/2?protocol=resp3");
        assert_eq!(files.ca.as_deref(), Some(Path::new("/etc/ca.pem")));
        assert_eq!(files.cert.as_deref(), Some(Path::new("/c.pem")));
        assert_eq!(files.key.as_deref(), Some(Path::new("k")));
        let (url, files) = split_options("rediss://h:1?ca=/a#insecure");
        assert_eq!(url, "rediss://h:1#insecure");
        assert!(files.ca.is_some());
        assert_eq!(split_options("redis://h:1").1, TlsFiles::default());
    }

    #[test]
    fn a_file_given_twice_is_refused() {
        let builder = TlsFiles {
            ca: Some("/a".into()),
            ..TlsFiles::default()
        };
        let url = TlsFiles {
            ca: Some("/b".into()),
            ..TlsFiles::default()
        };
        let err = merge(&builder, url, "rediss://h:1")
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "rediss://h:1: the TLS CA file is given both in the URL and by the builder"
        );
        let url = TlsFiles {
            key: Some("/k".into()),
            ..TlsFiles::default()
        };
        let merged = merge(&builder, url, "rediss://h:1").unwrap();
        assert_eq!(merged.ca.as_deref(), Some(Path::new("/a")));
        assert_eq!(merged.key.as_deref(), Some(Path::new("/k")));
    }
}
