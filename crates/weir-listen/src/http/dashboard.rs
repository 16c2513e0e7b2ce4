//! The live dashboard: `GET /dashboard`, mounted beside the admin API and only when an admin
//! token is configured (without one, a plain 404). It reads what the decision path left
//! behind and never takes part in a decision: the rules in force (`Engine::rules`), the
//! per-second history the engine samples from the rules' decision counters
//! (`weir_engine::HistoryView`), the top-denied sketch, readiness (the store and its mode),
//! the config status (the last reload and its error) and a front end's own panels
//! (`Metrics::panels`: under `weir proxy`, each upstream's circuit breaker and the in-flight
//! limit).
//!
//! A browser cannot send a bearer header when it loads a page, so the page is a static
//! shell that holds no data and asks for the admin token; its script keeps the token in
//! `sessionStorage` (this tab only, gone when it closes; never in a URL, so never in an
//! access log or a `Referer`) and polls `GET /dashboard/data` once a second with
//! `Authorization: Bearer <token>`. That endpoint is the admin API's token check in front
//! of the data: `401` without the token or with a wrong one, counted and logged as the
//! admin API's refusals.
//!
//! | path | what | token |
//! | --- | --- | --- |
//! | `GET /dashboard` | the page (`dashboard.html`) | no: holds no data |
//! | `GET /dashboard/dashboard.js`, `/dashboard/dashboard.css` | its script and style | no |
//! | `GET /dashboard/data` | everything the page shows, as JSON | yes |
//!
//! The page, script and style are compiled into the binary (`include_str!`): no build
//! step, no framework, no file to deploy. Every answer forbids caching; the page's
//! Content-Security-Policy allows only its own script, style and data requests (no inline
//! script, no framing), and the script writes server data as text, never as markup. Keys
//! (and their rules) come from clients: the data carries them with control and
//! bidirectional characters escaped ([`shown`]: `\u{202e}`), so none can reverse or hide
//! what the page shows.

use axum::extract::State;
use axum::http::header::{self, HeaderName};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use weir_core::Clock as _;
use weir_engine::HISTORY_SECONDS;

use super::admin::{authorize, rule_view, RuleView};
use crate::app::App;

const PAGE: &str = include_str!("dashboard.html");
const SCRIPT: &str = include_str!("dashboard.js");
const STYLE: &str = include_str!("dashboard.css");

/// The most rules listed (a rule set may hold thousands; the count is sent too).
const MAX_RULES_SHOWN: usize = 500;

/// The most denied keys shown.
const TOP_KEYS: usize = 20;

/// The page's policy: its own script, style and data requests only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

/// The dashboard's routes (mounted only with an admin token).
pub(crate) fn routes(app: App) -> Router<App> {
    let data = Router::new()
        .route("/dashboard/data", get(data))
        .route_layer(middleware::from_fn_with_state(app, authorize));
    Router::new()
        .route(
            "/dashboard",
            get(|| static_file(PAGE, "text/html; charset=utf-8")),
        )
        .route(
            "/dashboard/dashboard.js",
            get(|| static_file(SCRIPT, "text/javascript; charset=utf-8")),
        )
        .route(
            "/dashboard/dashboard.css",
            get(|| static_file(STYLE, "text/css; charset=utf-8")),
        )
        .merge(data)
}

/// The headers every dashboard answer carries: never cached, never sniffed or framed, no
/// `Referer` sent from the page.
fn guarded(content_type: &'static str) -> [(HeaderName, &'static str); 6] {
    [
        (header::CONTENT_TYPE, content_type),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CONTENT_SECURITY_POLICY, CSP),
    ]
}

async fn static_file(body: &'static str, content_type: &'static str) -> Response {
    (guarded(content_type), body).into_response()
}

/// `text` as the page shows it: every control character (C0, DEL, C1) and every invisible
/// formatting one (the bidirectional controls such as U+202E RIGHT-TO-LEFT OVERRIDE, which
/// would reverse what follows on screen; zero-width characters, separators, tags) written
/// as `\u{202e}`, and a backslash doubled so that no key can spell another's escape. Keys
/// come from clients: one must not make itself look like another key, or hide.
pub(crate) fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// Control and invisible formatting characters (Unicode `Cc`, and the `Cf` / `Zl` / `Zp`
/// characters that change or hide what is displayed).
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{ad}'                       // soft hyphen
            | '\u{61c}'                    // Arabic letter mark
            | '\u{180e}'                   // Mongolian vowel separator
            | '\u{200b}'..='\u{200f}'      // zero-width space … right-to-left mark
            | '\u{2028}'..='\u{202e}'      // line / paragraph separators, embeddings, overrides
            | '\u{2060}'..='\u{206f}'      // word joiner, invisible operators, isolates
            | '\u{feff}'                   // zero-width no-break space (BOM)
            | '\u{fff9}'..='\u{fffb}'      // interlinear annotations
            | '\u{e0000}'..='\u{e007f}'    // tags
        )
}

/// `GET /dashboard/data`: the rules in force and their files, the config status, the store
/// and its mode, decisions per second per rule over the last five minutes, the most
/// denied keys (enforced denials; those not enforced, shadow and roll-out, apart), and
/// the front end's own panels (`weir proxy`'s circuit breakers and in-flight limit).
async fn data(State(app): State<App>) -> Response {
    let engine = app.engine();
    let snapshot = engine.rules().snapshot();
    let all = snapshot.rules.rules();
    let rules: Vec<RuleView> = all.iter().take(MAX_RULES_SHOWN).map(rule_view).collect();
    let sketch = engine.top_denied();
    let (mut keys, total) = sketch.top(TOP_KEYS.min(sketch.capacity()));
    let (mut shadow_keys, shadow_total) = engine
        .top_shadow_denied()
        .top(TOP_KEYS.min(sketch.capacity()));
    for key in keys.iter_mut().chain(shadow_keys.iter_mut()) {
        key.key = shown(&key.key);
        key.rule = shown(&key.rule);
    }
    let body = json!({
        "now_unix_ms": engine.limiter().clock().now_ns() / 1_000_000,
        "config": engine.config_status(),
        "global_shadow": engine.global_shadow(),
        "rules": rules,
        "rules_total": all.len(),
        "store": engine.readiness().await,
        "history": engine.decision_history(HISTORY_SECONDS),
        "top_denied": { "total_denials": total, "keys": keys },
        "top_shadow_denied": { "total_denials": shadow_total, "keys": shadow_keys },
        // A front end's own panels, by name (weir proxy: `upstreams`, its circuit
        // breakers, and `in_flight`, its in-flight limit; empty elsewhere).
        "panels": engine.metrics().panels(),
    });
    (guarded("application/json"), Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn control_and_bidi_characters_are_shown_escaped() {
        assert_eq!(shown("api:user=alice"), "api:user=alice");
        assert_eq!(shown("user=\u{202e}nimda"), "user=\\u{202e}nimda");
        assert_eq!(
            shown("a\u{200f}b\u{2066}c\u{2069}"),
            "a\\u{200f}b\\u{2066}c\\u{2069}"
        );
        assert_eq!(
            shown("\0\n\r\t\u{1b}[31m\u{7f}\u{85}\u{9f}"),
            "\\u{0}\\u{a}\\u{d}\\u{9}\\u{1b}[31m\\u{7f}\\u{85}\\u{9f}"
        );
        assert_eq!(
            shown("\u{200b}\u{feff}\u{e0041}"),
            "\\u{200b}\\u{feff}\\u{e0041}"
        );
        // A key cannot spell another's escape: its own backslash is doubled.
        assert_eq!(shown("x\\u{202e}"), "x\\\\u{202e}");
        assert_ne!(shown("x\\u{202e}"), shown("x\u{202e}"));
        // Printable text of any script is kept as it is.
        assert_eq!(
            shown("ユーザー=名前 émoji 🦀 עברית"),
            "ユーザー=名前 émoji 🦀 עברית"
        );
    }
}
