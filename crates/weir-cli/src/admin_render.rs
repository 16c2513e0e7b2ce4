//! `weir admin`'s readable output: one function per answer of the admin API, from its JSON
//! to lines of text (`admin.rs` sends the calls; `--json` prints the answer untouched
//! instead). Pure: no I/O. A field the server did not send is shown as `?`, never guessed.

use serde_json::Value;

use crate::duration::format_duration;

fn ms(v: &Value) -> String {
    v.as_u64().map_or_else(
        || "?".to_string(),
        |ms| format_duration(ms.saturating_mul(1_000_000)),
    )
}

/// A time left, rounded up to the second past one second (a block of 3599.998 s reads
/// "3600s"; one of 400 ms "400ms").
fn left(v: &Value) -> String {
    match v.as_u64() {
        Some(ms) if ms > 1000 => format_duration(ms.div_ceil(1000).saturating_mul(1_000_000_000)),
        _ => self::ms(v),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "?".to_string(),
        other => other.to_string(),
    }
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

/// `LocalFallback` (the admin API's spelling) as the rule files spell it: `local_fallback`.
fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `GET /admin/rules`: the config status, then one line per rule.
pub(crate) fn rules(answer: &Value) -> String {
    let config = &answer["config"];
    let mut out = format!(
        "{}: generation {}, {} rules{}\n",
        text(&config["source"]),
        text(&config["generation"]),
        text(&config["rules"]),
        if config["last_ok"] == false {
            format!(
                "; LAST RELOAD FAILED, these rules stay in force: {}",
                text(&config["last_error"])
            )
        } else {
            String::new()
        }
    );
    if answer["global_shadow"] == true {
        out.push_str("global shadow mode: no denial is enforced\n");
    }
    let rules = list(&answer["rules"]);
    let width = rules
        .iter()
        .filter_map(|r| r["id"].as_str())
        .map(str::len)
        .max()
        .unwrap_or(0)
        .min(60);
    for r in rules {
        let mut line = format!("  {:<width$}  {}", text(&r["id"]), text(&r["algorithm"]));
        if let Some(limit) = r["limit"].as_u64() {
            line.push_str(&format!(" {limit}"));
            if r["window_ms"].as_u64().is_some_and(|w| w > 0) {
                line.push_str(&format!(" per {}", ms(&r["window_ms"])));
            }
        }
        if let Some(mode) = r["mode"].as_str() {
            line.push_str(&format!(", {mode}"));
        }
        let lockout = &r["lockout"];
        if lockout.is_object() {
            line.push_str(&format!(", lockout {}", ms(&lockout["duration_ms"])));
            if lockout["max_ms"].as_u64() > lockout["duration_ms"].as_u64() {
                line.push_str(&format!(" escalating to {}", ms(&lockout["max_ms"])));
            }
        }
        if let Some(policy) = r["on_failure"].as_str() {
            line.push_str(&format!(", on failure {}", snake(policy)));
        }
        if r["warmup"].is_object() {
            line.push_str(&format!(
                ", warming up over {} from 1/{}",
                ms(&r["warmup"]["period_ms"]),
                text(&r["warmup"]["cold_factor"])
            ));
        }
        if r["shadow"] == true {
            line.push_str(", shadow");
        } else if r["enforce_percent"].as_u64().is_some_and(|p| p < 100) {
            line.push_str(&format!(
                ", enforced for {}% of keys",
                text(&r["enforce_percent"])
            ));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `POST /admin/keys/inspect`.
pub(crate) fn inspect(a: &Value) -> String {
    let mut out = format!(
        "{} under {}: {} of {} used, {} left",
        text(&a["key"]),
        text(&a["rule"]),
        text(&a["used"]),
        text(&a["limit"]),
        text(&a["remaining"]),
    );
    if a["blocked_for_ms"].as_u64().is_some_and(|b| b > 0) {
        out.push_str(&format!(", BLOCKED for {}", ms(&a["blocked_for_ms"])));
    }
    if a["strikes"].as_u64().is_some_and(|s| s > 0) {
        out.push_str(&format!(", {} lockout strike(s)", text(&a["strikes"])));
    }
    out.push_str(&format!(", fresh again in {}\n", ms(&a["reset_after_ms"])));
    out
}

/// A decision: `peek`, `penalty`, `reward`.
pub(crate) fn decision(a: &Value) -> String {
    let mut out = String::new();
    if let Some(n) = a["penalized"].as_u64() {
        out.push_str(&format!("added {n} unit(s) of usage\n"));
    }
    if let Some(n) = a["rewarded"].as_u64() {
        out.push_str(&format!("gave {n} unit(s) of usage back\n"));
    }
    let verdict = if a["allowed"] == true {
        "the next request would pass".to_string()
    } else {
        format!(
            "the next request would be DENIED, retry in {}",
            ms(&a["retry_after_ms"])
        )
    };
    out.push_str(&format!(
        "{} under {}: {verdict}; {} of {} left, fresh again in {}\n",
        text(&a["key"]),
        text(&a["rule"]),
        text(&a["remaining"]),
        text(&a["limit"]),
        ms(&a["reset_after_ms"]),
    ));
    out
}

/// `POST /admin/keys/block`.
pub(crate) fn blocked_one(a: &Value) -> String {
    format!(
        "{} under {}: blocked for {}\n",
        text(&a["key"]),
        text(&a["rule"]),
        ms(&a["blocked_for_ms"])
    )
}

/// `unblock`, `reset`.
pub(crate) fn done(a: &Value, what: &str) -> String {
    format!("{} under {}: {what}\n", text(&a["key"]), text(&a["rule"]))
}

/// `GET /admin/keys/blocked`.
pub(crate) fn blocked_list(a: &Value) -> String {
    let keys = list(&a["keys"]);
    let total = a["total"].as_u64().unwrap_or(0);
    let mut out = if total == 0 {
        "no key is blocked\n".to_string()
    } else {
        format!(
            "{total} key(s) blocked{}\n",
            if (keys.len() as u64) < total {
                format!(", the {} blocked longest:", keys.len())
            } else {
                ":".to_string()
            }
        )
    };
    for k in keys {
        let strikes = k["strikes"].as_u64().unwrap_or(0);
        out.push_str(&format!(
            "  {}  {}  for {}{}\n",
            text(&k["key"]),
            k["rule"].as_str().unwrap_or("(no rule in force)"),
            left(&k["blocked_for_ms"]),
            if strikes > 0 {
                format!(", {strikes} lockout strike(s)")
            } else {
                String::new()
            }
        ));
    }
    out
}

fn hitters(out: &mut String, keys: &[Value]) {
    for k in keys {
        let error = k["error"].as_u64().unwrap_or(0);
        out.push_str(&format!(
            "  {:>8}{}  {}  {}\n",
            text(&k["count"]),
            if error > 0 {
                format!(" (±{error})")
            } else {
                String::new()
            },
            text(&k["key"]),
            text(&k["rule"]),
        ));
    }
}

/// `GET /admin/top-denied`: enforced denials, then those not enforced.
pub(crate) fn top_denied(a: &Value) -> String {
    let mut out = format!(
        "most denied keys ({} enforced denials since start):\n",
        text(&a["total_denials"])
    );
    hitters(&mut out, list(&a["keys"]));
    let shadow = &a["shadow_denied"];
    if shadow["total_denials"].as_u64().is_some_and(|t| t > 0) {
        out.push_str(&format!(
            "denied but not enforced: shadow, roll-out ({} since start):\n",
            text(&shadow["total_denials"])
        ));
        hitters(&mut out, list(&shadow["keys"]));
    }
    out
}

/// `POST /admin/reload`.
pub(crate) fn reload(a: &Value) -> String {
    format!("reloaded: generation {}\n", text(&a["generation"]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_rule_line_says_mode_lockout_and_failure_policy() {
        let answer = json!({
            "config": {"source": "rules/", "generation": 3, "rules": 1, "last_ok": true},
            "global_shadow": false,
            "rules": [{"id": "api.login", "algorithm": "fixed_window", "limit": 5,
                       "window_ms": 60_000, "mode": "exact", "on_failure": "FailClosed",
                       "lockout": {"duration_ms": 300_000, "max_ms": 3_600_000},
                       "shadow": false, "enforce_percent": 100}],
        });
        let text = rules(&answer);
        assert!(
            text.contains(
                "api.login  fixed_window 5 per 60s, exact, lockout 300s escalating to 3600s, \
                 on failure fail_closed\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn missing_fields_show_as_unknown_not_zero() {
        assert_eq!(
            inspect(&json!({})),
            "? under ?: ? of ? used, ? left, fresh again in ?\n"
        );
    }
}
