//! `capfleet clean <run-id>`: remove a run's workspaces without ever losing work.
//!
//! A worktree goes only when it has no uncommitted changes (untracked files count,
//! ignored ones do not) and its branch holds nothing unmerged (no commit beyond the
//! base, or its tip is in the repository's `HEAD`); then its branch goes too.
//! `force` removes the worktree anyway, uncommitted changes included, but a branch
//! with unmerged commits is kept (`git branch -D` is the user's call). A plain
//! directory goes when it is empty, or with `force`. What is refused is reported with
//! the files that would be lost.

use std::path::{Path, PathBuf};

use git2::{BranchType, Repository, WorktreePruneOptions};

use super::error::{Context, WorkspaceError};
use super::record::{Kind, RunWorkspaces, Workspace};
use super::status::{plain_files, uncommitted};

/// What `clean` did.
#[derive(Debug, Default)]
pub struct CleanReport {
    pub removed: Vec<Removed>,
    pub refused: Vec<Refusal>,
    /// Sessions whose workspace an earlier clean removed already.
    pub gone: Vec<String>,
}

/// A workspace removed.
#[derive(Debug)]
pub struct Removed {
    pub session: String,
    pub path: PathBuf,
    /// Uncommitted files dropped (only with `force`).
    pub dropped: Vec<String>,
    /// A branch kept because it holds unmerged commits (only with `force`).
    pub kept_branch: Option<String>,
}

/// A workspace left in place, and why.
#[derive(Debug)]
pub enum Refusal {
    Uncommitted {
        session: String,
        path: PathBuf,
        files: Vec<String>,
    },
    Unmerged {
        run_id: String,
        session: String,
        branch: String,
        commits: usize,
    },
    Failed {
        session: String,
        error: WorkspaceError,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Uncommitted {
                session,
                path,
                files,
            } => write!(
                f,
                "git_dirty: {session} ({}): {} uncommitted file(s) would be lost: {} \
                 (commit or merge them, or clean --force)",
                path.display(),
                files.len(),
                super::error::list(files)
            ),
            Refusal::Unmerged {
                run_id,
                session,
                branch,
                commits,
            } => write!(
                f,
                "{session}: branch {branch} has {commits} commit(s) not in HEAD \
                 (capfleet merge {run_id} {session}, or clean --force to drop the worktree and keep the branch)"
            ),
            Refusal::Failed { session, error } => write!(f, "{session}: {error}"),
        }
    }
}

/// Clean every workspace of `run` (see the module doc).
pub fn clean(run: &RunWorkspaces, force: bool) -> CleanReport {
    let mut report = CleanReport::default();
    for w in &run.workspaces {
        match clean_one(w, &run.run_id, force) {
            Ok(Outcome::Removed(removed)) => report.removed.push(removed),
            Ok(Outcome::Refused(refusal)) => {
                report.refused.push(refusal);
                continue;
            }
            Ok(Outcome::Gone) => report.gone.push(w.session.clone()),
            Err(error) => {
                report.refused.push(Refusal::Failed {
                    session: w.session.clone(),
                    error,
                });
                continue;
            }
        }
        // The run's directory under `.cap-worktrees`, then that, once empty.
        if let Some(run_dir) = w.path.parent() {
            let _kept_while_not_empty = std::fs::remove_dir(run_dir)
                .and_then(|()| run_dir.parent().map_or(Ok(()), std::fs::remove_dir));
        }
    }
    report
}

/// What `clean` did with one workspace.
enum Outcome {
    Removed(Removed),
    Refused(Refusal),
    /// Removed by an earlier clean.
    Gone,
}

fn clean_one(w: &Workspace, run_id: &str, force: bool) -> Result<Outcome, WorkspaceError> {
    // Only what provisioning made is ever removed, whatever the record says.
    let ours = w
        .path
        .components()
        .any(|c| c.as_os_str() == super::WORKTREES_DIR);
    if !ours {
        return Err(WorkspaceError::Repo {
            path: w.path.clone(),
            reason: format!("not under {}: not removed", super::WORKTREES_DIR),
        });
    }
    let Kind::Worktree {
        repo,
        branch,
        base,
        name,
    } = &w.kind
    else {
        if !w.path.exists() {
            return Ok(Outcome::Gone);
        }
        let files = plain_files(&w.path)?;
        if !files.is_empty() && !force {
            return Ok(Outcome::Refused(Refusal::Uncommitted {
                session: w.session.clone(),
                path: w.path.clone(),
                files,
            }));
        }
        std::fs::remove_dir_all(&w.path).ctx("cannot remove", &w.path)?;
        return Ok(Outcome::Removed(Removed {
            session: w.session.clone(),
            path: w.path.clone(),
            dropped: files,
            kept_branch: None,
        }));
    };
    let files = if w.path.exists() {
        uncommitted(&w.path)?
    } else {
        Vec::new()
    };
    if !files.is_empty() && !force {
        return Ok(Outcome::Refused(Refusal::Uncommitted {
            session: w.session.clone(),
            path: w.path.clone(),
            files,
        }));
    }
    let repository = Repository::open(repo).ctx("cannot open the repository", repo)?;
    let branch_exists = repository.find_branch(branch, BranchType::Local).is_ok();
    if !w.path.exists() && !branch_exists {
        return Ok(Outcome::Gone);
    }
    let unmerged = unmerged_commits(&repository, branch, base)?;
    if unmerged > 0 && !force {
        return Ok(Outcome::Refused(Refusal::Unmerged {
            run_id: run_id.to_owned(),
            session: w.session.clone(),
            branch: branch.clone(),
            commits: unmerged,
        }));
    }
    remove_worktree(repo, name, &w.path)?;
    let kept_branch = if unmerged > 0 {
        Some(branch.clone())
    } else {
        if let Ok(mut b) = repository.find_branch(branch, BranchType::Local) {
            b.delete()
                .ctx(format!("cannot delete branch {branch}"), repo)?;
        }
        None
    };
    Ok(Outcome::Removed(Removed {
        session: w.session.clone(),
        path: w.path.clone(),
        dropped: files,
        kept_branch,
    }))
}

/// Commits on `branch` beyond `base` that the repository's `HEAD` does not contain
/// (0 when the branch is gone).
pub(crate) fn unmerged_commits(
    repository: &Repository,
    branch: &str,
    base: &str,
) -> Result<usize, WorkspaceError> {
    let path = repository.path().to_owned();
    let Ok(b) = repository.find_branch(branch, BranchType::Local) else {
        return Ok(0);
    };
    let Some(tip) = b.get().target() else {
        return Ok(0);
    };
    if tip.to_string() == base {
        return Ok(0);
    }
    let mut walk = repository.revwalk().ctx("cannot walk history", &path)?;
    walk.push(tip).ctx("cannot walk history", &path)?;
    if let Ok(head) = repository.head().and_then(|h| h.peel_to_commit()) {
        walk.hide(head.id()).ctx("cannot walk history", &path)?;
    }
    if let Ok(base) = git2::Oid::from_str(base) {
        // Commits of the base itself are not the session's work.
        let _unknown_base = walk.hide(base);
    }
    Ok(walk.count())
}

/// Remove a worktree's directory and git's record of it.
pub(crate) fn remove_worktree(repo: &Path, name: &str, path: &Path) -> Result<(), WorkspaceError> {
    if path.exists() {
        std::fs::remove_dir_all(path).ctx("cannot remove the worktree", path)?;
    }
    let repository = Repository::open(repo).ctx("cannot open the repository", repo)?;
    match repository.find_worktree(name) {
        Ok(wt) => wt
            .prune(Some(
                WorktreePruneOptions::new().valid(true).working_tree(true),
            ))
            .ctx(format!("cannot prune the worktree {name}"), repo),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(()),
        Err(source) => Err(WorkspaceError::Git {
            what: format!("cannot find the worktree {name}"),
            path: repo.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_pointing_elsewhere_removes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let precious = dir.path().join("precious");
        std::fs::create_dir_all(&precious).unwrap();
        std::fs::write(precious.join("work.txt"), "mine").unwrap();
        let run = RunWorkspaces {
            run_id: "r".into(),
            workspaces: vec![Workspace {
                session: "s".into(),
                path: precious.clone(),
                cwd: precious.clone(),
                kind: Kind::Plain,
                paths: Vec::new(),
                test_command: None,
            }],
        };
        let report = clean(&run, true);
        assert!(report.removed.is_empty());
        assert!(matches!(report.refused[..], [Refusal::Failed { .. }]));
        assert!(precious.join("work.txt").is_file());
    }
}
