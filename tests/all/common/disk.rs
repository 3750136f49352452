//! Disks that fail: a small tmpfs that fills up, a read-only one (mounted when the
//! tests run as root, as in CI; without root a read-only directory by its mode), and
//! `/dev/full`, which answers every write with ENOSPC and needs no privilege.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted for a test, unmounted (and its mount point removed) on drop.
pub(crate) struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// A tmpfs of `size` (e.g. `256k`) with mount options `extra` (e.g. `ro`), or why
    /// one cannot be mounted here.
    pub(crate) fn mount(size: &str, extra: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let opts = if extra.is_empty() {
            format!("size={size}")
        } else {
            format!("size={size},{extra}")
        };
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &opts, "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        Ok(Tmpfs { dir })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// A directory no one can create files in: a read-only tmpfs when mounting works,
/// else (no root) a directory of mode 0555 inside `scratch`.
pub(crate) enum ReadOnly {
    Mounted(Tmpfs),
    ByMode(PathBuf),
}

impl ReadOnly {
    pub(crate) fn new(scratch: &Path) -> ReadOnly {
        match Tmpfs::mount("64k", "ro") {
            Ok(t) => ReadOnly::Mounted(t),
            Err(why) => {
                eprintln!("no read-only tmpfs ({why}): a directory of mode 0555 instead");
                let dir = scratch.join("read-only");
                std::fs::create_dir_all(&dir).unwrap();
                let mode =
                    <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o555);
                std::fs::set_permissions(&dir, mode).unwrap();
                ReadOnly::ByMode(dir)
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        match self {
            ReadOnly::Mounted(t) => t.path(),
            ReadOnly::ByMode(p) => p,
        }
    }
}

/// A path in `dir` whose writes fail with ENOSPC: a symlink to `/dev/full`.
pub(crate) fn full_file(dir: &Path, name: &str) -> PathBuf {
    let link = dir.join(name);
    std::os::unix::fs::symlink("/dev/full", &link).unwrap();
    link
}
