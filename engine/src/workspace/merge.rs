//! `capfleet merge <run-id> <session>`: the session's branch into the current branch
//! (coding §7.4's three-way merge). Never auto-resolves: a conflict is computed in
//! memory first and reported (`merge_conflict`) with nothing changed; a dirty tree
//! on either side is refused (`git_dirty`) unless the branch is already merged
//! (nothing changes). Otherwise a fast-forward when possible, else a merge commit;
//! the working tree is checked out safely before `HEAD` moves.
//!
//! Never done twice: the merge's [`Intent`] (`HEAD`, the branch, the merged tree) is
//! handed to the caller to journal before anything changes. A merge cut between its
//! checkout and `HEAD`'s move leaves the merged tree checked out on the old `HEAD`:
//! given the intent back, [`merge`] finds that state and only moves `HEAD` (one merge
//! commit); one cut after `HEAD` moved, before its end was journaled, finds `HEAD`
//! to be what the intent makes and reports that merge (`found`), making nothing. A
//! kill inside git's own writes leaves its lock files and maybe a half-checked-out
//! tree: the next merge removes the locks no live process holds ([`super::locks`])
//! and finishes the checkout when every changed file holds what the checkout wrote
//! (or the start of it: the file it was writing) or what was there.

use std::path::Path;

use git2::build::CheckoutBuilder;
use git2::{BranchType, Repository};

use super::error::{Context, WorkspaceError};
use super::record::{Kind, Workspace};
use super::repo::committer;
use super::status::{uncommitted, uncommitted_in};

/// How a merge went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeOutcome {
    /// The current branch already has the session's work.
    UpToDate,
    /// `found`: made by a cut merge (`HEAD` moved before its end was journaled),
    /// found on `HEAD` and only reported now.
    FastForward {
        sha: String,
        found: bool,
    },
    Merged {
        sha: String,
        found: bool,
    },
}

/// What a merge is about to do, journaled before it does it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Intent {
    pub branch: String,
    pub into: String,
    /// `HEAD` before (full sha).
    pub ours: String,
    /// The branch's head (full sha).
    pub theirs: String,
    /// The tree checked out (the merged tree; the branch's for a fast-forward).
    pub tree: String,
}

/// Merge `ws`'s branch into the branch checked out at `at`; `started` is told the
/// intent before anything changes (and may refuse it); `pending` is one a cut merge
/// journaled and never finished.
pub fn merge(
    ws: &Workspace,
    at: &Path,
    pending: Option<&Intent>,
    started: &mut dyn FnMut(&Intent) -> Result<(), WorkspaceError>,
) -> Result<MergeOutcome, WorkspaceError> {
    let Kind::Worktree { repo, branch, .. } = &ws.kind else {
        return Err(WorkspaceError::Repo {
            path: ws.path.clone(),
            reason: format!(
                "{} worked in a plain directory (no git repository): there is no branch to merge",
                ws.session
            ),
        });
    };
    if ws.path.exists() {
        let files = uncommitted(&ws.path)?;
        if !files.is_empty() {
            return Err(WorkspaceError::Dirty {
                what: format!("{}'s worktree {}", ws.session, ws.path.display()),
                files,
                fix: "; commit them first (capfleet merge --commit, or git commit in the worktree)"
                    .into(),
            });
        }
    }
    let target = Repository::discover(at).ctx("cannot open the repository here", at)?;
    let session_repo = Repository::open(repo).ctx("cannot open the run's repository", repo)?;
    if canonical(target.commondir()) != canonical(session_repo.commondir()) {
        return Err(WorkspaceError::Repo {
            path: at.to_owned(),
            reason: format!(
                "not the repository of this run ({}): run capfleet merge there",
                repo.display()
            ),
        });
    }
    let workdir = target.workdir().unwrap_or(target.path()).to_owned();
    let head = target.head().ctx("cannot read HEAD", &workdir)?;
    if !head.is_branch() {
        return Err(WorkspaceError::Repo {
            path: workdir,
            reason: "HEAD is detached: check out the branch to merge into".into(),
        });
    }
    let into = head.shorthand().unwrap_or("HEAD").to_owned();
    if pending.is_some() {
        // A cut merge's git writes may have left their locks (the index, HEAD, the
        // branch's ref): those no live process holds are this merge's own.
        let into_ref = head.name().unwrap_or("HEAD").to_owned();
        super::locks::clear_stale(&super::locks::candidates(&target, &[&into_ref]))
            .ctx("cannot remove a stale git lock", &workdir)?;
    }
    let ours = head.peel_to_commit().ctx("cannot read HEAD", &workdir)?;
    let found = target.find_branch(branch, BranchType::Local);
    if let Err(e) = &found
        && e.code() == git2::ErrorCode::NotFound
        && !ws.path.exists()
    {
        return Err(WorkspaceError::Repo {
            path: ws.path.clone(),
            reason: format!(
                "the run was cleaned: {}'s worktree and branch {branch} are gone, there is \
                 nothing left to merge",
                ws.session
            ),
        });
    }
    let theirs = found
        .and_then(|b| b.get().peel_to_commit())
        .ctx(format!("cannot find branch {branch}"), &workdir)?;
    // A cut merge that moved HEAD before its end was journaled: made, reported now.
    if let Some(made) = pending.and_then(|i| made_by(&ours, i)) {
        return Ok(made);
    }
    let descends = |a, b| {
        target
            .graph_descendant_of(a, b)
            .ctx("cannot walk history", &workdir)
    };
    // Already merged: nothing to change, whatever the working tree holds (another
    // branch's cut merge, say).
    if ours.id() == theirs.id() || descends(ours.id(), theirs.id())? {
        return Ok(MergeOutcome::UpToDate);
    }
    // A cut merge's checkout, done (or finished now): only `HEAD` is left to move.
    let resumed = match pending
        .filter(|i| i.ours == ours.id().to_string() && i.theirs == theirs.id().to_string())
    {
        Some(i) if checked_out(&target, &i.tree) => Some(i),
        Some(i) => finish_checkout(&target, &ours, i, &workdir)?.then_some(i),
        None => None,
    };
    let dirty = uncommitted_in(&target, false)?;
    if resumed.is_none() && !dirty.is_empty() {
        return Err(WorkspaceError::Dirty {
            what: format!("the working tree of {into} ({})", workdir.display()),
            files: dirty,
            fix: "; commit or stash them first".into(),
        });
    }
    let intent = |tree: git2::Oid| Intent {
        branch: branch.clone(),
        into: into.clone(),
        ours: ours.id().to_string(),
        theirs: theirs.id().to_string(),
        tree: tree.to_string(),
    };
    let mut safe = CheckoutBuilder::new();
    safe.safe();
    if descends(theirs.id(), ours.id())? {
        let tree = theirs.tree().ctx("cannot read the branch", &workdir)?;
        if resumed.is_none() {
            started(&intent(tree.id()))?;
            target
                .checkout_tree(tree.as_object(), Some(&mut safe))
                .ctx("cannot check out the session's work", &workdir)?;
        }
        let mut head = head;
        head.set_target(
            theirs.id(),
            &format!("capfleet merge {branch}: fast-forward"),
        )
        .ctx("cannot move the branch", &workdir)?;
        return Ok(MergeOutcome::FastForward {
            sha: theirs.id().to_string(),
            found: false,
        });
    }
    let mut index = target
        .merge_commits(&ours, &theirs, None)
        .ctx("cannot merge", &workdir)?;
    if index.has_conflicts() {
        let mut files: Vec<String> = index
            .conflicts()
            .ctx("cannot read the conflicts", &workdir)?
            .filter_map(Result::ok)
            .filter_map(|c| c.our.or(c.their).or(c.ancestor))
            .map(|e| String::from_utf8_lossy(&e.path).into_owned())
            .collect();
        files.dedup();
        return Err(WorkspaceError::Conflict {
            branch: branch.clone(),
            into,
            files,
        });
    }
    let tree_id = index
        .write_tree_to(&target)
        .ctx("cannot write the merged tree", &workdir)?;
    let tree = target
        .find_tree(tree_id)
        .ctx("cannot read the merged tree", &workdir)?;
    if resumed.is_none() {
        started(&intent(tree_id))?;
        target
            .checkout_tree(tree.as_object(), Some(&mut safe))
            .ctx("cannot check out the merge", &workdir)?;
    }
    let sig = committer(&target)?;
    let message = format!("Merge branch '{branch}' into {into} (capfleet)");
    let sha = target
        .commit(Some("HEAD"), &sig, &sig, &message, &tree, &[&ours, &theirs])
        .ctx("cannot commit the merge", &workdir)?;
    Ok(MergeOutcome::Merged {
        sha: sha.to_string(),
        found: false,
    })
}

/// `head` is what the cut merge `intent` made: the branch's head it fast-forwarded
/// to, or a commit of its tree on its two parents (`HEAD` before, the branch).
fn made_by(head: &git2::Commit<'_>, intent: &Intent) -> Option<MergeOutcome> {
    let sha = head.id().to_string();
    if sha == intent.ours {
        return None;
    }
    if sha == intent.theirs {
        return Some(MergeOutcome::FastForward { sha, found: true });
    }
    let parents: Vec<String> = head.parent_ids().map(|p| p.to_string()).collect();
    (parents == [intent.ours.as_str(), intent.theirs.as_str()]
        && head.tree_id().to_string() == intent.tree)
        .then_some(MergeOutcome::Merged { sha, found: true })
}

/// A checkout of `intent.tree` over `ours` that a kill cut half-way: every file that
/// differs from `ours` holds either its `ours` content or its `intent.tree` content
/// (what the checkout wrote) or, the one it was writing, the start of the latter, so
/// the checkout is finished by force. Anything else
/// (an edit made since) is refused as dirty; `false` when there is nothing to finish.
fn finish_checkout(
    repo: &Repository,
    ours: &git2::Commit<'_>,
    intent: &Intent,
    workdir: &Path,
) -> Result<bool, WorkspaceError> {
    let changed = uncommitted_in(repo, true)?;
    if changed.is_empty() {
        return Ok(false);
    }
    let tree_id = git2::Oid::from_str(&intent.tree).ctx("cannot read the merge's tree", workdir)?;
    let theirs = repo
        .find_tree(tree_id)
        .ctx("cannot read the merge's tree", workdir)?;
    let ours = ours.tree().ctx("cannot read HEAD", workdir)?;
    let blob =
        |tree: &git2::Tree<'_>, path: &str| tree.get_path(Path::new(path)).ok().map(|e| e.id());
    let foreign: Vec<String> = changed
        .into_iter()
        .filter(|path| {
            let on_disk = workdir.join(path);
            let now = on_disk
                .is_file()
                .then(|| git2::Oid::hash_file(git2::ObjectType::Blob, &on_disk).ok())
                .flatten();
            let (was, will) = (blob(&ours, path), blob(&theirs, path));
            // A file in neither tree is an untracked one of the user's: not touched.
            (was.is_some() || will.is_some())
                && now != was
                && now != will
                && !cut_short(repo, &on_disk, will)
        })
        .collect();
    if !foreign.is_empty() {
        return Err(WorkspaceError::Dirty {
            what: format!("the working tree of a cut merge ({})", workdir.display()),
            files: foreign,
            fix: "; changed since the merge was cut: commit or stash them first".into(),
        });
    }
    let mut force = CheckoutBuilder::new();
    force.force();
    repo.checkout_tree(theirs.as_object(), Some(&mut force))
        .ctx("cannot finish the cut merge's checkout", workdir)?;
    Ok(checked_out(repo, &intent.tree))
}

/// `path` holds the start of blob `will`, shorter: the file the cut checkout was
/// writing (git writes a checked-out file in place, not by a rename).
fn cut_short(repo: &Repository, path: &Path, will: Option<git2::Oid>) -> bool {
    let (Some(will), Ok(now)) = (will, std::fs::read(path)) else {
        return false;
    };
    repo.find_blob(will)
        .is_ok_and(|b| now.len() < b.content().len() && b.content().starts_with(&now))
}

/// The index holds `tree` and the working tree matches the index.
fn checked_out(repo: &Repository, tree: &str) -> bool {
    let index_tree = repo.index().and_then(|mut i| i.write_tree());
    let clean = repo
        .diff_index_to_workdir(None, None)
        .map(|d| d.deltas().len() == 0);
    matches!((index_tree, clean), (Ok(t), Ok(true)) if t.to_string() == tree)
}

fn canonical(p: &Path) -> std::path::PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned())
}
