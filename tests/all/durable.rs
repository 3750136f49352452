//! Durable runs: no agent outlives capfleet, however capfleet dies. `SIGKILL` of
//! `capfleet run` mid-run (agents on every binding, each with a grandchild that left
//! its parent, a client terminal; a test command; `chat`'s agent) leaves nothing of the run within 1 s — the
//! keeper's work; and what a dead run left running anyway (its keeper killed too) is
//! swept, and named with its run, on the next start in the same data dir. `capfleet
//! runs` lists each run's state (running with its pid, interrupted, completed), and
//! `capfleet clean --all` / `--older-than` clean the finished ones. The same holds for
//! `capfleet serve`: `SIGKILL`ed with runs going, none of their agents outlives it.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::common::procs::{keeper_of, processes_marked_by, sigkill};
use crate::common::repo::Fixture;
use crate::common::stop_fleet::write_fleet;
use crate::common::wires::{Wire, session};
use crate::common::{EnvMarker, capfleet, latest_run, processes_in_group, wait_until};

/// An ACP turn that runs `sleep 300` in a client terminal (`cap.terminal.create`).
const TERMINAL: &str =
    "[[turn]]\nsteps = [{ say = \"t\" }, { run = \"sleep\", args = [\"300\"] }]\n";

/// Start `capfleet run fleet.toml` in `d` and wait until `ready` holds.
fn start(d: &Path, what: &str, ready: impl FnMut() -> bool) -> Child {
    let child = capfleet(d).args(["run", "fleet.toml"]).spawn().unwrap();
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(20), ready),
        "{what}"
    );
    child
}

#[test]
fn sigkill_leaves_no_agent_of_any_binding_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("term.toml"), TERMINAL).unwrap();
    let m = EnvMarker::new("durable-sigkill");
    let mut sessions: Vec<String> = Wire::ALL
        .iter()
        .enumerate()
        .map(|(i, &w)| session(&format!("s{i}"), w, "hang.toml", &m))
        .collect();
    sessions.push(session("s3", Wire::Acp, "term.toml", &m));
    write_fleet(d, &sessions);
    let fleet = std::fs::read_to_string(d.join("fleet.toml")).unwrap();
    let fleet = fleet.replacen(
        "task = \"go\"\n",
        "task = \"go\"\nallow_tools = [\"terminal.create\"]\nmax_risk = \"high\"\n",
        1,
    );
    std::fs::write(d.join("fleet.toml"), fleet).unwrap();
    let mut child = capfleet(d).args(["run", "fleet.toml"]).spawn().unwrap();
    let pid = child.id();
    // Four agents and their grandchildren, and the terminal's `sleep`.
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(20), || {
            m.processes().len() >= 8 && processes_marked_by(pid).len() >= 9
        }),
        "every agent, grandchild and terminal runs: {:?} / {:?}",
        m.processes(),
        processes_marked_by(pid)
    );
    assert!(keeper_of(pid).is_some(), "capfleet runs a keeper");
    let listed = runs(d);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["state"], "running", "{listed:?}");
    assert_eq!(listed[0]["pid"], pid, "{listed:?}");
    let groups: Vec<i32> = processes_marked_by(pid)
        .into_iter()
        .filter_map(|p| crate::common::procs::stat(p).map(|s| s.pgrp))
        .collect();
    sigkill(pid as i32);
    let killed = Instant::now();
    let _status = child.wait();
    let gone = wait_until(Duration::from_secs(1), Duration::from_millis(10), || {
        processes_marked_by(pid).is_empty()
            && m.processes().is_empty()
            && groups.iter().all(|&g| processes_in_group(g).is_empty())
    });
    eprintln!("everything gone {:?} after SIGKILL", killed.elapsed());
    assert!(
        gone,
        "within 1 s of SIGKILL nothing survives: {:?} marked, {:?} of the test",
        processes_marked_by(pid),
        m.processes()
    );
    assert!(
        wait_until(Duration::from_secs(3), Duration::from_millis(20), || {
            keeper_of(pid).is_none()
        }),
        "the keeper ends once its work is done"
    );
}

/// `capfleet chat` keeps a keeper too: its agent dies with it.
#[test]
fn sigkill_of_chat_leaves_no_agent_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_fleet(d, &[]);
    let mut child = capfleet(d)
        .args(["chat", "sim", "--script", "hang.toml", "--task", "go"])
        .spawn()
        .unwrap();
    let pid = child.id();
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(20), || {
            !processes_marked_by(pid).is_empty() && keeper_of(pid).is_some()
        }),
        "the agent and the keeper run"
    );
    sigkill(pid as i32);
    let _status = child.wait();
    assert!(
        wait_until(Duration::from_secs(1), Duration::from_millis(10), || {
            processes_marked_by(pid).is_empty()
        }),
        "the agent survives chat: {:?}",
        processes_marked_by(pid)
    );
}

/// A session's `test_command` (run at the end of a `--commit` run) dies with capfleet
/// too.
#[test]
fn sigkill_during_a_test_command_leaves_nothing_within_a_second() {
    let f = Fixture::git_repo(&[("README", "x\n")]);
    f.write(
        "fleet.toml",
        "[fleet]\nname = \"t\"\nstart = \"a\"\ntask = \"hi\"\n\n[[sessions]]\nname = \"a\"\n\
         agent = \"sim\"\ntest_command = [\"sh\", \"-c\", \"sleep 300; true\"]\n",
    );
    let mut child = f
        .command(&["run", "fleet.toml", "--commit"])
        .spawn()
        .unwrap();
    let pid = child.id();
    let sleeping = || {
        processes_marked_by(pid).iter().any(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sleep")
        })
    };
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(20), sleeping),
        "the test command runs"
    );
    sigkill(pid as i32);
    let _status = child.wait();
    assert!(
        wait_until(Duration::from_secs(1), Duration::from_millis(10), || {
            processes_marked_by(pid).is_empty()
        }),
        "the test command survives capfleet: {:?}",
        processes_marked_by(pid)
    );
}

#[test]
fn what_a_dead_run_left_is_swept_and_named_on_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("durable-sweep");
    write_fleet(d, &[session("s0", Wire::StreamJson, "hang.toml", &m)]);
    // Settled: the agent is the sim itself (past `sh`'s exec) and its grandchild sleeps.
    let mut child = start(d, "the agent and its grandchild run", || {
        let mut comms: Vec<String> = m
            .processes()
            .iter()
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).ok())
            .map(|c| c.trim().to_owned())
            .collect();
        comms.sort();
        comms == ["capfleet", "sleep"]
    });
    let pid = child.id();
    let first = latest_run(d);
    let keeper = keeper_of(pid).expect("a keeper");
    // Without its keeper, capfleet's death leaves its agents running.
    sigkill(keeper);
    sigkill(pid as i32);
    let _status = child.wait();
    std::thread::sleep(Duration::from_millis(300));
    // The grandchild at least (the agent itself may end at its closed stdout).
    let left = m.processes();
    assert!(!left.is_empty(), "orphans survive a keeper-less death");
    // The next run in the same data dir kills them and says whose they were.
    std::fs::write(
        d.join("fleet.toml"),
        "[fleet]\nname = \"next\"\nstart = \"a\"\ntask = \"hi\"\n\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\n",
    )
    .unwrap();
    let out = capfleet(d).args(["run", "fleet.toml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let id = first.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        stderr.contains(&format!(
            "process(es) left running by run {id} (its capfleet, pid {pid}, is dead)"
        )),
        "{stderr}"
    );
    m.wait_gone(Duration::from_secs(2), "swept");
    // `capfleet runs`: the dead one interrupted, the next one completed.
    let listed = runs(d);
    let states: Vec<(&str, &str)> = listed
        .iter()
        .map(|r| (r["run"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states.len(), 2, "{listed:?}");
    assert_eq!(states[0], (id.as_str(), "interrupted"), "{listed:?}");
    assert_eq!(states[1].1, "completed", "{listed:?}");
    assert_eq!(listed[1]["sessions"], 1, "{listed:?}");
    assert!(listed[0]["pid"].is_null(), "{listed:?}");
    // `clean --older-than` picks no run this young; `clean --all` cleans both.
    let young = capfleet(d)
        .args(["clean", "--older-than", "1d"])
        .output()
        .unwrap();
    assert!(young.status.success());
    assert!(young.stdout.is_empty(), "{young:?}");
    let workspaces = |id: &str| d.join(".cap-worktrees").join(id);
    assert!(workspaces(states[0].0).join("s0").is_dir());
    let all = capfleet(d).args(["clean", "--all"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&all.stdout);
    assert!(all.status.success(), "{stdout}");
    assert!(!workspaces(states[0].0).join("s0").exists(), "{stdout}");
    assert!(!workspaces(states[1].0).join("a").exists(), "{stdout}");
}

/// `capfleet runs --json` in `d`, one value per run.
fn runs(d: &Path) -> Vec<serde_json::Value> {
    let out = crate::common::succeeded(capfleet(d).args(["runs", "--json"]).output().unwrap());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn sigkill_of_serve_leaves_no_agent_of_its_runs_within_a_second() {
    use crate::common::serve::{Server, sim_fleet, submission};
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("durable-serve");
    let mut server = Server::start(dir.path(), &[]);
    let hang = "[[turn]]\nsteps = [{ say = \"started\" }, { hang = true }]\n";
    for name in ["one", "two"] {
        let fleet = sim_fleet(name, 2, m.pair());
        server.submit(None, &submission(&fleet, &[("script.toml", hang)]));
    }
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(20), || m
            .processes()
            .len()
            >= 4),
        "both runs' agents run: {:?}\n{}",
        m.processes(),
        server.stderr()
    );
    sigkill(server.pid());
    let _status = server.wait(Duration::from_secs(5));
    assert!(
        wait_until(Duration::from_secs(1), Duration::from_millis(10), || m
            .processes()
            .is_empty()),
        "agents outlive capfleet serve by 1 s: {:?}",
        m.processes()
    );
}
