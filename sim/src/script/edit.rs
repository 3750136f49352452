//! File steps: the sim changes files in its working directory as a coding agent
//! does, and shows each change as a tool call (`Write` / `Edit` / `Delete`; in ACP
//! mode an edit with `diff` content).
//!
//! - `{ write = "path", content = "text" }` writes text (parents created);
//! - `{ edit = "path", old = "text", new = "text" }` replaces the first `old` in an
//!   existing text file with `new` (a failed tool call when `old` is not there);
//! - `{ write = "path", bytes = N }` writes N deterministic pseudo-random bytes (a
//!   binary);
//! - `{ delete = "path" }` removes a file.
//!
//! `write` and `edit` take `duration_ms`: how long the tool call is shown running.
//! Paths are relative to the working directory and may not leave it (`..`).

use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

use serde_json::json;

use crate::fields::{Fields, ScriptError};
use crate::script::steps::{Step, ToolStep};

/// What a file step does.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Change {
    Text(String),
    Replace { old: String, new: String },
    Bytes(u64),
    Delete,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FileEdit {
    pub path: String,
    pub change: Change,
    /// How long its tool call is shown running (`duration_ms`, default 0).
    pub duration_ms: u64,
}

/// A file step once done.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    pub path: PathBuf,
    /// The text before (a text write over an existing text file, an edit).
    pub old: Option<String>,
    /// The text after (a text write, an edit).
    pub new: Option<String>,
    /// One line for the tool's output.
    pub summary: String,
}

/// `write`, `edit` or `delete` step.
pub(crate) fn parse(f: &Fields<'_, '_>, kind: &str) -> Result<Step, ScriptError> {
    let path = f.req_str(kind)?;
    let p = Path::new(&path);
    let escapes = p
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if path.is_empty() || escapes {
        return Err(f.loc.err(
            kind,
            "a path relative to the working directory, without `..`",
        ));
    }
    let change = if kind == "delete" {
        f.only(&["delete"])?;
        Change::Delete
    } else if kind == "edit" {
        f.only(&["edit", "old", "new", "duration_ms"])?;
        let old = f.req_str("old")?;
        if old.is_empty() {
            return Err(f.loc.err("old", "the text to replace, not empty"));
        }
        Change::Replace {
            old,
            new: f.req_str("new")?,
        }
    } else {
        f.only(&["write", "content", "bytes", "duration_ms"])?;
        match (f.str("content")?, f.u64("bytes")?) {
            (Some(text), None) => Change::Text(text),
            (None, Some(n)) => Change::Bytes(n),
            _ => {
                return Err(f
                    .loc
                    .err("write", "needs exactly one of `content` or `bytes`"));
            }
        }
    };
    let duration_ms = f.u64("duration_ms")?.unwrap_or(0);
    Ok(Step::Edit(FileEdit {
        path,
        change,
        duration_ms,
    }))
}

impl FileEdit {
    /// Do it, in the current directory.
    pub(crate) fn apply(&self) -> io::Result<Applied> {
        let path = std::env::current_dir()?.join(&self.path);
        let summary = match &self.change {
            Change::Delete => {
                std::fs::remove_file(&path)?;
                format!("deleted {}", self.path)
            }
            Change::Text(text) => {
                let old = std::fs::read_to_string(&path).ok();
                write_parents(&path)?;
                std::fs::write(&path, text)?;
                return Ok(Applied {
                    summary: format!("wrote {} bytes to {}", text.len(), self.path),
                    path,
                    old,
                    new: Some(text.clone()),
                });
            }
            Change::Replace { old, new } => {
                let before = std::fs::read_to_string(&path)?;
                let Some(at) = before.find(old.as_str()) else {
                    return Err(io::Error::other(format!(
                        "the text to replace is not in {}",
                        self.path
                    )));
                };
                let after = format!("{}{new}{}", &before[..at], &before[at + old.len()..]);
                std::fs::write(&path, &after)?;
                return Ok(Applied {
                    summary: format!("1 hunk applied to {}", self.path),
                    path,
                    old: Some(before),
                    new: Some(after),
                });
            }
            Change::Bytes(n) => {
                write_parents(&path)?;
                write_noise(&path, *n)?;
                format!("wrote {n} bytes to {}", self.path)
            }
        };
        Ok(Applied {
            path,
            old: None,
            new: None,
            summary,
        })
    }

    /// The tool call it is shown as (a failed one when `applied` is an error).
    pub(crate) fn as_tool(&self, applied: &io::Result<Applied>) -> ToolStep {
        let (name, input) = match &self.change {
            Change::Delete => ("Delete", json!({ "file_path": self.path })),
            Change::Replace { old, new } => (
                "Edit",
                json!({ "file_path": self.path, "old_string": old, "new_string": new }),
            ),
            _ => ("Write", json!({ "file_path": self.path })),
        };
        let (output, is_error) = match applied {
            Ok(a) => (a.summary.clone(), false),
            Err(e) => (format!("{}: {e}", self.path), true),
        };
        ToolStep {
            name: name.into(),
            input,
            deltas: Vec::new(),
            output: Some(output),
            is_error,
            duration_ms: self.duration_ms,
            risk: None,
        }
    }
}

fn write_parents(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) => std::fs::create_dir_all(dir),
        None => Ok(()),
    }
}

/// `n` bytes of xorshift noise with a NUL every 64 bytes (binary, never
/// compressible), in 64 KiB pieces.
fn write_noise(path: &Path, n: u64) -> io::Result<()> {
    let mut out = io::BufWriter::new(std::fs::File::create(path)?);
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut left = n;
    let mut buf = vec![0u8; 64 << 10];
    while left > 0 {
        let take = left.min(buf.len() as u64) as usize;
        for (i, chunk) in buf[..take].chunks_mut(8).enumerate() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
            // A NUL now and then: binary by any tool's heuristic.
            if i % 8 == 0 {
                chunk[0] = 0;
            }
        }
        out.write_all(&buf[..take])?;
        left -= take as u64;
    }
    out.flush()
}
