//! Committing a session's work on its branch (`capfleet run --commit`, `capfleet
//! merge --commit`): every change in the worktree (ignored files excepted) becomes
//! one commit authored by the agent, described as a coding §6.4 `commit` payload.

use git2::{IndexAddOption, Repository, Signature};
use serde_json::Map;

use super::error::{Context, WorkspaceError};
use super::record::{Kind, Workspace};
use super::repo::committer;
use crate::clock::rfc3339_secs;
use crate::protocol::Nullable;
use crate::protocol::coding::Commit;

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
    let stats = repo
        .diff_tree_to_tree(
            Some(&head.tree().ctx("cannot read the tree", path)?),
            Some(&tree),
            None,
        )
        .and_then(|d| d.stats())
        .ctx("cannot count the changes", path)?;
    Ok(Some(Commit {
        sha: oid.to_string(),
        message: Nullable::Value(message.to_owned()),
        author: Nullable::Value(author.to_owned()),
        committer: Nullable::Value(committer_sig.name().unwrap_or("capfleet").to_owned()),
        committed_at: Nullable::Value(rfc3339_secs(committer_sig.when().seconds())),
        files_changed: Nullable::Value(stats.files_changed() as u64),
        insertions: Nullable::Value(stats.insertions() as u64),
        deletions: Nullable::Value(stats.deletions() as u64),
        parents: Nullable::Value(vec![head.id().to_string()]),
        extra: Map::new(),
    }))
}
