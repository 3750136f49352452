//! Sandboxed sessions against the escape kit (issue 38), under each backend: a sim
//! session with `sandbox = "workspace"` and `network = "none"` tries to write the
//! home's `~/.bashrc`, beside its worktree, another session's worktree and `/tmp`;
//! to read a planted `~/.ssh` key and `~/.aws/credentials` (also through a symlink
//! in its worktree), the run's journal and another session's worktree; to kill,
//! ptrace and read the memory of capfleet, to kill a process outside its session,
//! and to reach a port the test listens on; every attempt fails (seeing another
//! process is what Landlock cannot prevent, said as such) and the run goes on. Its
//! `test_command`, writing outside the worktree, fails the same way. A host with no
//! backend refuses the session before anything spawns.

use std::process::Command;

use common::EnvMarker;
use common::repo::{Fixture, stderr};
use serde_json::Value;

use crate::common;

struct Planted {
    home: tempfile::TempDir,
    other: std::path::PathBuf,
    tmp_x: std::path::PathBuf,
    runs: std::path::PathBuf,
}

fn plant(f: &Fixture) -> Planted {
    let home = tempfile::tempdir().expect("home");
    for (rel, text) in [
        (".ssh/id_ed25519", "PRIVATE KEY"),
        (".aws/credentials", "AWS SECRET"),
    ] {
        let p = home.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("dir");
        std::fs::write(p, text).expect("plant");
    }
    let other = f.path().join(".cap-worktrees/an-earlier-run/other");
    std::fs::create_dir_all(&other).expect("other worktree");
    std::fs::write(other.join("work.rs"), "// another session's work\n").expect("work");
    let tmp_x = std::env::temp_dir().join(format!("capfleet-escape-x-{}", std::process::id()));
    let runs = f.path().join(".capfleet/runs");
    Planted {
        home,
        other,
        tmp_x,
        runs,
    }
}

fn escape_fleet(backend: &str, p: &Planted, victim: u32, port: u16, marker: &EnvMarker) -> String {
    let (k, v) = marker.pair();
    format!(
        r#"[fleet]
name = "escape"
start = "s"
task = "escape"
sandbox = "workspace"

[sandbox]
network = "none"
backend = "{backend}"

[[sessions]]
name = "s"
agent = "sim"
script = "s.toml"
test_command = "echo x > ../escape-test-beside; echo x > \"$HOME/escape-test\""
env = {{ {k} = "{v}", CAPFLEET_ESCAPE_OTHER = "{other}", CAPFLEET_ESCAPE_RUNS = "{runs}", CAPFLEET_ESCAPE_VICTIM = "{victim}", CAPFLEET_ESCAPE_CONNECT = "127.0.0.1:{port}", CAPFLEET_ESCAPE_TMP = "{tmp}" }}
"#,
        other = p.other.display(),
        runs = p.runs.display(),
        tmp = p.tmp_x.display(),
    )
}

/// The kit's lines, from the session's text in the journal.
pub(crate) fn kit_lines(journal: &[Value]) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let texts = journal
        .iter()
        .filter(|r| r["type"] == "cap")
        .filter_map(|r| r["event"]["text"].as_str());
    for line in texts.flat_map(str::lines) {
        if line.starts_with("escape ") && !lines.iter().any(|l| l == line) {
            lines.push(line.to_owned());
        }
    }
    lines
}

fn escapes_fail(backend: &str) {
    let f = Fixture::git_repo(&[("README.md", "# r\n")]);
    let p = plant(&f);
    let mut victim = Command::new("sleep").arg("30").spawn().expect("victim");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let m = EnvMarker::new("escape");
    f.write("s.toml", "[[turn]]\nsteps = [{ escape = true }]\n");
    f.write(
        "fleet.toml",
        &escape_fleet(backend, &p, victim.id(), port, &m),
    );
    let out = f
        .command(&["run", "fleet.toml"])
        .env("HOME", p.home.path())
        .output()
        .expect("capfleet runs");
    let victim_alive = victim.try_wait().expect("victim").is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    let lines = kit_lines(&f.journal());
    assert_eq!(
        lines.len(),
        15,
        "every attempt reported:\n{lines:#?}\n{}",
        stderr(&out)
    );
    for l in &lines {
        let seen = l.starts_with("escape see-other-process:");
        if seen && backend == "landlock" {
            assert!(l.ends_with("ESCAPED"), "Landlock hides no process: {l}");
            continue;
        }
        assert!(l.contains(": blocked: "), "{backend}: {l}\n{lines:#?}");
    }
    // The run went on: the turn completed, the run with it (the failed test command
    // is the session's failure, not the sandbox's).
    assert!(
        victim_alive,
        "{backend}: the process outside the session was killed"
    );
    assert!(!p.home.path().join(".bashrc").exists());
    assert!(
        !p.home.path().join("escape-test").exists(),
        "the test command wrote in the home"
    );
    assert!(!p.other.join("escape-was-here").exists());
    assert!(!p.tmp_x.exists(), "{} written", p.tmp_x.display());
    let beside = f.worktree("s").with_file_name("escape-beside");
    assert!(!beside.exists(), "{} written", beside.display());
    assert!(
        !f.worktree("s")
            .with_file_name("escape-test-beside")
            .exists()
    );
    let summary = stderr(&out);
    assert!(summary.contains("escape"), "{summary}");
}

#[test]
fn every_escape_fails_under_bubblewrap() {
    escapes_fail("bubblewrap");
}

#[test]
fn every_escape_fails_under_landlock() {
    escapes_fail("landlock");
}

#[test]
fn a_host_without_a_backend_refuses_the_session_before_anything_spawns() {
    let f = Fixture::git_repo(&[("README.md", "# r\n")]);
    f.write("s.toml", "[[turn]]\nsteps = [{ say = \"hi\" }]\n");
    f.write(
        "fleet.toml",
        "[fleet]\nname = \"refused\"\nstart = \"s\"\ntask = \"t\"\n\n[[sessions]]\nname = \"s\"\nagent = \"sim\"\nscript = \"s.toml\"\nsandbox = \"workspace\"\n",
    );
    let out = f
        .command(&["run", "fleet.toml"])
        .env("CAPFLEET_SANDBOX_BACKEND", "none")
        .output()
        .expect("capfleet runs");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("session \"s\"") && err.contains("sandbox"),
        "{err}"
    );
    assert!(err.contains("fleet.toml"), "the file is named: {err}");
    assert!(
        !f.path().join(".cap-worktrees").exists(),
        "nothing was provisioned"
    );
}
