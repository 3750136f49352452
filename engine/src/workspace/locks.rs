//! git's lock files left by a kill. git (and libgit2) take a ref, the index or HEAD
//! by creating `<file>.lock` with `O_EXCL`, write the new content into it and rename
//! it over the file: a process killed between the two leaves the lock, and every
//! later writer of that file fails ("the lock file exists") until someone removes it.
//!
//! capfleet removes a lock only when both hold: its own journaled step that writes
//! the locked file started and never finished (the caller knows; a commit's
//! `commit_started` without `committed`, a merge's `merge_started` without its end),
//! and no live process has the lock file open ([`held_open`]: every process's open
//! descriptors, from `/proc`). A lock another process holds is never touched: the
//! step then fails with git's own error, as it would without capfleet.

use std::path::{Path, PathBuf};

use git2::Repository;

/// The lock files a step on `repo` may have left: the index and HEAD of its git
/// directory (a worktree's own), `packed-refs`, and each of `refs` (full ref names,
/// in the common directory).
pub(crate) fn candidates(repo: &Repository, refs: &[&str]) -> Vec<PathBuf> {
    let (own, common) = (repo.path(), repo.commondir());
    let mut out = vec![
        own.join("index.lock"),
        own.join("HEAD.lock"),
        common.join("packed-refs.lock"),
    ];
    out.extend(
        refs.iter()
            .filter(|r| r.starts_with("refs/") && !r.contains(".."))
            .map(|r| common.join(format!("{r}.lock"))),
    );
    out.dedup();
    out
}

/// Remove each of `locks` that exists and that no live process holds open; the
/// removed ones are returned (each logged).
pub(crate) fn clear_stale(locks: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for lock in locks.iter().filter(|l| l.exists()) {
        if held_open(lock)? {
            tracing::warn!(lock = %lock.display(), "a git lock another process holds: left");
            continue;
        }
        match std::fs::remove_file(lock) {
            Ok(()) => {
                tracing::warn!(lock = %lock.display(), "a stale git lock of a cut step: removed");
                removed.push(lock.clone());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

/// Whether any live process has `path` open (a descriptor in `/proc/<pid>/fd`
/// pointing at it). Processes whose descriptors cannot be read (another user's,
/// when not root) cannot be checked: their locks are treated as held only if
/// `/proc` itself cannot be read.
pub(crate) fn held_open(path: &Path) -> std::io::Result<bool> {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    for proc_entry in std::fs::read_dir("/proc")?.filter_map(Result::ok) {
        let name = proc_entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(proc_entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.filter_map(Result::ok) {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l == target) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_nobody_holds_is_removed_and_one_held_open_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let (stale, held) = (dir.path().join("a.lock"), dir.path().join("b.lock"));
        std::fs::write(&stale, "").unwrap();
        let _holder = std::fs::File::create(&held).unwrap();
        assert!(!held_open(&stale).unwrap());
        assert!(held_open(&held).unwrap());
        let missing = dir.path().join("c.lock");
        let removed = clear_stale(&[stale.clone(), held.clone(), missing]).unwrap();
        assert_eq!(removed, std::slice::from_ref(&stale));
        assert!(!stale.exists() && held.exists());
    }

    #[test]
    fn the_candidates_are_the_index_head_packed_refs_and_the_named_refs() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let git = repo.path().to_owned();
        let c = candidates(&repo, &["refs/heads/capfleet/r/s", "refs/../../x", "HEAD"]);
        assert_eq!(
            c,
            [
                git.join("index.lock"),
                git.join("HEAD.lock"),
                git.join("packed-refs.lock"),
                git.join("refs/heads/capfleet/r/s.lock"),
            ]
        );
    }
}
