//! What would be lost: the uncommitted files of a worktree (staged, modified,
//! deleted, untracked; ignored files are not work) or the files of a plain directory.

use std::path::Path;

use git2::{Repository, Status, StatusOptions};

use super::error::{Context, WorkspaceError};

/// The uncommitted paths of the repository at `dir` (relative, sorted).
pub(crate) fn uncommitted(dir: &Path) -> Result<Vec<String>, WorkspaceError> {
    let repo = Repository::open(dir).ctx("cannot open the worktree", dir)?;
    uncommitted_in(&repo, true)
}

/// The uncommitted paths of `repo`; `untracked`: count untracked files too.
pub(crate) fn uncommitted_in(
    repo: &Repository,
    untracked: bool,
) -> Result<Vec<String>, WorkspaceError> {
    let mut opts = StatusOptions::new();
    opts.include_untracked(untracked)
        .recurse_untracked_dirs(untracked)
        .include_ignored(false)
        .exclude_submodules(true);
    let path = repo.workdir().unwrap_or(repo.path()).to_owned();
    let statuses = repo
        .statuses(Some(&mut opts))
        .ctx("cannot read the status", &path)?;
    let mut files: Vec<String> = statuses
        .iter()
        .filter(|e| e.status() != Status::CURRENT && !e.status().contains(Status::IGNORED))
        .map(|e| String::from_utf8_lossy(e.path_bytes()).into_owned())
        .collect();
    files.sort();
    Ok(files)
}

/// Every file under `dir` (relative, sorted); a missing directory has none.
pub(crate) fn plain_files(dir: &Path) -> Result<Vec<String>, WorkspaceError> {
    let mut out = Vec::new();
    if dir.is_dir() {
        walk(dir, dir, &mut out)?;
    }
    out.sort();
    Ok(out)
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), WorkspaceError> {
    let entries = std::fs::read_dir(dir).ctx("cannot list", dir)?;
    for entry in entries {
        let entry = entry.ctx("cannot list", dir)?;
        let path = entry.path();
        let kind = entry.file_type().ctx("cannot stat", &path)?;
        if kind.is_dir() {
            walk(root, &path, out)?;
        } else {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            out.push(rel.to_string_lossy().into_owned());
        }
    }
    Ok(())
}
