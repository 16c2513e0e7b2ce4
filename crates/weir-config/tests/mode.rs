//! A rule's `mode`: `exact` (the default) or `leased`, and the algorithms that refuse to
//! lease, each with an error naming the field and the reason.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use weir_config::RuleSet;
use weir_core::Mode;

fn rule_block(body: &str) -> String {
    format!("domain: api\ndescriptors:\n  - key: user\n    rule:\n{body}")
}

fn mode_of(body: &str) -> Result<Mode, String> {
    let set = RuleSet::parse("api.yaml", &rule_block(body)).map_err(|e| e.to_string())?;
    Ok(set.rules()[0].rule().unwrap().mode())
}

#[test]
fn a_rule_is_exact_unless_it_says_leased() {
    let gcra = "      algorithm: gcra\n      rate: 100\n      per: 1s\n      burst: 100\n";
    assert_eq!(mode_of(gcra).unwrap(), Mode::Exact);
    assert_eq!(
        mode_of(&format!("{gcra}      mode: exact\n")).unwrap(),
        Mode::Exact
    );
    assert_eq!(
        mode_of(&format!("{gcra}      mode: leased\n")).unwrap(),
        Mode::Leased
    );
    let window = "      algorithm: sliding_window\n      limit: 600\n      window: 1m\n      precision: 1s\n      mode: leased\n";
    assert_eq!(mode_of(window).unwrap(), Mode::Leased);
}

#[test]
fn the_sliding_log_refuses_to_lease_and_says_why() {
    let log =
        "      algorithm: sliding_log\n      limit: 10\n      window: 1s\n      mode: leased\n";
    let err = mode_of(log).unwrap_err();
    assert!(err.contains("mode"), "{err}");
    assert!(err.contains("use sliding_window"), "{err}");
}

#[test]
fn a_lockout_refuses_to_lease() {
    let body = "      algorithm: fixed_window\n      limit: 5\n      window: 1m\n      lockout: {duration: 15m}\n      mode: leased\n";
    let err = mode_of(body).unwrap_err();
    assert!(err.contains("lockout"), "{err}");
}

#[test]
fn an_unknown_mode_is_an_error_naming_the_choices() {
    let body =
        "      algorithm: fixed_window\n      limit: 5\n      window: 1m\n      mode: lazy\n";
    let err = mode_of(body).unwrap_err();
    assert!(err.contains("invalid mode 'lazy'"), "{err}");
    assert!(err.contains("exact or leased"), "{err}");
}
