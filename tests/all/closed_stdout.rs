//! Every verb piped into a closed pipe (`capfleet resolve sim | true`) exits quietly:
//! no panic, no exit 101. The printing verbs end as a Unix filter does (the default
//! `SIGPIPE`, or exit 0); `run` and `chat`, which drive agents, finish their work
//! (exit 0, no agent left) and only stop printing.

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::{self, EnvMarker, capfleet, wait_until};

/// The write end of a pipe whose read end is already closed.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the two descriptors; both are owned from here on.
    let rc = unsafe { libc::pipe(fds.as_mut_ptr()) };
    assert_eq!(rc, 0, "pipe");
    // SAFETY: fresh descriptors from pipe(2), owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

/// Run `c` with its stdout a closed pipe: it must end without a panic, by exit 0 or
/// by `SIGPIPE`'s default action (what `cat` does). Returns its exit code, if any.
fn quietly(mut c: Command, what: &str) -> Option<i32> {
    let out = c.stdout(closed_pipe()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    let quiet = out.status.success() || out.status.signal() == Some(libc::SIGPIPE);
    assert!(quiet, "{what}: {:?}: {stderr}", out.status);
    out.status.code()
}

fn verb(dir: &Path, args: &[&str]) -> Command {
    let mut c = capfleet(dir);
    c.args(args);
    c
}

#[test]
fn every_printing_verb_exits_quietly_into_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let root = common::repo_root();
    let manifest = root.join("config/agents/sim.toml");
    let demo = root.join("config/fleets/demo.toml");
    let run = d.join(".capfleet/runs/20261130T121500Z-3fa9");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(
        run.join("journal.jsonl"),
        "{\"seq\":1,\"urn\":\"cap://f/a\",\"ts_ms\":0,\"type\":\"state\",\"from\":\"starting\",\"to\":\"ready\"}\n".repeat(2000),
    )
    .unwrap();
    let (m, f) = (manifest.to_str().unwrap(), demo.to_str().unwrap());
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("resolve", vec!["resolve", "sim"]),
        ("resolve --json", vec!["resolve", "sim", "--json"]),
        ("manifest validate", vec!["manifest", "validate", m]),
        ("completions", vec!["completions", "bash"]),
        ("run --dry-run", vec!["run", "--dry-run", f]),
        (
            "run --dry-run --json",
            vec!["run", "--dry-run", "--json", f],
        ),
        ("log", vec!["log", "latest"]),
        ("log --json", vec!["log", "latest", "--json"]),
        ("--cap-manifest", vec!["--cap-manifest"]),
        ("--help", vec!["--help"]),
    ];
    for (what, args) in cases {
        quietly(verb(d, &args), what);
    }
}

#[test]
fn run_and_chat_finish_their_work_into_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("closed-stdout");
    std::fs::write(
        d.join("say.toml"),
        "[[turn]]\nsteps = [{ say = \"hello\" }, { say = \"again\" }]\n",
    )
    .unwrap();
    std::fs::write(
        d.join("fleet.toml"),
        format!(
            "[fleet]\nname = \"p\"\nstart = [\"a\"]\ntask = \"go\"\n\n{}",
            common::sim::fleet_session("a", "say.toml", &m, "")
        ),
    )
    .unwrap();
    assert_eq!(quietly(verb(d, &["run", "fleet.toml"]), "run"), Some(0));
    assert_eq!(
        quietly(verb(d, &["run", "fleet.toml", "--json"]), "run --json"),
        Some(0)
    );
    let chat = verb(
        d,
        &[
            "chat", "sim", "--task", "hi", "--script", "say.toml", "--json",
        ],
    );
    assert_eq!(quietly(chat, "chat"), Some(0));
    assert!(
        wait_until(
            std::time::Duration::from_secs(5),
            std::time::Duration::from_millis(20),
            || m.processes().is_empty()
        ),
        "no agent left"
    );
}
