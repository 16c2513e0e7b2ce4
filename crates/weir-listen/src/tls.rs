//! TLS for the listeners (gRPC, HTTP): a certificate chain and key from PEM files, and
//! optionally a CA whose certificates clients **must** show (mutual TLS, as
//! envoyproxy/ratelimit's `GRPC_CLIENT_TLS_CACERT`). rustls with the ring provider (the one
//! weir-redis uses for `rediss://`), TLS 1.2 and 1.3 by default ([`TlsVersion`]: the
//! minimum is an option; Envoy's default maximum for upstream TLS is 1.2). With a required client name (ratelimit's
//! `GRPC_CLIENT_TLS_SAN`) the client's certificate must also be valid for that name (a DNS
//! or IP subject alternative name, as Go's `VerifyOptions.DNSName`; [`NamedClients`]). The
//! files are read once, when the server
//! starts: a missing or unreadable file, a file without a certificate or key, or a key that
//! does not match is an error naming the file, and the server does not start.
//!
//! A certificate that is expired, not yet valid or expires within 14 days is a WARN at
//! start (`tls_validity.rs`); refused handshakes are counted and logged, one WARN per 10 s
//! with the count ([`handshake`]).
//!
//! Not here: accepting connections (`accept.rs`) and what they speak; the handshake is done
//! by each listener's connection task, bounded by [`HANDSHAKE_TIMEOUT`].

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig,
    SignatureScheme,
};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// The longest a client may take to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The files of one listener's TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsFiles {
    /// The server's certificate chain (PEM, leaf first).
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA (PEM) that clients' certificates must chain to: with it, a client without
    /// such a certificate is refused (mutual TLS). `None`: no client certificate asked.
    pub client_ca: Option<PathBuf>,
    /// With `client_ca`, the name (DNS name or IP address) a client's certificate must be
    /// valid for; others from the same CA are refused.
    pub client_name: Option<String>,
    /// The oldest TLS version a client may speak (default [`TlsVersion::Tls12`]).
    pub min_version: TlsVersion,
}

/// A TLS protocol version, as the minimum a listener accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsVersion {
    /// TLS 1.2 and 1.3 (the default: Envoy speaks at most TLS 1.2 to its upstreams unless
    /// told otherwise).
    #[default]
    Tls12,
    /// TLS 1.3 only.
    Tls13,
}

impl TlsVersion {
    /// The versions a listener with this minimum offers, newest first.
    fn versions(self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        static BOTH: [&rustls::SupportedProtocolVersion; 2] =
            [&rustls::version::TLS13, &rustls::version::TLS12];
        match self {
            Self::Tls12 => &BOTH,
            Self::Tls13 => &BOTH[..1],
        }
    }
}

impl TlsFiles {
    /// TLS with `cert` and `key`, no client certificate asked.
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        Self {
            cert: cert.into(),
            key: key.into(),
            client_ca: None,
            client_name: None,
            min_version: TlsVersion::default(),
        }
    }

    /// Clients must speak at least `version`.
    pub fn min_version(mut self, version: TlsVersion) -> Self {
        self.min_version = version;
        self
    }

    /// Clients must show a certificate from the CA in `ca` (mutual TLS).
    pub fn require_client_cert(mut self, ca: impl Into<PathBuf>) -> Self {
        self.client_ca = Some(ca.into());
        self
    }

    /// Clients' certificates must also be valid for `name` (a DNS name or an IP address).
    pub fn require_client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = Some(name.into());
        self
    }
}

/// TLS that cannot be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("{}: cannot read the {what}: {source}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Which file it is.
        what: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file holds nothing usable.
    #[error("{}: {reason}", file.display())]
    Invalid {
        /// The file.
        file: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// A TLS acceptor for `files`, offering `alpn` (e.g. `h2` for gRPC; none for the RESP
/// front end, which `weir serve --resp` sets up with this same function).
pub fn acceptor(files: &TlsFiles, alpn: &[&[u8]]) -> Result<TlsAcceptor, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = certificates(&files.cert, "certificate chain")?;
    let key_pem = read(&files.key, "private key")?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| TlsError::Invalid {
        file: files.key.clone(),
        reason: format!("no PEM private key ({e})"),
    })?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(files.min_version.versions())
        .map_err(|e| TlsError::Invalid {
            file: files.cert.clone(),
            reason: e.to_string(),
        })?;
    let builder = match &files.client_ca {
        None => {
            if files.client_name.is_some() {
                return Err(TlsError::Invalid {
                    file: files.cert.clone(),
                    reason: "a required client name needs a client CA".to_string(),
                });
            }
            builder.with_no_client_auth()
        }
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates(ca, "client CA")? {
                roots.add(cert).map_err(|e| TlsError::Invalid {
                    file: ca.clone(),
                    reason: format!("not a usable CA certificate: {e}"),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::Invalid {
                    file: ca.clone(),
                    reason: e.to_string(),
                })?;
            match &files.client_name {
                None => builder.with_client_cert_verifier(verifier),
                Some(name) => {
                    let name = ServerName::try_from(name.clone()).map_err(|_| {
                        TlsError::Invalid {
                            file: ca.clone(),
                            reason: format!(
                                "the required client name {name:?} is not a DNS name or an IP address"
                            ),
                        }
                    })?;
                    builder.with_client_cert_verifier(Arc::new(NamedClients {
                        inner: verifier,
                        name,
                    }))
                }
            }
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Invalid {
            file: files.key.clone(),
            reason: format!("the key does not fit the certificate chain: {e}"),
        })?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// A client verifier that also requires the certificate to be valid for one name.
#[derive(Debug)]
pub(crate) struct NamedClients {
    inner: Arc<dyn ClientCertVerifier>,
    name: ServerName<'static>,
}

impl ClientCertVerifier for NamedClients {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        let cert = webpki::EndEntityCert::try_from(end_entity)
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::BadEncoding))?;
        cert.verify_is_valid_for_subject_name(&self.name)
            .map_err(|_| rustls::Error::InvalidCertificate(CertificateError::NotValidForName))?;
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

fn read(file: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(file).map_err(|source| TlsError::Read {
        file: file.to_path_buf(),
        what,
        source,
    })
}

fn certificates(file: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(file, what)?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Invalid {
            file: file.to_path_buf(),
            reason: format!("not PEM certificates ({e})"),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Invalid {
            file: file.to_path_buf(),
            reason: format!("no PEM certificate in the {what}"),
        });
    }
    Ok(certs)
}

/// Logs a WARN at start when the leaf certificate of `files` (the `listener`'s) is expired,
/// not yet valid or expires within 14 days at `now_ns` (`tls_validity.rs`). A file that
/// cannot be read is left to [`acceptor`], which refuses it.
pub fn warn_if_expiring(files: &TlsFiles, listener: &str, now_ns: u64) {
    if let Ok(certs) = certificates(&files.cert, "certificate chain") {
        if let Some(leaf) = certs.first() {
            crate::tls_validity::warn_if_bad(leaf, listener, &files.cert, now_ns);
        }
    }
}

/// Refused handshakes are logged at most once per this span, with the count since the last
/// WARN: a scanner or a client that distrusts the certificate must not flood the log.
const REFUSED_LOG_EVERY_NS: u64 = 10_000_000_000;

/// One listener's TLS: the acceptor, and the log of the handshakes it refused. Every
/// listener of `weir serve` has one, the RESP front end's too (`weir_resp::Settings::tls`).
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
    refused: Arc<Refused>,
}

struct Refused {
    listener: &'static str,
    clock: weir_engine::SharedClock,
    logged_ns: AtomicU64,
    unlogged: AtomicU64,
}

impl Tls {
    /// `acceptor` for `listener` (`HTTP`, `gRPC`, `admin`, `RESP`), its refusals timed by
    /// `clock`.
    pub fn new(
        acceptor: TlsAcceptor,
        listener: &'static str,
        clock: weir_engine::SharedClock,
    ) -> Self {
        Self {
            acceptor,
            refused: Arc::new(Refused {
                listener,
                clock,
                logged_ns: AtomicU64::new(0),
                unlogged: AtomicU64::new(0),
            }),
        }
    }
}

impl Refused {
    /// Counts a refused handshake; a WARN with the count when the last was long enough ago.
    fn note(&self, peer: std::net::SocketAddr, reason: &str) {
        use weir_core::Clock as _;
        let unlogged = self.unlogged.fetch_add(1, Relaxed).saturating_add(1);
        let now = self.clock.now_ns().max(1);
        let last = self.logged_ns.load(Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= REFUSED_LOG_EVERY_NS;
        if due
            && self
                .logged_ns
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            self.unlogged.store(0, Relaxed);
            tracing::warn!(
                listener = self.listener,
                refused = unlogged,
                last_peer = %peer,
                last_reason = reason,
                "TLS handshakes refused (one line per 10 s at most)"
            );
        }
    }
}

/// The TLS stream of `stream`, or `None` when the client does not finish a handshake in
/// time or fails it (no certificate from the CA, a certificate it distrusts, no TLS at
/// all): counted, and a WARN at most once per 10 s with the count.
pub async fn handshake(
    tls: &Tls,
    stream: TcpStream,
    peer: std::net::SocketAddr,
) -> Option<TlsStream<TcpStream>> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream)).await {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(error)) => {
            tls.refused.note(peer, &error.to_string());
            None
        }
        Err(_) => {
            tls.refused.note(peer, "not finished in time");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_file_is_named() {
        let err = acceptor(&TlsFiles::new("/nonexistent/c.pem", "/k.pem"), &[])
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .starts_with("/nonexistent/c.pem: cannot read the certificate chain"),
            "{err}"
        );
        let dir = std::env::temp_dir().join(format!("weir-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "nothing here").unwrap();
        let err = acceptor(&TlsFiles::new(&empty, &empty), &[]).err().unwrap();
        assert!(
            err.to_string()
                .ends_with("no PEM certificate in the certificate chain"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
