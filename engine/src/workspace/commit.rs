//! Committing a session's work on its branch (`capfleet run --commit`, `capfleet
//! merge --commit`): every change in the worktree (ignored files excepted) becomes
//! one commit authored by the agent, described as a coding §6.4 `commit` payload.
//!
//! Exactly once across a kill: the run journals the branch head a commit goes on
//! ([`head`]) before making it and the commit after; a resume that finds the start
//! without the end asks [`made_on`] whether the commit is there already (the
//! branch's head, on that parent, with the run's message) instead of committing again.
//! A kill inside the commit can leave git's lock files; the resume removes those its
//! cut commit left ([`clear_cut_locks`]) before looking or committing.

use git2::{IndexAddOption, Repository, Signature};
use serde_json::Map;

use super::error::{Context, WorkspaceError};
use super::record::{Kind, Workspace};
use super::repo::committer;
use crate::protocol::Nullable;
use crate::protocol::coding::Commit;
use capfleet_wire::clock::rfc3339_secs;

/// Where a keyed commit of a run stood when the run was cut (read from its journal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitMark {
    /// Journaled as started on branch head `parent`, never as made.
    Started { parent: String },
    /// Made: `sha`.
    Done { sha: String },
}

/// The idempotency key of `session`'s commit in a run.
pub(crate) fn key(session: &str) -> String {
    format!("commit:{session}")
}

/// The head of `ws`'s branch (full sha); `Ok(None)` for a plain directory.
pub(crate) fn head(ws: &Workspace) -> Result<Option<String>, WorkspaceError> {
    if matches!(ws.kind, Kind::Plain) {
        return Ok(None);
    }
    let repo = Repository::open(&ws.path).ctx("cannot open the worktree", &ws.path)?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .ctx("cannot read the branch head", &ws.path)?;
    Ok(Some(head.id().to_string()))
}

/// The commit a cut run made on `ws`'s branch: its head, if that has `parent` as its
/// only parent and `message` as its message.
pub(crate) fn made_on(
    ws: &Workspace,
    parent: &str,
    message: &str,
) -> Result<Option<Commit>, WorkspaceError> {
    if matches!(ws.kind, Kind::Plain) {
        return Ok(None);
    }
    let path = &ws.path;
    let repo = Repository::open(path).ctx("cannot open the worktree", path)?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .ctx("cannot read the branch head", path)?;
    let on_parent = head.parent_count() == 1
        && head.parent_id(0).ok().map(|p| p.to_string()).as_deref() == Some(parent);
    if !on_parent || head.message().ok() != Some(message) {
        return Ok(None);
    }
    let parent = head.parent(0).ctx("cannot read the parent commit", path)?;
    describe(&repo, &head, &parent, path).map(Some)
}

/// Remove the git locks a commit on `ws`'s branch that was cut by a kill left (its
/// worktree's index and HEAD, its branch's ref), those no live process holds
/// ([`super::locks`]); call it only for a commit journaled as started and never as
/// made. Returns the locks removed.
pub(crate) fn clear_cut_locks(ws: &Workspace) -> Result<Vec<std::path::PathBuf>, WorkspaceError> {
    let Some(branch) = ws.branch() else {
        return Ok(Vec::new());
    };
    let path = &ws.path;
    let repo = Repository::open(path).ctx("cannot open the worktree", path)?;
    let branch_ref = format!("refs/heads/{branch}");
    let locks = super::locks::candidates(&repo, &[&branch_ref]);
    super::locks::clear_stale(&locks).map_err(|source| WorkspaceError::Io {
        what: "cannot remove a stale git lock".into(),
        path: path.clone(),
        source,
    })
}

/// Commit everything in `ws`'s worktree on its branch; `Ok(None)` when there is
/// nothing to commit (or the workspace is a plain directory).
pub fn commit(
    ws: &Workspace,
    message: &str,
    author: &str,
) -> Result<Option<Commit>, WorkspaceError> {
    if matches!(ws.kind, Kind::Plain) {
        return Ok(None);
    }
    let path = &ws.path;
    let repo = Repository::open(path).ctx("cannot open the worktree", path)?;
    let mut index = repo.index().ctx("cannot read the index", path)?;
    index
        .add_all(["*"], IndexAddOption::DEFAULT, None)
        .and_then(|()| index.update_all(["*"], None))
        .and_then(|()| index.write())
        .ctx("cannot stage the changes", path)?;
    let tree_id = index.write_tree().ctx("cannot write the tree", path)?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_commit())
        .ctx("cannot read the branch head", path)?;
    if head.tree_id() == tree_id {
        return Ok(None);
    }
    let tree = repo.find_tree(tree_id).ctx("cannot read the tree", path)?;
    let email = format!("{}@capfleet.invalid", ws.session);
    let author_sig =
        Signature::now(author, &email).ctx("cannot make the author signature", path)?;
    let committer_sig = committer(&repo)?;
    let oid = repo
        .commit(
            Some("HEAD"),
            &author_sig,
            &committer_sig,
            message,
            &tree,
            &[&head],
        )
        .ctx("cannot commit", path)?;
    let made = repo.find_commit(oid).ctx("cannot read the commit", path)?;
    describe(&repo, &made, &head, path).map(Some)
}

/// `made` (on `parent`) as a coding §6.4 `commit` payload.
fn describe(
    repo: &Repository,
    made: &git2::Commit<'_>,
    parent: &git2::Commit<'_>,
    path: &std::path::Path,
) -> Result<Commit, WorkspaceError> {
    let stats = repo
        .diff_tree_to_tree(
            Some(&parent.tree().ctx("cannot read the tree", path)?),
            Some(&made.tree().ctx("cannot read the tree", path)?),
            None,
        )
        .and_then(|d| d.stats())
        .ctx("cannot count the changes", path)?;
    let (author, committer) = (made.author(), made.committer());
    Ok(Commit {
        sha: made.id().to_string(),
        message: Nullable::Value(made.message().unwrap_or_default().to_owned()),
        author: Nullable::Value(author.name().unwrap_or_default().to_owned()),
        committer: Nullable::Value(committer.name().unwrap_or("capfleet").to_owned()),
        committed_at: Nullable::Value(rfc3339_secs(committer.when().seconds())),
        files_changed: Nullable::Value(stats.files_changed() as u64),
        insertions: Nullable::Value(stats.insertions() as u64),
        deletions: Nullable::Value(stats.deletions() as u64),
        parents: Nullable::Value(vec![parent.id().to_string()]),
        extra: Map::new(),
    })
}
