//! Traffic for `weir simulate`: the requests to replay, as offsets from the start of the
//! simulation and key indices. Generated (constant rate, periodic bursts) or read from a
//! traffic file's text. Pure: no clock, no I/O (`simulate_command.rs` reads the file). The simulation
//! (`simulate.rs`) consumes what this produces.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::duration::{format_duration, nanos, parse_duration, parse_seconds, DurationError};

/// The most requests one simulation replays (all rules see each of them).
pub(crate) const MAX_REQUESTS: u64 = 10_000_000;

/// The longest key in a traffic file, in bytes (the rule prefix is added to it).
const MAX_KEY_LEN: usize = 256;

/// `COUNT/PERIOD`: `30/s`, `100/1m`, `5/500ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rate {
    /// Requests per period (at least 1).
    pub(crate) count: u64,
    /// The period (at least 1 ns).
    pub(crate) per: Duration,
}

impl FromStr for Rate {
    type Err = TrafficError;

    fn from_str(text: &str) -> Result<Self, TrafficError> {
        let bad = |reason: &'static str| TrafficError::Rate {
            text: text.to_owned(),
            reason,
        };
        let (count, per) = text
            .split_once('/')
            .ok_or_else(|| bad("expected COUNT/PERIOD"))?;
        let count: u64 = count
            .trim()
            .parse()
            .map_err(|_| bad("the count is not a whole number"))?;
        if count == 0 {
            return Err(bad("the count must be at least 1"));
        }
        let per = per.trim();
        // A bare unit is one of it: `30/s` is `30/1s`.
        let per = if per.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            parse_duration(per)
        } else {
            parse_duration(&format!("1{per}"))
        }
        .map_err(|_| bad("the period is not a duration like s, 1s or 500ms"))?;
        if per.is_zero() {
            return Err(bad("the period must be greater than zero"));
        }
        Ok(Self { count, per })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.count, format_duration(nanos(self.per)))
    }
}

impl Rate {
    /// Offsets of evenly spaced requests in `[0, duration_ns)`: `⌊i·per/count⌋`.
    fn offsets(self, duration_ns: u64) -> impl Iterator<Item = u64> {
        let per_ns = u128::from(nanos(self.per).max(1));
        let count = u128::from(self.count.max(1));
        (0u64..)
            .map(move |i| u64::try_from(u128::from(i) * per_ns / count).unwrap_or(u64::MAX))
            .take_while(move |&at| at < duration_ns)
    }

    /// How many requests [`Rate::offsets`] yields: `⌈duration·count/per⌉`.
    fn len(self, duration_ns: u64) -> u128 {
        (u128::from(duration_ns) * u128::from(self.count))
            .div_ceil(u128::from(nanos(self.per).max(1)))
    }
}

/// A generated traffic pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pattern {
    /// Evenly spaced requests from t = 0.
    Constant(Rate),
    /// `size` requests at the same instant, at `offset` and then every `every` (once when
    /// `every` is `None`), optionally over a constant `background` rate.
    Burst {
        size: u64,
        every: Option<Duration>,
        offset: Duration,
        background: Option<Rate>,
    },
}

/// One request: when (from the start) and for which key (an index into [`Traffic::keys`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arrival {
    /// Nanoseconds from the start of the simulation.
    pub(crate) at_ns: u64,
    /// Index into [`Traffic::keys`].
    pub(crate) key: usize,
}

/// The requests to replay, in time order, and the keys they are for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Traffic {
    /// Distinct keys, as written (generated keys are `k0`, `k1`, ...).
    pub(crate) keys: Vec<String>,
    /// Requests sorted by time; ties keep their input order.
    pub(crate) arrivals: Vec<Arrival>,
}

impl Traffic {
    /// When the last request arrives, or 0 with no requests.
    pub(crate) fn last_ns(&self) -> u64 {
        self.arrivals.last().map_or(0, |a| a.at_ns)
    }

    /// Drops the requests at or after `end_ns`; returns how many went.
    pub(crate) fn truncate(&mut self, end_ns: u64) -> usize {
        let keep = self.arrivals.partition_point(|a| a.at_ns < end_ns);
        let dropped = self.arrivals.len() - keep;
        self.arrivals.truncate(keep);
        dropped
    }
}

/// Why traffic could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TrafficError {
    /// A `--rate` that did not parse.
    Rate { text: String, reason: &'static str },
    /// A line of a traffic file that did not parse (1-based).
    Line { line: usize, reason: String },
    /// The pattern asks for more than [`MAX_REQUESTS`].
    TooMany { requests: u128 },
    /// The first burst would start at or after the end.
    BurstAfterEnd { offset_ns: u64, duration_ns: u64 },
}

impl fmt::Display for TrafficError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rate { text, reason } => {
                write!(f, "rate `{text}`: {reason} (e.g. 30/s, 100/1m or 5/500ms)")
            }
            Self::Line { line, reason } => write!(f, "line {line}: {reason}"),
            Self::TooMany { requests } => write!(
                f,
                "the pattern makes {requests} requests, above the maximum of {MAX_REQUESTS}; \
                 shorten --duration or lower --rate/--burst"
            ),
            Self::BurstAfterEnd {
                offset_ns,
                duration_ns,
            } => write!(
                f,
                "the first burst (--offset {}) is not before the end (--duration {})",
                format_duration(*offset_ns),
                format_duration(*duration_ns)
            ),
        }
    }
}

impl std::error::Error for TrafficError {}

/// Generates `pattern` over `[0, duration_ns)`, spreading requests round-robin over `keys`
/// keys (at least one) in time order.
pub(crate) fn generate(
    pattern: &Pattern,
    duration_ns: u64,
    keys: usize,
) -> Result<Traffic, TrafficError> {
    let mut times: Vec<u64> = match *pattern {
        Pattern::Constant(rate) => {
            check_len(rate.len(duration_ns))?;
            rate.offsets(duration_ns).collect()
        }
        Pattern::Burst {
            size,
            every,
            offset,
            background,
        } => {
            let offset_ns = nanos(offset);
            if offset_ns >= duration_ns {
                return Err(TrafficError::BurstAfterEnd {
                    offset_ns,
                    duration_ns,
                });
            }
            let every_ns = every.map(nanos).filter(|&e| e > 0);
            let bursts = every_ns.map_or(1, |e| (duration_ns - 1 - offset_ns) / e + 1);
            let background_len = background.map_or(0, |r| r.len(duration_ns));
            check_len(u128::from(bursts) * u128::from(size) + background_len)?;
            let mut times = Vec::new();
            for k in 0..bursts {
                let at = offset_ns.saturating_add(k.saturating_mul(every_ns.unwrap_or(0)));
                times.extend(std::iter::repeat_n(at, usize::try_from(size).unwrap_or(0)));
            }
            if let Some(rate) = background {
                times.extend(rate.offsets(duration_ns));
            }
            times.sort_unstable();
            times
        }
    };
    times.retain(|&at| at < duration_ns);
    let keys = keys.max(1);
    Ok(Traffic {
        keys: (0..keys).map(|k| format!("k{k}")).collect(),
        arrivals: times
            .into_iter()
            .enumerate()
            .map(|(i, at_ns)| Arrival {
                at_ns,
                key: i % keys,
            })
            .collect(),
    })
}

fn check_len(requests: u128) -> Result<(), TrafficError> {
    if requests > u128::from(MAX_REQUESTS) {
        Err(TrafficError::TooMany { requests })
    } else {
        Ok(())
    }
}

/// Reads a traffic file: one request per line, `TIME [KEY]`. `TIME` is seconds from the start
/// (`0.9`, `12`) or a duration (`900ms`); `#` starts a comment. Lines without a key are
/// spread round-robin over `keys` generated keys (`k0`, `k1`, ...).
pub(crate) fn parse_file(text: &str, keys: usize) -> Result<Traffic, TrafficError> {
    let keys = keys.max(1);
    let mut names: Vec<String> = (0..keys).map(|k| format!("k{k}")).collect();
    let mut arrivals = Vec::new();
    let mut unkeyed = 0usize;
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        let bad = |reason: String| TrafficError::Line {
            line: line_no,
            reason,
        };
        let content = line.split_once('#').map_or(line, |(before, _)| before);
        let mut fields = content.split_whitespace();
        let Some(time) = fields.next() else {
            continue;
        };
        let key = fields.next();
        if let Some(extra) = fields.next() {
            return Err(bad(format!(
                "unexpected `{extra}`; a line is TIME [KEY], e.g. `0.9 alice`"
            )));
        }
        let at_ns = parse_time(time).map_err(|e| bad(format!("time: {e}")))?;
        let key = match key {
            None => {
                unkeyed += 1;
                (unkeyed - 1) % keys
            }
            Some(k) if k.len() > MAX_KEY_LEN => {
                return Err(bad(format!(
                    "the key is {} bytes, above the maximum of {MAX_KEY_LEN}",
                    k.len()
                )))
            }
            Some(k) => match names.iter().position(|n| n == k) {
                Some(i) => i,
                None => {
                    names.push(k.to_owned());
                    names.len() - 1
                }
            },
        };
        if u64::try_from(arrivals.len()).unwrap_or(u64::MAX) >= MAX_REQUESTS {
            return Err(TrafficError::TooMany {
                requests: u128::from(MAX_REQUESTS) + 1,
            });
        }
        arrivals.push(Arrival { at_ns, key });
    }
    arrivals.sort_by_key(|a| a.at_ns);
    Ok(Traffic {
        keys: names,
        arrivals,
    })
}

/// A traffic-file timestamp: bare seconds (`0.9`) or a duration (`900ms`).
fn parse_time(text: &str) -> Result<u64, DurationError> {
    if text.ends_with(|c: char| c.is_ascii_digit() || c == '.') {
        parse_seconds(text)
    } else {
        parse_duration(text).map(nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn times(t: &Traffic) -> Vec<u64> {
        t.arrivals.iter().map(|a| a.at_ns).collect()
    }

    #[test]
    fn rates_parse_with_or_without_a_number_before_the_unit() {
        let r: Rate = "30/s".parse().unwrap();
        assert_eq!((r.count, r.per), (30, Duration::from_secs(1)));
        let r: Rate = "5/500ms".parse().unwrap();
        assert_eq!((r.count, r.per), (5, Duration::from_millis(500)));
        assert_eq!(r.to_string(), "5/500ms");
        assert_eq!(
            "100/1m".parse::<Rate>().unwrap().per,
            Duration::from_secs(60)
        );
        for bad in ["30", "0/s", "x/s", "30/", "30/0s", "30/parsec"] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
        assert_eq!(
            "30".parse::<Rate>().unwrap_err().to_string(),
            "rate `30`: expected COUNT/PERIOD (e.g. 30/s, 100/1m or 5/500ms)"
        );
    }

    #[test]
    fn constant_traffic_is_evenly_spaced() {
        let t = generate(&Pattern::Constant("4/s".parse().unwrap()), 2 * S, 1).unwrap();
        assert_eq!(
            times(&t),
            [0, 250, 500, 750, 1000, 1250, 1500, 1750].map(|ms| ms * 1_000_000)
        );
        // 3/s does not divide a second: offsets round down, the count is still exact.
        let t = generate(&Pattern::Constant("3/s".parse().unwrap()), 10 * S, 1).unwrap();
        assert_eq!(t.arrivals.len(), 30);
        assert_eq!(t.arrivals[1].at_ns, 333_333_333);
    }

    #[test]
    fn bursts_repeat_over_a_background_and_keys_rotate() {
        let pattern = Pattern::Burst {
            size: 3,
            every: Some(Duration::from_secs(2)),
            offset: Duration::from_millis(500),
            background: Some("1/s".parse().unwrap()),
        };
        let t = generate(&pattern, 4 * S, 2).unwrap();
        let ms = |v: &[u64]| v.iter().map(|ns| ns / 1_000_000).collect::<Vec<_>>();
        assert_eq!(
            ms(&times(&t)),
            [0, 500, 500, 500, 1000, 2000, 2500, 2500, 2500, 3000]
        );
        let keys: Vec<usize> = t.arrivals.iter().map(|a| a.key).collect();
        assert_eq!(keys, [0, 1, 0, 1, 0, 1, 0, 1, 0, 1]);
        assert_eq!(t.keys, ["k0", "k1"]);
    }

    #[test]
    fn a_single_burst_and_its_limits() {
        let once = Pattern::Burst {
            size: 30,
            every: None,
            offset: Duration::from_millis(900),
            background: None,
        };
        let t = generate(&once, 3 * S, 1).unwrap();
        assert_eq!(t.arrivals.len(), 30);
        assert!(t.arrivals.iter().all(|a| a.at_ns == 900_000_000));
        assert!(matches!(
            generate(&once, S / 2, 1),
            Err(TrafficError::BurstAfterEnd { .. })
        ));
        let huge = Pattern::Constant("1000000/s".parse().unwrap());
        assert!(matches!(
            generate(&huge, 3_600 * S, 1),
            Err(TrafficError::TooMany { .. })
        ));
    }

    #[test]
    fn traffic_files_take_seconds_durations_keys_and_comments() {
        let text = "# a burst\n0.9 alice\n900ms bob  # same instant\n\n0.1\n2\n1.5 alice\n";
        let t = parse_file(text, 1).unwrap();
        assert_eq!(
            times(&t),
            [100_000_000, 900_000_000, 900_000_000, 1_500_000_000, 2 * S]
        );
        assert_eq!(t.keys, ["k0", "alice", "bob"]);
        let keys: Vec<usize> = t.arrivals.iter().map(|a| a.key).collect();
        assert_eq!(keys, [0, 1, 2, 1, 0]);
        assert_eq!(t.last_ns(), 2 * S);

        let spread = parse_file("0\n0\n0\n", 2).unwrap();
        let keys: Vec<usize> = spread.arrivals.iter().map(|a| a.key).collect();
        assert_eq!(keys, [0, 1, 0]);
    }

    #[test]
    fn traffic_file_errors_name_the_line() {
        assert_eq!(
            parse_file("0.1\nsoon\n", 1).unwrap_err().to_string(),
            "line 2: time: invalid duration 'soon': expected numbers with units, \
             e.g. 250ms, 1.5s or 1h2m3.5s (no sign, no spaces)"
        );
        assert_eq!(
            parse_file("0.1 a b\n", 1).unwrap_err().to_string(),
            "line 1: unexpected `b`; a line is TIME [KEY], e.g. `0.9 alice`"
        );
        assert!(parse_file("-1\n", 1).is_err());
        assert!(parse_file(&format!("1 {}\n", "k".repeat(300)), 1).is_err());
    }

    #[test]
    fn truncate_drops_the_tail() {
        let mut t = parse_file("0\n1\n2\n3\n", 1).unwrap();
        assert_eq!(t.truncate(2 * S), 2);
        assert_eq!(times(&t), [0, S]);
    }
}
