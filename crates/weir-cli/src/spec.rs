//! Rule specs: the compact `ALGORITHM:PARAM=VALUE,...` strings `--rule` takes, turned into
//! validated [`weir_core::Rule`]s. The algorithms and their parameters are weir-config's
//! one table (`weir_config::params`, the names rule files use too); durations are its one
//! grammar. Parsing and naming errors only; the values are checked by `weir-core`'s
//! constructors, whose message is passed on. Runs before any traffic is generated.

use std::fmt;

use weir_config::params::{self, AlgorithmParams, BuildError, Kind, Value};
use weir_config::DurationError;
use weir_core::{Algorithm, Rule, RuleError};

use crate::duration::parse_duration;

/// The one algorithm `weir simulate` cannot replay: it limits requests in flight.
const NOT_SIMULATED: &str = "concurrency";

/// Every algorithm `weir simulate` accepts, in the parameter table's order.
fn simulated() -> impl Iterator<Item = &'static AlgorithmParams> {
    params::ALGORITHMS
        .iter()
        .filter(|a| a.name != NOT_SIMULATED)
}

/// A parsed `--rule`: the text as given and the rule it builds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuleSpec {
    /// The spec as the user wrote it (trimmed), used as the rule's label.
    pub(crate) text: String,
    /// The validated rule.
    pub(crate) rule: Rule,
}

impl RuleSpec {
    /// The algorithm's name, e.g. `gcra`.
    pub(crate) fn algorithm(&self) -> &'static str {
        self.rule.algorithm().name()
    }

    /// Whether allowed requests are delayed (the leaky queue), so a mean delay is worth showing.
    pub(crate) fn delays(&self) -> bool {
        matches!(self.rule.algorithm(), Algorithm::LeakyQueue(_))
    }
}

/// Why a `--rule` spec was rejected. Every message names the algorithm and parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SpecError {
    /// No `ALGORITHM:` prefix.
    NoAlgorithm(String),
    /// An algorithm this command does not know.
    UnknownAlgorithm(String),
    /// `concurrency` limits requests in flight, which a replay of instants cannot model.
    NotSimulated(&'static str),
    /// An item without `=`.
    NotAPair {
        algorithm: &'static str,
        item: String,
    },
    /// A parameter the algorithm does not take.
    UnknownParam {
        algorithm: &'static str,
        param: String,
    },
    /// A parameter given twice.
    Duplicate {
        algorithm: &'static str,
        param: String,
    },
    /// A required parameter is missing.
    Missing {
        algorithm: &'static str,
        param: &'static str,
    },
    /// A count that is not a whole number.
    BadNumber {
        algorithm: &'static str,
        param: &'static str,
        value: String,
    },
    /// A duration that did not parse.
    BadDuration {
        algorithm: &'static str,
        param: &'static str,
        source: DurationError,
    },
    /// `weir-core` rejected the parameters.
    Rule {
        algorithm: &'static str,
        source: RuleError,
    },
    /// The parameter table refused them for a reason this command does not know yet.
    Other {
        algorithm: &'static str,
        reason: String,
    },
}

fn grammar(name: &str) -> Option<&'static AlgorithmParams> {
    simulated().find(|a| a.name == name)
}

fn names() -> String {
    simulated().map(|a| a.name).collect::<Vec<_>>().join(", ")
}

/// An algorithm's example spec: its required parameters at their example values.
fn example(a: &AlgorithmParams) -> String {
    let params: Vec<String> = a
        .params
        .iter()
        .filter(|p| p.required)
        .map(|p| format!("{}={}", p.name, p.example))
        .collect();
    format!("{}:{}", a.name, params.join(","))
}

fn takes(a: &AlgorithmParams) -> String {
    let params: Vec<String> = a
        .params
        .iter()
        .map(|p| match p.required {
            true => p.name.to_owned(),
            false => format!("[{}]", p.name),
        })
        .collect();
    format!(
        "{} takes {} (e.g. {})",
        a.name,
        params.join(", "),
        example(a)
    )
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoAlgorithm(spec) => write!(
                f,
                "`{spec}` does not start with an algorithm; expected ALGORITHM:PARAM=VALUE,... \
                 (e.g. fixed_window:limit=10,window=1s)"
            ),
            Self::UnknownAlgorithm(name) => {
                write!(f, "unknown algorithm `{name}`; expected one of {}", names())
            }
            Self::NotSimulated(name) => write!(
                f,
                "{name} limits requests in flight, which `weir simulate` does not model \
                 (requests here have no duration); use one of {}",
                names()
            ),
            Self::NotAPair { algorithm, item } => {
                write!(f, "{algorithm}: `{item}` is not PARAM=VALUE")
            }
            Self::UnknownParam { algorithm, param } => {
                let g = grammar(algorithm).map(takes).unwrap_or_default();
                write!(f, "{algorithm}: unknown parameter `{param}`; {g}")
            }
            Self::Duplicate { algorithm, param } => {
                write!(f, "{algorithm}: parameter `{param}` is given twice")
            }
            Self::Missing { algorithm, param } => {
                let g = grammar(algorithm).map(takes).unwrap_or_default();
                write!(f, "{algorithm}: missing parameter `{param}`; {g}")
            }
            Self::BadNumber {
                algorithm,
                param,
                value,
            } => write!(
                f,
                "{algorithm}: {param}=`{value}` is not a whole number (e.g. {param}=10)"
            ),
            Self::BadDuration {
                algorithm,
                param,
                source,
            } => write!(f, "{algorithm}: {param}: {source}"),
            Self::Other { algorithm, reason } => write!(f, "{algorithm}: {reason}"),
            Self::Rule { algorithm, source } => {
                write!(f, "{algorithm}: {source}")?;
                // weir-core's name, when it is not the spec's (`period` for `per`).
                let core = match source {
                    RuleError::Zero { param }
                    | RuleError::TooLarge { param, .. }
                    | RuleError::Inconsistent { param, .. } => Some(*param),
                    _ => None,
                };
                match (core, params::rule_error_param(source)) {
                    (Some(core), Some(spec)) if core != spec => {
                        write!(f, " (`{spec}=` in the spec)")
                    }
                    _ => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for SpecError {}

/// Parses one `--rule` spec, e.g. `gcra:rate=10,per=1s,burst=10`.
pub(crate) fn parse_rule(spec: &str) -> Result<RuleSpec, SpecError> {
    let text = spec.trim();
    let Some((name, rest)) = text.split_once(':') else {
        return Err(match grammar(text) {
            Some(g) => SpecError::Missing {
                algorithm: g.name,
                param: g.params.first().map_or("limit", |p| p.name),
            },
            None if text == NOT_SIMULATED => SpecError::NotSimulated(NOT_SIMULATED),
            None if text.contains('=') || text.is_empty() => {
                SpecError::NoAlgorithm(text.to_owned())
            }
            None => SpecError::UnknownAlgorithm(text.to_owned()),
        });
    };
    let name = name.trim();
    let g = match grammar(name) {
        Some(g) => g,
        None if name == NOT_SIMULATED => return Err(SpecError::NotSimulated(NOT_SIMULATED)),
        None if name.is_empty() => return Err(SpecError::NoAlgorithm(text.to_owned())),
        None => return Err(SpecError::UnknownAlgorithm(name.to_owned())),
    };
    let mut values: Vec<(&'static str, Value)> = Vec::new();
    for item in rest.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((param, value)) = item.split_once('=') else {
            return Err(SpecError::NotAPair {
                algorithm: g.name,
                item: item.to_owned(),
            });
        };
        let (param, value) = (param.trim(), value.trim());
        let Some(param) = g.reads(param) else {
            return Err(SpecError::UnknownParam {
                algorithm: g.name,
                param: param.to_owned(),
            });
        };
        if values.iter().any(|(p, _)| *p == param.name) {
            return Err(SpecError::Duplicate {
                algorithm: g.name,
                param: param.name.to_owned(),
            });
        }
        values.push((param.name, self::value(g.name, param, value)?));
    }
    let rule = g
        .build(|name| values.iter().find(|(p, _)| *p == name).map(|(_, v)| *v))
        .map_err(|e| match e {
            BuildError::Missing(param) => SpecError::Missing {
                algorithm: g.name,
                param,
            },
            BuildError::Rule(source) => SpecError::Rule {
                algorithm: g.name,
                source,
            },
            // `BuildError` may grow; say what it was.
            other => SpecError::Other {
                algorithm: g.name,
                reason: format!("{other:?}"),
            },
        })?;
    Ok(RuleSpec {
        text: text.to_owned(),
        rule,
    })
}

/// One `PARAM=VALUE`'s value, read as the table's kind says.
fn value(
    algorithm: &'static str,
    param: &'static params::Param,
    text: &str,
) -> Result<Value, SpecError> {
    match param.kind {
        Kind::Count => text
            .parse()
            .map(Value::Count)
            .map_err(|_| SpecError::BadNumber {
                algorithm,
                param: param.name,
                value: text.to_owned(),
            }),
        _ => parse_duration(text)
            .map(Value::Duration)
            .map_err(|source| SpecError::BadDuration {
                algorithm,
                param: param.name,
                source,
            }),
    }
}

/// One example spec per algorithm (the help must show each).
#[cfg(test)]
pub(crate) fn examples() -> impl Iterator<Item = String> {
    simulated().map(example)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn err(spec: &str) -> String {
        parse_rule(spec).unwrap_err().to_string()
    }

    #[test]
    fn every_example_parses_to_its_algorithm() {
        for (example, g) in examples().zip(simulated()) {
            let spec = parse_rule(&example).unwrap();
            assert_eq!(spec.algorithm(), g.name);
            assert_eq!(spec.text, example);
        }
    }

    #[test]
    fn specs_build_the_same_rules_as_code() {
        let s = Duration::from_secs(1);
        let cases = [
            ("fixed_window:limit=10,window=1s", Rule::fixed_window(10, s)),
            (
                " gcra : rate = 10 , per = 1s , burst = 5 ",
                Rule::gcra(10, s, 5),
            ),
            (
                "token_bucket:capacity=10,rate=10,per=1s,initial_tokens=5",
                Rule::token_bucket(10, 10, s).and_then(|r| r.with_initial_tokens(5)),
            ),
            (
                "sliding_window:limit=100,window=1m,precision=1s",
                Rule::sliding_window(100, Duration::from_secs(60), s),
            ),
            (
                "leaky_queue:rate=10,per=1s,max_depth=20",
                Rule::leaky_queue(10, s, 20, Duration::MAX),
            ),
            (
                "gcra:rate=90,per=1m30s,burst=1",
                Rule::gcra(90, Duration::from_secs(90), 1),
            ),
            (
                "leaky_queue:rate=10,per=1s,max_depth=20,max_wait=250ms",
                Rule::leaky_queue(10, s, 20, Duration::from_millis(250)),
            ),
        ];
        for (spec, rule) in cases {
            assert_eq!(parse_rule(spec).unwrap().rule, rule.unwrap(), "{spec}");
        }
        assert!(parse_rule("leaky_queue:rate=1,per=1s,max_depth=1")
            .unwrap()
            .delays());
        assert!(!parse_rule("gcra:rate=1,per=1s,burst=1").unwrap().delays());
    }

    #[test]
    fn errors_name_what_was_wrong() {
        assert_eq!(
            err("token_bucket_2:limit=1"),
            "unknown algorithm `token_bucket_2`; expected one of fixed_window, sliding_log, \
             sliding_window, weighted_window, token_bucket, leaky_bucket, gcra, leaky_queue"
        );
        assert_eq!(
            err("gcra:rate=10,per=1s,limit=10"),
            "gcra: unknown parameter `limit`; gcra takes rate, per, burst, [warmup], \
             [cold_factor] (e.g. gcra:rate=10,per=1s,burst=10)"
        );
        assert_eq!(
            err("gcra:rate=10,per=1s"),
            "gcra: missing parameter `burst`; gcra takes rate, per, burst, [warmup], \
             [cold_factor] (e.g. gcra:rate=10,per=1s,burst=10)"
        );
        assert_eq!(
            err("sliding_log:limit=10,window=1s,warmup=30s"),
            "sliding_log: warmup: only gcra and token_bucket warm up: a window counts requests \
             against a limit per window and has no rate to ramp"
        );
        assert_eq!(
            err("fixed_window:limit=10,window=1"),
            "fixed_window: window: invalid duration '1': a number has no unit \
             (ns, us, ms, s, m, h or d), e.g. 10s or 1m30s"
        );
        assert_eq!(
            err("fixed_window:limit=ten,window=1s"),
            "fixed_window: limit=`ten` is not a whole number (e.g. limit=10)"
        );
        assert_eq!(
            err("fixed_window:limit=0,window=1s"),
            "fixed_window: limit must be greater than zero"
        );
        assert_eq!(
            err("leaky_queue:rate=10,per=1s,max_depth=0"),
            "leaky_queue: max_depth must be greater than zero"
        );
        assert_eq!(
            err("token_bucket:capacity=5,rate=1,per=1s,initial_tokens=6"),
            "token_bucket: initial_tokens is 6, above the maximum of 5"
        );
        assert_eq!(
            err("gcra:rate=1,per=0s,burst=1"),
            "gcra: period must be greater than zero (`per=` in the spec)"
        );
        assert_eq!(
            err("leaky_queue:rate=10,per=1s,depth=20"),
            "leaky_queue: unknown parameter `depth`; leaky_queue takes rate, per, max_depth, \
             [max_wait] (e.g. leaky_queue:rate=10,per=1s,max_depth=20)"
        );
        assert_eq!(
            err("fixed_window:limit=1,limit=2,window=1s"),
            "fixed_window: parameter `limit` is given twice"
        );
        assert_eq!(
            err("fixed_window:limit"),
            "fixed_window: `limit` is not PARAM=VALUE"
        );
        assert!(err("limit=10,window=1s").starts_with("`limit=10,window=1s` does not start"));
        assert!(err("gcra").starts_with("gcra: missing parameter `rate`"));
        assert!(
            err("concurrency:max_leases=3").starts_with("concurrency limits requests in flight")
        );
        assert!(err("sliding_window:limit=5,window=10s,precision=3s").contains("must divide"));
    }
}
