//! `capfleet run --resume-on-crash`: a supervising capfleet. It runs the run in a
//! child capfleet (the same arguments, less this flag) and, whenever that child dies
//! by a signal — a chaos `self_kill`, a crash, an OOM kill — runs `capfleet run
//! --resume <id>` on the same run, until a child ends by itself (its exit code is
//! the supervisor's) or [`MAX_RESUMES`] resumes were made.
//!
//! The child learns nothing of its supervisor but a file to write its run's id in
//! (`--run-id-file`, hidden). It gets `PR_SET_PDEATHSIG` = `SIGKILL` (spawned from the
//! main thread, which waits for it: the death signal fires only when the spawning
//! thread exits), so a supervisor killed outright leaves no child behind, and the
//! child's keeper then kills its agents. `SIGTERM` and `SIGHUP` are passed on to the
//! child; `SIGINT` from a terminal reaches both (one process group): the child stops
//! the run, the supervisor waits for it and does not resume an interrupted run.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, ExitStatus};

use tokio::signal::unix::{SignalKind, signal};

use super::RunArgs;

/// At most this many resumes in one supervision.
pub(crate) const MAX_RESUMES: u32 = 10;

/// Supervise the run `args` describe (see the module doc).
pub(super) fn supervise(args: &RunArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("capfleet: error: cannot start the supervisor: {e}");
            return ExitCode::FAILURE;
        }
    };
    let id_file = std::env::temp_dir().join(format!("capfleet-run-{}.id", std::process::id()));
    let code = runtime.block_on(supervise_in(args, &id_file));
    let _never_written = std::fs::remove_file(&id_file);
    code
}

async fn supervise_in(args: &RunArgs, id_file: &Path) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("capfleet: error: cannot find capfleet's own binary: {e}");
            return ExitCode::FAILURE;
        }
    };
    let all: Vec<OsString> = std::env::args_os().skip(1).collect();
    // The global options (`--color`) and the verb, kept for the resumes.
    let verb = all.iter().position(|a| a == "run").map_or(0, |i| i + 1);
    let head = all[..verb].to_vec();
    let mut argv: Vec<OsString> = all
        .into_iter()
        .filter(|a| a != "--resume-on-crash")
        .collect();
    argv.extend(["--run-id-file".into(), id_file.into()]);
    let mut resumes = 0;
    loop {
        let status = match run_child(&exe, &argv).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("capfleet: error: cannot run the supervised capfleet: {e}");
                return ExitCode::FAILURE;
            }
        };
        let Some(sig) = status.signal() else {
            let code = status.code().and_then(|c| u8::try_from(c).ok());
            return ExitCode::from(code.unwrap_or(1));
        };
        let by_signal = ExitCode::from(u8::try_from(128 + sig).unwrap_or(u8::MAX));
        let Some(id) = std::fs::read_to_string(id_file)
            .ok()
            .filter(|id| !id.trim().is_empty())
        else {
            eprintln!(
                "capfleet: the supervised capfleet died by signal {sig} before its run began"
            );
            return by_signal;
        };
        if resumes == MAX_RESUMES {
            eprintln!(
                "capfleet: the supervised capfleet died by signal {sig}; {MAX_RESUMES} resumes \
                 made already: giving up (capfleet run --resume {id} goes on with it)"
            );
            return by_signal;
        }
        resumes += 1;
        eprintln!(
            "capfleet: the supervised capfleet died by signal {sig}; resuming run {} \
             ({resumes}/{MAX_RESUMES})",
            id.trim()
        );
        argv = resume_argv(&head, id.trim(), args.json, id_file);
    }
}

/// `run --resume <id>` with the global options given, `--json` if given.
fn resume_argv(head: &[OsString], id: &str, json: bool, id_file: &Path) -> Vec<OsString> {
    let mut argv = head.to_vec();
    argv.extend(["--resume".into(), id.into()]);
    if json {
        argv.push("--json".into());
    }
    argv.extend(["--run-id-file".into(), PathBuf::from(id_file).into()]);
    argv
}

/// Run one child capfleet to its end, passing `SIGTERM` and `SIGHUP` on.
async fn run_child(exe: &Path, argv: &[OsString]) -> std::io::Result<ExitStatus> {
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(argv);
    // SAFETY: prctl(2) and getppid(2) are async-signal-safe; nothing is allocated.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The supervisor died before the death signal was armed.
            if libc::getppid() == 1 {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let pid = child.id().and_then(|p| i32::try_from(p).ok());
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut int = signal(SignalKind::interrupt())?;
    loop {
        let sig = tokio::select! {
            status = child.wait() => return status,
            _ = term.recv() => libc::SIGTERM,
            _ = hup.recv() => libc::SIGHUP,
            // The terminal's Ctrl-C reached the child too: it stops the run itself.
            _ = int.recv() => continue,
        };
        if let Some(pid) = pid {
            // SAFETY: kill(2) to our own child, not yet reaped (its wait is pending).
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }
}
