//! The diff of a workspace against its base (coding §6.1, §7.3): everything the
//! session changed — committed, staged, modified and untracked files, ignored files
//! excluded — as one unified diff with `diff --git` headers.
//!
//! The patch streams into a writer (the artifact file) and its first
//! [`INLINE_MAX`] bytes are kept for the inline artifact; the changed files, line
//! counts and each added line (for vetting) come out of the same pass. A plain
//! directory has no base: every file in it is new.

use std::io::{Read, Write};
use std::path::Path;

use git2::{Delta, DiffDelta, DiffFormat, DiffLine, DiffOptions, Oid, Patch, Repository};
use serde::Serialize;

use super::error::{Context, WorkspaceError};
use super::record::{Kind, Workspace};
use super::status::plain_files;

/// Inline bytes of one artifact, at most; longer ones travel as a file URI.
pub(crate) const INLINE_MAX: usize = 64 * 1024;
/// In a plain directory, files larger than this are shown as binary (not read).
pub(crate) const MAX_TEXT: u64 = 16 << 20;
/// How far into a file binary detection looks (git's heuristic: a NUL byte).
const SNIFF: usize = 8000;

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    Added,
    Modified,
    Deleted,
    Renamed,
    TypeChange,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    /// Relative to the workspace root.
    pub path: String,
    pub change: Change,
    pub binary: bool,
    /// Size of the new file (0 when deleted).
    pub size: u64,
}

/// What a diff found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiffSummary {
    pub files: Vec<FileChange>,
    pub insertions: u64,
    pub deletions: u64,
    /// Bytes of the whole patch.
    pub bytes: u64,
    /// The patch's first bytes (at most [`INLINE_MAX`], cut at a line end).
    pub head: String,
    /// `head` is not the whole patch.
    pub truncated: bool,
}

/// Called with each added line: (path, new line number, content).
pub type AddedLine<'a> = dyn FnMut(&str, u32, &[u8]) + 'a;

/// Diff `ws` against its base, streaming the patch into `out`.
pub fn diff(
    ws: &Workspace,
    out: &mut dyn Write,
    added: &mut AddedLine<'_>,
) -> Result<DiffSummary, WorkspaceError> {
    let mut p = Printer::new(out, added);
    match &ws.kind {
        Kind::Worktree { base, .. } => diff_worktree(&ws.path, base, &mut p)?,
        Kind::Plain => diff_plain(&ws.path, &mut p)?,
    }
    p.finish(&ws.path)
}

/// `f` with the worktree at `path`'s repository and its diff against `base` (a sha):
/// everything changed, untracked files included.
fn with_worktree_diff<T>(
    path: &Path,
    base: &str,
    f: impl FnOnce(&Repository, &git2::Diff<'_>) -> Result<T, WorkspaceError>,
) -> Result<T, WorkspaceError> {
    let repo = Repository::open(path).ctx("cannot open the worktree", path)?;
    let oid = Oid::from_str(base).ctx("the recorded base is not a sha", path)?;
    let tree = repo
        .find_commit(oid)
        .and_then(|c| c.tree())
        .ctx(format!("cannot read the base {base}"), path)?;
    let mut opts = options();
    let diff = repo
        .diff_tree_to_workdir_with_index(Some(&tree), Some(&mut opts))
        .ctx("cannot diff the worktree", path)?;
    f(&repo, &diff)
}

fn diff_worktree(path: &Path, base: &str, p: &mut Printer<'_, '_>) -> Result<(), WorkspaceError> {
    with_worktree_diff(path, base, |_, diff| print_worktree(path, diff, p))
}

fn print_worktree(
    path: &Path,
    diff: &git2::Diff<'_>,
    p: &mut Printer<'_, '_>,
) -> Result<(), WorkspaceError> {
    let printed = diff.print(DiffFormat::Patch, |delta, _hunk, line| {
        p.line(&delta, &line)
    });
    p.check(printed, path)?;
    for delta in diff.deltas() {
        let change = match delta.status() {
            Delta::Added | Delta::Untracked | Delta::Copied => Change::Added,
            Delta::Deleted => Change::Deleted,
            Delta::Renamed => Change::Renamed,
            Delta::Typechange => Change::TypeChange,
            Delta::Modified => Change::Modified,
            _ => continue,
        };
        let file = if change == Change::Deleted {
            delta.old_file()
        } else {
            delta.new_file()
        };
        let rel = file
            .path()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let size = match change {
            Change::Deleted => 0,
            _ => std::fs::symlink_metadata(path.join(&rel)).map_or(file.size(), |m| m.len()),
        };
        let binary = delta.flags().is_binary() || p.binary.contains(&rel);
        p.files.push(FileChange {
            path: rel,
            change,
            binary,
            size,
        });
    }
    Ok(())
}

/// One changed text file of a worktree, whole: as at its base and as it is now (an
/// editor's diff view; ACP's `diff` content). Binary files and files larger than
/// [`MAX_TEXT`] are left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileVersions {
    /// Relative to the worktree root.
    pub path: String,
    /// `None`: the file is new.
    pub old: Option<String>,
    /// `None`: the file was deleted.
    pub new: Option<String>,
}

/// Every changed text file of the worktree at `path` against `base` (a sha).
pub fn file_versions(path: &Path, base: &str) -> Result<Vec<FileVersions>, WorkspaceError> {
    with_worktree_diff(path, base, |repo, diff| Ok(versions(path, repo, diff)))
}

fn versions(path: &Path, repo: &Repository, diff: &git2::Diff<'_>) -> Vec<FileVersions> {
    let text = |bytes: &[u8]| {
        let small = bytes.len() as u64 <= MAX_TEXT && !bytes[..bytes.len().min(SNIFF)].contains(&0);
        small
            .then(|| String::from_utf8(bytes.to_vec()).ok())
            .flatten()
    };
    let mut out = Vec::new();
    for delta in diff.deltas() {
        if delta.flags().is_binary() {
            continue;
        }
        let old_file = delta.old_file();
        let old = match delta.status() {
            Delta::Added | Delta::Untracked => None,
            _ => match repo.find_blob(old_file.id()) {
                Ok(blob) => match text(blob.content()) {
                    Some(t) => Some(t),
                    None => continue,
                },
                Err(_) => None,
            },
        };
        let Some(rel) = delta.new_file().path().or(old_file.path()) else {
            continue;
        };
        let new = match delta.status() {
            Delta::Deleted => None,
            _ => match std::fs::read(path.join(rel)).ok().as_deref().map(text) {
                Some(Some(t)) => Some(t),
                _ => continue,
            },
        };
        out.push(FileVersions {
            path: rel.to_string_lossy().into_owned(),
            old,
            new,
        });
    }
    out
}

fn options() -> DiffOptions {
    let mut opts = DiffOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(true)
        .include_typechange(true)
        // No size cut-off: libgit2 sniffs large files for binary content itself (its
        // cut-off path writes a broken header for untracked files).
        .max_size(-1);
    opts
}

fn diff_plain(dir: &Path, p: &mut Printer<'_, '_>) -> Result<(), WorkspaceError> {
    for rel in plain_files(dir)? {
        let path = dir.join(&rel);
        let size = std::fs::metadata(&path).ctx("cannot stat", &path)?.len();
        let mut file = std::fs::File::open(&path).ctx("cannot read", &path)?;
        let mut sniff = Vec::with_capacity(SNIFF);
        (&mut file)
            .take(SNIFF as u64)
            .read_to_end(&mut sniff)
            .ctx("cannot read", &path)?;
        let binary = sniff.contains(&0) || size > MAX_TEXT;
        if binary {
            let header = format!(
                "diff --git a/{rel} b/{rel}\nnew file mode 100644\nBinary files /dev/null and b/{rel} differ\n"
            );
            p.raw(header.as_bytes());
        } else {
            let mut content = sniff;
            file.read_to_end(&mut content).ctx("cannot read", &path)?;
            let mut opts = options();
            let mut patch =
                Patch::from_buffers(&[], None, &content, Some(Path::new(&rel)), Some(&mut opts))
                    .ctx("cannot diff", &path)?;
            let printed = patch.print(&mut |delta, _hunk, line| p.line(&delta, &line));
            p.check(printed, &path)?;
        }
        p.files.push(FileChange {
            path: rel,
            change: Change::Added,
            binary,
            size,
        });
    }
    Ok(())
}

/// Writes the patch, keeps its head, counts lines, hands added lines on.
struct Printer<'o, 'a> {
    out: &'o mut dyn Write,
    added: &'o mut AddedLine<'a>,
    head: Vec<u8>,
    head_full: bool,
    bytes: u64,
    insertions: u64,
    deletions: u64,
    files: Vec<FileChange>,
    /// Paths git printed a binary line for.
    binary: Vec<String>,
    error: Option<std::io::Error>,
}

impl<'o, 'a> Printer<'o, 'a> {
    fn new(out: &'o mut dyn Write, added: &'o mut AddedLine<'a>) -> Self {
        Printer {
            out,
            added,
            head: Vec::new(),
            head_full: false,
            bytes: 0,
            insertions: 0,
            deletions: 0,
            files: Vec::new(),
            binary: Vec::new(),
            error: None,
        }
    }

    /// One line of git's patch output; false stops the diff (a write failed).
    fn line(&mut self, delta: &DiffDelta<'_>, line: &DiffLine<'_>) -> bool {
        let origin = line.origin();
        let path = || {
            delta
                .new_file()
                .path()
                .or_else(|| delta.old_file().path())
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        match origin {
            '+' | '-' | ' ' => {
                if origin == '+' {
                    self.insertions += 1;
                    if let Some(n) = line.new_lineno() {
                        (self.added)(&path(), n, line.content());
                    }
                } else if origin == '-' {
                    self.deletions += 1;
                }
                self.raw(&[origin as u8]);
            }
            'B' => self.binary.push(path()),
            _ => {}
        }
        self.raw(line.content());
        self.error.is_none()
    }

    fn raw(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.out.write_all(bytes) {
            self.error = Some(e);
            return;
        }
        self.bytes += bytes.len() as u64;
        if !self.head_full {
            let room = INLINE_MAX - self.head.len();
            if bytes.len() <= room {
                self.head.extend_from_slice(bytes);
            } else {
                self.head.extend_from_slice(&bytes[..room]);
                self.head_full = true;
            }
        }
    }

    /// A git error from printing, or the write error that stopped it.
    fn check(
        &mut self,
        printed: Result<(), git2::Error>,
        path: &Path,
    ) -> Result<(), WorkspaceError> {
        if let Some(e) = self.error.take() {
            return Err(e).ctx("cannot write the diff", path);
        }
        printed.ctx("cannot print the diff", path)
    }

    fn finish(mut self, path: &Path) -> Result<DiffSummary, WorkspaceError> {
        self.out.flush().ctx("cannot write the diff", path)?;
        let truncated = self.bytes > self.head.len() as u64;
        if truncated {
            // Cut at the last complete line.
            if let Some(end) = self.head.iter().rposition(|b| *b == b'\n') {
                self.head.truncate(end + 1);
            }
        }
        Ok(DiffSummary {
            files: self.files,
            insertions: self.insertions,
            deletions: self.deletions,
            bytes: self.bytes,
            head: String::from_utf8_lossy(&self.head).into_owned(),
            truncated,
        })
    }
}
