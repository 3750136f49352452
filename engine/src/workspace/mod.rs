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

pub mod artifacts;
pub mod candidates;
pub mod clean;
pub mod collect;
pub mod commit;
pub mod diff;
mod error;
pub mod locks;
pub mod merge;
pub mod provision;
pub mod record;
pub mod repo;
pub mod status;
pub mod testrun;
pub mod transcript;
pub mod vet;

use tokio::sync::mpsc;

pub use artifacts::ArtifactStore;
pub use error::WorkspaceError;
pub use record::{Kind, RunWorkspaces, Workspace};

use capfleet_wire::events::{Published, Publisher, urn};

/// The directory (in a repository's working tree, or beside a plain session's cwd)
/// that holds the worktrees.
pub const WORKTREES_DIR: &str = ".cap-worktrees";

/// The last URN segment of the workspace records' stream.
pub const WORKSPACE_URN_SEGMENT: &str = "workspace";

/// The workspace records' stream: artifacts and vetting warnings published under
/// `cap://<fleet>/workspace` (numbered like a session's events), each naming its
/// session in `_meta."capfleet.session"`, to the journal and the run's watchers.
pub fn publisher(fleet: &str, sinks: Vec<mpsc::Sender<Published>>, after: u64) -> Publisher {
    Publisher::continuing(urn(fleet, WORKSPACE_URN_SEGMENT), sinks, after)
}
