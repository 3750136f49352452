//! A session's sandbox made visible and kept (issue 38): `run --dry-run` (text and
//! JSON), the journal's `session` record and the summary's row say the backend, the
//! network and what it may write; `resolve AGENT --sandbox` says the same for one
//! agent; `chat --sandbox workspace` confines the agent (the escape kit is blocked)
//! and is refused on a host with no backend; a session whose sandbox cannot be had
//! never starts; a resumed run keeps the sandbox its journal holds though the fleet
//! no longer asks for it; a SIGKILL of capfleet during a sandboxed run leaves no
//! process after 1 s, bubblewrap's included, under each backend.

use std::process::Stdio;
use std::time::Duration;

use common::EnvMarker;
use common::repo::{Fixture, stderr, stdout};
use serde_json::Value;

use crate::common;

const BACKEND: &str = "CAPFLEET_SANDBOX_BACKEND";

/// A fleet of one sim session `s` running `script`, sandboxed with `network`, and
/// `extra` lines in `[sandbox]`.
fn fleet(network: &str, extra: &str, env: &str) -> String {
    format!(
        "[fleet]\nname = \"vis\"\nstart = \"s\"\ntask = \"t\"\nsandbox = \"workspace\"\n\n\
         [sandbox]\nnetwork = \"{network}\"\n{extra}\n\n\
         [[sessions]]\nname = \"s\"\nagent = \"sim\"\nscript = \"s.toml\"\nenv = {{ {env} }}\n"
    )
}

fn session_record(journal: &[Value]) -> Value {
    journal
        .iter()
        .find(|r| r["type"] == "session" && r["name"] == "s")
        .cloned()
        .expect("a session record")
}

#[test]
fn the_dry_run_the_journal_and_the_summary_say_each_sessions_sandbox() {
    let f = Fixture::git_repo(&[("README.md", "# r\n")]);
    f.write("s.toml", "[[turn]]\nsteps = [{ say = \"done\" }]\n");
    f.write("fleet.toml", &fleet("none", "", ""));
    for (backend, cannot) in [("bubblewrap", "cannot see"), ("landlock", "cannot read")] {
        let out = f
            .command(&["run", "fleet.toml", "--dry-run"])
            .env(BACKEND, backend)
            .output()
            .expect("dry run");
        let text = stdout(&out);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            text.contains(&format!("sandbox workspace on {backend}, network none")),
            "{text}"
        );
        assert!(text.contains("may write: its own worktree of"), "{text}");
        assert!(text.contains(cannot), "{text}");
        let landlock_says = text.contains("not enforced: processes: not hidden");
        assert_eq!(landlock_says, backend == "landlock", "{text}");
    }
    let out = f
        .command(&["run", "fleet.toml", "--dry-run", "--json"])
        .env(BACKEND, "landlock")
        .output()
        .expect("dry run");
    let plan: Value = serde_json::from_slice(&out.stdout).expect("JSON plan");
    let sb = &plan["sessions"][0]["sandbox"];
    assert_eq!(sb["backend"], "landlock", "{plan}");
    assert_eq!(sb["network"], "none");
    assert_eq!(sb["workspace_made_at_start"], true);
    assert!(
        (sb["unenforced"].as_array().expect("unenforced").iter())
            .any(|u| u.as_str().is_some_and(|u| u.contains("no pid namespace"))),
        "{sb}"
    );

    let out = f
        .command(&["run", "fleet.toml"])
        .env(BACKEND, "bubblewrap")
        .output()
        .expect("run");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("sandboxed (bubblewrap, network none)"),
        "the summary's row: {err}"
    );
    let rec = session_record(&f.journal());
    let sb = &rec["sandbox"];
    assert_eq!(sb["backend"], "bubblewrap", "{rec}");
    assert_eq!(sb["network"], "none");
    let worktree = std::fs::canonicalize(f.worktree("s")).expect("worktree");
    let writable: Vec<&str> = (sb["writable"].as_array().expect("writable").iter())
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(writable[0], worktree.to_str().expect("utf-8"), "{rec}");
    assert!(
        (sb["hidden"].as_array().expect("hidden").iter()).any(|h| h
            .as_str()
            .is_some_and(|h| std::path::Path::new(h) == std::env::temp_dir())),
        "the temporary directory hidden: {rec}"
    );
}

#[test]
fn resolve_says_the_sandbox_one_agent_would_get() {
    let f = Fixture::plain();
    let out = f
        .command(&["resolve", "claude-code", "--sandbox", "--json"])
        .env(BACKEND, "landlock")
        .output()
        .expect("resolve");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let sb = &v["sandbox"];
    assert_eq!(sb["backend"], "landlock", "{v}");
    assert_eq!(sb["network"], "host");
    let writable = sb["writable"].to_string();
    assert!(writable.contains(".claude"), "the agent's state paths: {v}");
    let said = sb["said"].to_string();
    assert!(said.contains("not enforced: network"), "{said}");
    assert!(said.contains("not enforced: processes"), "{said}");

    let out = f
        .command(&["resolve", "sim", "--sandbox", "--sandbox-network", "none"])
        .env(BACKEND, "bubblewrap")
        .output()
        .expect("resolve");
    let text = stdout(&out);
    assert!(
        text.contains("sandbox workspace on bubblewrap, network none"),
        "{text}"
    );
    assert!(
        !text.contains("not enforced"),
        "bubblewrap, no network: {text}"
    );
}

#[test]
fn chat_in_a_sandbox_blocks_the_escape_kit_and_is_refused_without_a_backend() {
    let f = Fixture::plain();
    let home = tempfile::tempdir().expect("home");
    f.write("s.toml", "[[turn]]\nsteps = [{ escape = true }]\n");
    let out = f
        .command(&[
            "chat",
            "sim",
            "--script",
            "s.toml",
            "--task",
            "go",
            "--sandbox",
            "workspace",
            "--sandbox-network",
            "none",
        ])
        .env("HOME", home.path())
        .env(BACKEND, "bubblewrap")
        .output()
        .expect("chat");
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("escape write-bashrc: blocked"), "{text}");
    assert!(text.contains("escape read-ssh: blocked"), "{text}");
    assert!(!home.path().join(".bashrc").exists());

    let out = f
        .command(&["chat", "sim", "--task", "go", "--sandbox", "workspace"])
        .env(BACKEND, "none")
        .output()
        .expect("chat");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--sandbox workspace"), "{err}");
}

#[test]
fn a_session_whose_sandbox_cannot_be_had_never_starts() {
    let f = Fixture::git_repo(&[("README.md", "# r\n")]);
    f.write("s.toml", "[[turn]]\nsteps = [{ say = \"ran\" }]\n");
    // A writable path that cannot be made: known only once the run goes.
    let extra = "writable = [\"/proc/capfleet-cannot-make-this\"]";
    f.write("fleet.toml", &fleet("host", extra, ""));
    let out = f.capfleet(&["run", "fleet.toml"]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("sandbox") && err.contains("nothing was started"),
        "{err}"
    );
    let journal = f.journal();
    assert!(
        !journal
            .iter()
            .any(|r| r["type"] == "cap" || r["type"] == "turn_started"),
        "an agent spoke: {journal:#?}"
    );
}

#[test]
fn a_resumed_run_keeps_the_sandbox_its_journal_holds() {
    let f = Fixture::git_repo(&[("README.md", "# r\n")]);
    let home = tempfile::tempdir().expect("home");
    let m = EnvMarker::new("sbx-resume");
    let (k, v) = m.pair();
    f.write(
        "s.toml",
        "[[turn]]\nsteps = [{ sleep_ms = 2500 }, { escape = true }]\n",
    );
    f.write("fleet.toml", &fleet("none", "", &format!("{k} = \"{v}\"")));
    let mut child = f
        .command(&["run", "fleet.toml"])
        .env("HOME", home.path())
        .env(BACKEND, "bubblewrap")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("capfleet");
    m.wait_for(1, "the sandboxed agent");
    common::procs::sigkill(child.id() as i32);
    let _reaped = child.wait();
    m.wait_gone(Duration::from_secs(5), "the agents of the killed run");
    // The fleet no longer asks for a sandbox: the journal's holds.
    let unconfined = fleet("none", "", &format!("{k} = \"{v}\""))
        .replace("sandbox = \"workspace\"\n", "")
        .replace("[sandbox]\nnetwork = \"none\"\n", "");
    assert!(!unconfined.contains("sandbox"), "{unconfined}");
    f.write("fleet.toml", &unconfined);
    let out = f
        .command(&["run", "--resume", "latest", "--force"])
        .env("HOME", home.path())
        .env(BACKEND, "bubblewrap")
        .output()
        .expect("resume");
    let err = stderr(&out);
    let text: String = (f.journal().iter())
        .filter(|r| r["type"] == "cap")
        .filter_map(|r| r["event"]["text"].as_str().map(str::to_owned))
        .collect();
    assert!(
        text.contains("escape write-bashrc: blocked"),
        "{text}\n{err}"
    );
    assert!(text.contains("escape read-ssh: blocked"), "{text}\n{err}");
    assert!(!home.path().join(".bashrc").exists(), "{err}");
}

/// SIGKILL of capfleet during a sandboxed turn under `backend`: within 1 s no process
/// of the session is left (bubblewrap's own included: it carries the marker too).
fn killed_leaves_nothing(backend: &str) {
    let f = Fixture::git_repo(&[("README.md", "# r\n")]);
    let m = EnvMarker::new(&format!("sbx-kill-{backend}"));
    let (k, v) = m.pair();
    f.write("s.toml", "[[turn]]\nsteps = [{ sleep_ms = 60000 }]\n");
    f.write("fleet.toml", &fleet("host", "", &format!("{k} = \"{v}\"")));
    let mut child = f
        .command(&["run", "fleet.toml"])
        .env(BACKEND, backend)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("capfleet");
    // bubblewrap and the agent inside it; under Landlock the agent alone.
    let expected = if backend == "bubblewrap" { 2 } else { 1 };
    m.wait_for(expected, "the sandboxed agent");
    let seen = m.processes();
    if backend == "bubblewrap" {
        assert!(
            seen.iter()
                .any(|p| std::fs::read_to_string(format!("/proc/{p}/comm"))
                    .is_ok_and(|c| c.trim() == "bwrap")),
            "bubblewrap among {seen:?}"
        );
    }
    common::procs::sigkill(child.id() as i32);
    let _reaped = child.wait();
    m.wait_gone(Duration::from_secs(1), "left 1 s after capfleet's SIGKILL");
}

#[test]
fn sigkill_of_capfleet_leaves_nothing_under_bubblewrap() {
    killed_leaves_nothing("bubblewrap");
}

#[test]
fn sigkill_of_capfleet_leaves_nothing_under_landlock() {
    killed_leaves_nothing("landlock");
}
