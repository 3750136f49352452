//! `<binary> --cap-manifest` (spec §5 option 4), bounded in time and output size;
//! and any other such probe (`<binary> --help` for [`super::flags`]).

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::process::{Io, SpawnSpec};

/// Largest manifest a probe may print.
pub const PROBE_STDOUT_MAX: usize = 1024 * 1024;
/// Kept stderr, for error messages.
const STDERR_MAX: usize = 4096;
/// Grace between SIGTERM and SIGKILL for a timed-out probe.
const PROBE_KILL_GRACE: Duration = Duration::from_millis(200);

/// How a probe ended, short of producing a manifest.
#[derive(Debug)]
pub(crate) enum ProbeOutcome {
    /// Exit 0: its stdout (at most [`PROBE_STDOUT_MAX`] bytes).
    Printed(String),
    /// Non-zero exit: the binary does not speak `--cap-manifest`.
    Failed {
        status: ExitStatus,
        stderr: String,
    },
    TimedOut,
    TooLarge,
    NotUtf8,
    Spawn(std::io::Error),
}

/// Read at most `max + 1` bytes (so the caller can tell "over the limit").
async fn read_capped<R: AsyncRead + Unpin>(r: Option<R>, max: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    if let Some(r) = r {
        // A read error leaves what was read so far; the exit status tells the rest.
        let _partial = r.take(max as u64 + 1).read_to_end(&mut buf).await;
    }
    buf
}

pub(crate) async fn run(binary: &Path, timeout: Duration) -> ProbeOutcome {
    run_args(binary, &["--cap-manifest".to_owned()], timeout).await
}

/// `binary args...`, bounded the same way (the help probe of [`super::flags`]).
pub(crate) async fn run_args(binary: &Path, args: &[String], timeout: Duration) -> ProbeOutcome {
    let spec = args
        .iter()
        .fold(SpawnSpec::new(binary), |spec, a| spec.arg(a))
        .stdio(Io::Null, Io::Piped, Io::Piped);
    let mut attempts = 0;
    let mut group = loop {
        match spec.spawn() {
            Ok(g) => break g,
            // A just-written script may still be open for writing in a forked sibling.
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempts < 5 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return ProbeOutcome::Spawn(e),
        }
    };
    let stdout = group.child().stdout.take();
    let stderr = group.child().stderr.take();
    let work = async {
        let (out, err) = tokio::join!(
            read_capped(stdout, PROBE_STDOUT_MAX),
            read_capped(stderr, STDERR_MAX)
        );
        if out.len() > PROBE_STDOUT_MAX {
            return (None, out, err);
        }
        let status = group.wait().await.ok();
        (status, out, err)
    };
    let finished = tokio::time::timeout(timeout, work).await;
    // Whatever happened, nothing of the probe's group outlives this call.
    let _status = group.kill(PROBE_KILL_GRACE).await;
    let (status, out, err) = match finished {
        Err(_elapsed) => return ProbeOutcome::TimedOut,
        Ok(r) => r,
    };
    let Some(status) = status else {
        return if out.len() > PROBE_STDOUT_MAX {
            ProbeOutcome::TooLarge
        } else {
            ProbeOutcome::TimedOut
        };
    };
    if !status.success() {
        let mut stderr = String::from_utf8_lossy(&err[..err.len().min(STDERR_MAX)])
            .trim()
            .to_owned();
        if stderr.is_empty() {
            stderr = "(no stderr)".to_owned();
        }
        return ProbeOutcome::Failed { status, stderr };
    }
    match String::from_utf8(out) {
        Ok(s) => ProbeOutcome::Printed(s),
        Err(_) => ProbeOutcome::NotUtf8,
    }
}

/// `name` looked up on the given `PATH` directories (first executable file wins).
pub(crate) fn which(name: &str, path_dirs: &[PathBuf]) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path_dirs.iter().map(|d| d.join(name)).find(|p| {
        std::fs::metadata(p)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    })
}
