//! `cap.fs.read|write|list|exists|delete` (coding §4), every path checked by the scope.

use std::io::{BufRead, BufReader, Read, Write};

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::RpcError;
use super::fs_open::{open_parent, open_read};
use super::scope::Scope;

/// Default byte cap of one `cap.fs.read` result.
pub(crate) const DEFAULT_READ_CAP: u64 = 16 * 1024 * 1024;

#[derive(Debug, Deserialize)]
pub(crate) struct ReadParams {
    pub path: String,
    /// First line, 1-based.
    #[serde(default)]
    pub line: Option<u64>,
    /// How many lines.
    #[serde(default)]
    pub limit: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WriteParams {
    pub path: String,
    pub content: String,
    #[serde(default)]
    pub encoding: Option<String>,
    #[serde(default)]
    pub create: Option<bool>,
    #[serde(default)]
    pub overwrite: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct PathParams {
    pub path: String,
    #[serde(default)]
    pub recursive: Option<bool>,
}

/// The content of `bytes` as `(content, encoding)`.
fn encode(bytes: Vec<u8>) -> (String, &'static str) {
    match String::from_utf8(bytes) {
        Ok(s) => (s, "utf-8"),
        Err(e) => (
            base64::engine::general_purpose::STANDARD.encode(e.into_bytes()),
            "base64",
        ),
    }
}

/// `cap.fs.read`: the whole file, or a window of lines; never more than `cap` bytes.
pub(crate) fn read(scope: &Scope, p: &ReadParams, cap: u64) -> Result<Value, RpcError> {
    let resolved = scope.check(&p.path)?;
    let f = open_read(scope, &resolved)?;
    let meta = f.metadata().map_err(|e| RpcError::from_io(&e))?;
    if meta.is_dir() {
        return Err(RpcError::Io("is a directory".into()));
    }
    let size = meta.len();
    let bytes = if p.line.is_none() && p.limit.is_none() {
        if size > cap {
            return Err(RpcError::Io(format!(
                "file is {size} bytes, over the read cap of {cap} bytes; read a window with line/limit"
            )));
        }
        let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        f.take(cap + 1)
            .read_to_end(&mut buf)
            .map_err(|e| RpcError::from_io(&e))?;
        buf
    } else {
        window(f, p.line.unwrap_or(1).max(1), p.limit, cap)?
    };
    let (content, encoding) = encode(bytes);
    Ok(json!({ "content": content, "encoding": encoding, "size": size }))
}

/// Lines `first ..` (1-based), at most `limit` of them and at most `cap` bytes.
fn window(f: std::fs::File, first: u64, limit: Option<u64>, cap: u64) -> Result<Vec<u8>, RpcError> {
    let mut r = BufReader::new(f);
    let mut out = Vec::new();
    let mut line = Vec::new();
    let mut n = 0u64;
    let mut taken = 0u64;
    loop {
        line.clear();
        let got = r
            .by_ref()
            .take(cap + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| RpcError::from_io(&e))?;
        if got == 0 {
            break;
        }
        n += 1;
        if n < first {
            continue;
        }
        if limit.is_some_and(|l| taken >= l) {
            break;
        }
        if (out.len() + line.len()) as u64 > cap {
            return Err(RpcError::Io(format!(
                "the requested lines exceed the read cap of {cap} bytes; ask for fewer lines"
            )));
        }
        out.extend_from_slice(&line);
        taken += 1;
    }
    Ok(out)
}

/// `cap.fs.write`: `create` and `overwrite` default to true.
pub(crate) fn write(scope: &Scope, p: &WriteParams) -> Result<Value, RpcError> {
    let bytes = match p.encoding.as_deref() {
        None | Some("utf-8") => p.content.as_bytes().to_vec(),
        Some("base64") => base64::engine::general_purpose::STANDARD
            .decode(&p.content)
            .map_err(|e| RpcError::InvalidParams(format!("bad base64: {e}")))?,
        Some(other) => {
            return Err(RpcError::InvalidParams(format!(
                "unknown encoding {other:?}"
            )));
        }
    };
    let resolved = scope.check(&p.path)?;
    let dir = open_parent(scope, &resolved)?;
    let mut flags = 0;
    if p.create.unwrap_or(true) {
        flags |= libc::O_CREAT;
    }
    if !p.overwrite.unwrap_or(true) {
        flags |= libc::O_CREAT | libc::O_EXCL;
        if !p.create.unwrap_or(true) {
            return Err(RpcError::InvalidParams(
                "create=false with overwrite=false writes nothing".into(),
            ));
        }
    }
    let mut f = dir.open_write(flags)?;
    f.set_len(0).map_err(|e| RpcError::from_io(&e))?;
    f.write_all(&bytes).map_err(|e| RpcError::from_io(&e))?;
    Ok(json!({ "bytes_written": bytes.len() }))
}

fn kind_name(t: std::fs::FileType) -> &'static str {
    if t.is_symlink() {
        "symlink"
    } else if t.is_dir() {
        "dir"
    } else {
        "file"
    }
}

/// `cap.fs.exists`.
pub(crate) fn exists(scope: &Scope, p: &PathParams) -> Result<Value, RpcError> {
    let resolved = scope.check(&p.path)?;
    let dir = open_parent(scope, &resolved);
    Ok(match dir.and_then(|d| d.kind()) {
        Ok(k) => json!({ "exists": true, "kind": kind_name(k) }),
        Err(RpcError::ScopeViolation) => return Err(RpcError::ScopeViolation),
        Err(_) => json!({ "exists": false }),
    })
}

/// `cap.fs.list`: entries of a directory, recursively when asked (links not followed).
pub(crate) fn list(scope: &Scope, p: &PathParams) -> Result<Value, RpcError> {
    let resolved = scope.check(&p.path)?;
    let f = open_read(scope, &resolved)?;
    let base = std::path::PathBuf::from(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&f)
    ));
    let mut entries = Vec::new();
    let mut stack = vec![(base, String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        for e in std::fs::read_dir(&dir).map_err(|e| RpcError::from_io(&e))? {
            let e = e.map_err(|e| RpcError::from_io(&e))?;
            let Ok(meta) = e.path().symlink_metadata() else {
                continue;
            };
            let name = format!("{prefix}{}", e.file_name().to_string_lossy());
            let modified_ms = meta
                .modified()
                .ok()
                .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as u64);
            if p.recursive.unwrap_or(false) && meta.is_dir() {
                stack.push((e.path(), format!("{name}/")));
            }
            entries.push(json!({
                "name": name, "kind": kind_name(meta.file_type()), "size": meta.len(),
                "modified_ms": modified_ms,
            }));
        }
    }
    Ok(json!({ "entries": entries }))
}

/// `cap.fs.delete`: `recursive` only matters for directories.
pub(crate) fn delete(scope: &Scope, p: &PathParams) -> Result<Value, RpcError> {
    let resolved = scope.check(&p.path)?;
    if resolved == scope.root() {
        return Err(RpcError::Io("refusing to delete the scope root".into()));
    }
    let dir = open_parent(scope, &resolved)?;
    let kind = dir.kind()?;
    if kind.is_dir() {
        if p.recursive.unwrap_or(false) {
            std::fs::remove_dir_all(dir.dir_path()).map_err(|e| RpcError::from_io(&e))?;
        } else {
            dir.unlink(true)?;
        }
    } else {
        dir.unlink(false)?;
    }
    Ok(json!({ "ok": true }))
}
