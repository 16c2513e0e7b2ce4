//! The help texts that follow clap's option lists: examples for `weir`, `weir serve`,
//! `weir check-config`, `weir decide`, `weir admin` and `weir simulate`, and the rule-spec and traffic
//! reference of `weir simulate --help`. Text only; the options
//! themselves are documented where they are declared (`main.rs`, `simulate_command.rs`). The tests run
//! every example through the real parser so the help cannot drift from the options.

/// Shown after `weir --help`.
pub(crate) const WEIR: &str = "\
Examples:
  # Serve decisions on 127.0.0.1:8080 (HTTP) and :8081 (Envoy gRPC) with the example rules
  weir serve

  # ... with envoyproxy/ratelimit's config directory, unchanged, on Redis
  weir serve --config /srv/runtime_data/current/config --store redis://127.0.0.1:6379

  # Ask the running server (exit 0 allowed, 2 over the limit)
  weir decide --domain api --descriptor remote_address=10.0.0.1

  # Protect a weak backend on :9000: per-IP limits, crawlers slowed, at most 8 requests inside
  weir proxy --upstream http://127.0.0.1:9000 --max-in-flight 8

  # Validate rules before deploying them
  weir check-config config/example.yaml

  # Operate the running server: who is denied most, lift a lockout (token: WEIR_ADMIN_TOKEN)
  weir admin top-denied
  weir admin unblock --domain api -d login_failures=alice

  # Compare how four algorithms treat the same bursts, and draw it
  weir simulate --rule fixed_window:limit=10,window=1s --rule sliding_log:limit=10,window=1s \\
    --rule token_bucket:capacity=10,rate=10,per=1s --rule gcra:rate=10,per=1s,burst=10 \\
    --pattern burst --burst 30 --every 2s --rate 5/s --duration 10s --svg burst.svg

  # What does 10/s with bursts of 5 do to a steady 15/s?
  weir simulate --rule gcra:rate=10,per=1s,burst=5 --rate 15/s --duration 5s

  # Every algorithm's spec, the traffic options and more examples
  weir simulate --help";

/// Shown after `weir serve --help`.
pub(crate) const SERVE: &str = "\
Endpoints:
  POST /v1/check   {\"domain\", \"descriptors\": [{\"entries\": [{\"key\", \"value\"}]}], \"hits\"}
  POST /json       envoyproxy/ratelimit's JSON endpoint
  POST /v1/acquire {\"domain\", \"entries\", \"holder\", \"ttl_ms\"}: a lease of a concurrency rule
  POST /v1/release {\"domain\", \"entries\", \"holder\"}: give it back
  gRPC             envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit on --grpc,
                   and grpc.health.v1.Health (services \"ratelimit\" and \"\")
  GET  /healthz, /readyz, /healthcheck (200 OK or 500, as ratelimit), /metrics (Prometheus)
  /admin/...       only with WEIR_ADMIN_TOKEN or --admin-token-file (Bearer token), and
  /dashboard       on --http, or on --admin-listen only
  A POST from a browser on another origin (Origin, Sec-Fetch-Site) is refused (403)

envoyproxy/ratelimit's environment:
  REDIS_URL, REDIS_SOCKET_TYPE, REDIS_TYPE, REDIS_AUTH, REDIS_TLS*, BACKEND_TYPE,
  MEMCACHE_HOST_PORT, RUNTIME_ROOT/_SUBDIRECTORY/_APPDIRECTORY, HOST, PORT, GRPC_HOST,
  GRPC_PORT, LOG_LEVEL, LOG_FORMAT, SHADOW_MODE, NEAR_LIMIT_RATIO, CACHE_KEY_PREFIX,
  LIMIT_RESPONSE_HEADERS_ENABLED, LIMIT_*_HEADER, the GRPC_SERVER_TLS settings, and
  CONFIG_TYPE=GRPC_XDS_SOTW with CONFIG_GRPC_XDS_* (rules from an xDS management server:
  nothing listens until its first update) are read when set, after the flags and WEIR_*
  variables; one Weir cannot honour is named in a
  start-up warning (docs/envoy-ratelimit-env.md maps each). --no-ratelimit-env reads none.

Examples:
  # The example rules on the memory store
  weir serve

  # envoyproxy/ratelimit's rules on a Redis Cluster, shared by 4 instances
  weir serve --config rules/ --store redis+cluster://10.0.0.1:7000,10.0.0.2:7000 --instances 4

  # Try a new rule set without enforcing it, logging JSON
  weir serve --config rules/ --shadow --log-format json

  # Redis at high rates: batch decisions (2 ms, up to 64 a call); rules with `mode: leased`
  # decide from slices of their limit claimed ahead (config/README.md, \"Leased mode\")
  weir serve --config rules/ --store redis://10.0.0.5:6379 --redis-batch-wait 2ms \\
    --redis-batch-size 64 --instances 4 --reconcile

  # Keep the memory store's lockouts and blocks across restarts (written every 30s and at
  # shutdown; a corrupt file is reported and ignored). The directory must be writable by
  # Weir's user alone (else refused, unless --state-file-allow-shared-dir)
  install -d -m 0700 /var/lib/weir
  weir serve --config rules/ --state-file /var/lib/weir/state

  # Decisions on every interface; the admin API and the dashboard on loopback only
  weir serve --http 0.0.0.0:8080 --grpc 0.0.0.0:8081 --admin-listen 127.0.0.1:9090 \\
    --admin-token-file /run/secrets/weir-admin

  # The Redis protocol too (CL.THROTTLE, THROTTLE, WEIR.CHECK; MULTI/EXEC pipelines), with a
  # password (AUTH) and TLS; keep it private without them
  weir serve --resp 0.0.0.0:6380 --resp-password-file /etc/weir/resp-password \\
    --resp-tls-cert /etc/weir/tls.pem --resp-tls-key /etc/weir/tls.key

  # In place of envoyproxy/ratelimit, with its environment
  REDIS_SOCKET_TYPE=tcp REDIS_URL=redis:6379 RUNTIME_ROOT=/data RUNTIME_SUBDIRECTORY=ratelimit \\
    weir serve";

/// Shown after `weir proxy --help`.
pub(crate) const PROXY: &str = "\
How a request is decided:
  Each request is described, under its class (the first --class it matches, then the built-in
  `crawler` class of known crawler User-Agents, else `reader`), as [class], [class,
  remote_address], [class, path] and [global=all]. The rule files' domain `proxy` says which
  of those are limited (see config/proxy.yaml, the default rules). A request goes on only if
  every limit that applies allows it; nothing is counted otherwise.

Paths (--path-match):
  normalized (default): the path descriptor is the path as common routers read it, so no
    spelling they send to one handler gets a budget of its own: dot segments and `//`
    resolved, escapes decoded, `;params` cut (Tomcat, Spring: /login;jsessionid=1 is
    /login), no trailing slash (Express, Spring before 6: /login/ is /login), lower case
    (Express, ASP.NET, IIS: /LOGIN is /login). Refused with 400, never forwarded: %2F %5C
    (encoded slashes), a raw backslash, control bytes (%00-%1F, %7F), %25, %3B, a broken or
    non-UTF-8 escape, and `;` after `.`, `..` or an empty segment (/login/..;/login). Rules
    must name paths in that form (/login, not /Login/); other values are refused.
  exact: only dot segments, `//` and unreserved escapes (%6C) are resolved; /LOGIN, /login/
    and /login;a=1 are paths of their own. Only control bytes are refused.
  Either way the upstream gets the path as the client spelt it.

Adaptive in-flight limit (--max-in-flight auto):
  Instead of a number you must guess, the limit is found by measuring the upstream (Envoy's
  gradient controller; docs/adaptive-concurrency.md). First, and every
  --adaptive-min-rtt-interval, the limit drops to --adaptive-min-concurrency for
  --adaptive-min-rtt-requests answers: their latency is the upstream's unloaded latency.
  Then every --adaptive-window the limit moves by how much slower the window's answers were
  (its --adaptive-percentile) than unloaded × --adaptive-tolerance: down when they queue, up
  (by about its square root) when they do not, within --adaptive-min-limit and
  --adaptive-max-limit. A failed answer (502-504) lowers it by a tenth. Requests over the
  limit wait (--in-flight-queue, --in-flight-wait), higher --class-priority first; when the
  line is full the lowest priority is shed first (crawlers before readers). The limit, the
  latencies and the shedding are on /metrics (weir_proxy_in_flight_*,
  weir_proxy_min_rtt_seconds, weir_proxy_sample_rtt_seconds). Try it first with
  `weir simulate --backend knee=8,base=20ms`.

Forwarding headers:
  The upstream gets Forwarded and X-Forwarded-For with this hop appended. X-Forwarded-Proto,
  X-Forwarded-Host and X-Real-IP are passed on only from a --trusted-proxy; from anyone
  else they are replaced by the proxy's own (http, the request's Host, the peer's address),
  and X-Forwarded-Port, X-Forwarded-Prefix, X-Original-URL and X-Rewrite-URL are removed.

Circuit breaker (--breaker, off by default):
  Each upstream has its own. Closed, it counts the calls of the last --breaker-window: once
  there are --breaker-min-calls and --breaker-error-ratio of them failed (a 5xx other than
  501/505, unreachable, timed out; a 4xx never counts) or --breaker-slow-ratio were slower
  than --breaker-slow-call, it opens. Open, the upstream's calls go to --fallback-upstream
  (if its own breaker is closed), else get 503 with Retry-After (the time left), and none
  reaches it, for --breaker-open-for. Then --breaker-probes calls go through (half-open):
  all fine closes it, one failed or slow opens it again. Shown in /metrics
  (weir_upstream_breaker_state: 0 closed, 1 open, 2 half-open; _transitions_total,
  _rejected_total) and on the dashboard. The calls still spend their clients' limits first.

Endpoints on --api (weir serve's HTTP API):
  GET /metrics, /healthz, /readyz; /admin/... with WEIR_ADMIN_TOKEN or --admin-token-file

Examples:
  # Protect a local app on :9000 with the example rules; browse http://127.0.0.1:8000
  weir proxy --upstream http://127.0.0.1:9000

  # A backend that takes 8 requests at a time: queue the rest (up to 5 s), crawlers to a replica
  weir proxy --upstream http://10.0.0.5:8080 --config proxy-rules.yaml --max-in-flight 8 \\
    --in-flight-wait 5s --class-upstream crawler=http://10.0.0.6:8080 --listen 0.0.0.0:8000

  # A backend whose capacity nobody knows: find it, shed crawlers first, degrade the rest
  weir proxy --upstream http://10.0.0.5:8080 --max-in-flight auto --on-limit degrade \\
    --fallback-upstream http://10.0.0.7:8080

  # Behind a load balancer at 10.0.0.0/8; over-limit readers get the cached site instead
  weir proxy --upstream http://127.0.0.1:9000 --trusted-proxy 10.0.0.0/8 \\
    --on-limit degrade --fallback-upstream http://127.0.0.1:9001

  # A backend that sometimes falls over: while it fails, serve the cached site instead
  weir proxy --upstream http://127.0.0.1:9000 --fallback-upstream http://127.0.0.1:9001 \
    --breaker --breaker-open-for 10s";

/// Shown after `weir check-config --help`.
pub(crate) const CHECK_CONFIG: &str = "\
Examples:
  weir check-config config/example.yaml
  weir check-config /srv/runtime_data/current/config
  # What weir serve reads under envoyproxy/ratelimit's variables (RUNTIME_ROOT, …)
  RUNTIME_ROOT=/srv/runtime_data/current RUNTIME_IGNOREDOTFILES=true weir check-config";

/// Shown after `weir decide --help`.
pub(crate) const DECIDE: &str = "\
Examples:
  # One descriptor
  weir decide --domain api --descriptor remote_address=10.0.0.1

  # Two descriptors, 5 units, the raw JSON answer
  weir decide --domain api -d plan=enterprise,user_id=42 -d user_id=42 --hits 5 --json";

/// Shown after `weir admin --help`.
pub(crate) const ADMIN: &str = "\
Verbs (each also takes --server, --admin-token-file, --json and --timeout):
  rules                           the rules in force: algorithm, limit, mode, lockout, on_failure
  inspect | peek | unblock | reset  --domain D -d KEY=VALUE[,KEY=VALUE...]
  block     --domain D -d ... --for DURATION
  penalty | reward  --domain D -d ... [--units N]
  blocked [--limit N]             keys blocked now (memory store; a network store refuses)
  top-denied [--limit N]          enforced denials first, shadow / roll-out ones apart
  reload                          read the rule files now (a bad file keeps the old rules)

Exit status: 0 done, 1 an error (the server's reason is printed), 2 a usage error.

Examples:
  # The token the server was started with, from a file only you can read
  export WEIR_ADMIN_TOKEN_FILE=/etc/weir/admin-token

  # What is in force, and who is denied most
  weir admin rules
  weir admin top-denied --limit 10

  # Why is alice refused? Let her try again now
  weir admin inspect --domain api -d login_failures=alice
  weir admin unblock --domain api -d login_failures=alice

  # Block an abusive IP for an hour, then list every blocked key
  weir admin block --domain api -d remote_address=203.0.113.7 --for 1h
  weir admin blocked --limit 50

  # A request turned out expensive: charge 5 units more; would the next one pass?
  weir admin penalty --domain api -d user_id=42 --units 5
  weir admin peek --domain api -d user_id=42

  # Another server, JSON out (for jq)
  weir admin --server http://10.0.0.5:8080 --json top-denied";

/// The examples closing both `weir simulate -h` and `--help` (a macro so `concat!` can use it).
macro_rules! examples {
    () => {
        "\
Examples:
  # How do fixed window, sliding log, token bucket and GCRA treat the same bursts?
  weir simulate --rule fixed_window:limit=10,window=1s --rule sliding_log:limit=10,window=1s \\
    --rule token_bucket:capacity=10,rate=10,per=1s --rule gcra:rate=10,per=1s,burst=10 \\
    --pattern burst --burst 30 --every 2s --rate 5/s --duration 10s --svg burst.svg

  # Steady traffic 50% over the limit, per 100 ms
  weir simulate --rule gcra:rate=10,per=1s,burst=5 --rate 15/s --duration 3s --interval 100ms

  # Bursts of 10 every 200 ms from 0.9s: around 1s the fixed window lets 20 through
  weir simulate --rule fixed_window:limit=10,window=1s --rule sliding_log:limit=10,window=1s \\
    --burst 10 --offset 900ms --every 200ms --duration 2s

  # Shaping instead of rejecting, for 5 clients, as CSV
  weir simulate --rule leaky_queue:rate=10,per=1s,max_depth=20,max_wait=2s \\
    --burst 100 --every 10s --keys 5 --duration 30s --format csv

  # In-flight limits, not rules: none vs static 8 vs auto before a backend best at 8 in flight
  weir simulate --backend knee=8,base=20ms --svg adaptive.svg

  # Replay recorded traffic (TIME [KEY] per line) from stdin
  printf '0.9 alice\\n0.9 alice\\n1.2 bob\\n' | weir simulate --rule gcra:rate=1,per=1s,burst=1 --input -"
    };
}

/// Shown after `weir simulate -h`.
pub(crate) const SIMULATE: &str = concat!(
    examples!(),
    "\n\nRun `weir simulate --help` for every algorithm's spec and the traffic file format."
);

/// Shown after `weir simulate --help`.
pub(crate) const SIMULATE_LONG: &str = concat!(
    "\
Rule specs (--rule ALGORITHM:PARAM=VALUE,...; durations: 100ns 250us 500ms 1.5s 1m30s 1d):
  fixed_window:limit=10,window=1s
      at most `limit` per window; windows start on the clock (t=0 here), so up to 2x
      the limit can pass around a window boundary
  sliding_log:limit=10,window=1s
      at most `limit` in any window of that length, exactly (a timestamp per request)
  sliding_window:limit=100,window=1m,precision=1s
      the same counted in `precision`-wide buckets: less memory, slightly lenient
  weighted_window:limit=10,window=1s
      estimates the sliding count from two fixed windows (two counters per key)
  token_bucket:capacity=10,rate=10,per=1s[,initial_tokens=5][,warmup=30s][,cold_factor=3]
      bursts of up to `capacity`, refilled at `rate` per `per`; starts full (or at
      `initial_tokens`)
  leaky_bucket:capacity=10,rate=10,per=1s
      a level that drains at `rate` per `per`; denies what would overflow `capacity`
  gcra:rate=10,per=1s,burst=10[,warmup=30s][,cold_factor=3]
      `rate` per `per` on average with bursts of up to `burst`; one timestamp per key
  warmup (gcra, token_bucket): a cold key (new, or full for `warmup`) gets
      `rate / cold_factor` (default 3), ramping to `rate` as it is used: over `warmup`
      at full use; a cold key's burst is about 1 + (burst - 1) / cold_factor
  leaky_queue:rate=10,per=1s,max_depth=20[,max_wait=2s]
      shapes instead of rejecting: delays requests so they leave at `rate`; denies
      beyond `max_depth` waiting or `max_wait` (default: no time bound)

Traffic (the clock is simulated: nothing sleeps; t=0 is 2023-11-15T00:00:00Z):
  --pattern constant --rate 30/s
      evenly spaced requests from t=0
  --pattern burst --burst 50 [--every 5s] [--offset 0s] [--rate 5/s]
      50 requests at the same instant, at --offset and then every --every, over an
      optional background --rate
  --pattern file --input FILE
      one request per line: TIME [KEY]. TIME is seconds from the start (0.9) or a
      duration (900ms); lines need not be sorted; `#` starts a comment; `-` reads stdin;
      lines without a KEY are spread over --keys
  --pattern may be left out: it follows from --input, --burst or --rate.

Output:
  A table on stdout: one row per --interval with allowed/denied for each rule (the
  leaky queue adds ~ the mean delay), then the totals. --format csv gives one line per
  interval and rule, --format json the same as an object; --svg FILE also draws a chart
  into FILE, relative to the current directory (a directory gets weir-simulate.svg
  inside it; --svg alone writes ./weir-simulate.svg); the full path written goes to
  stderr.

",
    examples!()
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::examples;

    #[test]
    fn the_long_help_shows_every_algorithm() {
        for example in examples() {
            assert!(
                SIMULATE_LONG.contains(&example),
                "{example} is not in the help"
            );
        }
        let optional = weir_config::params::ALGORITHMS
            .iter()
            .filter(|a| a.name != "concurrency")
            .flat_map(|a| a.params)
            .filter(|p| !p.required);
        for param in optional {
            let shown = format!("[,{}={}]", param.name, param.example);
            assert!(SIMULATE_LONG.contains(&shown), "{shown} is not in the help");
        }
    }

    /// Every `weir ...` command in an examples text parses (without running it).
    fn assert_examples_parse(examples: &str) {
        use clap::Parser as _;
        let joined = examples.replace("\\\n", " ");
        let mut checked = 0;
        for line in joined.lines().map(str::trim) {
            let command = match line.split_once("| weir ") {
                Some((_, rest)) => rest,
                None => match line.strip_prefix("weir ") {
                    Some(rest) => rest,
                    None => continue,
                },
            };
            let words: Vec<&str> = std::iter::once("weir")
                .chain(command.split_whitespace())
                .collect();
            match crate::Cli::try_parse_from(&words) {
                Ok(_) => {}
                Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {}
                Err(e) => panic!("{line}: {e}"),
            }
            checked += 1;
        }
        assert!(checked >= 2, "no examples found");
    }

    #[test]
    fn the_help_examples_parse() {
        assert_examples_parse(SIMULATE);
        assert_examples_parse(SIMULATE_LONG);
        assert_examples_parse(WEIR);
        assert_examples_parse(SERVE);
        assert_examples_parse(CHECK_CONFIG);
        assert_examples_parse(DECIDE);
        assert_examples_parse(ADMIN);
    }
}
