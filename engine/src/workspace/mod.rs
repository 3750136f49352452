//! Workspaces of coding sessions (core §10.4; coding profile §6, §7.3, §7.4): a git
//! worktree per session on its own branch, diffs against the base with vetting,
//! commits, merges, test results, transcripts — and never a lost change.
//!
//! ```text
//! provision(run, base, sessions)   before any agent starts; a failure fails the run
//!   -> RunWorkspaces (workspaces.json in the run dir; cwd of each session's config)
//! during the run: agent-emitted artifacts stored (ArtifactStore::keep),
//!   transcripts written per session (transcript::spawn), race pickers see
//!   candidates' diffs (Candidates)
//! collect(...)                     at the end: diff + vet, --commit, tests, artifacts
//! capfleet diff | merge | clean    later: diff::diff, merge::merge, clean::clean
//! ```
//!
//! Nothing here removes a worktree except `clean`, which refuses to lose work.

pub(crate) mod artifacts;
pub(crate) mod candidates;
pub mod clean;
pub(crate) mod collect;
pub mod commit;
pub mod diff;
mod error;
pub(crate) mod locks;
pub mod merge;
pub mod provision;
pub(crate) mod record;
pub mod repo;
pub(crate) mod status;
pub(crate) mod testrun;
pub(crate) mod transcript;
pub(crate) mod vet;

pub use artifacts::{ARTIFACTS_DIR, sanitize};
pub use record::RECORD_FILE;
pub use testrun::{TestCommand, TestRun, run_tests};
pub use vet::Vetter;

use tokio::sync::mpsc;

pub use artifacts::ArtifactStore;
pub use error::WorkspaceError;
pub use record::{Kind, RunWorkspaces, Workspace};

use capfleet_wire::events::{Published, Publisher, urn};

/// The directory (in a repository's working tree, or beside a plain session's cwd)
/// that holds the worktrees.
pub(crate) const WORKTREES_DIR: &str = ".cap-worktrees";

/// The last URN segment of the workspace records' stream.
pub(crate) const WORKSPACE_URN_SEGMENT: &str = "workspace";

/// The workspace records' stream: artifacts and vetting warnings published under
/// `cap://<fleet>/workspace` (numbered like a session's events), each naming its
/// session in `_meta."capfleet.session"`, to the journal and the run's watchers.
pub(crate) fn publisher(fleet: &str, sinks: Vec<mpsc::Sender<Published>>, after: u64) -> Publisher {
    Publisher::continuing(urn(fleet, WORKSPACE_URN_SEGMENT), sinks, after)
}
