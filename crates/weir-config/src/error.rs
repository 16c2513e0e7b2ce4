//! Errors of this crate: [`ConfigError`] when a rule file cannot become a [`RuleSet`]
//! (load time; the server keeps its old rules), and [`MatchError`] when a request cannot be
//! matched (request time; the server answers 400 / `INVALID_ARGUMENT`). A request that no
//! rule covers is not an error: its descriptor matches `None`.
//!
//! [`RuleSet`]: crate::RuleSet

use std::fmt;
use std::path::{Path, PathBuf};

/// A rule file (or directory) could not be loaded. Every message names the file, the place
/// in the file (a path such as `descriptors[1].descriptors[0].rate_limit.unit`, and a line
/// when known) and the reason.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file or directory could not be read.
    #[error("{}: cannot read: {source}", file.display())]
    Io {
        /// The file or directory.
        file: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML, or its YAML does not have the expected shape (an unknown
    /// field, a duplicate key, a wrong type, a resource limit hit).
    #[error("{}: {}", Place { file, line: *line, path }, reason)]
    Yaml {
        /// The file.
        file: PathBuf,
        /// The 1-based line, when the YAML library reports one.
        line: Option<u32>,
        /// Where in the document, e.g. `descriptors[0].rate_limit`; empty when unknown.
        path: String,
        /// What the YAML library reported.
        reason: String,
    },
    /// The YAML is well-formed but a value is not acceptable.
    #[error("{}: {}", Place { file, line: *line, path }, reason)]
    Invalid {
        /// The file.
        file: PathBuf,
        /// The 1-based line of the offending node, when known.
        line: Option<u32>,
        /// Where in the document, e.g. `descriptors[1].rate_limit.unit`.
        path: String,
        /// Why the value is not acceptable.
        reason: String,
    },
    /// Two files define the same domain (envoyproxy/ratelimit rejects this too).
    #[error("{}: domain '{domain}' is already defined in {}", second.display(), first.display())]
    DuplicateDomain {
        /// The domain.
        domain: String,
        /// The file that defined it first.
        first: PathBuf,
        /// The file that defined it again.
        second: PathBuf,
    },
    /// The rules are valid YAML and valid rules, but the program loading them cannot run
    /// them (e.g. `weir proxy` needs the domain `proxy`).
    #[error("{}: {reason}", origin.display())]
    Rejected {
        /// The file or directory, as the loader names it.
        origin: PathBuf,
        /// Why.
        reason: String,
    },
    /// A directory holds no `*.yaml` or `*.yml` file.
    #[error("{}: no *.yaml or *.yml rule files", dir.display())]
    NoRuleFiles {
        /// The directory.
        dir: PathBuf,
    },
    /// A file is larger than [`bounds::MAX_FILE_BYTES`](crate::bounds::MAX_FILE_BYTES).
    #[error("{}: {len} bytes or more, above the maximum of {max}", file.display())]
    FileTooLarge {
        /// The file.
        file: PathBuf,
        /// Its size in bytes.
        len: u64,
        /// The largest size accepted.
        max: u64,
    },
}

impl ConfigError {
    /// The file the error is about.
    pub fn file(&self) -> &Path {
        match self {
            Self::Io { file, .. }
            | Self::Yaml { file, .. }
            | Self::Invalid { file, .. }
            | Self::FileTooLarge { file, .. } => file,
            Self::DuplicateDomain { second, .. } => second,
            Self::NoRuleFiles { dir } => dir,
            Self::Rejected { origin, .. } => origin,
        }
    }
}

/// `file:line: path` with the missing parts left out.
struct Place<'a> {
    file: &'a Path,
    line: Option<u32>,
    path: &'a str,
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        Ok(())
    }
}

/// A request cannot be matched: it breaks a documented [limit](crate::bounds) or names a
/// domain no rule file defines. Messages say what was wrong and, for limits, the limit;
/// indexes are 0-based positions in the request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatchError {
    /// The domain is empty.
    #[error("domain is empty")]
    EmptyDomain,
    /// The domain is longer than [`bounds::MAX_DOMAIN_LEN`](crate::bounds::MAX_DOMAIN_LEN).
    #[error("domain is {len} bytes, above the maximum of {max}")]
    DomainTooLong {
        /// Its length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// No rule file defines the domain. Not a refusal of the request: `weir serve` answers
    /// it `OK` with no limit on every descriptor, as envoyproxy/ratelimit does.
    #[error("unknown domain '{0}'")]
    UnknownDomain(String),
    /// The request has no descriptors.
    #[error("no descriptors")]
    NoDescriptors,
    /// More descriptors than [`bounds::MAX_DESCRIPTORS`](crate::bounds::MAX_DESCRIPTORS).
    #[error("{count} descriptors, above the maximum of {max}")]
    TooManyDescriptors {
        /// How many the request has.
        count: usize,
        /// The maximum.
        max: usize,
    },
    /// A descriptor has more entries than
    /// [`bounds::MAX_ENTRIES`](crate::bounds::MAX_ENTRIES).
    #[error("descriptors[{descriptor}]: {count} entries, above the maximum of {max}")]
    TooManyEntries {
        /// The descriptor's index.
        descriptor: usize,
        /// How many entries it has.
        count: usize,
        /// The maximum.
        max: usize,
    },
    /// An entry's key is longer than [`bounds::MAX_KEY_LEN`](crate::bounds::MAX_KEY_LEN).
    #[error(
        "descriptors[{descriptor}].entries[{entry}]: key is {len} bytes, above the maximum of {max}"
    )]
    KeyTooLong {
        /// The descriptor's index.
        descriptor: usize,
        /// The entry's index.
        entry: usize,
        /// The key's length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// An entry's value is longer than [`bounds::MAX_VALUE_LEN`](crate::bounds::MAX_VALUE_LEN).
    #[error(
        "descriptors[{descriptor}].entries[{entry}]: value is {len} bytes, above the maximum of {max}"
    )]
    ValueTooLong {
        /// The descriptor's index.
        descriptor: usize,
        /// The entry's index.
        entry: usize,
        /// The value's length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// A hits addend (per request or per descriptor) is above
    /// [`bounds::MAX_HITS_ADDEND`](crate::bounds::MAX_HITS_ADDEND).
    #[error("{place}hits_addend is {value}, above the maximum of {max}")]
    HitsAddendTooLarge {
        /// `descriptors[i].` for a descriptor's addend, empty for the request's.
        place: String,
        /// The value given.
        value: u64,
        /// The maximum.
        max: u64,
    },
    /// A descriptor's limit override is not a valid rule (zero requests per unit).
    #[error("descriptors[{descriptor}].limit: {reason}")]
    BadLimitOverride {
        /// The descriptor's index.
        descriptor: usize,
        /// Why the override is not valid.
        reason: String,
    },
}
