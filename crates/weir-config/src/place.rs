//! Where a problem is in a rule file: the file, a path such as
//! `descriptors[1].rate_limit.unit`, and the line of the offending node. Every validation
//! error in `compile.rs` and `block.rs` is built here, so all read alike.

use std::path::Path;

use serde_saphyr::Spanned;

use crate::error::ConfigError;

/// A position in a file being compiled.
#[derive(Clone)]
pub(crate) struct Place<'a> {
    pub(crate) file: &'a Path,
    pub(crate) path: String,
    pub(crate) line: Option<u32>,
}

impl<'a> Place<'a> {
    /// The document's root.
    pub(crate) fn root(file: &'a Path) -> Self {
        Self {
            file,
            path: String::new(),
            line: None,
        }
    }

    /// A field below this place; its line if it is present, else this place's line.
    pub(crate) fn field<T>(&self, name: &str, node: Option<&Spanned<T>>) -> Self {
        let path = if self.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.path)
        };
        Self {
            file: self.file,
            path,
            line: node.and_then(line_of).or(self.line),
        }
    }

    /// A field below this place, at a known line (else this place's line).
    pub(crate) fn named(&self, name: &str, line: Option<u32>) -> Self {
        let mut place = self.field::<()>(name, None);
        place.line = line.or(self.line);
        place
    }

    /// The `index`th element of the list at this place.
    pub(crate) fn index<T>(&self, index: usize, node: &Spanned<T>) -> Self {
        Self {
            file: self.file,
            path: format!("{}[{index}]", self.path),
            line: line_of(node).or(self.line),
        }
    }

    /// An error at this place.
    pub(crate) fn error(&self, reason: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_path_buf(),
            line: self.line,
            path: self.path.clone(),
            reason: reason.into(),
        }
    }
}

/// The 1-based line of a node, if known.
pub(crate) fn line_of<T>(node: &Spanned<T>) -> Option<u32> {
    let line = node.referenced.line();
    u32::try_from(line).ok().filter(|l| *l > 0)
}
