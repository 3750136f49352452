//! What a run provisioned, kept in its run directory (`workspaces.json`) so that
//! `capfleet diff`, `merge` and `clean` find each session's worktree and branch
//! after the run.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{Context, WorkspaceError};
use super::testrun::TestCommand;

/// The record's file name inside a run directory.
pub const RECORD_FILE: &str = "workspaces.json";

/// One session's workspace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workspace {
    /// The session's name in its fleet.
    pub session: String,
    /// The worktree's root, or the plain directory.
    pub path: PathBuf,
    /// Where the agent runs: `path`, or the same subdirectory the session's `cwd`
    /// was in inside its repository.
    pub cwd: PathBuf,
    pub kind: Kind,
    /// Declared paths (globs, relative to the workspace root): changes elsewhere are
    /// flagged by vetting. Empty: no such check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Run after the session's work to produce a `test_result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_command: Option<TestCommand>,
}

/// A git worktree, or a plain directory (the session's cwd is in no repository).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Kind {
    Worktree {
        /// The working directory of the repository the worktree belongs to.
        repo: PathBuf,
        /// `capfleet/<run-id>/<session>`.
        branch: String,
        /// The base commit (full sha).
        base: String,
        /// The worktree's name in git (`.git/worktrees/<name>`).
        name: String,
    },
    Plain,
}

impl Workspace {
    /// The branch, for a worktree.
    pub fn branch(&self) -> Option<&str> {
        match &self.kind {
            Kind::Worktree { branch, .. } => Some(branch),
            Kind::Plain => None,
        }
    }

    /// The base commit, for a worktree.
    pub fn base(&self) -> Option<&str> {
        match &self.kind {
            Kind::Worktree { base, .. } => Some(base),
            Kind::Plain => None,
        }
    }
}

/// Every workspace of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunWorkspaces {
    pub run_id: String,
    pub workspaces: Vec<Workspace>,
}

impl RunWorkspaces {
    /// Write `workspaces.json` into `run_dir`.
    pub fn save(&self, run_dir: &Path) -> Result<(), WorkspaceError> {
        let path = run_dir.join(RECORD_FILE);
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::from);
        json.and_then(|j| std::fs::write(&path, j))
            .ctx("cannot record the run's workspaces", &path)
    }

    /// Read `workspaces.json` from `run_dir`.
    pub fn load(run_dir: &Path) -> Result<RunWorkspaces, WorkspaceError> {
        let path = run_dir.join(RECORD_FILE);
        let text = std::fs::read(&path).ctx(
            "cannot read the run's workspaces (did the run provision any?)",
            &path,
        )?;
        serde_json::from_slice(&text)
            .map_err(std::io::Error::from)
            .ctx("the run's workspace record does not parse", &path)
    }

    /// The workspace of `session`.
    pub fn find(&self, session: &str) -> Option<&Workspace> {
        self.workspaces.iter().find(|w| w.session == session)
    }

    /// The session names, for error messages.
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.workspaces.iter().map(|w| w.session.as_str()).collect();
        names.join(", ")
    }
}
