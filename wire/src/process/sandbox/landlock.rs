//! The Landlock backend: a ruleset built in capfleet (read on everything but the
//! hidden roots, read on the readable paths, all rights on the writable ones, TCP
//! denied for `network = "none"`, signals and abstract unix sockets scoped to the
//! session), applied by the child between fork and exec — two system calls, nothing
//! that allocates.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};
use tokio::process::Command;

use super::{Network, Sandbox, SandboxError};

/// The highest ABI asked for; lower kernels get what they have (listed as not
/// enforced by [`super::probe::unenforced`]).
const ABI_WANTED: ABI = ABI::V7;

/// The ruleset of `s`, as a file descriptor the child restricts itself with.
pub(super) fn ruleset(s: &Sandbox) -> Result<Arc<OwnedFd>, SandboxError> {
    let err = |e: landlock::RulesetError| SandboxError::Landlock(e.to_string());
    let read = AccessFs::from_read(ABI_WANTED);
    let all = AccessFs::from_all(ABI_WANTED);
    let mut base = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(err)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(err)?;
    if s.network == Network::None {
        base = base
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(err)?;
    }
    let device = AccessFs::from_file(ABI_WANTED) | AccessFs::ReadDir;
    let created = base
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(
            super::paths::complement(&s.hidden),
            read,
        ))
        .map_err(err)?
        .add_rules(path_beneath_rules(&s.readable, read))
        .map_err(err)?
        .add_rules(path_beneath_rules(["/dev"], device))
        .map_err(err)?
        .add_rules(path_beneath_rules(&s.writable, all))
        .map_err(err)?;
    let fd: Option<OwnedFd> = created.into();
    fd.map(Arc::new)
        .ok_or_else(|| SandboxError::Landlock("the kernel made no ruleset".into()))
}

/// Restrict the child of `cmd` with `fd` before it executes.
pub(super) fn install(cmd: &mut Command, fd: Arc<OwnedFd>) {
    let raw = fd.as_raw_fd();
    // SAFETY: the closure runs in the forked child and makes two system calls
    // (async-signal-safe, no allocation); `fd` is kept open by the parent's Arc for as
    // long as the command exists, and is close-on-exec.
    unsafe {
        cmd.pre_exec(move || {
            let _held = &fd;
            restrict(raw)
        });
    }
}

fn restrict(fd: i32) -> std::io::Result<()> {
    // SAFETY: plain prctl and landlock_restrict_self calls on an open ruleset fd.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
