//! TLS and mutual TLS on both listeners (issue 15), with a CA and certificates made at test
//! time (rcgen) and real TLS clients: tonic's (rustls) for gRPC `ShouldRateLimit` and the
//! health service, hyper over tokio-rustls for HTTP. A client without a certificate from
//! the CA, or with one from another CA, is refused when mutual TLS is on; a plaintext client
//! gets nothing from a TLS listener.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use common::{bounded, descriptor, envoy_readme_dir, request, settings};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use http_body_util::{BodyExt as _, Empty};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use weir_server::{App, Settings, TlsFiles};

/// A CA, a server certificate for `localhost` / 127.0.0.1 and a client certificate, in a
/// scratch directory; `other` is a second CA with a client of its own.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let dir =
            std::env::temp_dir().join(format!("weir-server-tls-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for ca_name in ["ca", "other"] {
            let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
            ca.distinguished_name
                .push(DnType::CommonName, format!("weir test {ca_name}"));
            ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
            std::fs::write(dir.join(format!("{ca_name}.pem")), ca.pem()).unwrap();
            let people: &[(&str, Vec<String>, ExtendedKeyUsagePurpose)] = if ca_name == "ca" {
                &[
                    (
                        "server",
                        vec!["localhost".to_owned(), "127.0.0.1".to_owned()],
                        ExtendedKeyUsagePurpose::ServerAuth,
                    ),
                    (
                        "client",
                        vec!["envoy".to_owned()],
                        ExtendedKeyUsagePurpose::ClientAuth,
                    ),
                ]
            } else {
                &[(
                    "stranger",
                    vec!["stranger".to_owned()],
                    ExtendedKeyUsagePurpose::ClientAuth,
                )]
            };
            for (who, names, usage) in people {
                let key = KeyPair::generate().unwrap();
                let mut params = CertificateParams::new(names.clone()).unwrap();
                params.distinguished_name.push(DnType::CommonName, *who);
                params.extended_key_usages = vec![usage.clone()];
                let cert = params.signed_by(&key, &ca).unwrap();
                std::fs::write(dir.join(format!("{who}.pem")), cert.pem()).unwrap();
                std::fs::write(dir.join(format!("{who}.key")), key.serialize_pem()).unwrap();
            }
        }
        Pki { dir }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    fn read(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.path(file)).unwrap()
    }

    fn server_files(&self, mutual: bool) -> TlsFiles {
        let files = TlsFiles::new(self.path("server.pem"), self.path("server.key"));
        if mutual {
            files.require_client_cert(self.path("ca.pem"))
        } else {
            files
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A server on loopback listeners with `settings` (TLS on either), stopped when dropped.
struct Server {
    http: SocketAddr,
    grpc: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), weir_server::ServerError>>,
}

impl Server {
    async fn start(settings: Settings) -> Server {
        let app = App::new(settings).await.unwrap();
        let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (http_addr, grpc_addr) = (http.local_addr().unwrap(), grpc.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(weir_server::serve(app, http, grpc, async move {
            let _ = stopped.await;
        }));
        Server {
            http: http_addr,
            grpc: grpc_addr,
            stop: Some(stop),
            task,
        }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        (&mut self.task).await.unwrap().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A gRPC channel over TLS trusting the test CA, showing `identity` (`client`, `stranger`)
/// if given. `Err` when the server refuses it.
async fn tls_channel(
    pki: &Pki,
    grpc: SocketAddr,
    identity: Option<&str>,
) -> Result<Channel, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(pki.read("ca.pem")))
        .domain_name("localhost");
    if let Some(who) = identity {
        tls = tls.identity(Identity::from_pem(
            pki.read(&format!("{who}.pem")),
            pki.read(&format!("{who}.key")),
        ));
    }
    Channel::from_shared(format!("https://{grpc}"))
        .unwrap()
        .tls_config(tls)?
        .connect()
        .await
}

/// One `ShouldRateLimit` over `channel`: `Ok(overall code)`, or `Err` when refused.
async fn ask(channel: Result<Channel, tonic::transport::Error>) -> Result<i32, String> {
    let channel = channel.map_err(|e| e.to_string())?;
    let mut rls = RateLimitServiceClient::new(channel.clone());
    let answer = rls
        .should_rate_limit(request("internal", vec![descriptor(&[("azure", "x")])]))
        .await
        .map_err(|e| e.to_string())?;
    let health = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: "ratelimit".into(),
        })
        .await
        .map_err(|e| e.to_string())?;
    assert_eq!(health.into_inner().status, 1, "SERVING");
    Ok(answer.into_inner().overall_code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_over_tls_answers_and_a_plaintext_client_gets_nothing() {
    bounded(async {
        let pki = Pki::new("grpc");
        let (mut settings, _clock) = settings(Some(&envoy_readme_dir()));
        settings.grpc_tls = Some(pki.server_files(false));
        let server = Server::start(settings).await;
        assert_eq!(
            ask(tls_channel(&pki, server.grpc, None).await).await,
            Ok(Code::Ok as i32)
        );
        let plain = Channel::from_shared(format!("http://{}", server.grpc))
            .unwrap()
            .connect()
            .await;
        assert!(ask(plain).await.is_err(), "plaintext on a TLS listener");
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_mutual_tls_refuses_a_client_without_a_certificate_from_the_ca() {
    bounded(async {
        let pki = Pki::new("grpc-mtls");
        let (mut settings, _clock) = settings(Some(&envoy_readme_dir()));
        settings.grpc_tls = Some(pki.server_files(true));
        let server = Server::start(settings).await;
        assert_eq!(
            ask(tls_channel(&pki, server.grpc, Some("client")).await).await,
            Ok(Code::Ok as i32)
        );
        for who in [None, Some("stranger")] {
            let refused = ask(tls_channel(&pki, server.grpc, who).await).await;
            assert!(refused.is_err(), "{who:?} was let in");
        }
        server.stop().await;
    })
    .await;
}

/// ratelimit's `GRPC_CLIENT_TLS_SAN`: a certificate from the CA is not enough, it must be
/// valid for the required name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_mutual_tls_with_a_required_client_name() {
    bounded(async {
        let pki = Pki::new("grpc-san");
        for (name, allowed) in [("envoy", true), ("someone-else", false)] {
            let (mut settings, _clock) = settings(Some(&envoy_readme_dir()));
            settings.grpc_tls = Some(pki.server_files(true).require_client_name(name));
            let server = Server::start(settings).await;
            let answer = ask(tls_channel(&pki, server.grpc, Some("client")).await).await;
            assert_eq!(answer.is_ok(), allowed, "required {name}: {answer:?}");
            server.stop().await;
        }
    })
    .await;
}

/// `GET path` over TLS with hyper and tokio-rustls, showing `identity` if given: the status
/// and body, or `Err` when refused.
async fn https_get(
    pki: &Pki,
    http: SocketAddr,
    identity: Option<&str>,
    path: &str,
) -> Result<(u16, String), String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pki.read("ca.pem")) {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some(who) => {
            let certs = CertificateDer::pem_slice_iter(&pki.read(&format!("{who}.pem")))
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(&pki.read(&format!("{who}.key"))).unwrap();
            builder.with_client_auth_cert(certs, key).unwrap()
        }
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(http).await.map_err(|e| e.to_string())?;
    let tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header("host", "localhost")
        .body(Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_over_tls_and_mutual_tls() {
    bounded(async {
        let pki = Pki::new("http");
        let (mut settings, _clock) = settings(None);
        settings.http_tls = Some(pki.server_files(false));
        let server = Server::start(settings).await;
        assert_eq!(
            https_get(&pki, server.http, None, "/healthcheck").await,
            Ok((200, "OK".to_string()))
        );
        let plain = weir_server::client::send(
            &server.http.to_string(),
            "GET",
            "/healthz",
            None,
            None,
            std::time::Duration::from_secs(5),
        )
        .await;
        assert!(plain.is_err(), "plaintext on a TLS listener: {plain:?}");
        server.stop().await;

        let (mut settings, _clock) = common::settings(None);
        settings.http_tls = Some(pki.server_files(true));
        let server = Server::start(settings).await;
        assert_eq!(
            https_get(&pki, server.http, Some("client"), "/healthz").await,
            Ok((200, "ok\n".to_string()))
        );
        for who in [None, Some("stranger")] {
            let refused = https_get(&pki, server.http, who, "/healthz").await;
            assert!(refused.is_err(), "{who:?} was let in: {refused:?}");
        }
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_certificate_stops_the_start_naming_the_file() {
    bounded(async {
        let (mut settings, _clock) = settings(None);
        settings.grpc_tls = Some(TlsFiles::new(
            "/nonexistent/cert.pem",
            "/nonexistent/key.pem",
        ));
        let app = App::new(settings).await.unwrap();
        let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let err = weir_server::serve(app, http, grpc, std::future::pending())
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("gRPC TLS: /nonexistent/cert.pem: cannot read the certificate chain"),
            "{err}"
        );
    })
    .await;
}

/// A TLS handshake with the listener at `addr` by a rustls client that speaks only
/// `version`: the negotiated version, or the refusal.
async fn handshake(
    pki: &Pki,
    addr: SocketAddr,
    version: &'static rustls::SupportedProtocolVersion,
) -> Result<rustls::ProtocolVersion, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pki.read("ca.pem")) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[version])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    Ok(tls.get_ref().1.protocol_version().unwrap())
}

/// Issue 28: every listener spoke TLS 1.3 only, so a TLS 1.2 client (Envoy's default
/// maximum towards upstreams) was refused. Both versions are served by default (a TLS
/// 1.2-only client, and `openssl s_client -tls1_2` when installed, complete a handshake
/// with the gRPC listener); `--tls-min-version 1.3` refuses 1.2 again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_1_2_and_1_3_by_default_and_1_3_only_on_request() {
    use rustls::version::{TLS12, TLS13};
    use rustls::ProtocolVersion;
    bounded(async {
        let pki = Pki::new("versions");
        let (mut both, _clock) = settings(Some(&envoy_readme_dir()));
        both.grpc_tls = Some(pki.server_files(false));
        both.http_tls = Some(pki.server_files(false));
        let server = Server::start(both).await;
        for addr in [server.grpc, server.http] {
            assert_eq!(
                handshake(&pki, addr, &TLS12).await,
                Ok(ProtocolVersion::TLSv1_2)
            );
            assert_eq!(
                handshake(&pki, addr, &TLS13).await,
                Ok(ProtocolVersion::TLSv1_3)
            );
        }
        let openssl = std::path::Path::new("/usr/bin/openssl");
        if openssl.exists() {
            let grpc = server.grpc.to_string();
            let ca = pki.path("ca.pem");
            let out = tokio::task::spawn_blocking(move || {
                std::process::Command::new(openssl)
                    .args([
                        "s_client", "-tls1_2", "-brief", "-connect", &grpc, "-CAfile",
                    ])
                    .arg(ca)
                    .stdin(std::process::Stdio::null())
                    .output()
                    .unwrap()
            })
            .await
            .unwrap();
            let text = String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("Protocol version: TLSv1.2"), "{text}");
        } else {
            println!("SKIPPED: openssl s_client: /usr/bin/openssl is not installed");
        }
        server.stop().await;

        let (mut strict, _clock) = settings(Some(&envoy_readme_dir()));
        let only_13 = pki
            .server_files(false)
            .min_version(weir_server::TlsVersion::Tls13);
        strict.grpc_tls = Some(only_13);
        let server = Server::start(strict).await;
        assert!(handshake(&pki, server.grpc, &TLS12).await.is_err());
        assert_eq!(
            handshake(&pki, server.grpc, &TLS13).await,
            Ok(ProtocolVersion::TLSv1_3)
        );
        server.stop().await;
    })
    .await;
}
