//! The bubblewrap backend: new user, pid, ipc and uts namespaces (and net for
//! `network = "none"`), the root bound read-only, each hidden root covered by an
//! empty file system (read-only once the allowed paths are bound back into it), the
//! readable paths bound read-only, the writable ones read-write — each path after
//! the ones it lies in, so a hidden path inside a writable one stays hidden — a fresh
//! `/dev` and `/proc`. bubblewrap stays in the spawn's process group (no `--new-session`), so
//! the group's signals and the keeper reach it and all it runs; `--die-with-parent`
//! and the pid namespace end everything inside when it goes.

use std::ffi::OsString;
use std::path::Path;

use super::{Network, Sandbox};

/// What a path of the sandbox is mounted as.
#[derive(Clone, Copy)]
enum Mount {
    Hidden,
    Readable,
    Writable,
}

/// bubblewrap's arguments, up to the `--` before the program.
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
    // Shallower first: a path inside another is mounted after it, whichever kind
    // each is (a readable path inside a hidden root comes back into it; a hidden file
    // inside the writable workspace — a server's token file — stays hidden). A
    // readable path inside a writable one stays writable.
    let writable_holds = |p: &Path| s.writable.iter().any(|w| p.starts_with(w));
    let mut mounts: Vec<(&Path, Mount)> = (s.hidden.iter())
        .map(|h| (h.as_path(), Mount::Hidden))
        .chain(
            (s.readable.iter())
                .filter(|r| !writable_holds(r))
                .map(|r| (r.as_path(), Mount::Readable)),
        )
        .chain(s.writable.iter().map(|w| (w.as_path(), Mount::Writable)))
        .collect();
    mounts.sort_by_key(|(p, _)| p.components().count());
    for (p, kind) in mounts {
        match kind {
            Mount::Hidden if p.is_dir() => {
                a.push("--tmpfs".into());
                a.push(p.into());
            }
            Mount::Hidden => two(&mut a, "--ro-bind", Path::new("/dev/null"), p),
            Mount::Readable => two(&mut a, "--ro-bind-try", p, p),
            Mount::Writable => two(&mut a, "--bind", p, p),
        }
    }
    for h in s.hidden.iter().filter(|h| h.is_dir()) {
        a.push("--remount-ro".into());
        a.push(h.into());
    }
    a.push("--".into());
    a
}
