//! The one table of algorithm parameters: for each Weir algorithm, the parameters it takes
//! (name, required or optional, count or duration) and the `weir_core::Rule` constructor
//! they feed. Read by the rule files' `rule:` block (`block.rs`), by `weir simulate`'s
//! `--rule ALGORITHM:PARAM=VALUE,...` specs, and checked against `config/README.md`'s table
//! by a test. Parsing a value is the front end's job (a YAML integer, a spec's text); this
//! module names the parameters and builds the rule from their values.

use std::time::Duration;

use weir_core::{Rule, RuleError, WarmUp};

/// What a parameter's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A whole number, 0 or more (the constructor refuses the zeros it cannot use).
    Count,
    /// A duration in [`parse_duration`](crate::parse_duration)'s grammar.
    Duration,
}

/// One parameter of one algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// Its name, the same in rule files and `weir simulate` specs (`initial_tokens`).
    pub name: &'static str,
    /// Count or duration.
    pub kind: Kind,
    /// Whether a rule must give it.
    pub required: bool,
    /// A typical value, for examples (`10`, `1s`).
    pub example: &'static str,
}

/// One algorithm: its name, the constructor its parameters feed, and the parameters in
/// the order the constructor takes them.
#[derive(Debug, Clone, Copy)]
pub struct AlgorithmParams {
    /// The `algorithm:` name (`token_bucket`).
    pub name: &'static str,
    /// The constructor call its parameters feed, as Rust.
    pub constructor: &'static str,
    /// Its parameters, required ones first.
    pub params: &'static [Param],
    /// That constructor, called with the parameters' values.
    rule: fn(&Args<'_>) -> Result<Rule, BuildError>,
}

/// The values [`AlgorithmParams::build`] was given, read by kind.
struct Args<'a> {
    value: &'a dyn Fn(&str) -> Option<Value>,
}

impl Args<'_> {
    fn count(&self, name: &'static str) -> Result<u64, BuildError> {
        match (self.value)(name) {
            Some(Value::Count(n)) => Ok(n),
            _ => Err(BuildError::Missing(name)),
        }
    }

    fn duration(&self, name: &'static str) -> Result<Duration, BuildError> {
        match (self.value)(name) {
            Some(Value::Duration(d)) => Ok(d),
            _ => Err(BuildError::Missing(name)),
        }
    }

    /// An optional parameter's value, `None` when not given.
    fn optional<T>(
        &self,
        name: &'static str,
        read: impl Fn(&Self, &'static str) -> Result<T, BuildError>,
    ) -> Result<Option<T>, BuildError> {
        match (self.value)(name) {
            None => Ok(None),
            Some(_) => read(self, name).map(Some),
        }
    }
}

fn fixed_window(a: &Args<'_>) -> Result<Rule, BuildError> {
    Ok(Rule::fixed_window(
        a.count("limit")?,
        a.duration("window")?,
    )?)
}

fn sliding_log(a: &Args<'_>) -> Result<Rule, BuildError> {
    Ok(Rule::sliding_log(a.count("limit")?, a.duration("window")?)?)
}

fn sliding_window(a: &Args<'_>) -> Result<Rule, BuildError> {
    let (limit, window) = (a.count("limit")?, a.duration("window")?);
    Ok(Rule::sliding_window(
        limit,
        window,
        a.duration("precision")?,
    )?)
}

fn weighted_window(a: &Args<'_>) -> Result<Rule, BuildError> {
    Ok(Rule::weighted_window(
        a.count("limit")?,
        a.duration("window")?,
    )?)
}

fn token_bucket(a: &Args<'_>) -> Result<Rule, BuildError> {
    let initial = a.optional("initial_tokens", Args::count)?;
    let rule = Rule::token_bucket(a.count("capacity")?, a.count("rate")?, a.duration("per")?)?;
    warm(
        match initial {
            Some(n) => rule.with_initial_tokens(n)?,
            None => rule,
        },
        a,
    )
}

/// The warm-up options of the rate-based algorithms: `warmup` (the period) and
/// `cold_factor` (default [`WarmUp::DEFAULT_COLD_FACTOR`]), which needs `warmup`.
fn warm(rule: Rule, a: &Args<'_>) -> Result<Rule, BuildError> {
    let cold_factor = a.optional("cold_factor", Args::count)?;
    match a.optional("warmup", Args::duration)? {
        Some(period) => {
            Ok(rule.with_warmup(period, cold_factor.unwrap_or(WarmUp::DEFAULT_COLD_FACTOR))?)
        }
        None if cold_factor.is_some() => Err(BuildError::Rule(RuleError::Inconsistent {
            param: "cold_factor",
            reason: "applies only with warmup",
        })),
        None => Ok(rule),
    }
}

/// A warm-up option (`warmup`, `cold_factor`) as the table has it.
fn warmup_param(name: &str) -> Option<&'static Param> {
    algorithm("gcra")?
        .param(name)
        .filter(|p| matches!(p.name, "warmup" | "cold_factor"))
}

fn leaky_bucket(a: &Args<'_>) -> Result<Rule, BuildError> {
    let (capacity, rate) = (a.count("capacity")?, a.count("rate")?);
    Ok(Rule::leaky_bucket(capacity, rate, a.duration("per")?)?)
}

fn gcra(a: &Args<'_>) -> Result<Rule, BuildError> {
    let rule = Rule::gcra(a.count("rate")?, a.duration("per")?, a.count("burst")?)?;
    warm(rule, a)
}

/// Without `max_wait`, a request waits as long as its place in the queue says.
fn leaky_queue(a: &Args<'_>) -> Result<Rule, BuildError> {
    let max_wait = a.optional("max_wait", Args::duration)?;
    let (rate, per, depth) = (a.count("rate")?, a.duration("per")?, a.count("max_depth")?);
    Ok(Rule::leaky_queue(
        rate,
        per,
        depth,
        max_wait.unwrap_or(Duration::MAX),
    )?)
}

fn concurrency(a: &Args<'_>) -> Result<Rule, BuildError> {
    Ok(Rule::concurrency(a.count("max_leases")?)?)
}

/// A parameter's value, as a front end read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Value {
    /// A [`Kind::Count`].
    Count(u64),
    /// A [`Kind::Duration`].
    Duration(Duration),
}

/// Why [`AlgorithmParams::build`] built no rule.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// A required parameter has no value (or a value of the wrong kind).
    Missing(&'static str),
    /// The constructor refused the values; [`rule_error_param`] says which parameter.
    Rule(RuleError),
}

impl From<RuleError> for BuildError {
    fn from(error: RuleError) -> Self {
        Self::Rule(error)
    }
}

const fn required(name: &'static str, kind: Kind, example: &'static str) -> Param {
    Param {
        name,
        kind,
        required: true,
        example,
    }
}

const fn optional(name: &'static str, kind: Kind, example: &'static str) -> Param {
    Param {
        name,
        kind,
        required: false,
        example,
    }
}

use Kind::{Count, Duration as Span};

/// Every algorithm, in the order documentation lists them.
pub const ALGORITHMS: &[AlgorithmParams] = &[
    AlgorithmParams {
        name: "fixed_window",
        rule: fixed_window,
        constructor: "Rule::fixed_window(limit, window)",
        params: &[
            required("limit", Count, "10"),
            required("window", Span, "1s"),
        ],
    },
    AlgorithmParams {
        name: "sliding_log",
        rule: sliding_log,
        constructor: "Rule::sliding_log(limit, window)",
        params: &[
            required("limit", Count, "10"),
            required("window", Span, "1s"),
        ],
    },
    AlgorithmParams {
        name: "sliding_window",
        rule: sliding_window,
        constructor: "Rule::sliding_window(limit, window, precision)",
        params: &[
            required("limit", Count, "100"),
            required("window", Span, "1m"),
            required("precision", Span, "1s"),
        ],
    },
    AlgorithmParams {
        name: "weighted_window",
        rule: weighted_window,
        constructor: "Rule::weighted_window(limit, window)",
        params: &[
            required("limit", Count, "10"),
            required("window", Span, "1s"),
        ],
    },
    AlgorithmParams {
        name: "token_bucket",
        rule: token_bucket,
        constructor: "Rule::token_bucket(capacity, rate, per).with_initial_tokens(initial_tokens)\
                      .with_warmup(warmup, cold_factor)",
        params: &[
            required("capacity", Count, "10"),
            required("rate", Count, "10"),
            required("per", Span, "1s"),
            optional("initial_tokens", Count, "5"),
            optional("warmup", Span, "30s"),
            optional("cold_factor", Count, "3"),
        ],
    },
    AlgorithmParams {
        name: "leaky_bucket",
        rule: leaky_bucket,
        constructor: "Rule::leaky_bucket(capacity, rate, per)",
        params: &[
            required("capacity", Count, "10"),
            required("rate", Count, "10"),
            required("per", Span, "1s"),
        ],
    },
    AlgorithmParams {
        name: "gcra",
        rule: gcra,
        constructor: "Rule::gcra(rate, per, burst).with_warmup(warmup, cold_factor)",
        params: &[
            required("rate", Count, "10"),
            required("per", Span, "1s"),
            required("burst", Count, "10"),
            optional("warmup", Span, "30s"),
            optional("cold_factor", Count, "3"),
        ],
    },
    AlgorithmParams {
        name: "leaky_queue",
        rule: leaky_queue,
        constructor: "Rule::leaky_queue(rate, per, max_depth, max_wait)",
        params: &[
            required("rate", Count, "10"),
            required("per", Span, "1s"),
            required("max_depth", Count, "20"),
            optional("max_wait", Span, "2s"),
        ],
    },
    AlgorithmParams {
        name: "concurrency",
        rule: concurrency,
        constructor: "Rule::concurrency(max_leases)",
        params: &[required("max_leases", Count, "3")],
    },
];

/// The algorithm named `name`, if any.
///
/// ```
/// use weir_config::params::{algorithm, Kind};
///
/// let gcra = algorithm("gcra").unwrap();
/// let names: Vec<_> = gcra.params.iter().map(|p| p.name).collect();
/// assert_eq!(names, ["rate", "per", "burst", "warmup", "cold_factor"]);
/// assert_eq!(gcra.param("per").unwrap().kind, Kind::Duration);
/// assert!(algorithm("gcra2").is_none());
/// ```
pub fn algorithm(name: &str) -> Option<&'static AlgorithmParams> {
    ALGORITHMS.iter().find(|a| a.name == name)
}

/// Every parameter name any algorithm takes, once each, in table order.
pub fn all_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for param in ALGORITHMS.iter().flat_map(|a| a.params) {
        if !names.contains(&param.name) {
            names.push(param.name);
        }
    }
    names
}

/// The parameter a weir-core [`RuleError`] is about, by its name in this table (weir-core
/// says `period` where the table says `per`); `None` when the error names none.
pub fn rule_error_param(error: &RuleError) -> Option<&'static str> {
    let param: &'static str = match error {
        RuleError::Zero { param }
        | RuleError::TooLarge { param, .. }
        | RuleError::Inconsistent { param, .. } => param,
        RuleError::PrecisionDoesNotDivideWindow { .. } => "precision",
        _ => return None,
    };
    Some(match param {
        "period" => "per",
        "window / precision" => "precision",
        other => other,
    })
}

impl AlgorithmParams {
    /// The parameter named `name`, if this algorithm takes it.
    pub fn param(&self, name: &str) -> Option<&'static Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// The parameter `name` as a front end reads it: one this algorithm takes, or a warm-up
    /// option it does not take, which [`build`](Self::build) then refuses with weir-core's
    /// reason (the sliding log has no rate to ramp, …) rather than as an unknown name.
    pub fn reads(&self, name: &str) -> Option<&'static Param> {
        self.param(name).or_else(|| warmup_param(name))
    }

    /// The names it takes, comma-separated: `rate, per, burst`.
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.params.iter().map(|p| p.name).collect();
        names.join(", ")
    }

    /// Builds the rule from each parameter's value (`value(name)`, `None` when not given),
    /// with the constructor [`constructor`](Self::constructor) names. The required
    /// parameters are looked for in table order, so the first missing one is reported.
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_config::params::{algorithm, BuildError, Value};
    /// use weir_core::Rule;
    ///
    /// let gcra = algorithm("gcra").unwrap();
    /// let rule = gcra.build(|name| match name {
    ///     "rate" => Some(Value::Count(10)),
    ///     "per" => Some(Value::Duration(Duration::from_secs(1))),
    ///     "burst" => Some(Value::Count(5)),
    ///     _ => None,
    /// });
    /// assert_eq!(rule, Ok(Rule::gcra(10, Duration::from_secs(1), 5)?));
    /// assert_eq!(gcra.build(|_| None), Err(BuildError::Missing("rate")));
    /// # Ok::<(), weir_core::RuleError>(())
    /// ```
    pub fn build(&self, value: impl Fn(&str) -> Option<Value>) -> Result<Rule, BuildError> {
        if let Some(missing) = self
            .params
            .iter()
            .find(|p| p.required && value(p.name).is_none())
        {
            return Err(BuildError::Missing(missing.name));
        }
        let rule = (self.rule)(&Args { value: &value })?;
        let warm = ["warmup", "cold_factor"].map(&value);
        if self.param("warmup").is_none() && warm.iter().any(Option::is_some) {
            // weir-core refuses the algorithm before it looks at the values.
            let period = match warm[0] {
                Some(Value::Duration(d)) => d,
                _ => Duration::from_secs(1),
            };
            rule.with_warmup(period, WarmUp::DEFAULT_COLD_FACTOR)?;
        }
        Ok(rule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every algorithm builds from its examples, and the rule is of that algorithm.
    #[test]
    fn every_algorithm_builds_from_its_examples() {
        for algorithm in ALGORITHMS {
            let rule = algorithm
                .build(|name| {
                    let param = algorithm.param(name)?;
                    Some(match param.kind {
                        Kind::Count => Value::Count(param.example.parse().unwrap()),
                        Kind::Duration => {
                            Value::Duration(crate::parse_duration(param.example).unwrap())
                        }
                    })
                })
                .unwrap();
            assert_eq!(rule.algorithm().name(), algorithm.name);
            assert!(algorithm.constructor.contains(algorithm.name));
            for param in algorithm.params {
                assert!(algorithm.constructor.contains(param.name), "{param:?}");
            }
        }
    }

    #[test]
    fn a_missing_parameter_is_named_in_table_order() {
        let bucket = algorithm("token_bucket").unwrap();
        let only_rate = |name: &str| (name == "rate").then_some(Value::Count(1));
        assert_eq!(
            bucket.build(only_rate),
            Err(BuildError::Missing("capacity"))
        );
        let wrong_kind = |_: &str| Some(Value::Count(1));
        assert_eq!(bucket.build(wrong_kind), Err(BuildError::Missing("per")));
    }

    #[test]
    fn a_cold_factor_needs_a_warmup() {
        let gcra = algorithm("gcra").unwrap();
        let value = |with_warmup: bool| {
            move |name: &str| match name {
                "per" => Some(Value::Duration(Duration::from_secs(1))),
                "warmup" if with_warmup => Some(Value::Duration(Duration::from_secs(30))),
                "warmup" => None,
                _ => Some(Value::Count(5)),
            }
        };
        let rule = gcra.build(value(true)).unwrap();
        assert_eq!(rule.warmup().map(|w| w.cold_factor()), Some(5));
        let BuildError::Rule(err) = gcra.build(value(false)).unwrap_err() else {
            panic!()
        };
        assert_eq!(rule_error_param(&err), Some("cold_factor"));
        let log = algorithm("sliding_log").unwrap();
        assert!(log.reads("warmup").is_some() && log.reads("burst").is_none());
        let warm_log = log.build(|name| match name {
            "limit" => Some(Value::Count(5)),
            "window" | "warmup" => Some(Value::Duration(Duration::from_secs(1))),
            _ => None,
        });
        let Err(BuildError::Rule(err)) = warm_log else {
            panic!("{warm_log:?}")
        };
        assert_eq!(rule_error_param(&err), Some("warmup"));
    }

    #[test]
    fn core_errors_name_the_tables_parameter() {
        let gcra = algorithm("gcra").unwrap();
        let err = gcra
            .build(|name| match name {
                "per" => Some(Value::Duration(Duration::ZERO)),
                _ => Some(Value::Count(1)),
            })
            .unwrap_err();
        let BuildError::Rule(err) = err else {
            panic!("{err:?}")
        };
        assert_eq!(rule_error_param(&err), Some("per"));
    }
}
