//! The escape kit: a hostile agent's attempts to leave its sandbox (a script step
//! `escape = true`), each tried for real and reported on one line of the turn's
//! text — `escape <name>: blocked: <why>` or `escape <name>: ESCAPED` — so a test
//! can hold every backend to it. Targets beyond its own home and workspace come from
//! the environment: `CAPFLEET_ESCAPE_OTHER` (another session's worktree),
//! `CAPFLEET_ESCAPE_RUNS` (the run directory, journals inside),
//! `CAPFLEET_ESCAPE_VICTIM` (a pid outside the session), `CAPFLEET_ESCAPE_CONNECT`
//! (`host:port` on the host's loopback), `CAPFLEET_ESCAPE_TMP` (default `/tmp/x`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Every attempt's line, in order.
pub(super) fn report() -> String {
    let mut out = Vec::new();
    let mut line = |name: &str, r: Result<(), String>| {
        out.push(match r {
            Ok(()) => format!("escape {name}: ESCAPED"),
            Err(why) => format!("escape {name}: blocked: {why}"),
        });
    };
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let cwd = std::env::current_dir().unwrap_or_default();
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    line("write-bashrc", write(&home.join(".bashrc")));
    line("write-beside", write(&cwd.with_file_name("escape-beside")));
    let tmp = var("CAPFLEET_ESCAPE_TMP").unwrap_or_else(|| "/tmp/x".into());
    line("write-tmp", write(Path::new(&tmp)));
    line("read-ssh", read_any(&home.join(".ssh")));
    line("read-aws", read(&home.join(".aws/credentials")));
    let link = cwd.join("escape-link");
    let _fresh = std::fs::remove_file(&link);
    line(
        "read-via-symlink",
        std::os::unix::fs::symlink(home.join(".ssh"), &link)
            .map_err(|e| e.to_string())
            .and_then(|()| read_any(&link)),
    );
    let _gone = std::fs::remove_file(&link);
    if let Some(other) = var("CAPFLEET_ESCAPE_OTHER").map(PathBuf::from) {
        line(
            "write-other-worktree",
            write(&other.join("escape-was-here")),
        );
        line("read-other-worktree", read_any(&other));
    }
    if let Some(runs) = var("CAPFLEET_ESCAPE_RUNS").map(PathBuf::from) {
        line("read-journal", read_journal(&runs));
    }
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    line("kill-capfleet", kill(parent));
    line("ptrace-capfleet", ptrace(parent));
    line("proc-mem-capfleet", open_mem(parent));
    if let Some(victim) = var("CAPFLEET_ESCAPE_VICTIM").and_then(|v| v.parse::<i32>().ok()) {
        line(
            "see-other-process",
            std::fs::metadata(format!("/proc/{victim}"))
                .map(drop)
                .map_err(|e| e.to_string()),
        );
        line("kill-other-process", kill(victim));
    }
    if let Some(addr) = var("CAPFLEET_ESCAPE_CONNECT") {
        line("connect-host-loopback", connect(&addr));
    }
    out.join("\n")
}

fn write(path: &Path) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(drop)
        .map_err(|e| e.to_string())
}

fn read(path: &Path) -> Result<(), String> {
    let mut buf = [0u8; 16];
    let mut f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    f.read(&mut buf).map(drop).map_err(|e| e.to_string())
}

/// Read the first file found in `dir` (or list it, when it holds none).
fn read_any(dir: &Path) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| e.to_string())?;
    let files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    match files.iter().find(|p| p.is_file()) {
        Some(f) => read(f),
        None if files.is_empty() => Err("nothing there to read".into()),
        None => Ok(()),
    }
}

fn read_journal(runs: &Path) -> Result<(), String> {
    let entries = std::fs::read_dir(runs).map_err(|e| e.to_string())?;
    for run in entries.flatten() {
        let journal = run.path().join("journal.jsonl");
        if journal.exists() {
            return read(&journal);
        }
    }
    Err("no journal visible".into())
}

fn kill(pid: i32) -> Result<(), String> {
    if pid <= 1 {
        return Err(format!("pid {pid}: capfleet is not in this pid namespace"));
    }
    // SAFETY: kill has no memory preconditions; pid > 1.
    match unsafe { libc::kill(pid, libc::SIGKILL) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error().to_string()),
    }
}

fn ptrace(pid: i32) -> Result<(), String> {
    if pid <= 1 {
        return Err(format!("pid {pid}: capfleet is not in this pid namespace"));
    }
    // SAFETY: PTRACE_ATTACH then, if it worked, PTRACE_DETACH of the same pid; no
    // memory is passed.
    unsafe {
        if libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0) == 0 {
            let _ = libc::ptrace(libc::PTRACE_DETACH, pid, 0, 0);
            return Ok(());
        }
    }
    Err(std::io::Error::last_os_error().to_string())
}

/// Opening `/proc/<pid>/mem` is where the kernel checks the right to ptrace.
fn open_mem(pid: i32) -> Result<(), String> {
    if pid <= 1 {
        return Err(format!("pid {pid}: capfleet is not in this pid namespace"));
    }
    std::fs::File::open(format!("/proc/{pid}/mem"))
        .map(drop)
        .map_err(|e| e.to_string())
}

fn connect(addr: &str) -> Result<(), String> {
    let addr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1))
        .map(drop)
        .map_err(|e| e.to_string())
}
