//! The bubblewrap backend: new user, pid, ipc and uts namespaces (and net for
//! `network = "none"`), the root bound read-only, each hidden root covered by an
//! empty file system (read-only once the allowed paths are bound back into it), the
//! readable paths bound read-only, the writable ones read-write, a fresh `/dev` and
//! `/proc`. bubblewrap stays in the spawn's process group (no `--new-session`), so
//! the group's signals and the keeper reach it and all it runs; `--die-with-parent`
//! and the pid namespace end everything inside when it goes.

use std::ffi::OsString;
use std::path::Path;

use super::{Network, Sandbox};

/// bubblewrap's arguments, before `--` and the program.
pub(super) fn args(s: &Sandbox) -> Vec<OsString> {
    let mut a: Vec<OsString> = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    if s.network == Network::None {
        a.push("--unshare-net".into());
    }
    let two = |a: &mut Vec<OsString>, flag: &str, src: &Path, dest: &Path| {
        a.push(flag.into());
        a.push(src.into());
        a.push(dest.into());
    };
    two(&mut a, "--ro-bind", Path::new("/"), Path::new("/"));
    a.extend(["--dev", "/dev", "--proc", "/proc"].map(OsString::from));
    for h in &s.hidden {
        if h.is_dir() {
            a.push("--tmpfs".into());
            a.push(h.into());
        } else {
            two(&mut a, "--ro-bind", Path::new("/dev/null"), h);
        }
    }
    for r in &s.readable {
        two(&mut a, "--ro-bind-try", r, r);
    }
    for w in &s.writable {
        two(&mut a, "--bind", w, w);
    }
    for h in s.hidden.iter().filter(|h| h.is_dir()) {
        a.push("--remount-ro".into());
        a.push(h.into());
    }
    a
}
