//! `weir proxy` as a command: its options (each also a `WEIR_*` environment variable) and
//! the glue that turns them into `weir_proxy::ProxySettings` and runs the proxy until
//! SIGTERM or SIGINT. The proxy itself is the `weir-proxy` crate; the decision options
//! (rules, store, admin token, headers, logs) are `weir serve`'s (`engine_args.rs`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Args, ValueEnum};
use weir_proxy::{Class, PathMatch, ProxySettings, Upstream};
use weir_tower::{parse_ip_net, ClientIp, ForwardedHeader, IpNet, OnLimit};

use crate::duration::parse_duration;
use crate::engine_args::{bind, run, shutdown_signal, EngineArgs};
use crate::help;
use crate::in_flight_args::InFlightArgs;
use crate::proxy_breaker::BreakerArgs;

/// What a request over its limit gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnLimitChoice {
    /// 429 Too Many Requests, with Retry-After and RateLimit headers
    Reject,
    /// Wait until the limits allow it (up to --max-wait, --max-queued per key), then forward
    Queue,
    /// Forward it to --fallback-upstream instead
    Degrade,
}

/// How request paths are read for the `path` descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PathMatchChoice {
    /// Read as common routers do: `/LOGIN`, `/login/` and `/login;a=1` are `/login`; ambiguous
    /// spellings (`%2F`, `%00`, `..;`) are refused with 400
    Normalized,
    /// Read as RFC 3986 alone: case, a trailing slash and `;params` make paths of their own
    Exact,
}

/// Options of `weir proxy`.
#[derive(Debug, Args)]
#[command(after_help = help::PROXY)]
pub(crate) struct ProxyArgs {
    /// The backend to protect, e.g. http://127.0.0.1:9000
    #[arg(long, value_name = "URL", env = "WEIR_UPSTREAM")]
    upstream: Upstream,

    /// Where the proxy listens
    #[arg(
        long,
        value_name = "ADDR",
        env = "WEIR_LISTEN",
        default_value = "127.0.0.1:8000"
    )]
    listen: SocketAddr,

    /// Where the proxy's HTTP API listens: /metrics, /healthz, /readyz and (with
    /// WEIR_ADMIN_TOKEN) /admin
    #[arg(
        long,
        value_name = "ADDR",
        env = "WEIR_API",
        default_value = "127.0.0.1:8001"
    )]
    api: SocketAddr,

    /// Also serve /v1/check, /json and the lease endpoints on the API listener, on the
    /// proxy's own counters. Off by default: anyone who reaches them can spend (or, with
    /// hits, exhaust) any client's budget
    #[arg(long, env = "WEIR_API_DECISIONS")]
    api_decisions: bool,

    /// What a request over its limit gets
    #[arg(long, value_enum, value_name = "ACTION", env = "WEIR_ON_LIMIT", default_value_t = OnLimitChoice::Reject)]
    on_limit: OnLimitChoice,

    /// Where degraded requests go (required with --on-limit degrade), e.g. a cache
    #[arg(long, value_name = "URL", env = "WEIR_FALLBACK_UPSTREAM")]
    fallback_upstream: Option<Upstream>,

    /// With --on-limit queue: the longest a request waits for its limits
    #[arg(long, value_name = "DURATION", env = "WEIR_MAX_WAIT", default_value = "2s",
          value_parser = parse_duration)]
    max_wait: Duration,

    /// With --on-limit queue: how many requests of one key may wait at once
    #[arg(long, value_name = "N", env = "WEIR_MAX_QUEUED", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_queued: u64,

    /// The in-flight limit (fixed or adaptive) and the classes' priorities at it.
    #[command(flatten)]
    in_flight: InFlightArgs,

    /// A request class, NAME=HEADER:PATTERN[,PATTERN…] (case-insensitive substrings); the
    /// first matching class wins, then the built-in `crawler` class, else `reader`.
    /// Repeat for more, e.g. --class partner=x-partner-key:acme,globex
    #[arg(long = "class", value_name = "CLASS")]
    classes: Vec<Class>,

    /// Drop the built-in `crawler` class (known crawler User-Agents)
    #[arg(long, env = "WEIR_NO_CRAWLER_CLASS")]
    no_crawler_class: bool,

    /// A class's own upstream, NAME=URL, e.g. --class-upstream crawler=http://10.0.0.9:80
    #[arg(long = "class-upstream", value_name = "NAME=URL")]
    class_upstreams: Vec<String>,

    /// A proxy or load balancer in front of Weir whose X-Forwarded-For / Forwarded is
    /// believed (an address or a network, e.g. 10.0.0.0/8); repeat for more. Without one,
    /// the client is the TCP peer and those headers are ignored. Only a trusted proxy's
    /// X-Forwarded-Proto, X-Forwarded-Host and X-Real-IP reach the upstream; anyone else's
    /// are replaced by the proxy's own (http, the request's Host, the peer's address), and
    /// their X-Forwarded-Port / -Prefix, X-Original-URL and X-Rewrite-URL removed
    #[arg(
        long = "trusted-proxy",
        value_name = "CIDR",
        env = "WEIR_TRUSTED_PROXIES",
        value_delimiter = ',',
        value_parser = parse_ip_net
    )]
    trusted_proxies: Vec<IpNet>,

    /// The one forwarding header your trusted proxies append, and the only one read:
    /// x-forwarded-for (nginx, Envoy, most balancers) or forwarded (RFC 7239). The other
    /// is never believed, so a client cannot slip its own past the balancer
    #[arg(
        long,
        value_name = "HEADER",
        env = "WEIR_FORWARDED_HEADER",
        default_value = "x-forwarded-for"
    )]
    forwarded_header: ForwardedHeader,

    /// How request paths are read for the `path` descriptor (rules' path values must be in
    /// that form, or the rules are refused): normalized (the default) gives /LOGIN,
    /// /login/ and /login;a=1 the budget of /login and refuses ambiguous spellings with 400;
    /// exact keeps them apart (for backends that do too). See "Paths" below
    #[arg(long, value_enum, value_name = "MODE", env = "WEIR_PATH_MATCH",
          default_value_t = PathMatchChoice::Normalized)]
    path_match: PathMatchChoice,

    /// IPv6 clients are limited per network of this prefix (1..=128)
    #[arg(long, value_name = "BITS", env = "WEIR_IPV6_PREFIX", default_value_t = 64,
          value_parser = clap::value_parser!(u8).range(1..=128))]
    ipv6_prefix: u8,

    /// The longest the proxy waits to connect to an upstream and for its response head
    /// (then 504)
    #[arg(long, value_name = "DURATION", env = "WEIR_UPSTREAM_TIMEOUT", default_value = "30s",
          value_parser = parse_duration)]
    upstream_timeout: Duration,

    /// The longest pause between two chunks of a client's request body; past it the
    /// request is refused with 408 (the client's fault, never blamed on the upstream)
    #[arg(long, value_name = "DURATION", env = "WEIR_CLIENT_BODY_TIMEOUT", default_value = "30s",
          value_parser = parse_duration)]
    client_body_timeout: Duration,

    /// The longest pause between two chunks of the upstream's response body, once its head
    /// arrived; past it the client's response is cut and a WARN names the upstream
    #[arg(long, value_name = "DURATION", env = "WEIR_UPSTREAM_BODY_TIMEOUT", default_value = "30s",
          value_parser = parse_duration)]
    upstream_body_timeout: Duration,

    /// The most protocol upgrades (WebSocket tunnels) open at once; past it an upgrade is
    /// answered 503. An upgraded connection leaves --max-connections' count: this is its cap
    #[arg(long, value_name = "N", env = "WEIR_MAX_TUNNELS",
          default_value_t = std::num::NonZeroUsize::new(weir_proxy::DEFAULT_MAX_TUNNELS).unwrap_or(std::num::NonZeroUsize::MIN))]
    max_tunnels: std::num::NonZeroUsize,

    /// The longest a WebSocket (or other upgraded) tunnel may move no byte either way
    /// before the proxy closes it (as nginx's proxy_read_timeout does)
    #[arg(long, value_name = "DURATION", env = "WEIR_TUNNEL_IDLE_TIMEOUT", default_value = "60s",
          value_parser = parse_duration)]
    tunnel_idle_timeout: Duration,

    /// The most connections each listener (the proxy's and --api) keeps open at once; at
    /// the cap a new connection is closed as soon as it is accepted, and the open ones keep
    /// being served (the process needs an open-files limit above twice this: a start-up
    /// WARN says when `ulimit -n` is lower)
    #[arg(long, value_name = "N", env = "WEIR_MAX_CONNECTIONS",
          default_value_t = weir_server::Settings::DEFAULT_MAX_CONNECTIONS)]
    max_connections: std::num::NonZeroUsize,

    #[command(flatten)]
    breaker: BreakerArgs,

    #[command(flatten)]
    engine: EngineArgs,
}

impl ProxyArgs {
    fn settings(&self) -> anyhow::Result<ProxySettings> {
        let mut settings = ProxySettings::new(self.upstream.clone());
        let mut server = self.engine.settings()?;
        if self.engine.config.is_none() {
            server.engine.rules = settings.server.engine.rules.clone();
        }
        settings.server = server.listen;
        if self.api_decisions {
            settings.api_routes = Some(weir_server::decision_routes_on);
        }
        settings.fallback_upstream = self.fallback_upstream.clone();
        let mut classes = self.classes.clone();
        if !self.no_crawler_class {
            classes.push(Class::known_crawlers());
        }
        settings.classes = Arc::from(classes);
        settings.class_upstreams = self.class_upstreams()?;
        let mut client_ip = ClientIp::new()
            .ipv6_prefix(self.ipv6_prefix)?
            .header(self.forwarded_header);
        for net in &self.trusted_proxies {
            client_ip = client_ip.trust(*net);
        }
        settings.client_ip = client_ip;
        settings.path_match = match self.path_match {
            PathMatchChoice::Normalized => PathMatch::Normalized,
            PathMatchChoice::Exact => PathMatch::Exact,
        };
        settings.on_limit = match self.on_limit {
            OnLimitChoice::Reject => OnLimit::Reject,
            OnLimitChoice::Queue => OnLimit::Queue {
                max_wait: self.max_wait,
                max_queued: usize::try_from(self.max_queued).unwrap_or(usize::MAX),
            },
            OnLimitChoice::Degrade => {
                if self.fallback_upstream.is_none() {
                    bail!("--on-limit degrade needs --fallback-upstream URL (where degraded requests go)");
                }
                OnLimit::Degrade
            }
        };
        settings.in_flight = self.in_flight.limit()?;
        settings.class_priorities = self
            .in_flight
            .priorities(settings.class_priorities.clone())?;
        settings.upstream_timeout = self.upstream_timeout;
        settings.client_body_timeout = self.client_body_timeout;
        settings.upstream_body_timeout = self.upstream_body_timeout;
        settings.max_tunnels = self.max_tunnels.get();
        settings.tunnel_idle_timeout = self.tunnel_idle_timeout;
        settings.server.max_connections = self.max_connections;
        settings.listen = Some(self.listen);
        settings.breaker = self.breaker.settings()?;
        Ok(settings)
    }

    fn class_upstreams(&self) -> anyhow::Result<HashMap<String, Upstream>> {
        let mut map = HashMap::new();
        for pair in &self.class_upstreams {
            let (name, url) = pair
                .split_once('=')
                .with_context(|| format!("--class-upstream {pair:?}: write NAME=URL"))?;
            let upstream: Upstream = url
                .parse()
                .with_context(|| format!("--class-upstream {pair:?}"))?;
            if map.insert(name.trim().to_string(), upstream).is_some() {
                bail!("--class-upstream: class {name:?} given twice");
            }
        }
        Ok(map)
    }
}

/// Runs `weir proxy` until a signal stops it.
pub(crate) fn proxy(args: &ProxyArgs) -> anyhow::Result<()> {
    args.engine.init_logs()?;
    let mut settings = args.settings()?;
    settings.server.connection_threads = args.engine.connection_threads()?;
    run(async {
        let listener = bind(args.listen, "proxy").await?;
        let api = bind(args.api, "API").await?;
        weir_proxy::run(settings, listener, api, shutdown_signal())
            .await
            .context("weir proxy")
    })
}
