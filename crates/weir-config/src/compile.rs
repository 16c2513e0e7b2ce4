//! Raw YAML → validated rule tree (stub; implementation follows).

use std::path::Path;
use std::sync::Arc;

use crate::error::ConfigError;
use crate::ruleset::RuleInfo;

/// One domain's rule tree.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tree {
    rules: usize,
}

impl Tree {
    pub(crate) fn rule_count(&self) -> usize {
        self.rules
    }
}

pub(crate) struct Compiled {
    pub(crate) domain: Arc<str>,
    pub(crate) tree: Tree,
    pub(crate) rules: Vec<RuleInfo>,
}

pub(crate) fn compile(file: &Path, _yaml: &str) -> Result<Compiled, ConfigError> {
    Err(ConfigError::Invalid {
        file: file.to_path_buf(),
        line: None,
        path: String::new(),
        reason: "not implemented yet".into(),
    })
}
