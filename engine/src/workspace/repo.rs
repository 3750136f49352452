//! The repository side of workspaces: finding the repository of a directory,
//! resolving the fleet's `base`, the local exclude file, and who commits.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use git2::{Repository, Signature};

use super::error::{Context, WorkspaceError};

/// Lines capfleet keeps in the repository's local exclude file (`info/exclude`), not
/// in the user's `.gitignore`.
pub(crate) const EXCLUDES: [&str; 2] = [".cap-worktrees/", ".capfleet/"];

/// The identity capfleet commits with when git has none configured.
pub(crate) const FALLBACK_NAME: &str = "capfleet";
pub(crate) const FALLBACK_EMAIL: &str = "capfleet@localhost";

/// A resolved `base`: the repository's working directory and the commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    /// The working directory of the repository (of the worktree `dir` is in).
    pub workdir: PathBuf,
    /// `dir`, relative to `workdir`.
    pub subdir: PathBuf,
    /// Full sha of the base commit.
    pub commit: String,
    /// What was asked for (`HEAD` by default).
    pub spec: String,
}

/// The repository `dir` is in, if any (`Ok(None)`: not in a git repository).
pub(crate) fn discover(dir: &Path) -> Result<Option<Repository>, WorkspaceError> {
    match Repository::discover(dir) {
        Ok(repo) => Ok(Some(repo)),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(source) => Err(WorkspaceError::Git {
            what: "cannot open the git repository".into(),
            path: dir.to_owned(),
            source,
        }),
    }
}

/// Resolve `spec` (default `HEAD`) in the repository of `dir`; `Ok(None)` when `dir`
/// is in no repository.
pub fn resolve_base(dir: &Path, spec: Option<&str>) -> Result<Option<Base>, WorkspaceError> {
    let Some(repo) = discover(dir)? else {
        return Ok(None);
    };
    let workdir = workdir(&repo)?;
    let spec = spec.unwrap_or("HEAD").to_owned();
    let commit = base_commit(&repo, &spec)?;
    let dir = std::fs::canonicalize(dir).ctx("cannot resolve the directory", dir)?;
    let subdir = dir
        .strip_prefix(&workdir)
        .unwrap_or(Path::new(""))
        .to_owned();
    Ok(Some(Base {
        workdir,
        subdir,
        commit: commit.to_string(),
        spec,
    }))
}

/// The repository's working directory, canonical; a bare repository has none.
pub(crate) fn workdir(repo: &Repository) -> Result<PathBuf, WorkspaceError> {
    let Some(dir) = repo.workdir() else {
        return Err(WorkspaceError::Repo {
            path: repo.path().to_owned(),
            reason: "a bare repository has no working tree to branch worktrees from".into(),
        });
    };
    std::fs::canonicalize(dir).ctx("cannot resolve the repository's working directory", dir)
}

/// The commit `spec` names.
pub(crate) fn base_commit(repo: &Repository, spec: &str) -> Result<git2::Oid, WorkspaceError> {
    let path = repo.workdir().unwrap_or(repo.path()).to_owned();
    if spec == "HEAD" && repo.head().is_err() {
        return Err(WorkspaceError::Repo {
            path,
            reason: "the repository has no commit yet (HEAD is unborn): commit something first"
                .into(),
        });
    }
    let object = repo
        .revparse_single(spec)
        .ctx(format!("`{spec}` names no revision"), &path)?;
    let commit = object
        .peel_to_commit()
        .ctx(format!("`{spec}` is not a commit"), &path)?;
    Ok(commit.id())
}

/// Add [`EXCLUDES`] to the repository's `info/exclude` (shared by its worktrees)
/// where missing.
pub(crate) fn ensure_excludes(repo: &Repository) -> Result<(), WorkspaceError> {
    let info = repo.commondir().join("info");
    let path = info.join("exclude");
    let current = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).ctx("cannot read the exclude file", &path),
    };
    let missing: Vec<&str> = EXCLUDES
        .iter()
        .copied()
        .filter(|x| !current.lines().any(|l| l.trim() == *x))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(&info).ctx("cannot create", &info)?;
    let mut text = String::new();
    if !current.is_empty() && !current.ends_with('\n') {
        text.push('\n');
    }
    text.push_str("# capfleet: agent worktrees and run records\n");
    for m in missing {
        text.push_str(m);
        text.push('\n');
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .ctx("cannot update the exclude file", &path)
}

/// Who commits: the repository's configured identity, else capfleet's own.
pub(crate) fn committer(repo: &Repository) -> Result<Signature<'static>, WorkspaceError> {
    repo.signature()
        .or_else(|_| Signature::now(FALLBACK_NAME, FALLBACK_EMAIL))
        .ctx("cannot make a commit signature", repo.path())
}
