//! Why a workspace operation failed: every git error with what was being done and
//! where, and the two refusals the coding profile names (`git_dirty`,
//! `merge_conflict`, coding §10).

use std::path::PathBuf;

use crate::protocol::ErrorKind;

/// A failed or refused workspace operation.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("{what} ({}): {source}", path.display())]
    Git {
        what: String,
        path: PathBuf,
        #[source]
        source: git2::Error,
    },
    #[error("{what} ({}): {source}", path.display())]
    Io {
        what: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {reason}", path.display())]
    Repo { path: PathBuf, reason: String },
    /// Uncommitted changes where a clean tree is required (coding `git_dirty`).
    #[error("git_dirty: {what} has uncommitted changes: {}{}", list(files), fix)]
    Dirty {
        what: String,
        files: Vec<String>,
        /// How to go on (starts with "; ").
        fix: String,
    },
    /// A merge that cannot be done without resolving conflicts (coding
    /// `merge_conflict`); nothing was changed.
    #[error(
        "merge_conflict: {branch} conflicts with {into} in {}; nothing was changed (resolve by hand: git merge {branch})",
        list(files)
    )]
    Conflict {
        branch: String,
        into: String,
        files: Vec<String>,
    },
}

impl WorkspaceError {
    /// The `cap.error` code this error carries, when the profile names one.
    pub fn code(&self) -> Option<ErrorKind> {
        match self {
            WorkspaceError::Dirty { .. } => Some(ErrorKind::GitDirty),
            WorkspaceError::Conflict { .. } => Some(ErrorKind::MergeConflict),
            _ => None,
        }
    }
}

/// Shorthands that put context on git and I/O errors.
pub(crate) trait Context<T> {
    fn ctx(self, what: impl Into<String>, path: impl Into<PathBuf>) -> Result<T, WorkspaceError>;
}

impl<T> Context<T> for Result<T, git2::Error> {
    fn ctx(self, what: impl Into<String>, path: impl Into<PathBuf>) -> Result<T, WorkspaceError> {
        self.map_err(|source| WorkspaceError::Git {
            what: what.into(),
            path: path.into(),
            source,
        })
    }
}

impl<T> Context<T> for Result<T, std::io::Error> {
    fn ctx(self, what: impl Into<String>, path: impl Into<PathBuf>) -> Result<T, WorkspaceError> {
        self.map_err(|source| WorkspaceError::Io {
            what: what.into(),
            path: path.into(),
            source,
        })
    }
}

/// At most ten file names, then a count.
pub(super) fn list(files: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut s = files
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if files.len() > SHOWN {
        s.push_str(&format!(" and {} more", files.len() - SHOWN));
    }
    s
}
