//! Opening in-scope paths without a check-then-use race.
//!
//! The path was resolved and checked by [`Scope::check`]; between that and the open, a
//! directory on the way may have been swapped for a symlink. So the last component is
//! opened with `O_NOFOLLOW`, and the descriptor's real location (`/proc/self/fd/N`) is
//! checked against the scope again; writes, creates and deletes go through the parent
//! directory's checked descriptor (`openat` / `unlinkat`).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::error::RpcError;
use super::scope::Scope;

/// Where an open descriptor really points.
fn fd_path(f: &File) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd()))
}

fn verify(scope: &Scope, f: File) -> Result<File, RpcError> {
    let real = fd_path(&f).map_err(|e| RpcError::Io(e.to_string()))?;
    if scope.contains(&real) {
        Ok(f)
    } else {
        Err(RpcError::ScopeViolation)
    }
}

/// Map an open error: a symlink met with `O_NOFOLLOW` (`ELOOP`, or `ENOTDIR` with
/// `O_DIRECTORY`) means the path changed under us; if it now leads out, say so.
fn open_err(scope: &Scope, path: &Path, e: &io::Error) -> RpcError {
    let link_met = matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR));
    if link_met && !scope.contains(&super::scope::resolve(path)) {
        RpcError::ScopeViolation
    } else if e.raw_os_error() == Some(libc::ELOOP) {
        RpcError::Io("path is a symlink".into())
    } else {
        RpcError::from_io(e)
    }
}

/// Open an existing in-scope file or directory for reading.
pub(crate) fn open_read(scope: &Scope, resolved: &Path) -> Result<File, RpcError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(resolved)
        .map_err(|e| open_err(scope, resolved, &e))?;
    verify(scope, f)
}

/// An in-scope parent directory, held open, and the name inside it.
pub(crate) struct InDir {
    dir: File,
    name: CString,
    path: PathBuf,
    scope: Scope,
}

/// Open the parent of `resolved` (which must be in scope) for `openat`/`unlinkat`.
pub(crate) fn open_parent(scope: &Scope, resolved: &Path) -> Result<InDir, RpcError> {
    let (Some(parent), Some(name)) = (resolved.parent(), resolved.file_name()) else {
        return Err(RpcError::Io("no parent directory".into()));
    };
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(parent)
        .map_err(|e| open_err(scope, parent, &e))?;
    let dir = verify(scope, dir)?;
    let name =
        CString::new(name.as_bytes()).map_err(|_| RpcError::InvalidParams("NUL in path".into()))?;
    Ok(InDir {
        dir,
        name,
        path: resolved.to_path_buf(),
        scope: scope.clone(),
    })
}

impl InDir {
    /// `openat(dir, name, O_WRONLY | O_NOFOLLOW | extra)`.
    pub(crate) fn open_write(&self, extra: i32) -> Result<File, RpcError> {
        let flags = libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | extra;
        // SAFETY: both pointers are valid for the call; the mode is a plain integer.
        let fd = unsafe { libc::openat(self.dir.as_raw_fd(), self.name.as_ptr(), flags, 0o644) };
        if fd < 0 {
            return Err(open_err(
                &self.scope,
                &self.path,
                &io::Error::last_os_error(),
            ));
        }
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// `unlinkat(dir, name, 0 | AT_REMOVEDIR)`.
    pub(crate) fn unlink(&self, dir: bool) -> Result<(), RpcError> {
        let flags = if dir { libc::AT_REMOVEDIR } else { 0 };
        // SAFETY: both pointers are valid for the call.
        let rc = unsafe { libc::unlinkat(self.dir.as_raw_fd(), self.name.as_ptr(), flags) };
        if rc == 0 {
            Ok(())
        } else {
            Err(RpcError::from_io(&io::Error::last_os_error()))
        }
    }

    /// The entry's type without following it.
    pub(crate) fn kind(&self) -> Result<std::fs::FileType, RpcError> {
        let at = PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()))
            .join(std::ffi::OsStr::from_bytes(self.name.as_bytes()));
        std::fs::symlink_metadata(at)
            .map(|m| m.file_type())
            .map_err(|e| RpcError::from_io(&e))
    }

    /// A path that reaches the checked directory itself (for recursive deletes).
    pub(crate) fn dir_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()))
            .join(std::ffi::OsStr::from_bytes(self.name.as_bytes()))
    }
}
