//! The paths a sandbox is made of: `~/` expanded, the git directories a worktree
//! needs, the roots hidden (none inside another), an agent's install found, a missing
//! state path created.

use std::path::{Path, PathBuf};

use super::SandboxError;

/// `path` made absolute with symbolic links resolved.
pub(super) fn canonical(path: &Path) -> Result<PathBuf, SandboxError> {
    std::fs::canonicalize(path).map_err(|source| SandboxError::Io {
        path: path.to_owned(),
        source,
    })
}

/// A manifest's `~/x` under `home`; `None` when there is no home to put it under.
fn expand(p: &str, home: Option<&Path>) -> Option<PathBuf> {
    match p.strip_prefix("~/") {
        Some(rest) => home.map(|h| h.join(rest)),
        None => Some(PathBuf::from(p)),
    }
}

pub(super) fn expand_all(list: &[String], home: Option<&Path>) -> Vec<PathBuf> {
    list.iter().filter_map(|p| expand(p, home)).collect()
}

/// The git directories of a worktree (its `.git` a file naming its admin directory)
/// or a checkout.
#[derive(Debug, Default)]
pub(super) struct GitDirs {
    /// The worktree's own admin directory (`<repo>/.git/worktrees/<name>`): its index
    /// and `HEAD`, written by `git add` and `git commit`.
    pub admin: Option<PathBuf>,
    /// The repository's shared git directory (objects, refs), read.
    pub common: Option<PathBuf>,
    /// The repository's own checkout, hidden (it holds other sessions' work).
    pub repository: Option<PathBuf>,
}

pub(super) fn git_dirs(workspace: &Path) -> GitDirs {
    let dot_git = workspace.join(".git");
    let Ok(text) = std::fs::read_to_string(&dot_git) else {
        return GitDirs::default();
    };
    let Some(admin) = text
        .trim()
        .strip_prefix("gitdir:")
        .map(|d| workspace.join(d.trim()))
        .and_then(|d| std::fs::canonicalize(d).ok())
    else {
        return GitDirs::default();
    };
    let common = std::fs::read_to_string(admin.join("commondir"))
        .ok()
        .and_then(|c| std::fs::canonicalize(admin.join(c.trim())).ok());
    let repository = common
        .as_ref()
        .filter(|c| c.file_name().is_some_and(|n| n == ".git"))
        .and_then(|c| c.parent().map(Path::to_owned));
    GitDirs {
        admin: Some(admin),
        common,
        repository,
    }
}

/// Each path once, in order, made canonical where it exists.
pub(super) fn dedup(list: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in list {
        let p = std::fs::canonicalize(&p).unwrap_or(p);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The hidden roots that exist, none inside another — unless an `allowed` path
/// (writable or readable) lies between them: a server's token file inside a workspace
/// inside the hidden temporary directory is hidden again inside the workspace.
pub(super) fn roots(list: Vec<PathBuf>, allowed: &[PathBuf]) -> Vec<PathBuf> {
    let existing: Vec<PathBuf> = list.into_iter().filter(|p| p.exists()).collect();
    let in_allowed = |p: &Path| allowed.iter().any(|a| p.starts_with(a) && p != a);
    existing
        .iter()
        .filter(|p| in_allowed(p) || !existing.iter().any(|q| q != *p && p.starts_with(q)))
        .cloned()
        .collect()
}

/// The hidden roots inside a writable or readable path, said: Landlock only grants,
/// so a path inside a granted tree cannot be taken back out of it (bubblewrap
/// mounts it over again).
pub(super) fn uncovered(
    hidden: &[PathBuf],
    writable: &[PathBuf],
    readable: &[PathBuf],
) -> Vec<String> {
    hidden
        .iter()
        .filter_map(|h| {
            let inside =
                |list: &[PathBuf]| list.iter().find(|p| h.starts_with(p) && h != *p).cloned();
            let (holder, may) = match (inside(writable), inside(readable)) {
                (Some(w), _) => (w, "write"),
                (None, Some(r)) => (r, "read"),
                (None, None) => return None,
            };
            Some(format!(
                "hidden: {} lies inside {}, which the session may {may}: Landlock cannot take \
                 a path back out of a tree it grants (bubblewrap hides it)",
                h.display(),
                holder.display()
            ))
        })
        .collect()
}

/// Where a program inside a hidden root is installed, made readable: the tree above
/// its topmost `node_modules` (an npm package's dependencies), the Python virtual
/// environment holding it (`pyvenv.cfg`) with the installation it was made from
/// (aider in a venv of a pyenv Python), else its directory; for the path as found on
/// `PATH`, for the file it links to and for a script's interpreter (its `#!` line,
/// `env NAME` looked up on `PATH`). Only what lies in a hidden root is listed.
pub(super) fn install_roots(program: &Path, hidden: &[PathBuf]) -> Vec<PathBuf> {
    let in_hidden = |p: &Path| hidden.iter().any(|h| p.starts_with(h));
    let mut found = vec![program.to_owned()];
    found.extend(interpreter(program));
    let mut out = Vec::new();
    for p in found {
        let real = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
        for q in [p, real] {
            if in_hidden(&q) {
                out.extend(install_root(&q).into_iter().filter(|r| in_hidden(r)));
            }
        }
    }
    out
}

fn install_root(p: &Path) -> Vec<PathBuf> {
    let top_modules = p
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
        .and_then(Path::parent);
    if let Some(root) = top_modules {
        return vec![root.to_owned()];
    }
    if let Some(venv) = p
        .ancestors()
        .skip(1)
        .find(|a| a.join("pyvenv.cfg").is_file())
    {
        return std::iter::once(venv.to_owned())
            .chain(venv_base(venv))
            .collect();
    }
    p.parent().map(Path::to_owned).into_iter().collect()
}

/// The installation a virtual environment was made from: its `pyvenv.cfg`'s
/// `home = <prefix>/bin`, as `<prefix>` (the interpreter's standard library beside).
fn venv_base(venv: &Path) -> Option<PathBuf> {
    let cfg = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    let home = cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home").then(|| PathBuf::from(v.trim()))
    })?;
    match home.file_name() {
        Some(n) if n == "bin" => home.parent().map(Path::to_owned),
        _ => Some(home),
    }
}

/// The interpreter a script names on its `#!` line (`/usr/bin/env NAME`: NAME on
/// `PATH`), if it is one.
fn interpreter(script: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.file_name().is_some_and(|n| n == "env") {
        let name = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
        return crate::process::find_program(Path::new(name), Path::new("/"), None);
    }
    Some(first)
}

/// Create a missing writable path: an empty file when its name has an extension
/// (`~/.claude.json`), else a directory.
pub(super) fn create_missing(path: &Path) -> Result<(), SandboxError> {
    if path.exists() {
        return Ok(());
    }
    let io = |source| SandboxError::Io {
        path: path.to_owned(),
        source,
    };
    if path.extension().is_some() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(drop)
            .map_err(io)
    } else {
        std::fs::create_dir_all(path).map_err(io)
    }
}

/// The entries to grant read on so that everything but `hidden` is readable
/// (Landlock allows, it cannot deny): walking down from `/`, an entry that holds a
/// hidden root is entered, one that is or lies in a hidden root skipped, any other
/// granted whole.
pub(super) fn complement(hidden: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(Path::new("/"), hidden, &mut out);
    out
}

fn walk(dir: &Path, hidden: &[PathBuf], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let p = entry.path();
        let real = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
        if hidden
            .iter()
            .any(|h| real.starts_with(h) || p.starts_with(h))
        {
            continue;
        }
        let holds_hidden = hidden.iter().any(|h| h.starts_with(&p));
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if holds_hidden && is_dir {
            walk(&p, hidden, out);
        } else if !hidden.iter().any(|h| h.starts_with(&real)) {
            out.push(p);
        }
    }
}
