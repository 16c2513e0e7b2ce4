//! Everything `weir proxy` can be told. The decision side (the engine's rules, store, clock,
//! reload) and the listeners' (admin token, headers, limits, timers) are what every Weir
//! program's listeners share ([`Settings`], `weir-listen`); the rest is the proxy's: where
//! to listen, where to forward, who is a crawler, whom to trust, and what to do at the
//! limit.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use weir_listen::Settings;
use weir_tower::{ClientIp, InFlightLimit, OnLimit, PathMatch};

use crate::breaker::BreakerSettings;
use crate::classify::Class;
use crate::upstream::Upstream;

/// The priority at the in-flight limit of a class with none of its own (`reader` too).
pub const DEFAULT_PRIORITY: u8 = 1;

/// The built-in `crawler` class's priority unless set: below every other class, so
/// crawlers are shed first when the backend is full.
pub const CRAWLER_PRIORITY: u8 = 0;

/// Settings of one proxy.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProxySettings {
    /// Rules, store, admin token, headers, clock, reload, the listeners' limits: as for
    /// `weir serve`. The rules must define the `proxy` domain.
    pub server: Settings,
    /// Routes the API listener serves beside the operations and admin API, over the
    /// proxy's engine: `weir proxy --api-decisions` gives `weir serve`'s decision endpoints
    /// here (`weir_server::decision_routes_on`), on the proxy's own counters. None by
    /// default: on the API listener they would let anyone who reaches it spend clients'
    /// budgets.
    pub api_routes: Option<fn(weir_listen::App) -> axum::Router>,
    /// The default upstream.
    pub upstream: Upstream,
    /// Where degraded requests go; `None` turns `OnLimit::Degrade` into a rejection.
    pub fallback_upstream: Option<Upstream>,
    /// Request classes, first match wins (default: the built-in `crawler` class).
    pub classes: Arc<[Class]>,
    /// A class's own upstream.
    pub class_upstreams: HashMap<String, Upstream>,
    /// How the client address is found (trusted proxies, IPv6 grouping), and whose
    /// forwarding claims (`X-Forwarded-Proto`, `-Host`, `-Port`, `-Prefix`, `X-Real-IP`,
    /// `X-Original-URL`, `X-Rewrite-URL`) are passed on.
    pub client_ip: ClientIp,
    /// How request paths are read for the `path` descriptor, and which spellings are
    /// refused (`400`): [`PathMatch::Normalized`] by default.
    pub path_match: PathMatch,
    /// What a denial does: reject (default), queue, or degrade.
    pub on_limit: OnLimit,
    /// The backend's concurrency, if bounded: fixed, or adaptive
    /// ([`InFlightLimit::adaptive`], `--max-in-flight auto`).
    pub in_flight: Option<InFlightLimit>,
    /// Each class's priority at the in-flight limit (higher goes first, and a full line
    /// sheds its lowest); a class not listed has [`DEFAULT_PRIORITY`]. By default the
    /// built-in `crawler` class is [`CRAWLER_PRIORITY`], below everyone else.
    pub class_priorities: HashMap<String, u8>,
    /// The longest the proxy waits to connect and for a response head (default 30 s),
    /// counted from the request's last progress and never while it waits on the client.
    pub upstream_timeout: Duration,
    /// The longest a client's request body may send nothing before the request is
    /// answered `408` (default 30 s).
    pub client_body_timeout: Duration,
    /// The longest an upstream's response body may send nothing, once its head has come,
    /// before the client's response is cut and the upstream named in a WARN (default
    /// 30 s).
    pub upstream_body_timeout: Duration,
    /// The most protocol upgrades (WebSocket tunnels) open at once; past it an upgrade is
    /// a `503` (default 1024; 0 is taken as 1). A tunnel leaves the listener's connection cap once
    /// upgraded: this is its cap.
    pub max_tunnels: usize,
    /// The longest a tunnel may move no byte either way before it is closed (default
    /// 60 s, as nginx's `proxy_read_timeout`).
    pub tunnel_idle_timeout: Duration,
    /// How long shutdown waits for in-flight requests (default 30 s).
    pub shutdown_grace: Duration,
    /// For logs only: the address the proxy listens on.
    pub listen: Option<SocketAddr>,
    /// A circuit breaker per upstream, and its knobs (default: off; see
    /// `docs/circuit-breaking.md` for why).
    pub breaker: Option<BreakerSettings>,
}

impl ProxySettings {
    /// Defaults around `upstream`: the example proxy rules (`config/proxy.yaml`), the
    /// memory store, the `crawler` class, no trusted proxies, normalized paths, reject at
    /// the limit.
    pub fn new(upstream: Upstream) -> Self {
        let mut server = Settings::default();
        server.engine.rules = weir_engine::RuleSource::Inline {
            name: "config/proxy.yaml",
            yaml: crate::EXAMPLE_RULES,
        };
        Self {
            server,
            // The API listener serves metrics, health and admin; the decision endpoints on
            // the proxy's own counters only when asked (`weir proxy --api-decisions`).
            api_routes: None,
            upstream,
            fallback_upstream: None,
            classes: Arc::from(vec![Class::known_crawlers()]),
            class_upstreams: HashMap::new(),
            client_ip: ClientIp::new(),
            path_match: PathMatch::default(),
            on_limit: OnLimit::Reject,
            in_flight: None,
            class_priorities: HashMap::from([("crawler".to_string(), CRAWLER_PRIORITY)]),
            upstream_timeout: Duration::from_secs(30),
            client_body_timeout: Duration::from_secs(30),
            upstream_body_timeout: Duration::from_secs(30),
            max_tunnels: crate::DEFAULT_MAX_TUNNELS,
            tunnel_idle_timeout: crate::DEFAULT_TUNNEL_IDLE_TIMEOUT,
            shutdown_grace: Duration::from_secs(30),
            listen: None,
            breaker: None,
        }
    }
}
