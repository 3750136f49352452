//! Native resume of a turn cut by capfleet's death (issue 17, point 3): `run --resume`
//! takes up an ACP session with `session/load` (the agent advertises `loadSession`)
//! and an A2A one with `GetTask` on the same task, instead of re-issuing the prompt
//! with the partial text. On the simulator: its ACP mode keeps each conversation in
//! its state directory and replays it on load (the replay is not the turn's output);
//! its A2A mode answers `GetTask` with what a task said, kept after it ends. And with
//! real peers: the official Python ACP SDK's agent (peer `py-acp`) loads the session
//! it is given and says so; a task of the official Python A2A SDK's agent (peer
//! `a2a-py`) that ended while capfleet was dead is read back with `GetTask`.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::a2a::{A2aPeer, manifest, sim};
use crate::common::durable::stop;
use crate::common::repo::{Fixture, stderr};
use crate::common::{peer, support, wait_until};

/// The text a session's turn `turn` said, joined.
fn said(j: &[Value], urn: &str, turn: u64) -> String {
    j.iter()
        .filter(|r| r["urn"] == urn && r["turn"] == turn)
        .filter_map(|r| r["event"]["text"].as_str())
        .collect()
}

/// The prompts of `urn`'s turns as they went out.
fn prompts(j: &[Value], urn: &str) -> Vec<String> {
    j.iter()
        .filter(|r| r["urn"] == urn && r["type"] == "turn_started")
        .map(|r| r["prompt"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Run `fleets/f.toml` in `f` until every session named in `cut` has said "partial",
/// then `SIGKILL` capfleet (none of its agents outlives it by 1 s).
fn run_and_cut(f: &Fixture, cut: &[&str]) {
    let mut child = f.command(&["run", "fleet.toml"]).spawn().unwrap();
    let cut_all = wait_until(Duration::from_secs(30), Duration::from_millis(20), || {
        let j = f.journal_so_far();
        cut.iter()
            .all(|s| said(&j, &format!("cap://native/{s}"), 1).contains("partial"))
    });
    stop(&mut child, libc::SIGKILL, "the kill");
    assert!(cut_all, "every session said its first words");
}

/// The resume, to its end: completed.
fn resume(f: &Fixture) -> Vec<Value> {
    let out = f.capfleet(&["run", "--resume", "latest"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let j = f.journal();
    let ends: Vec<&Value> = j.iter().filter(|r| r["type"] == "run_ended").collect();
    assert_eq!(ends.last().unwrap()["outcome"], "completed");
    j
}

/// The ready events of `urn`, their session ids.
fn readies(j: &[Value], urn: &str) -> Vec<String> {
    j.iter()
        .filter(|r| r["urn"] == urn && r["event"]["kind"] == "cap.session.ready")
        .map(|r| {
            r["event"]["session_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

const INTERRUPTED: &str = "[capfleet: this turn was interrupted";

fn acp_fleet(state: &Path) -> Fixture {
    let f = Fixture::git_repo(&[("README.md", "a service\n")]);
    f.write(
        "acp.toml",
        "[[turn]]\nsteps = [{ say = \"partial\" }, { sleep_ms = 2500 }, { say = \" rest\" }]\n",
    );
    let acp = support("sim-acp.toml");
    f.write(
        "fleet.toml",
        &format!(
            "[fleet]\nname = \"native\"\nstart = \"a\"\ntask = \"go on\"\n\n\
             [[sessions]]\nname = \"a\"\nagent = \"{}\"\nscript = \"acp.toml\"\n\
             env = {{ CAPFLEET_SIM_STATE = \"{}\" }}\n",
            acp.display(),
            state.display()
        ),
    );
    f
}

#[test]
fn an_acp_session_cut_mid_turn_is_loaded_again_not_re_prompted() {
    let state = tempfile::tempdir().unwrap();
    let f = acp_fleet(state.path());
    run_and_cut(&f, &["a"]);
    let j = resume(&f);
    let urn = "cap://native/a";
    let ids = readies(&j, urn);
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], ids[1], "the same ACP session, loaded");
    // Loaded: the prompt goes again as it was, no partial text carried (§10.6 is for
    // agents that cannot resume).
    let p = prompts(&j, urn);
    assert_eq!(p, ["go on", "go on"], "{p:?}");
    // The conversation the load replayed (the first prompt, "partial") is the past:
    // the resumed turn says only what it said.
    assert_eq!(said(&j, urn, 2), "partial rest");

    // An agent that no longer has the session refuses the load: a new one, and the
    // cut turn is re-issued with its partial text.
    let state = tempfile::tempdir().unwrap();
    let f = acp_fleet(state.path());
    run_and_cut(&f, &["a"]);
    for e in std::fs::read_dir(state.path()).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let j = resume(&f);
    let ids = readies(&j, urn);
    assert_ne!(ids[0], ids[1], "a new session: {ids:?}");
    let p = prompts(&j, urn);
    assert!(
        p[1].starts_with("go on") && p[1].contains(INTERRUPTED),
        "{p:?}"
    );
    assert!(p[1].contains("partial"), "{p:?}");
}

/// An A2A sim in `dir` playing a turn that says "partial", sleeps `ms`, says " rest".
fn a2a_peer(dir: &Path, ms: u64) -> A2aPeer {
    std::fs::create_dir_all(dir).unwrap();
    let script = format!(
        "[[turn]]\nsteps = [{{ say = \"partial\" }}, {{ sleep_ms = {ms} }}, {{ say = \" rest\" }}, \
         {{ usage = {{ input_tokens = 10, output_tokens = 2, cost_usd = 0.001 }} }}]\n"
    );
    sim(dir, &script, &[])
}

#[test]
fn an_a2a_turn_cut_mid_task_is_taken_up_with_get_task_on_the_same_task() {
    let f = Fixture::git_repo(&[("README.md", "a service\n")]);
    let peers = tempfile::tempdir().unwrap();
    // `done` ends its task while capfleet is dead; `busy` still runs at the resume.
    let done = a2a_peer(&peers.path().join("done"), 300);
    let busy = a2a_peer(&peers.path().join("busy"), 4000);
    let m_done = manifest(&peers.path().join("done"), &done.url, "");
    let m_busy = manifest(&peers.path().join("busy"), &busy.url, "");
    f.write(
        "fleet.toml",
        &format!(
            "[fleet]\nname = \"native\"\nstart = [\"done\", \"busy\"]\ntask = \"go on\"\n\n\
             [[sessions]]\nname = \"done\"\nagent = \"{}\"\n\n\
             [[sessions]]\nname = \"busy\"\nagent = \"{}\"\n",
            m_done.display(),
            m_busy.display()
        ),
    );
    run_and_cut(&f, &["done", "busy"]);
    // `done`'s task ends meanwhile.
    std::thread::sleep(Duration::from_millis(800));
    let j = resume(&f);
    for (name, peer) in [("done", &done), ("busy", &busy)] {
        let urn = format!("cap://native/{name}");
        let log = peer.requests();
        let count = |m: &str| log.lines().filter(|l| l.starts_with(m)).count();
        assert_eq!(
            count("SendStreamingMessage "),
            1,
            "{name}: never sent again: {log}"
        );
        assert_eq!(count("GetTask "), 1, "{name}: {log}");
        // The turn taken up says what the task said, once.
        assert_eq!(said(&j, &urn, 2), "partial rest", "{name}");
        let p = prompts(&j, &urn);
        assert!(!p[1].contains(INTERRUPTED), "{name}: {p:?}");
        let usage: Vec<&Value> = j
            .iter()
            .filter(|r| r["urn"] == urn.as_str() && r["event"]["kind"] == "cap.usage")
            .collect();
        assert_eq!(usage.len(), 1, "{name}: the task's usage, once: {usage:?}");
    }
    let log = busy.requests();
    assert!(
        log.lines().any(|l| l.starts_with("SubscribeToTask ")),
        "the running task followed on: {log}"
    );
}

#[test]
fn the_python_acp_sdk_agent_is_given_its_session_again_on_resume() {
    let f = Fixture::git_repo(&[("README.md", "a service\n")]);
    f.write(
        "fleet.toml",
        &format!(
            "[fleet]\nname = \"native\"\nstart = \"a\"\ntask = \"dots 40\"\n\n\
             [[sessions]]\nname = \"a\"\nagent = \"{}\"\nargv = [\"{}\", \"{}\"]\n",
            support("acp-echo.toml").display(),
            peer("py-acp").display(),
            support("acp_echo_agent.py").display()
        ),
    );
    let urn = "cap://native/a";
    let mut child = f.command(&["run", "fleet.toml"]).spawn().unwrap();
    let dotted = wait_until(Duration::from_secs(30), Duration::from_millis(20), || {
        said(&f.journal_so_far(), urn, 1).len() >= 3
    });
    stop(&mut child, libc::SIGKILL, "the kill");
    assert!(dotted, "the agent streamed");
    let j = resume(&f);
    let ids = readies(&j, urn);
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], ids[1], "the same ACP session, loaded");
    assert_eq!(prompts(&j, urn), ["dots 40", "dots 40"]);
    assert_eq!(
        said(&j, urn, 2),
        format!("[loaded {}] {}", ids[0], ".".repeat(40)),
        "the agent was given its session"
    );
}

#[test]
fn a_python_a2a_sdk_task_that_ended_meanwhile_is_read_back() {
    let f = Fixture::git_repo(&[("README.md", "a service\n")]);
    let mut cmd = std::process::Command::new(peer("a2a-py"));
    cmd.arg(support("a2a_py_agent.py"))
        .args(["--spelling", "1.0"]);
    let agent = A2aPeer::spawn(cmd, None);
    let peers = tempfile::tempdir().unwrap();
    let m = manifest(peers.path(), &agent.url, "");
    f.write(
        "fleet.toml",
        &format!(
            "[fleet]\nname = \"native\"\nstart = \"a\"\ntask = \"later\"\n\n\
             [[sessions]]\nname = \"a\"\nagent = \"{}\"\n",
            m.display()
        ),
    );
    let urn = "cap://native/a";
    let mut child = f.command(&["run", "fleet.toml"]).spawn().unwrap();
    let half = wait_until(Duration::from_secs(30), Duration::from_millis(20), || {
        said(&f.journal_so_far(), urn, 1).contains("half")
    });
    stop(&mut child, libc::SIGKILL, "the kill");
    assert!(half, "the task said its first half");
    // The SDK's task ends meanwhile (1.5 s).
    std::thread::sleep(Duration::from_millis(2500));
    let j = resume(&f);
    assert_eq!(
        said(&j, urn, 2),
        "half done",
        "the task's result, read back"
    );
    let p = prompts(&j, urn);
    assert_eq!(p, ["later", "later"], "{p:?}");
    // The same task, not a new one: every task the session's resume ids name is one.
    let tasks: std::collections::BTreeSet<String> = j
        .iter()
        .filter(|r| r["urn"] == urn && r["type"] == "resume_id")
        .filter_map(|r| serde_json::from_str::<Value>(r["id"].as_str()?).ok())
        .filter_map(|p| p["task"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(tasks.len(), 1, "one task: {tasks:?}");
    // Read back, not run again (that takes the agent 1.5 s).
    let took = j
        .iter()
        .find(|r| r["urn"] == urn && r["type"] == "turn_ended" && r["turn"] == 2)
        .and_then(|r| r["duration_ms"].as_u64())
        .unwrap();
    assert!(took < 1500, "the resumed turn took {took} ms");
    let usage = j
        .iter()
        .filter(|r| r["urn"] == urn && r["event"]["kind"] == "cap.usage")
        .count();
    assert_eq!(usage, 1, "the task's usage, once");
}
