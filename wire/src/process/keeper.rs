//! The keeper: no agent outlives capfleet, however capfleet dies.
//!
//! `PR_SET_PDEATHSIG` is no answer: it fires when the *thread* that forked the child
//! exits (tokio's blocking threads come and go), and it reaches only the child, not
//! its process group. Instead the application starts one keeper per process
//! ([`start`]): capfleet itself re-executed as `capfleet __keeper <pid>` in a process
//! group of its own, its stdin one end of a socket pair whose other end only capfleet
//! holds (close-on-exec, so no agent inherits it).
//!
//! Every process group capfleet spawns is announced to the keeper ([`register`],
//! right after the spawn) and withdrawn once it is gone ([`unregister`]): one 4-byte
//! record each, `+pgid` or `-pgid`. When capfleet dies — exit, crash, `SIGKILL`, OOM
//! kill — the kernel closes its end and the keeper reads end of file: it `SIGKILL`s
//! every group still registered, then every process whose [`super::sweep`] marker
//! names capfleet's pid (what left its group, or was forked in the instant before
//! its registration), until none is left (at most [`KEEP_LIMIT`]), and exits. The
//! keeper ignores the stop signals (`SIGINT`, `SIGTERM`, `SIGHUP`): they are for
//! capfleet, which ends its agents itself.
//!
//! A process that never called [`start`] (a library user, the engine's own tests)
//! registers nothing and relies on the group kill of each driver alone.

use std::collections::HashSet;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The first argument that makes the binary a keeper (see [`serve`]).
pub const KEEPER_ARG: &str = "__keeper";

/// How long the keeper goes on killing after capfleet's death, at most.
pub(crate) const KEEP_LIMIT: Duration = Duration::from_secs(2);

/// capfleet's end of the socket pair, once the keeper runs.
static CHANNEL: OnceLock<OwnedFd> = OnceLock::new();

/// Start this process's keeper: `program` (the running binary) with
/// `[KEEPER_ARG, <our pid>]`. Returns the keeper's pid. A second call is refused.
pub fn start(program: &Path) -> io::Result<u32> {
    if CHANNEL.get().is_some() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the keeper already runs",
        ));
    }
    let (ours, theirs) = socket_pair()?;
    let child = Command::new(program)
        .arg(KEEPER_ARG)
        .arg(std::process::id().to_string())
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Neither the terminal's signals nor a kill of capfleet's group reach it.
        .process_group(0)
        .spawn()?;
    // The keeper is never waited for: it outlives us by design.
    let pid = child.id();
    drop(child);
    CHANNEL
        .set(ours)
        .map_err(|_| io::Error::new(io::ErrorKind::AlreadyExists, "the keeper already runs"))?;
    Ok(pid)
}

/// Announce a process group capfleet just spawned (no-op without a keeper).
pub(crate) fn register(pgid: i32) {
    send(pgid);
}

/// Withdraw a process group that is gone (no-op without a keeper).
pub(crate) fn unregister(pgid: i32) {
    send(-pgid);
}

fn send(record: i32) {
    let Some(fd) = CHANNEL.get() else { return };
    let bytes = record.to_ne_bytes();
    // SAFETY: send(2) on a socket we own, from a live 4-byte buffer. MSG_NOSIGNAL: a
    // dead keeper is an error here, never a SIGPIPE. A stream socket takes 4 bytes
    // whole or not at all while its buffer has room; the keeper drains it at once.
    let sent = unsafe {
        libc::send(
            fd.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    if sent != 4 {
        tracing::warn!(
            record,
            error = %io::Error::last_os_error(),
            "the keeper did not take a process group: it would not be killed if capfleet died"
        );
    }
}

fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds: [RawFd; 2] = [-1; 2];
    // SAFETY: socketpair(2) writes two descriptors into the array we pass.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The keeper's life (the binary calls it for `KEEPER_ARG`): read registrations from
/// stdin until end of file, then kill what `owner` (capfleet's pid) left.
pub fn serve(owner: u32) {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
        // SAFETY: ignoring a signal has no memory-safety preconditions.
        unsafe {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
    let groups = read_registrations(io::stdin().lock());
    reap(owner, &groups);
}

/// The groups still registered when `input` ends (or fails).
fn read_registrations(mut input: impl Read) -> HashSet<i32> {
    let mut groups = HashSet::new();
    let mut buf = [0u8; 4096];
    let mut held = Vec::with_capacity(4);
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => return groups,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return groups,
        };
        held.extend_from_slice(&buf[..n]);
        let whole = held.len() / 4 * 4;
        for rec in held[..whole].chunks_exact(4) {
            let r = i32::from_ne_bytes([rec[0], rec[1], rec[2], rec[3]]);
            if r > 1 {
                groups.insert(r);
            } else if r < -1 {
                groups.remove(&-r);
            }
        }
        held.drain(..whole);
    }
}

/// Kill every group of `groups` and every process marked by `owner`, again until
/// nothing of theirs is left or [`KEEP_LIMIT`] has passed.
fn reap(owner: u32, groups: &HashSet<i32>) {
    let deadline = Instant::now() + KEEP_LIMIT;
    loop {
        for &g in groups {
            let _gone = super::signal_group(g, libc::SIGKILL);
        }
        let marked = super::sweep::kill_marked_by(owner);
        // Zombies do not count: whoever inherited them reaps them.
        let running = super::members::any_running(|g| groups.contains(&g));
        if (marked == 0 && !running) || Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_add_and_withdraw_groups_across_split_reads() {
        let mut bytes = Vec::new();
        for r in [100i32, 200, -100, 300, 1, -1, 0] {
            bytes.extend_from_slice(&r.to_ne_bytes());
        }
        /// Hands out its bytes three at a time, splitting records.
        struct Trickle(Vec<u8>);
        impl Read for Trickle {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(3).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0.drain(..n);
                Ok(n)
            }
        }
        let groups = read_registrations(Trickle(bytes));
        assert_eq!(groups, HashSet::from([200, 300]));
    }
}
