//! [`Forward`]: the last step of a request through the proxy, after the limits let it go.
//! Picks the upstream (the fallback for a degraded request, the class's own upstream, else
//! the default; with the circuit breakers on, an upstream whose circuit is open sends the
//! call to the fallback or answers `503`: `breaker/`), rewrites only what a proxy must —
//! hop-by-hop headers removed both ways, the forwarding headers rewritten (`forwarded.rs`:
//! an untrusted client's claims replaced, this hop appended) — and streams both bodies
//! over pooled keep-alive connections, driven by the request's own task (see
//! [`crate::pool`]).
//!
//! Whose fault a failure is decides the answer. The upstream's: unreachable or closed is a
//! `502`, no response head within the upstream timeout a `504`, each with a WARN naming it;
//! a response body that then sends nothing for the upstream body timeout is cut (the
//! client's connection closes mid-body: [`UpstreamBody`]), with a WARN too.
//! The client's (its request body, watched by [`ClientBody`]): broken framing is a `400`,
//! a body that stalls past the client body timeout a `408`, logged at DEBUG and never
//! counted against the upstream. The upstream's clock does not run while the request waits
//! on the client, and starts again whenever the client's body moves.
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{HeaderName, HeaderValue, CONNECTION, UPGRADE};
use http::uri::{PathAndQuery, Uri};
use http::{HeaderMap, Request, Response, StatusCode};
use hyper::body::Incoming;
use weir_engine::SharedClock;
use weir_tower::{peer_addr, BoxFuture, ClientIp, Degraded};

use crate::answer::{ProxyBody, UpstreamBody};
use crate::body::{ClientBody, ClientFault, ClientWatch, Outbound, Watched};
use crate::breaker::{divert, BreakerSettings, Breakers};
use crate::classify::{classify_headers, Class};
use crate::forwarded;
use crate::pool::{exchange, ExchangeError, Pool, PooledBody};
use crate::reply::{error, error_and_close};
use crate::tunnel::{self, Tunnels};
use crate::upstream::Upstream;

/// Whether `name` is a header that belongs to one connection, never forwarded (RFC 9110
/// §7.6.1), besides any the `Connection` header names (`HTTP2-Settings` goes with a
/// declined `h2c` upgrade even when a client forgets to name it). One `match` on the name:
/// nothing is built or parsed per request.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "http2-settings"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "upgrade"
    )
}

/// Where requests go.
#[derive(Debug, Clone)]
pub struct Routes {
    /// The default upstream.
    pub upstream: Upstream,
    /// Degraded requests go here (when the rules' answer to a denial is to degrade).
    pub fallback: Option<Upstream>,
    /// A class's own upstream (e.g. crawlers to a cheaper replica).
    pub by_class: HashMap<String, Upstream>,
    /// The classes, to find a request's class.
    pub classes: Arc<[Class]>,
}

/// The upstreams' connection pools, by route.
#[derive(Debug, Clone)]
struct Pools {
    upstream: Arc<Pool>,
    fallback: Option<Arc<Pool>>,
    by_class: HashMap<String, Arc<Pool>>,
    classes: Arc<[Class]>,
}

impl Pools {
    /// One pool per distinct upstream.
    fn new(routes: Routes, connect_timeout: Duration) -> Self {
        let mut all: Vec<Arc<Pool>> = Vec::new();
        let mut pool_of = |upstream: Upstream| {
            if let Some(pool) = all.iter().find(|p| *p.upstream() == upstream) {
                return Arc::clone(pool);
            }
            let pool = Arc::new(Pool::new(upstream, connect_timeout));
            all.push(Arc::clone(&pool));
            pool
        };
        Self {
            upstream: pool_of(routes.upstream),
            fallback: routes.fallback.map(&mut pool_of),
            by_class: routes
                .by_class
                .into_iter()
                .map(|(class, upstream)| (class, pool_of(upstream)))
                .collect(),
            classes: routes.classes,
        }
    }
}

/// The forwarding service. Cheap to clone: one shared `Arc` (the layer clones the service
/// for every request, so one counter moves, not one per field).
#[derive(Debug, Clone)]
pub struct Forward {
    inner: Arc<Inner>,
}

/// What every clone of a [`Forward`] shares.
#[derive(Debug, Clone)]
struct Inner {
    pools: Pools,
    timeout: Duration,
    client_body_timeout: Duration,
    upstream_body_timeout: Duration,
    trust: ClientIp,
    /// Upgraded connections (WebSocket): their bound, idle timeout and shutdown.
    tunnels: Arc<Tunnels>,
    /// One circuit breaker per upstream (none unless turned on).
    breakers: Arc<Breakers>,
}

/// The body timeouts when none is set: 30 s each.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The most tunnels open at once when none is set.
pub const DEFAULT_MAX_TUNNELS: usize = 1024;

/// How long a tunnel may move no byte either way when none is set (nginx's
/// `proxy_read_timeout`, which bounds its WebSocket tunnels, is 60 s too).
pub const DEFAULT_TUNNEL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

impl Forward {
    /// Forwards by `routes`, waiting at most `timeout` for an upstream's response head.
    /// `trust` says which peers are trusted proxies: only theirs `X-Forwarded-Proto`,
    /// `X-Forwarded-Host` and `X-Real-IP` are passed on; anyone else's are replaced by the
    /// proxy's own (its scheme, the request's `Host`, the peer's address), and their
    /// `X-Forwarded-Port` / `-Prefix`, `X-Original-URL` and `X-Rewrite-URL` removed.
    pub fn new(routes: Routes, timeout: Duration, trust: ClientIp) -> Self {
        Self {
            inner: Arc::new(Inner {
                pools: Pools::new(routes, timeout),
                timeout,
                client_body_timeout: BODY_TIMEOUT,
                upstream_body_timeout: BODY_TIMEOUT,
                trust,
                tunnels: Arc::new(Tunnels::new(
                    DEFAULT_MAX_TUNNELS,
                    DEFAULT_TUNNEL_IDLE_TIMEOUT,
                )),
                breakers: Arc::default(),
            }),
        }
    }

    /// Protocol upgrades (WebSocket): at most `max` tunnels open at once (past that an
    /// upgrade is a `503`), each closed once it has moved no byte either way for `idle`
    /// (1024 and 60 s unless set). Call before serving: tunnels already open keep the
    /// bounds they opened under.
    pub fn tunnels(mut self, max: usize, idle: Duration) -> Self {
        Arc::make_mut(&mut self.inner).tunnels = Arc::new(Tunnels::new(max, idle));
        self
    }

    /// A circuit breaker for each upstream (the default, the fallback, each class's own),
    /// timed on `clock`: while an upstream's is open its calls go to the fallback, or are
    /// answered `503` with `Retry-After` (off unless set). Call before serving.
    pub fn breakers(mut self, settings: BreakerSettings, clock: &SharedClock) -> Self {
        let pools = &self.inner.pools;
        let upstreams = std::iter::once(&pools.upstream)
            .chain(&pools.fallback)
            .chain(pools.by_class.values())
            .map(|pool| pool.upstream());
        let breakers = Arc::new(Breakers::new(upstreams, settings, clock));
        Arc::make_mut(&mut self.inner).breakers = breakers;
        self
    }

    /// The breakers, for the metrics and the dashboard.
    pub(crate) fn upstream_breakers(&self) -> Arc<Breakers> {
        Arc::clone(&self.inner.breakers)
    }

    /// Closes every open tunnel, and any opened later: what the proxy does once it stops
    /// serving (a tunnel is not a request, so the shutdown grace does not wait for it).
    pub fn close_tunnels(&self) {
        self.inner.tunnels.close_all();
    }

    /// The longest the client's request body may send nothing (then `408`; 30 s unless
    /// set).
    pub fn client_body_timeout(mut self, idle: Duration) -> Self {
        Arc::make_mut(&mut self.inner).client_body_timeout = idle;
        self
    }

    /// The longest an upstream's response body may send nothing once its head has come
    /// (then the client's response is cut; 30 s unless set).
    pub fn upstream_body_timeout(mut self, idle: Duration) -> Self {
        Arc::make_mut(&mut self.inner).upstream_body_timeout = idle;
        self
    }
}

impl Inner {
    fn pool_for(&self, request: &Request<Incoming>) -> &Arc<Pool> {
        let pools = &self.pools;
        if let Some(fallback) = &pools.fallback {
            if request.extensions().get::<Degraded>().is_some() {
                return fallback;
            }
        }
        if !pools.by_class.is_empty() {
            let class = classify_headers(&pools.classes, request.headers());
            if let Some(pool) = pools.by_class.get(class) {
                return pool;
            }
        }
        &pools.upstream
    }
}

/// The request as the listener read it (its body streaming), the answer in a
/// [`ProxyBody`]: neither boxed.
impl tower::Service<Request<Incoming>> for Forward {
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<ProxyBody>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Incoming>) -> Self::Future {
        let this = Arc::clone(&self.inner);
        Box::pin(async move {
            let upgrade = tunnel::upgrade_of(&request)
                .map(|protocol| (protocol, hyper::upgrade::on(&mut request)));
            let chosen = this.pool_for(&request);
            let (pool, permit) = match divert(&this.breakers, chosen, this.pools.fallback.as_ref())
            {
                Ok(way) => way,
                Err(refusal) => return Ok(refusal.answer()),
            };
            let (timeout, client_body_timeout, upstream_body_timeout) = (
                this.timeout,
                this.client_body_timeout,
                this.upstream_body_timeout,
            );
            let peer = peer_addr(request.extensions()).map(|a| a.ip());
            let (mut parts, body) = request.into_parts();
            if let Err(e) = origin_form(&mut parts.uri) {
                return Ok(error(
                    StatusCode::BAD_REQUEST,
                    &format!("bad request target: {e}"),
                ));
            }
            // HTTP/1.1 towards the upstream, whatever the client spoke.
            parts.version = http::Version::HTTP_11;
            strip_hop_by_hop(&mut parts.headers);
            // Before a missing Host is filled in: `X-Forwarded-Host` is the client's.
            forwarded::rewrite(&mut parts.headers, peer, &this.trust);
            if !parts.headers.contains_key(http::header::HOST) {
                // HTTP/1.0 without one: the upstream's own name.
                if let Ok(host) = HeaderValue::from_str(pool.upstream().authority().as_str()) {
                    parts.headers.insert(http::header::HOST, host);
                }
            }
            // A request without a body has nothing to watch: it goes without one.
            let (body, watch) = if hyper::body::Body::is_end_stream(&body) {
                (Outbound::Empty, None)
            } else {
                let watch = Arc::new(ClientWatch::default());
                let body = ClientBody::new(body, client_body_timeout, Arc::clone(&watch));
                (Outbound::Client(body), Some(watch))
            };
            if let Some((protocol, _)) = &upgrade {
                tunnel::keep_upgrade(&mut parts.headers, protocol.clone());
            }
            let outbound = Request::from_parts(parts, body);
            if let Some((_, client)) = upgrade {
                // An upgrade's end says nothing the breaker counts: its permit is abandoned.
                return Ok(this.tunnel(pool, outbound, client, peer).await);
            }
            let upstream = pool.upstream();
            let sent = send(pool, outbound, timeout, watch.as_deref()).await;
            // Whose fault a failed exchange is (a timeout is the upstream's: see `send`).
            let fault = match &sent {
                Some(Err(_)) => watch.as_ref().and_then(|w| w.fault()),
                _ => None,
            };
            if let Some(permit) = permit {
                match (&sent, &fault) {
                    (Some(Ok(response)), _) => permit.finish(upstream_error(response.status())),
                    // The client's fault says nothing of the upstream: abandoned.
                    (_, Some(_)) => drop(permit),
                    // Unreachable, closed before answering, or no answer in time.
                    (_, None) => permit.finish(true),
                }
            }
            match sent {
                Some(Ok(response)) => {
                    let (mut parts, incoming) = response.into_parts();
                    strip_hop_by_hop(&mut parts.headers);
                    let body = UpstreamBody::new(incoming, upstream_body_timeout, upstream.clone());
                    Ok(Response::from_parts(parts, ProxyBody::upstream(body)))
                }
                Some(Err(e)) => Ok(match fault {
                    Some(fault) => client_fault(&fault, peer),
                    None => upstream_failed(upstream, &e),
                }),
                None => Ok(upstream_timed_out(upstream, timeout)),
            }
        })
    }
}

impl Inner {
    /// An upgrade request's way (`tunnel.rs`): a tunnel slot, the request on a connection
    /// of its own, and on `101` the client's and the upstream's sockets joined; any other
    /// answer is passed on as it is.
    async fn tunnel(
        &self,
        pool: &Arc<Pool>,
        outbound: Request<Outbound>,
        client: hyper::upgrade::OnUpgrade,
        peer: Option<IpAddr>,
    ) -> Response<ProxyBody> {
        let upstream = pool.upstream();
        let Some(slot) = self.tunnels.slot() else {
            tracing::warn!(%upstream, "upgrade refused: every tunnel slot is taken");
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many open tunnels (the proxy's max_tunnels); try again later",
            );
        };
        let mut response =
            match tokio::time::timeout(self.timeout, pool.open_upgrade(outbound)).await {
                Ok(Ok(response)) => response,
                Ok(Err(e)) => return upstream_failed(upstream, &e),
                Err(_) => return upstream_timed_out(upstream, self.timeout),
            };
        if response.status() != StatusCode::SWITCHING_PROTOCOLS {
            let (mut parts, incoming) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            let body = Watched::new(incoming, self.upstream_body_timeout, upstream.clone());
            return Response::from_parts(parts, ProxyBody::direct(body));
        }
        let upstream_side = hyper::upgrade::on(&mut response);
        let (mut parts, _) = response.into_parts();
        let protocol = parts.headers.get(UPGRADE).cloned();
        strip_hop_by_hop(&mut parts.headers);
        if let Some(protocol) = protocol {
            tunnel::keep_upgrade(&mut parts.headers, protocol);
        }
        self.tunnels
            .open(client, upstream_side, slot, (peer, upstream.clone()));
        Response::from_parts(parts, ProxyBody::empty())
    }
}

/// Whether an upstream's answer counts as a failure for its circuit breaker: a `5xx` that
/// says the server is failing (`500`, `502`, `503`, `504`, …), not one about the request
/// itself (`501 Not Implemented`, `505 HTTP Version Not Supported`). `4xx` are the
/// client's.
fn upstream_error(status: StatusCode) -> bool {
    status.is_server_error()
        && status != StatusCode::NOT_IMPLEMENTED
        && status != StatusCode::HTTP_VERSION_NOT_SUPPORTED
}

/// `504`: no response head within `timeout`.
fn upstream_timed_out(upstream: &Upstream, timeout: Duration) -> Response<ProxyBody> {
    tracing::warn!(%upstream, ?timeout, "upstream timed out");
    error(
        StatusCode::GATEWAY_TIMEOUT,
        &format!(
            "upstream {upstream} did not answer within {} ms",
            timeout.as_millis()
        ),
    )
}

/// Sends `outbound` and waits for the response head; `None` when the upstream took longer
/// than `timeout`. That clock runs from the request's last progress (its body moved), and
/// not while the request waits on the client: the client body's own timer runs then, and
/// when it fires the request fails as the client's fault. A request without a body (most)
/// has a plain deadline, checked by the exchange on its connection's one timer; one with a
/// body has a timer of its own, started again whenever the body moves.
async fn send(
    pool: &Arc<Pool>,
    outbound: Request<Outbound>,
    timeout: Duration,
    watch: Option<&ClientWatch>,
) -> Option<Result<Response<PooledBody>, ExchangeError>> {
    let Some(watch) = watch else {
        return match exchange(pool, outbound, Some(pool.due_in(timeout))).await {
            Err(ExchangeError::TimedOut) => None,
            answer => Some(answer),
        };
    };
    let mut sent = std::pin::pin!(exchange(pool, outbound, None));
    loop {
        tokio::select! {
            answer = &mut sent => return Some(answer),
            () = watch.progressed() => {}
            () = tokio::time::sleep(timeout) => {
                if !watch.waiting_on_client() {
                    return None;
                }
            }
        }
    }
}

/// `502`: the upstream could not be reached, or closed before its response head.
fn upstream_failed(upstream: &Upstream, e: &ExchangeError) -> Response<ProxyBody> {
    tracing::warn!(%upstream, error = %e, "upstream request failed");
    let what = if e.is_connect() {
        format!("upstream {upstream} is unreachable")
    } else {
        format!("upstream {upstream} failed: the connection closed before a response")
    };
    error(StatusCode::BAD_GATEWAY, &what)
}

/// The answer to a client whose request body failed: `400` for a body that cannot be read
/// (a client that went away never sees it), `408` for one that stalled; the connection is
/// closed after it. DEBUG only: a client can cause as many as it likes.
fn client_fault(fault: &ClientFault, peer: Option<IpAddr>) -> Response<ProxyBody> {
    match fault {
        ClientFault::Malformed(why) => {
            tracing::debug!(?peer, error = %why, "the client's request body failed: 400");
            error_and_close(StatusCode::BAD_REQUEST, &format!("bad request body: {why}"))
        }
        ClientFault::Stalled(idle) => {
            tracing::debug!(
                ?peer,
                ?idle,
                "the client's request body failed: stalled, 408"
            );
            error_and_close(
                StatusCode::REQUEST_TIMEOUT,
                &format!(
                    "the request body stalled: nothing for {} ms",
                    idle.as_millis()
                ),
            )
        }
    }
}

/// The request target as an origin server reads it (`/path?query`): an absolute-form
/// target (`http://host/path`) loses its scheme and authority; an origin-form one, the
/// usual, is left as it is.
fn origin_form(uri: &mut Uri) -> Result<(), http::Error> {
    if uri.scheme().is_none() && uri.authority().is_none() {
        return Ok(());
    }
    let path = uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    *uri = Uri::builder().path_and_query(path).build()?;
    Ok(())
}

/// Removes hop-by-hop headers, and those the `Connection` header lists, except `Host`: a
/// client listing `Connection: host` must not make the upstream see the proxy's own
/// address for the request's host.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages have none: one pass over their few names, no hashing.
    if !headers.keys().any(is_hop_by_hop) {
        return;
    }
    let mut gone: Vec<HeaderName> = headers
        .keys()
        .filter(|n| is_hop_by_hop(n))
        .cloned()
        .collect();
    if headers.contains_key(CONNECTION) {
        gone.extend(
            headers
                .get_all(CONNECTION)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .filter_map(|name| HeaderName::try_from(name.trim()).ok())
                .filter(|name| name != http::header::HOST),
        );
    }
    for name in gone {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forwarded::rewrite;
    use weir_tower::ClientIp;

    #[test]
    fn hop_by_hop_headers_are_removed_and_forwarding_appended() {
        let mut h = HeaderMap::new();
        h.insert(
            CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret-hop"),
        );
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-secret-hop", HeaderValue::from_static("1"));
        h.insert("upgrade", HeaderValue::from_static("h2c"));
        h.insert("http2-settings", HeaderValue::from_static("AAMAAABk"));
        h.insert("x-forwarded-for", HeaderValue::from_static("198.51.100.1"));
        h.insert("x-keep", HeaderValue::from_static("yes"));
        strip_hop_by_hop(&mut h);
        rewrite(&mut h, Some("127.0.0.1".parse().unwrap()), &ClientIp::new());
        assert!(h.get(CONNECTION).is_none() && h.get("keep-alive").is_none());
        assert!(h.get("x-secret-hop").is_none() && h.get("upgrade").is_none());
        assert!(h.get("http2-settings").is_none());
        assert_eq!(h["x-keep"], "yes");
        assert_eq!(h["x-forwarded-for"], "198.51.100.1, 127.0.0.1");
        assert_eq!(h["forwarded"], "for=127.0.0.1;proto=http");
        assert_eq!(h["x-forwarded-proto"], "http");
        let mut v6 = HeaderMap::new();
        rewrite(
            &mut v6,
            Some("2001:db8::1".parse().unwrap()),
            &ClientIp::new(),
        );
        assert_eq!(v6["forwarded"], "for=\"[2001:db8::1]\";proto=http");
        assert_eq!(v6["x-forwarded-for"], "2001:db8::1");
    }

    #[test]
    fn targets_go_upstream_in_origin_form() {
        for (target, sent) in [
            ("/a?b=1", "/a?b=1"),
            ("http://example.com/a?b=1", "/a?b=1"),
            ("http://example.com", "/"),
            ("*", "*"),
        ] {
            let mut uri: Uri = target.parse().unwrap();
            origin_form(&mut uri).unwrap();
            assert_eq!(uri, sent, "{target}");
        }
    }
}
