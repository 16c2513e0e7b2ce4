//! The ways to a node other than plain TCP, each against a real `redis-server`:
//!
//! - `rediss://` to a server on TLS only (`--port 0 --tls-port`), with a CA, server and
//!   client certificates made at test time (rcgen): decisions and the conformance suite
//!   over TLS, the server's certificate verified (an unknown CA, the system's roots and a
//!   certificate for another name are refused), mutual TLS from the builder and from the
//!   URL, and no password in any failure;
//! - `unix://` and `redis+unix://` to a server on a Unix socket only (`--port 0
//!   --unixsocket`): decisions and the conformance suite, the `db` and `pass` query options
//!   honoured, a wrong password kept out of the message.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use weir_core::{CheckError, Key, Op, Outcome, Rule, Store, StoreError};
use weir_redis::{RedisStore, RedisStoreBuilder, TimeSource};
use weir_testkit::conformance::{self, Suite};
use weir_testkit::servers::{ClientAuth, RedisSocketServer, RedisTlsServer, TlsFiles};
use weir_testkit::T0_NS;

/// A CA, a server certificate for 127.0.0.1 / localhost and a client certificate signed
/// by it, written as PEM files into a directory removed on drop.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(name: &str) -> Self {
        Self::naming(name, &["127.0.0.1", "localhost"])
    }

    /// The server's certificate names `server_names` only.
    fn naming(name: &str, server_names: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!("weir-tls-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name
            .push(DnType::CommonName, format!("weir test CA {name}"));
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        for (who, names, usage) in [
            (
                "server",
                server_names.iter().map(|n| (*n).to_owned()).collect(),
                ExtendedKeyUsagePurpose::ServerAuth,
            ),
            (
                "client",
                vec!["weir-client".to_owned()],
                ExtendedKeyUsagePurpose::ClientAuth,
            ),
        ] {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(names).unwrap();
            params.distinguished_name.push(DnType::CommonName, who);
            params.extended_key_usages = vec![usage];
            let cert = params.signed_by(&key, &ca).unwrap();
            std::fs::write(dir.join(format!("{who}.pem")), cert.pem()).unwrap();
            std::fs::write(dir.join(format!("{who}.key")), key.serialize_pem()).unwrap();
        }
        Self { dir }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    fn server_files(&self) -> TlsFiles {
        TlsFiles {
            cert: self.path("server.pem"),
            key: self.path("server.key"),
            ca: self.path("ca.pem"),
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn builder(url: impl Into<String>) -> RedisStoreBuilder {
    RedisStore::builder(url)
        .time_source(TimeSource::Process)
        .ttl_grace(Duration::from_secs(600))
        .timeout(Duration::from_secs(5))
}

async fn check(store: &RedisStore, key: &str, rule: &Rule, now: u64) -> Result<bool, CheckError> {
    match store
        .apply(
            weir_core::ScopedKey::plain(&Key::new(key).unwrap()),
            rule,
            Op::Check { cost: 1 },
            now,
        )
        .await?
    {
        Outcome::Decision(d) => Ok(d.allowed),
        other => panic!("{other:?}"),
    }
}

/// Two allowed, the third denied, one allowed again a second later: the store decides.
async fn decides(store: &RedisStore, key: &str) {
    let rule = Rule::per_second(2).unwrap();
    assert!(check(store, key, &rule, T0_NS).await.unwrap());
    assert!(check(store, key, &rule, T0_NS).await.unwrap());
    assert!(!check(store, key, &rule, T0_NS).await.unwrap());
    assert!(check(store, key, &rule, T0_NS + 1_000_000_000)
        .await
        .unwrap());
    store.ping().await.unwrap();
}

/// The failure of a first call, which must be the store being unavailable.
async fn refused(store: &RedisStore) -> String {
    let rule = Rule::per_second(2).unwrap();
    match check(store, "refused", &rule, T0_NS).await {
        Err(CheckError::Store(StoreError::Unavailable(msg))) => msg,
        other => panic!("expected the store to be unavailable, got {other:?}"),
    }
}

/// [`refused`] for a store at `url` trusting the CA in `ca`.
async fn refused_trusting(url: &str, ca: &Path) -> String {
    refused(&builder(url).tls_ca(ca).build().unwrap()).await
}

fn url_with(server: &RedisTlsServer, query: &[(&str, &Path)]) -> String {
    let query: Vec<String> = query
        .iter()
        .map(|(name, path)| format!("{name}={}", path.display()))
        .collect();
    format!("{}?{}", server.url(), query.join("&"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_over_tls_decides_and_passes_the_conformance_suite() {
    let pki = Pki::new("decides");
    let redis = RedisTlsServer::start(&pki.server_files(), ClientAuth::Off);
    // The CA named in the URL, as `weir serve --store` gives it.
    let store = builder(url_with(&redis, &[("ca", &pki.path("ca.pem"))]))
        .build()
        .unwrap();
    decides(&store, "tls-url").await;
    // The CA given to the builder; a host name the certificate names.
    let store = builder(format!("rediss://localhost:{}", redis.port()))
        .tls_ca(pki.path("ca.pem"))
        .build()
        .unwrap();
    decides(&store, "tls-builder").await;
    conformance::run(
        &store,
        Suite {
            cases: 100,
            seed: 0x7415,
            prefix: "tls",
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_certificate_is_verified() {
    let pki = Pki::new("verified");
    let other = Pki::new("other");
    let redis = RedisTlsServer::start(&pki.server_files(), ClientAuth::Off);
    let with_password = redis.url().replace("rediss://", "rediss://app:hunter2@");
    // The system's roots do not know the test CA.
    let msg = refused(&builder(with_password.as_str()).build().unwrap()).await;
    assert!(msg.contains("rediss://app:***@127.0.0.1:"), "{msg}");
    assert!(!msg.contains("hunter2"), "{msg}");
    assert!(msg.contains("UnknownIssuer"), "{msg}");
    // Nor does another CA.
    let msg = refused_trusting(&with_password, &other.path("ca.pem")).await;
    assert!(!msg.contains("hunter2"), "{msg}");
    assert!(msg.contains("UnknownIssuer"), "{msg}");
    // A certificate from the trusted CA that names another host.
    let elsewhere = Pki::naming("elsewhere", &["redis.example"]);
    let misnamed = RedisTlsServer::start(&elsewhere.server_files(), ClientAuth::Off);
    let msg = refused_trusting(&misnamed.url(), &elsewhere.path("ca.pem")).await;
    assert!(msg.contains("not valid for name \"127.0.0.1\""), "{msg}");
    // A file that is not a CA certificate is refused when the store is built.
    let err = builder(redis.url())
        .tls_ca(pki.path("server.key"))
        .build()
        .unwrap_err()
        .to_string();
    assert!(err.contains("no PEM certificate in"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_shows_the_client_certificate() {
    let pki = Pki::new("mutual");
    let redis = RedisTlsServer::start(&pki.server_files(), ClientAuth::Required);
    // Without a client certificate the server refuses.
    let msg = refused_trusting(&redis.url(), &pki.path("ca.pem")).await;
    assert!(msg.contains("CertificateRequired"), "{msg}");
    // From the builder.
    let store = builder(redis.url())
        .tls_ca(pki.path("ca.pem"))
        .tls_client_cert(pki.path("client.pem"), pki.path("client.key"))
        .build()
        .unwrap();
    decides(&store, "mtls-builder").await;
    // From the URL, as `weir serve --store` gives them.
    let url = url_with(
        &redis,
        &[
            ("ca", &pki.path("ca.pem")),
            ("cert", &pki.path("client.pem")),
            ("key", &pki.path("client.key")),
        ],
    );
    decides(&builder(url).build().unwrap(), "mtls-url").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_on_a_unix_socket_decides_and_passes_the_conformance_suite() {
    let redis = RedisSocketServer::start();
    let store = builder(redis.url()).build().unwrap();
    decides(&store, "unix").await;
    assert_eq!(redis.raw("DBSIZE").as_deref(), Some(":1\r\n"));
    conformance::run(
        &store,
        Suite {
            cases: 100,
            seed: 0x50c7,
            prefix: "unix",
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_unix_urls_take_a_database_and_a_password() {
    let redis = RedisSocketServer::start_with(&["--requirepass", "s3cret"]);
    let path = redis.path();
    let store = builder(format!("redis+unix://{}?db=3&pass=s3cret", path.display()))
        .build()
        .unwrap();
    decides(&store, "db3").await;
    // Nothing in database 0: the record went to database 3.
    let client = format!("redis+unix://{}?pass=s3cret", path.display());
    let zero = builder(client).build().unwrap();
    let rule = Rule::per_second(2).unwrap();
    assert!(!check(&store, "db3", &rule, T0_NS).await.unwrap());
    assert!(check(&zero, "db3", &rule, T0_NS).await.unwrap());

    let wrong = builder(format!("unix://{}?pass=hunter2", path.display()))
        .build()
        .unwrap();
    match check(&wrong, "k", &rule, T0_NS).await {
        Err(CheckError::Store(StoreError::Unavailable(msg))) => {
            assert!(!msg.contains("hunter2"), "{msg}");
            assert!(
                msg.starts_with(&format!("unix://{}: ", path.display())),
                "{msg}"
            );
        }
        other => panic!("expected the store to be unavailable, got {other:?}"),
    }
}
