//! The demo fleet tells one story, in a git checkout as a new user runs it: the
//! journal's order is the story's (worker-b's planned turn before worker-a's later
//! mention, the reviewer's join only once worker-b has done both, a plan entry in
//! progress from its turn's start), the sim's file steps leave real changes for
//! `capfleet diff` and `merge`, the task is routed from `fleet`, a race says who won,
//! and the README's `chat --script demo-coding.toml` line runs what it reports.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::repo::{Fixture, stderr, stdout};

fn fleet(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("config/fleets/{name}.toml"))
}

/// Run a shipped fleet in a fresh git checkout; it must exit 0.
fn run(name: &str) -> (Fixture, String) {
    let repo = Fixture::git_repo(&[("README.md", "a service\n")]);
    let out = repo.capfleet(&["run", fleet(name).to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (repo, stderr(&out))
}

/// The position of the first record that `is` holds for.
fn at(records: &[Value], what: &str, is: impl Fn(&Value) -> bool) -> usize {
    records
        .iter()
        .position(is)
        .unwrap_or_else(|| panic!("no {what} in {records:#?}"))
}

fn routed(r: &Value, via: &str, to: &str) -> bool {
    r["type"] == "routed" && r["via"] == via && r["to"] == to
}

fn plan_entry(r: &Value, id: &str, status: &str) -> bool {
    r["type"] == "plan_entry" && r["id"] == id && r["status"] == status
}

fn of(r: &Value, session: &str, kind: &str) -> bool {
    r["urn"] == format!("cap://demo/{session}") && r["type"] == kind
}

#[test]
fn the_demo_journal_follows_its_story() {
    let (repo, _) = run("demo");
    let j = repo.journal();
    let task = at(&j, "the task", |r| routed(r, "task", "planner"));
    assert_eq!(
        j[task]["from"],
        serde_json::json!(["fleet"]),
        "the task's source"
    );

    // worker-b: its planned entry first, worker-a's mention (sent before) second.
    let planned = at(&j, "p2 routed", |r| routed(r, "plan", "worker-b"));
    let mention = at(&j, "the mention", |r| routed(r, "mention", "worker-b"));
    assert!(planned < mention, "planned work before the later mention");
    assert!(at(&j, "p1 completed", |r| plan_entry(r, "p1", "completed")) < planned);

    // p2 is in progress when its turn starts: the router's next record after routing
    // it, and before worker-b's first turn starts.
    let router: Vec<usize> = (0..j.len())
        .filter(|&i| j[i]["urn"] == "cap://demo/router")
        .collect();
    let in_progress = at(&j, "p2 in_progress", |r| plan_entry(r, "p2", "in_progress"));
    let next = router.iter().find(|&&i| i > planned).copied();
    assert_eq!(
        next,
        Some(in_progress),
        "p2 in_progress right after its routing"
    );
    let b_starts: Vec<usize> = (0..j.len())
        .filter(|&i| of(&j[i], "worker-b", "turn_started"))
        .collect();
    assert_eq!(b_starts.len(), 2, "worker-b: its entry, then the mention");
    assert!(in_progress < b_starts[0] && planned < b_starts[0]);
    assert!(b_starts[1] > mention);

    // The join fires once, after worker-b's last turn and its entry completed.
    let join = at(&j, "the join", |r| routed(r, "route", "reviewer"));
    assert_eq!(
        j.iter().filter(|r| routed(r, "route", "reviewer")).count(),
        1
    );
    let b_ended: Vec<usize> = (0..j.len())
        .filter(|&i| of(&j[i], "worker-b", "turn_ended"))
        .collect();
    assert_eq!(b_ended.len(), 2);
    assert!(b_ended[1] < join, "the reviewer runs after worker-b's work");
    assert!(at(&j, "p2 completed", |r| plan_entry(r, "p2", "completed")) < join);

    // `capfleet log` reads the same: the task from the fleet.
    let log = stdout(&repo.capfleet(&["log", "latest"]));
    assert!(log.contains("fleet -> planner via task"), "{log}");
}

#[test]
fn the_demo_leaves_the_changes_it_talks_about() {
    let (repo, summary) = run("demo");
    let diff = |session: &str| {
        let out = repo.capfleet(&["diff", "latest", session]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out)
    };
    let a = diff("worker-a");
    assert!(
        a.contains("+++ b/src/health.rs") && a.contains("pub fn status"),
        "{a}"
    );
    let b = diff("worker-b");
    assert!(b.contains("+++ b/tests/health.rs"), "{b}");
    assert!(
        b.contains("fn test_health_ok") && b.contains("fn test_health_503"),
        "the planned test and the mention's test: {b}"
    );
    assert!(
        !diff("reviewer").contains("+++"),
        "the reviewer changes nothing"
    );
    let a_line = summary
        .lines()
        .find(|l| l.trim_start().starts_with("worker-a") && l.contains("capfleet/"))
        .unwrap_or_else(|| panic!("worker-a's workspace line: {summary}"));
    assert!(!a_line.contains("no changes"), "{a_line}");

    // Both merge into the checkout: the handler and both tests land.
    for session in ["worker-a", "worker-b"] {
        let out = repo.capfleet(&["merge", "--commit", "latest", session]);
        assert_eq!(out.status.code(), Some(0), "{session}: {}", stderr(&out));
    }
    assert!(repo.read("src/health.rs").contains("pub fn status"));
    assert!(repo.read("tests/health.rs").contains("fn test_health_503"));
}

#[test]
fn a_race_says_who_won_and_why_the_loser_stopped() {
    let (repo, summary) = run("race");
    let j = repo.journal();
    let won = at(&j, "race_won", |r| r["type"] == "race_won");
    assert_eq!(j[won]["winner"], "fast");
    assert_eq!(j[won]["cancelled"], serde_json::json!(["slow"]));
    let slow = |r: &Value| r["urn"] == "cap://race/slow";
    let cancel = at(&j, "slow's cancel", |r| {
        slow(r) && r["type"] == "cancel_requested"
    });
    assert_eq!(j[cancel]["reason"], "cancelled because fast won the race");
    assert!(
        !j.iter()
            .any(|r| slow(r) && r["type"] == "cap" && r["event"]["kind"] == "cap.error"),
        "a cancelled loser is no error: {j:#?}"
    );
    let ended = at(&j, "slow's turn end", |r| {
        slow(r) && r["type"] == "turn_ended"
    });
    assert_eq!(j[ended]["outcome"], "cancelled");

    let row = |name: &str| {
        summary
            .lines()
            .find(|l| l.trim_start().starts_with(name) && l.contains("turns"))
            .unwrap_or_else(|| panic!("{name}'s row: {summary}"))
            .to_owned()
    };
    assert!(row("fast").ends_with("won the race"), "{summary}");
    assert!(
        row("slow").ends_with("cancelled: fast won the race"),
        "{summary}"
    );
    assert!(!row("judge").contains("race"), "{summary}");

    let log = stdout(&repo.capfleet(&["log", "latest"]));
    assert!(log.contains("fast won routes[0]; cancelled slow"), "{log}");
    assert!(log.contains("cancelled because fast won the race"), "{log}");
}

#[test]
fn the_readme_chat_example_runs_what_it_reports() {
    // The README's line, run as written (without a terminal: no one to ask).
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("capfleet chat sim --script config/sim/demo-coding.toml"))
        .expect("the README's demo-coding example");
    let (head, task) = line.split_once(" --task ").expect("a --task");
    let task = task.trim().trim_matches('"');
    let args: Vec<&str> = head.split_whitespace().skip(1).collect();
    let dir = tempfile::tempdir().unwrap();
    let out = crate::common::capfleet(dir.path())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(&args)
        .args(["--task", task])
        .output()
        .unwrap();
    let text = stdout(&out) + stderr(&out).as_str();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("Bash(cargo test)"), "{text}");
    assert!(
        !text.contains("deny"),
        "the tests it reports were not run: {text}"
    );
    assert!(
        text.contains("running 12 tests") && text.contains("all 12 tests pass"),
        "{text}"
    );
}

/// `[fleet] queue = "arrival"`: the demo's mention, written before worker-a's turn
/// ended, reaches worker-b before the plan entry that turn made ready — the order of
/// arrival, where the default hands out planned work first.
#[test]
fn queue_arrival_delivers_the_mention_before_the_planned_entry() {
    let sims = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/sim/");
    let demo = std::fs::read_to_string(fleet("demo")).unwrap();
    let arrival = demo.replace("../sim/", sims.to_str().unwrap()).replacen(
        "[fleet]\n",
        "[fleet]\nqueue = \"arrival\"\n",
        1,
    );
    let repo = Fixture::git_repo(&[("README.md", "a service\n")]);
    std::fs::write(repo.path().join("arrival.toml"), arrival).unwrap();
    let plan = stdout(&repo.capfleet(&["run", "--dry-run", "arrival.toml"]));
    assert!(plan.contains("queue arrival"), "{plan}");
    let out = repo.capfleet(&["run", "arrival.toml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let j = repo.journal();
    let planned = at(&j, "p2 routed", |r| routed(r, "plan", "worker-b"));
    let mention = at(&j, "the mention", |r| routed(r, "mention", "worker-b"));
    assert!(mention < planned, "arrival order: the mention first");
    let join = at(&j, "the join", |r| routed(r, "route", "reviewer"));
    assert!(at(&j, "p2 completed", |r| plan_entry(r, "p2", "completed")) < join);
}
