//! Rule specs: the compact `ALGORITHM:PARAM=VALUE,...` strings `--rule` takes, turned into
//! validated [`weir_core::Rule`]s. Parsing and naming errors only; the parameters are
//! checked by `weir-core`'s constructors, whose message is passed on with the spec's
//! parameter name. Runs before any traffic is generated.

use std::fmt;
use std::time::Duration;

use weir_core::{Algorithm, Rule, RuleError};

use crate::duration::{parse_duration, DurationError};

/// One algorithm's spec grammar.
struct Grammar {
    name: &'static str,
    required: &'static [&'static str],
    optional: &'static [&'static str],
    example: &'static str,
}

/// Every algorithm `weir simulate` accepts, in the order the help lists them.
const GRAMMARS: &[Grammar] = &[
    Grammar {
        name: "fixed_window",
        required: &["limit", "window"],
        optional: &[],
        example: "fixed_window:limit=10,window=1s",
    },
    Grammar {
        name: "sliding_log",
        required: &["limit", "window"],
        optional: &[],
        example: "sliding_log:limit=10,window=1s",
    },
    Grammar {
        name: "sliding_window",
        required: &["limit", "window", "precision"],
        optional: &[],
        example: "sliding_window:limit=100,window=1m,precision=1s",
    },
    Grammar {
        name: "weighted_window",
        required: &["limit", "window"],
        optional: &[],
        example: "weighted_window:limit=10,window=1s",
    },
    Grammar {
        name: "token_bucket",
        required: &["capacity", "rate", "per"],
        optional: &["initial"],
        example: "token_bucket:capacity=10,rate=10,per=1s",
    },
    Grammar {
        name: "leaky_bucket",
        required: &["capacity", "rate", "per"],
        optional: &[],
        example: "leaky_bucket:capacity=10,rate=10,per=1s",
    },
    Grammar {
        name: "gcra",
        required: &["rate", "per", "burst"],
        optional: &[],
        example: "gcra:rate=10,per=1s,burst=10",
    },
    Grammar {
        name: "leaky_queue",
        required: &["rate", "per", "depth"],
        optional: &["max_wait"],
        example: "leaky_queue:rate=10,per=1s,depth=20,max_wait=2s",
    },
];

/// Where `weir-core` names a parameter differently from the spec.
const CORE_NAMES: &[(&str, &str)] = &[
    ("period", "per"),
    ("max_depth", "depth"),
    ("initial_tokens", "initial"),
];

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
}

fn grammar(name: &str) -> Option<&'static Grammar> {
    GRAMMARS.iter().find(|g| g.name == name)
}

fn names() -> String {
    GRAMMARS
        .iter()
        .map(|g| g.name)
        .collect::<Vec<_>>()
        .join(", ")
}

fn takes(g: &Grammar) -> String {
    let mut params: Vec<String> = g.required.iter().map(|p| (*p).to_owned()).collect();
    params.extend(g.optional.iter().map(|p| format!("[{p}]")));
    format!(
        "{} takes {} (e.g. {})",
        g.name,
        params.join(", "),
        g.example
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
            Self::Rule { algorithm, source } => {
                write!(f, "{algorithm}: {source}")?;
                let core = match source {
                    RuleError::Zero { param }
                    | RuleError::TooLarge { param, .. }
                    | RuleError::Inconsistent { param, .. } => Some(*param),
                    _ => None,
                };
                match CORE_NAMES.iter().find(|(c, _)| Some(*c) == core) {
                    Some((_, spec)) => write!(f, " (`{spec}=` in the spec)"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for SpecError {}

/// The `PARAM=VALUE` pairs of one spec, checked against its grammar.
struct Params<'a> {
    algorithm: &'static str,
    pairs: Vec<(&'a str, &'a str)>,
}

impl Params<'_> {
    fn get(&self, param: &'static str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(p, _)| *p == param)
            .map(|(_, v)| *v)
    }

    fn count(&self, param: &'static str) -> Result<u64, SpecError> {
        let value = self.get(param).ok_or(SpecError::Missing {
            algorithm: self.algorithm,
            param,
        })?;
        value.parse().map_err(|_| SpecError::BadNumber {
            algorithm: self.algorithm,
            param,
            value: value.to_owned(),
        })
    }

    fn duration(&self, param: &'static str) -> Result<Duration, SpecError> {
        let value = self.get(param).ok_or(SpecError::Missing {
            algorithm: self.algorithm,
            param,
        })?;
        parse_duration(value).map_err(|source| SpecError::BadDuration {
            algorithm: self.algorithm,
            param,
            source,
        })
    }
}

/// Parses one `--rule` spec, e.g. `gcra:rate=10,per=1s,burst=10`.
pub(crate) fn parse_rule(spec: &str) -> Result<RuleSpec, SpecError> {
    let text = spec.trim();
    let Some((name, rest)) = text.split_once(':') else {
        return Err(match grammar(text) {
            Some(g) => SpecError::Missing {
                algorithm: g.name,
                param: g.required.first().copied().unwrap_or("limit"),
            },
            None if text == "concurrency" => SpecError::NotSimulated("concurrency"),
            None if text.contains('=') || text.is_empty() => {
                SpecError::NoAlgorithm(text.to_owned())
            }
            None => SpecError::UnknownAlgorithm(text.to_owned()),
        });
    };
    let name = name.trim();
    let g = match grammar(name) {
        Some(g) => g,
        None if name == "concurrency" => return Err(SpecError::NotSimulated("concurrency")),
        None if name.is_empty() => return Err(SpecError::NoAlgorithm(text.to_owned())),
        None => return Err(SpecError::UnknownAlgorithm(name.to_owned())),
    };
    let mut params = Params {
        algorithm: g.name,
        pairs: Vec::new(),
    };
    for item in rest.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((param, value)) = item.split_once('=') else {
            return Err(SpecError::NotAPair {
                algorithm: g.name,
                item: item.to_owned(),
            });
        };
        let (param, value) = (param.trim(), value.trim());
        if !g.required.contains(&param) && !g.optional.contains(&param) {
            return Err(SpecError::UnknownParam {
                algorithm: g.name,
                param: param.to_owned(),
            });
        }
        if params.pairs.iter().any(|(p, _)| *p == param) {
            return Err(SpecError::Duplicate {
                algorithm: g.name,
                param: param.to_owned(),
            });
        }
        params.pairs.push((param, value));
    }
    if let Some(param) = g.required.iter().find(|p| params.get(p).is_none()) {
        return Err(SpecError::Missing {
            algorithm: g.name,
            param,
        });
    }
    let rule = build(&params)?;
    Ok(RuleSpec {
        text: text.to_owned(),
        rule,
    })
}

/// Builds the rule with `weir-core`'s constructor, which validates the values.
fn build(p: &Params<'_>) -> Result<Rule, SpecError> {
    let core = |source| SpecError::Rule {
        algorithm: p.algorithm,
        source,
    };
    match p.algorithm {
        "fixed_window" => Rule::fixed_window(p.count("limit")?, p.duration("window")?),
        "sliding_log" => Rule::sliding_log(p.count("limit")?, p.duration("window")?),
        "sliding_window" => Rule::sliding_window(
            p.count("limit")?,
            p.duration("window")?,
            p.duration("precision")?,
        ),
        "weighted_window" => Rule::weighted_window(p.count("limit")?, p.duration("window")?),
        "token_bucket" => {
            let rule =
                Rule::token_bucket(p.count("capacity")?, p.count("rate")?, p.duration("per")?)
                    .map_err(core)?;
            match p.get("initial") {
                Some(_) => rule.with_initial_tokens(p.count("initial")?),
                None => Ok(rule),
            }
        }
        "leaky_bucket" => {
            Rule::leaky_bucket(p.count("capacity")?, p.count("rate")?, p.duration("per")?)
        }
        "gcra" => Rule::gcra(p.count("rate")?, p.duration("per")?, p.count("burst")?),
        _ => {
            let max_wait = match p.get("max_wait") {
                Some("none") | None => Duration::MAX,
                Some(_) => p.duration("max_wait")?,
            };
            Rule::leaky_queue(
                p.count("rate")?,
                p.duration("per")?,
                p.count("depth")?,
                max_wait,
            )
        }
    }
    .map_err(core)
}

/// One example spec per algorithm (the help must show each).
#[cfg(test)]
pub(crate) fn examples() -> impl Iterator<Item = &'static str> {
    GRAMMARS.iter().map(|g| g.example)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(spec: &str) -> String {
        parse_rule(spec).unwrap_err().to_string()
    }

    #[test]
    fn every_example_parses_to_its_algorithm() {
        for (example, g) in examples().zip(GRAMMARS) {
            let spec = parse_rule(example).unwrap();
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
                "token_bucket:capacity=10,rate=10,per=1s,initial=5",
                Rule::token_bucket(10, 10, s).and_then(|r| r.with_initial_tokens(5)),
            ),
            (
                "sliding_window:limit=100,window=1m,precision=1s",
                Rule::sliding_window(100, Duration::from_secs(60), s),
            ),
            (
                "leaky_queue:rate=10,per=1s,depth=20",
                Rule::leaky_queue(10, s, 20, Duration::MAX),
            ),
            (
                "leaky_queue:rate=10,per=1s,depth=20,max_wait=none",
                Rule::leaky_queue(10, s, 20, Duration::MAX),
            ),
            (
                "leaky_queue:rate=10,per=1s,depth=20,max_wait=250ms",
                Rule::leaky_queue(10, s, 20, Duration::from_millis(250)),
            ),
        ];
        for (spec, rule) in cases {
            assert_eq!(parse_rule(spec).unwrap().rule, rule.unwrap(), "{spec}");
        }
        assert!(parse_rule("leaky_queue:rate=1,per=1s,depth=1")
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
            "gcra: unknown parameter `limit`; gcra takes rate, per, burst \
             (e.g. gcra:rate=10,per=1s,burst=10)"
        );
        assert_eq!(
            err("gcra:rate=10,per=1s"),
            "gcra: missing parameter `burst`; gcra takes rate, per, burst \
             (e.g. gcra:rate=10,per=1s,burst=10)"
        );
        assert_eq!(
            err("fixed_window:limit=10,window=1"),
            "fixed_window: window: `1` has no unit; write e.g. 1s or 1ms"
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
            err("leaky_queue:rate=10,per=1s,depth=0"),
            "leaky_queue: max_depth must be greater than zero (`depth=` in the spec)"
        );
        assert_eq!(
            err("token_bucket:capacity=5,rate=1,per=1s,initial=6"),
            "token_bucket: initial_tokens is 6, above the maximum of 5 (`initial=` in the spec)"
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
