//! The escape kit: a hostile agent's attempts to leave its sandbox (a script step
//! `escape = true`), each tried for real and reported on one line of the turn's
//! text — `escape <name>: blocked: <why>` or `escape <name>: ESCAPED` — so a test
//! can hold every backend to it. Targets beyond its own home and workspace come from
//! the environment: `CAPFLEET_ESCAPE_OTHER` (another session's worktree),
//! `CAPFLEET_ESCAPE_RUNS` (the run directory, journals inside),
//! `CAPFLEET_ESCAPE_VICTIM` (a pid outside the session), `CAPFLEET_ESCAPE_CONNECT`
//! (`host:port` on the host's loopback), `CAPFLEET_ESCAPE_TMP` (default `/tmp/x`),
//! `CAPFLEET_ESCAPE_TOKENS` (serve's token file: read it, open it to write — an
//! agent that could would make itself admin) and `CAPFLEET_ESCAPE_DATA` (serve's
//! data dir: a journal of its runs read); `CAPFLEET_ESCAPE_ONLY` picks attempts.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Every attempt's line, in order (only those `CAPFLEET_ESCAPE_ONLY` names, when
/// set: a comma-separated list, so that a run with nothing hidden — a control that
/// shows an attempt catches what it looks for — tries nothing harmful).
pub(super) fn report() -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let only = var("CAPFLEET_ESCAPE_ONLY");
    let mut out = Vec::new();
    let mut line = |name: &str, attempt: &mut dyn FnMut() -> Result<(), String>| {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|n| n.trim() == name))
        {
            return;
        }
        out.push(match attempt() {
            Ok(()) => format!("escape {name}: ESCAPED"),
            Err(why) => format!("escape {name}: blocked: {why}"),
        });
    };
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let cwd = std::env::current_dir().unwrap_or_default();
    line("write-bashrc", &mut || write(&home.join(".bashrc")));
    line("write-beside", &mut || {
        write(&cwd.with_file_name("escape-beside"))
    });
    let tmp = var("CAPFLEET_ESCAPE_TMP").unwrap_or_else(|| "/tmp/x".into());
    line("write-tmp", &mut || write(Path::new(&tmp)));
    line("read-ssh", &mut || read_any(&home.join(".ssh")));
    line("read-aws", &mut || read(&home.join(".aws/credentials")));
    line("read-via-symlink", &mut || {
        let link = cwd.join("escape-link");
        let _fresh = std::fs::remove_file(&link);
        let read = std::os::unix::fs::symlink(home.join(".ssh"), &link)
            .map_err(|e| e.to_string())
            .and_then(|()| read_any(&link));
        let _gone = std::fs::remove_file(&link);
        read
    });
    if let Some(other) = var("CAPFLEET_ESCAPE_OTHER").map(PathBuf::from) {
        line("write-other-worktree", &mut || {
            write(&other.join("escape-was-here"))
        });
        line("read-other-worktree", &mut || read_any(&other));
    }
    if let Some(runs) = var("CAPFLEET_ESCAPE_RUNS").map(PathBuf::from) {
        line("read-journal", &mut || read_journal(&runs));
    }
    if let Some(tokens) = var("CAPFLEET_ESCAPE_TOKENS").map(PathBuf::from) {
        line("read-serve-tokens", &mut || read(&tokens));
        line("write-serve-tokens", &mut || write(&tokens));
    }
    if let Some(data) = var("CAPFLEET_ESCAPE_DATA").map(PathBuf::from) {
        line("read-serve-data", &mut || read_journal(&data.join("runs")));
    }
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    line("kill-capfleet", &mut || kill(parent));
    line("ptrace-capfleet", &mut || ptrace(parent));
    line("proc-mem-capfleet", &mut || open_mem(parent));
    if let Some(victim) = var("CAPFLEET_ESCAPE_VICTIM").and_then(|v| v.parse::<i32>().ok()) {
        line("see-other-process", &mut || {
            std::fs::metadata(format!("/proc/{victim}"))
                .map(drop)
                .map_err(|e| e.to_string())
        });
        line("kill-other-process", &mut || kill(victim));
    }
    if let Some(addr) = var("CAPFLEET_ESCAPE_CONNECT") {
        line("connect-host-loopback", &mut || connect(&addr));
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

/// Read something of `path`: a file that reads empty (a hidden file shows as
/// `/dev/null`) gave nothing away.
fn read(path: &Path) -> Result<(), String> {
    let mut buf = [0u8; 16];
    let mut f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    match f.read(&mut buf) {
        Ok(0) => Err("it reads empty: nothing of it visible".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
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
