//! Reading envoyproxy/ratelimit's variables the way its settings library
//! (kelseyhightower/envconfig) reads them: booleans as Go's `strconv.ParseBool`, numbers,
//! Go durations. An empty variable counts as unset. Every error names the variable; a
//! secret's value is never repeated.

use std::time::Duration;

use anyhow::bail;

/// The environment as a lookup, so tests pass a map instead of the process's variables.
pub(crate) struct Vars<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Vars<'a> {
    /// Variables looked up with `lookup`.
    pub(crate) fn new(lookup: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Self { lookup }
    }

    /// The variable's value, trimmed; `None` when unset or empty.
    pub(crate) fn get(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// A boolean as Go reads it: 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False.
    pub(crate) fn bool(&self, name: &str) -> anyhow::Result<Option<bool>> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        match value.as_str() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(Some(true)),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(Some(false)),
            _ => bail!("{name}={value:?}: not a boolean (true or false)"),
        }
    }

    /// Whether the boolean is set to true.
    pub(crate) fn is_true(&self, name: &str) -> anyhow::Result<bool> {
        Ok(self.bool(name)?.unwrap_or(false))
    }

    /// A port number.
    pub(crate) fn port(&self, name: &str) -> anyhow::Result<Option<u16>> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        match value.parse::<u16>() {
            Ok(port) => Ok(Some(port)),
            Err(_) => bail!("{name}={value:?}: not a port number (0 to 65535)"),
        }
    }

    /// A ratio from 0 to 1.
    pub(crate) fn ratio(&self, name: &str) -> anyhow::Result<Option<f64>> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        match value.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(Some(r)),
            _ => bail!("{name}={value:?}: not a ratio from 0 to 1"),
        }
    }

    /// A Go duration (`10s`, `500ms`, `1m30s`; `0` alone too).
    pub(crate) fn duration(&self, name: &str) -> anyhow::Result<Option<Duration>> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        if value == "0" {
            return Ok(Some(Duration::ZERO));
        }
        match crate::duration::parse_duration(&value) {
            Ok(d) => Ok(Some(d)),
            Err(e) => bail!("{name}={value:?}: not a duration ({e})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_go_reads_them() {
        let lookup = |name: &str| {
            let value = match name {
                "T" => "True",
                "F" => "0",
                "BAD" => "yes",
                "PORT" => "8080",
                "BIG" => "70000",
                "D" => "1m30s",
                "ZERO" => "0",
                "EMPTY" => "  ",
                _ => return None,
            };
            Some(value.to_string())
        };
        let vars = Vars::new(&lookup);
        assert_eq!(vars.bool("T").unwrap(), Some(true));
        assert_eq!(vars.bool("F").unwrap(), Some(false));
        assert_eq!(vars.bool("EMPTY").unwrap(), None);
        assert_eq!(
            vars.bool("BAD").unwrap_err().to_string(),
            "BAD=\"yes\": not a boolean (true or false)"
        );
        assert_eq!(vars.port("PORT").unwrap(), Some(8080));
        assert!(vars.port("BIG").is_err());
        assert_eq!(vars.duration("D").unwrap(), Some(Duration::from_secs(90)));
        assert_eq!(vars.duration("ZERO").unwrap(), Some(Duration::ZERO));
    }
}
