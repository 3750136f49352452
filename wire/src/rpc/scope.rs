//! `fs.scope` enforcement (coding §7.1): where reverse-RPC paths may reach.
//!
//! A path is resolved component by component, following every symlink (also dangling
//! ones, also in not-yet-existing tails) and applying `..` to the resolved prefix, so
//! neither a link nor `..` can leave the root unnoticed. The check runs on the fully
//! resolved path; missing and existing paths outside scope fail the same way. Opening
//! is then re-checked on the opened descriptor (see [`super::fs_open`]) so a symlink
//! swapped in between check and use does not escape either.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use super::error::RpcError;
use crate::manifest::FsScope;

/// The most symlinks followed while resolving one path (like Linux's `MAXSYMLINKS`).
const MAX_HOPS: usize = 40;

/// VCS root markers for `project_root`.
const VCS_MARKERS: [&str; 3] = [".git", ".hg", ".svn"];

/// A resolved scope root; `unrestricted` is the root `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    root: PathBuf,
}

impl Scope {
    /// The scope of a session whose cwd is `cwd` (absolute).
    pub fn new(kind: FsScope, cwd: &Path) -> Result<Self, RpcError> {
        if !cwd.is_absolute() {
            return Err(RpcError::InvalidParams(
                "session cwd must be absolute".into(),
            ));
        }
        let cwd = std::fs::canonicalize(cwd).map_err(|e| RpcError::Io(e.to_string()))?;
        let root = match kind {
            FsScope::WorkspaceOnly => cwd,
            FsScope::Unrestricted => PathBuf::from("/"),
            FsScope::ProjectRoot => project_root(&cwd).unwrap_or(cwd),
        };
        Ok(Scope { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Is an already resolved path inside the scope?
    pub fn contains(&self, resolved: &Path) -> bool {
        resolved.starts_with(&self.root)
    }

    /// Resolve `path` (must be absolute) and check it is in scope.
    pub fn check(&self, path: &str) -> Result<PathBuf, RpcError> {
        let p = Path::new(path);
        if !p.is_absolute() {
            return Err(RpcError::InvalidParams(format!(
                "path must be absolute: {path}"
            )));
        }
        let resolved = resolve(p);
        if self.contains(&resolved) {
            Ok(resolved)
        } else {
            Err(RpcError::ScopeViolation)
        }
    }
}

/// The nearest ancestor of `dir` (itself included) holding a VCS marker.
fn project_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| {
            VCS_MARKERS
                .iter()
                .any(|m| std::fs::symlink_metadata(d.join(m)).is_ok())
        })
        .map(Path::to_path_buf)
}

/// Resolve every symlink and `.`/`..` of an absolute path; components that do not
/// exist are kept as they are (they cannot be links).
pub(crate) fn resolve(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    let mut queue: VecDeque<OsString> = VecDeque::new();
    push_front(&mut queue, path);
    let mut hops = 0;
    while let Some(c) = queue.pop_front() {
        match c.to_str() {
            Some(".") | Some("") => continue,
            Some("..") => {
                out.pop();
                continue;
            }
            _ => {}
        }
        let candidate = out.join(&c);
        let is_link = std::fs::symlink_metadata(&candidate)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false);
        if !is_link {
            out = candidate;
            continue;
        }
        hops += 1;
        let target = match std::fs::read_link(&candidate) {
            Ok(t) if hops <= MAX_HOPS => t,
            // A loop or an unreadable link: keep it literally; opening it fails later
            // with O_NOFOLLOW, and the check still sees its real location.
            _ => {
                out = candidate;
                continue;
            }
        };
        if target.is_absolute() {
            out = PathBuf::from("/");
        }
        push_front(&mut queue, &target);
    }
    out
}

/// Put the components of `p` (root excluded) at the front of `queue`, in order.
fn push_front(queue: &mut VecDeque<OsString>, p: &Path) {
    let parts: Vec<OsString> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir => Some(".".into()),
            Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    for part in parts.into_iter().rev() {
        queue.push_front(part);
    }
}
