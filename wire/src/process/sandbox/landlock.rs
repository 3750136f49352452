//! The Landlock backend: a ruleset (read on everything but the hidden roots, read on
//! the readable paths, all rights on the writable ones, TCP denied for
//! `network = "none"`, signals and abstract unix sockets scoped to the session)
//! applied by a helper that then executes the program: a small binary beside the
//! application's, [`HELPER_BIN`], run as `capfleet-landlock <sandbox as JSON>
//! <program> <args>...` ([`set_helper`], [`serve`]).
//!
//! Why a helper process, not the child itself between fork and exec: a `pre_exec`
//! hook makes the standard library fork the whole application (its address space
//! copied, however large) where it would otherwise `posix_spawn` (vfork-like), some
//! milliseconds a spawn in a fleet of a hundred. Nor a thread of the application
//! restricted by the ruleset and spawning the child from there: the child shares that
//! thread's Landlock domain, so for as long as the thread lives the child may signal
//! (`SIGKILL` of its thread id ends the whole application) or ptrace it, which the
//! scoping denies for any process outside the domain. The helper is a process of its
//! own, spawned with `posix_spawn`: it restricts itself and becomes the program, whose
//! domain holds nothing of the application. It is a binary of its own, not capfleet
//! re-executed, because a binary's start costs what its relocations cost: capfleet's
//! takes milliseconds (ten in a debug build), more than the fork it replaces.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};

use super::{Network, Sandbox, SandboxError};

/// The highest ABI asked for; lower kernels get what they have (listed as not
/// enforced by [`super::probe::unenforced`]).
const ABI_WANTED: ABI = ABI::V7;

/// The helper's name, installed beside capfleet's binary (`src/bin/`).
pub const HELPER_BIN: &str = "capfleet-landlock";

/// What a helper that cannot start the program exits with (a shell's "cannot
/// execute").
const CANNOT_EXECUTE: u8 = 126;

/// The helper, once named.
static HELPER: OnceLock<PathBuf> = OnceLock::new();

/// Name the helper: a program whose `main` is [`serve`] ([`HELPER_BIN`] beside
/// capfleet's binary). A process that names none cannot confine with Landlock (its
/// confinement is refused, saying so). A second call changes nothing.
pub fn set_helper(program: &Path) {
    let _first_wins = HELPER.set(program.to_owned());
}

/// The helper's command line before the program: the helper and `s`.
pub(super) fn helper_argv(s: &Sandbox) -> Result<(PathBuf, Vec<OsString>), SandboxError> {
    let helper = HELPER.get().ok_or_else(|| {
        SandboxError::Landlock(format!(
            "this process names no helper to apply it (`{HELPER_BIN}`, `sandbox::set_helper`)"
        ))
    })?;
    if !helper.is_file() {
        return Err(SandboxError::Landlock(format!(
            "its helper {} is not there: install it beside capfleet (`cargo install` \
             installs both)",
            helper.display()
        )));
    }
    let rules = serde_json::to_string(s).map_err(|e| SandboxError::Landlock(e.to_string()))?;
    Ok((helper.clone(), vec![rules.into()]))
}

/// The helper's life, for its arguments (the sandbox as JSON, the program, its
/// arguments): the ruleset built and applied to this process, then the program
/// executed in its place. Returns only when that fails, having said why on stderr.
pub fn serve(mut args: impl Iterator<Item = OsString>) -> ExitCode {
    let (rules, program) = (args.next(), args.next());
    let why = match (rules, program) {
        (Some(rules), Some(program)) => match restrict_to(&rules) {
            Ok(()) => format!(
                "{}: {}",
                Path::new(&program).display(),
                std::process::Command::new(&program).args(args).exec()
            ),
            Err(e) => e,
        },
        _ => format!("usage: {HELPER_BIN} <sandbox as JSON> <program> [<arg>...]"),
    };
    eprintln!("capfleet: cannot start the program inside its Landlock sandbox: {why}");
    ExitCode::from(CANNOT_EXECUTE)
}

/// Build the ruleset of the sandbox `rules` (JSON) and restrict this process by it.
fn restrict_to(rules: &std::ffi::OsStr) -> Result<(), String> {
    let rules = rules.to_str().ok_or("the sandbox is not UTF-8")?;
    let sandbox: Sandbox = serde_json::from_str(rules).map_err(|e| e.to_string())?;
    let fd = ruleset(&sandbox).map_err(|e| e.to_string())?;
    restrict(&fd).map_err(|e| format!("landlock_restrict_self: {e}"))
}

/// The ruleset of `s`, as a file descriptor a process restricts itself with.
fn ruleset(s: &Sandbox) -> Result<OwnedFd, SandboxError> {
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
    fd.ok_or_else(|| SandboxError::Landlock("the kernel made no ruleset".into()))
}

fn restrict(fd: &OwnedFd) -> std::io::Result<()> {
    // SAFETY: plain prctl and landlock_restrict_self calls on an open ruleset fd.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
