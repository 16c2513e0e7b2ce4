//! [`RuleSet`]: the validated, immutable snapshot of every domain's rule tree (its rules are
//! [`RuleInfo`]s, in `info.rs`). Built by [`RuleSet::load`] (a file or a directory) or
//! [`RuleSet::parse`]; queried by [`RuleSet::matches`] (in `matcher.rs`). Rule files are
//! read here, through `file.rs`'s one safe reader, and nowhere else in the crate.

use crate::bounds::{MAX_FILES, MAX_FILE_BYTES};
use crate::compile;
use crate::error::ConfigError;
use crate::file::{read_regular, FileError, Links};
use crate::info::RuleInfo;
use crate::tree::Tree;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The rules of every configured domain: validated, immutable, cheap to clone (one `Arc`).
///
/// The server holds one snapshot and replaces it whole on reload; a bad file never yields a
/// partial `RuleSet`.
///
/// ```
/// use weir_config::RuleSet;
/// let rules = RuleSet::example();
/// assert!(rules.domains().any(|d| d == "api"));
/// assert!(rules.rules().iter().any(|r| r.shadow));
/// ```
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    domains: BTreeMap<Arc<str>, Domain>,
    rules: Vec<RuleInfo>,
}

#[derive(Debug)]
pub(crate) struct Domain {
    pub(crate) file: PathBuf,
    pub(crate) tree: Arc<Tree>,
    /// Index of this domain's first rule in `Inner::rules`.
    pub(crate) first_rule: usize,
}

/// The embedded example rules: this crate's `example.yaml` (inside the package, so it
/// publishes), which `config/example.yaml` links to.
const EXAMPLE: &str = include_str!("../example.yaml");

impl RuleSet {
    /// A copy of these rules for one thread: the same rules, matched the same way, whose
    /// rule ids and names are allocations of its own (the descriptor trees are shared:
    /// matching only reads them). A match clones the id and the name it reports; on one
    /// set shared by every core, each clone and drop writes a count that every core writes,
    /// and its cache line moves between cores on every request (issue 31). The engine
    /// keeps one copy a thread (`RuleBook::snapshot_here`).
    ///
    /// ```
    /// use weir_config::RuleSet;
    /// let rules = RuleSet::example();
    /// let copy = rules.fork();
    /// assert_eq!(copy.rules(), rules.rules());
    /// assert!(!std::sync::Arc::ptr_eq(&copy.rules()[0].id, &rules.rules()[0].id));
    /// ```
    pub fn fork(&self) -> RuleSet {
        let own = |text: &Arc<str>| Arc::<str>::from(&**text);
        RuleSet {
            inner: Arc::new(Inner {
                domains: self
                    .inner
                    .domains
                    .iter()
                    .map(|(name, domain)| {
                        let copy = Domain {
                            file: domain.file.clone(),
                            tree: Arc::clone(&domain.tree),
                            first_rule: domain.first_rule,
                        };
                        (Arc::clone(name), copy)
                    })
                    .collect(),
                rules: self
                    .inner
                    .rules
                    .iter()
                    .map(|rule| RuleInfo {
                        id: own(&rule.id),
                        name: rule.name.as_ref().map(own),
                        ..rule.clone()
                    })
                    .collect(),
            }),
        }
    }

    /// Loads a rule file, or every `*.yaml` / `*.yml` file of a directory (not recursive,
    /// hidden files skipped, in name order). Each file holds one domain, as in
    /// envoyproxy/ratelimit; a domain defined in two files is an error naming both.
    ///
    /// Each file is read by [`read_regular`](crate::file::read_regular), up to
    /// [`MAX_FILE_BYTES`]. Symbolic links are
    /// followed (Kubernetes mounts ConfigMaps through them), but a rule file must end at a
    /// regular file: a dangling or looping link, a FIFO, a device or a directory named like a
    /// rule file is an error naming it (a reload then keeps the old rules), never skipped
    /// and never waited on.
    pub fn load(path: &Path) -> Result<RuleSet, ConfigError> {
        let io = |source| ConfigError::Io {
            file: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        if !meta.is_dir() {
            return Self::parse_file(path);
        }
        let mut files = Vec::new();
        for entry in std::fs::read_dir(path).map_err(io)? {
            let file = entry.map_err(io)?.path();
            if is_rule_file(&file) {
                files.push(file);
            }
            if files.len() > MAX_FILES {
                return Err(ConfigError::Invalid {
                    file: path.to_path_buf(),
                    line: None,
                    path: String::new(),
                    reason: format!("more than {MAX_FILES} rule files"),
                });
            }
        }
        if files.is_empty() {
            return Err(ConfigError::NoRuleFiles {
                dir: path.to_path_buf(),
            });
        }
        files.sort();
        let mut set = RuleSet::default();
        for file in files {
            set = set.merge(Self::parse_file(&file)?)?;
        }
        Ok(set)
    }

    fn parse_file(file: &Path) -> Result<RuleSet, ConfigError> {
        let bytes = read_regular(file, MAX_FILE_BYTES, Links::Follow).map_err(|e| match e {
            FileError::TooLarge { len, max } => ConfigError::FileTooLarge {
                file: file.to_path_buf(),
                len,
                max,
            },
            FileError::NotRegular(what) => ConfigError::Invalid {
                file: file.to_path_buf(),
                line: None,
                path: String::new(),
                reason: format!("not a regular file ({what}): rule files must be regular files"),
            },
            FileError::Io(source) => ConfigError::Io {
                file: file.to_path_buf(),
                source,
            },
            other => ConfigError::Io {
                file: file.to_path_buf(),
                source: std::io::Error::other(other.to_string()),
            },
        })?;
        let text = String::from_utf8(bytes).map_err(|_| ConfigError::Io {
            file: file.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
        })?;
        Self::parse_path(file, &text)
    }

    /// Parses one rule document (one domain). `source_name` names it in errors and in
    /// [`RuleInfo::file`].
    pub fn parse(source_name: &str, yaml: &str) -> Result<RuleSet, ConfigError> {
        Self::parse_path(Path::new(source_name), yaml)
    }

    fn parse_path(file: &Path, yaml: &str) -> Result<RuleSet, ConfigError> {
        let compiled = compile::compile(file, yaml)?;
        let mut domains = BTreeMap::new();
        domains.insert(
            compiled.domain,
            Domain {
                file: file.to_path_buf(),
                tree: compiled.tree,
                first_rule: 0,
            },
        );
        Ok(RuleSet {
            inner: Arc::new(Inner {
                domains,
                rules: compiled.rules,
            }),
        })
    }

    /// The example rules shipped as `config/example.yaml` (what `weir serve` runs with no
    /// `--config`). A test guarantees they load; were they ever not to, this returns an empty
    /// set rather than panic.
    pub fn example() -> RuleSet {
        Self::parse("config/example.yaml", EXAMPLE).unwrap_or_default()
    }

    /// Both sets' domains in one. A domain in both is [`ConfigError::DuplicateDomain`].
    pub fn merge(self, other: RuleSet) -> Result<RuleSet, ConfigError> {
        self.merge_with(other, false)
    }

    /// Both sets' domains in one, a domain in both merged as envoyproxy/ratelimit's
    /// `MERGE_DOMAIN_CONFIG=true` merges it: `other`'s top-level descriptors are added to
    /// the domain's, and a `key` / `key_value` both define is an error naming it (ratelimit's
    /// "duplicate descriptor composite key").
    pub fn merge_domains(self, other: RuleSet) -> Result<RuleSet, ConfigError> {
        self.merge_with(other, true)
    }

    fn merge_with(self, other: RuleSet, merge_domains: bool) -> Result<RuleSet, ConfigError> {
        // Every domain with its parts (a tree and its rules, per set holding it), by name.
        type Part<'a> = (&'a Domain, &'a [RuleInfo]);
        let mut by_name: BTreeMap<&Arc<str>, Vec<Part<'_>>> = BTreeMap::new();
        for set in [&self, &other] {
            for (name, domain) in &set.inner.domains {
                let parts = by_name.entry(name).or_default();
                if let (Some((first, _)), false) = (parts.first(), merge_domains) {
                    return Err(ConfigError::DuplicateDomain {
                        domain: name.to_string(),
                        first: first.file.clone(),
                        second: domain.file.clone(),
                    });
                }
                parts.push((domain, set.domain_rules(domain)));
            }
        }
        let mut domains = BTreeMap::new();
        let mut rules = Vec::with_capacity(self.inner.rules.len() + other.inner.rules.len());
        for (name, parts) in by_name {
            let first_rule = rules.len();
            let Some(((first, first_rules), rest)) = parts.split_first() else {
                continue;
            };
            rules.extend_from_slice(first_rules);
            let mut tree = Arc::clone(&first.tree);
            for (domain, domain_rules) in rest {
                let mut merged = Tree::clone(&tree);
                merged
                    .root
                    .merge(domain.tree.root.clone(), merged.rule_count)
                    .map_err(|composite| ConfigError::Invalid {
                        file: domain.file.clone(),
                        line: None,
                        path: "descriptors".to_string(),
                        reason: format!(
                            "duplicate descriptor composite key '{name}.{composite}' (domain '{name}' \
                             is merged with {} by MERGE_DOMAIN_CONFIG)",
                            first.file.display()
                        ),
                    })?;
                merged.rule_count += domain.tree.rule_count;
                rules.extend_from_slice(domain_rules);
                tree = Arc::new(merged);
            }
            domains.insert(
                Arc::clone(name),
                Domain {
                    file: first.file.clone(),
                    tree,
                    first_rule,
                },
            );
        }
        Ok(RuleSet {
            inner: Arc::new(Inner { domains, rules }),
        })
    }

    fn domain_rules(&self, domain: &Domain) -> &[RuleInfo] {
        let end = domain.first_rule.saturating_add(domain.tree.rule_count);
        self.inner
            .rules
            .get(domain.first_rule..end)
            .unwrap_or_default()
    }

    /// Every rule, domains in name order, rules in file order.
    pub fn rules(&self) -> &[RuleInfo] {
        &self.inner.rules
    }

    /// The rule with this id, if any.
    pub fn rule(&self, id: &str) -> Option<&RuleInfo> {
        self.inner.rules.iter().find(|r| r.id.as_ref() == id)
    }

    /// The configured domains, in name order.
    pub fn domains(&self) -> impl Iterator<Item = &str> {
        self.inner.domains.keys().map(|d| d.as_ref())
    }

    /// The file a domain came from.
    pub fn domain_file(&self, domain: &str) -> Option<&Path> {
        self.inner.domains.get(domain).map(|d| d.file.as_path())
    }

    /// Whether no domain is configured.
    pub fn is_empty(&self) -> bool {
        self.inner.domains.is_empty()
    }

    pub(crate) fn domain(&self, name: &str) -> Option<(&Domain, &[RuleInfo])> {
        let domain = self.inner.domains.get(name)?;
        Some((domain, self.domain_rules(domain)))
    }
}

fn is_rule_file(path: &Path) -> bool {
    let hidden = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_none_or(|n| n.starts_with('.'));
    let yaml = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e == "yaml" || e == "yml");
    !hidden && yaml
}
