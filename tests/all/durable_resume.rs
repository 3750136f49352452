//! `capfleet run --resume` (issue 17, point 3): the demo fleet (a plan, a mention, a
//! join, a budget, worktrees, a restart mid-turn), `SIGKILL`ed at seeded moments and
//! resumed until it completes: no delivery is routed twice, no completed turn runs
//! again, and the run ends as an uninterrupted one does (the same deliveries
//! completed, the same files). A completed run's resume is a no-op; a changed fleet
//! is refused (the line named) or taken with `--force`; a torn last line is reported
//! and the run goes on; a running run's resume is refused.

use std::time::Duration;

use crate::common::EnvMarker;
use crate::common::durable::{as_uninterrupted, completed, demo, exactly_once, moments, stop};
use crate::common::repo::{Fixture, stderr};
use crate::common::sim::fleet_session;
use crate::common::wait_until;

/// Start `c`, `SIGKILL` it after `after`, wait until none of its agents lives.
fn sigkill_after(mut c: std::process::Command, after: Duration) -> std::process::ExitStatus {
    let mut child = c.spawn().unwrap();
    std::thread::sleep(after);
    stop(&mut child, libc::SIGKILL, "a kill")
}

#[test]
fn a_sigkilled_run_resumed_again_and_again_completes_as_an_uninterrupted_one() {
    let whole = demo();
    let t = std::time::Instant::now();
    let out = whole.capfleet(&["run", "fleets/demo.toml"]);
    let span = t.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let expected = completed(&whole.journal());

    // Kills at seeded moments (the first during the run, then during each resume).
    let repo = demo();
    let first = sigkill_after(
        repo.command(&["run", "fleets/demo.toml"]),
        moments(17, 1, span)[0],
    );
    assert!(!first.success(), "killed within {span:?}");
    let id = repo.run_id();
    let mut resumes = 0;
    for at in moments(29, 3, span) {
        let status = sigkill_after(repo.command(&["run", "--resume", &id]), at);
        resumes += 1;
        if status.success() {
            break;
        }
        assert_eq!(repo.run_id(), id, "a resume goes on in the same run");
    }
    let last = repo.capfleet(&["run", "--resume", &id]);
    let err = stderr(&last);
    assert!(last.status.code() == Some(0), "resume {resumes} + 1: {err}");
    let j = repo.journal();
    assert!(
        j.iter().any(|r| r["type"] == "resumed"),
        "the resumed record"
    );
    as_uninterrupted(&j, &expected);
    let b = std::fs::read_to_string(repo.worktree("worker-b").join("tests/health.rs")).unwrap();
    assert!(b.contains("fn test_health_503"), "{b}");

    // Resuming a completed run says so and changes nothing.
    let before = std::fs::read(repo.run_dir().join("journal.jsonl")).unwrap();
    let again = repo.capfleet(&["run", "--resume", "latest"]);
    assert_eq!(again.status.code(), Some(0));
    assert!(
        stderr(&again).contains("had ended (completed)"),
        "{}",
        stderr(&again)
    );
    assert_eq!(
        std::fs::read(repo.run_dir().join("journal.jsonl")).unwrap(),
        before
    );
}

#[test]
fn a_changed_fleet_is_refused_or_forced_and_a_torn_line_is_reported() {
    let repo = demo();
    let _ = sigkill_after(
        repo.command(&["run", "fleets/demo.toml"]),
        Duration::from_millis(400),
    );
    let journal = repo.run_dir().join("journal.jsonl");
    // A torn last line: a record cut mid-way.
    let mut bytes = std::fs::read(&journal).unwrap();
    bytes.extend_from_slice(b"{\"seq\":99,\"urn\":\"cap://demo/wor");
    std::fs::write(&journal, &bytes).unwrap();
    let fleet = repo.path().join("fleets/demo.toml");
    let text = std::fs::read_to_string(&fleet).unwrap();
    std::fs::write(
        &fleet,
        text.replace("budget_usd = 0.50", "budget_usd = 0.60"),
    )
    .unwrap();
    let refused = repo.capfleet(&["run", "--resume", "latest"]);
    assert_eq!(refused.status.code(), Some(2));
    let err = stderr(&refused);
    assert!(
        err.contains("changed since run") && err.contains("budget_usd = 0.60"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&journal).unwrap(),
        bytes,
        "a refused resume changes nothing"
    );

    let forced = repo.capfleet(&["run", "--resume", "latest", "--force"]);
    let err = stderr(&forced);
    assert_eq!(forced.status.code(), Some(0), "{err}");
    assert!(err.contains("torn"), "{err}");
    let j = repo.journal();
    let resumed = j.iter().find(|r| r["type"] == "resumed").unwrap();
    assert!(
        resumed["fleet_changed"].as_str().unwrap().contains("0.60"),
        "{resumed}"
    );
    assert_eq!(resumed["torn_bytes"], 31);
    exactly_once(&j);
}

#[test]
fn a_running_run_is_not_resumed_twice() {
    let repo = demo();
    let mut child = repo.command(&["run", "fleets/demo.toml"]).spawn().unwrap();
    assert!(wait_until(
        Duration::from_secs(20),
        Duration::from_millis(20),
        || {
            repo.path().join(".capfleet/runs").is_dir()
                && repo.run_dir().join("orchestrator.lock").exists()
        }
    ));
    let second = repo.capfleet(&["run", "--resume", "latest"]);
    let err = stderr(&second);
    let _ = child.kill();
    let _ = child.wait();
    if second.status.code() == Some(0) {
        // The first ended before the second looked: it says the run had ended.
        assert!(err.contains("had ended"), "{err}");
    } else {
        assert_eq!(second.status.code(), Some(2), "{err}");
        assert!(err.contains("is running (pid "), "{err}");
    }
}

/// A stop between a mention and its turn's end (issue 36, point 1): the agent had
/// written `@cap://b …` when capfleet was killed; the resumed agent (stream-json,
/// resumed natively) answers again from the start, so the turn's result is its new
/// answer alone — the mention delivered once, its message intact (not the cut
/// attempt's text joined to the new answer). A resume of the finished run's journal
/// cut after that turn rebuilds the same result and the same single delivery.
#[test]
fn a_mention_cut_before_its_turn_ended_is_delivered_once_live_and_replayed() {
    let f = Fixture::git_repo(&[("README.md", "x\n")]);
    let m = EnvMarker::new("mention-cut");
    f.write(
        "a.toml",
        "[[turn]]\nsteps = [{ say = \"@cap://b check the frame format\" }, { sleep_ms = 700 }, \
         { say = \"\\ndone\" }]\n",
    );
    f.write("b.toml", "[[turn]]\nsteps = [{ say = \"checked\" }]\n");
    let sessions =
        fleet_session("a", "a.toml", &m, "") + fleet_session("b", "b.toml", &m, "").as_str();
    f.write(
        "fleet.toml",
        &format!("[fleet]\nname = \"f\"\nstart = \"a\"\ntask = \"go\"\n\n{sessions}"),
    );
    let mut child = f.command(&["run", "fleet.toml"]).spawn().unwrap();
    let runs = f.path().join(".capfleet/runs");
    let mentioned = wait_until(Duration::from_secs(30), Duration::from_millis(10), || {
        std::fs::read_dir(&runs).is_ok_and(|mut d| {
            d.any(|e| {
                e.ok().is_some_and(|e| {
                    std::fs::read_to_string(e.path().join("journal.jsonl"))
                        .is_ok_and(|j| j.contains("check the frame format"))
                })
            })
        })
    });
    assert!(mentioned, "a's mention is journaled");
    stop(&mut child, libc::SIGKILL, "a kill after the mention");
    let out = f.capfleet(&["run", "--resume", "latest"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let delivered = |j: &[serde_json::Value]| -> Vec<String> {
        j.iter()
            .filter(|r| r["type"] == "turn_started" && r["urn"] == "cap://f/b")
            .map(|r| r["prompt"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let j = f.journal();
    assert_eq!(
        delivered(&j),
        ["Message from cap://f/a: check the frame format"],
        "one delivery, its message intact"
    );
    let routed_to_b = j
        .iter()
        .filter(|r| r["type"] == "routed" && r["to"] == "b")
        .count();
    assert_eq!(routed_to_b, 1);

    // The replay: the journal cut right after a's re-issued turn ended (before the
    // router's delivery was journaled) is resumed to the same single delivery.
    let path = f.run_dir().join("journal.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let a_ended = lines
        .iter()
        .rposition(|l| l.contains("\"turn_ended\"") && l.contains("\"urn\":\"cap://f/a\""))
        .unwrap();
    std::fs::write(&path, lines[..=a_ended].join("\n") + "\n").unwrap();
    let again = f.capfleet(&["run", "--resume", "latest"]);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert!(
        !stderr(&again).contains("did not come up again"),
        "{}",
        stderr(&again)
    );
    assert_eq!(
        delivered(&f.journal()),
        ["Message from cap://f/a: check the frame format"],
        "the replay decides as the live run did"
    );
}

/// A cut turn's edits (issue 36, point 5): the agent had written `notes.md` when
/// capfleet was killed; the agent cannot resume its own conversation (a manifest
/// without `resume_arg`), so its re-issued prompt says what the journal knows the cut
/// attempt did — the tool call by name and path — with its partial answer. The edit
/// stays in the worktree and the run completes.
#[test]
fn a_cut_turn_reissued_without_native_resume_is_told_the_tools_it_had_run() {
    let f = Fixture::git_repo(&[("README.md", "x\n")]);
    let m = EnvMarker::new("tools-cut");
    let sim =
        std::fs::read_to_string(crate::common::repo_root().join("config/agents/sim.toml")).unwrap();
    f.write(
        ".config-test/cap/agents/forgetful.toml",
        &sim.replace("name = \"sim\"", "name = \"forgetful\"")
            .replace("resume_arg = \"--resume\"\n", ""),
    );
    f.write(
        "a.toml",
        "[[turn]]\nsteps = [{ say = \"writing notes\" }, \
         { write = \"notes.md\", content = \"n\\n\" }, { sleep_ms = 1500 }, { say = \" done\" }]\n",
    );
    let session = fleet_session("a", "a.toml", &m, "").replace("\"sim\"", "\"forgetful\"");
    f.write(
        "fleet.toml",
        &format!("[fleet]\nname = \"f\"\nstart = \"a\"\ntask = \"take notes\"\n\n{session}"),
    );
    let mut child = f.command(&["run", "fleet.toml"]).spawn().unwrap();
    let wrote = wait_until(Duration::from_secs(30), Duration::from_millis(10), || {
        crate::common::capfleet::journal_so_far(f.path())
            .iter()
            .any(|r| r["event"]["kind"] == "cap.tool_call.start")
    });
    assert!(wrote, "the write is journaled");
    stop(&mut child, libc::SIGKILL, "a kill after the write");
    let out = f.capfleet(&["run", "--resume", "latest"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let j = f.journal();
    let prompts: Vec<&str> = j
        .iter()
        .filter(|r| r["type"] == "turn_started" && r["urn"] == "cap://f/a")
        .filter_map(|r| r["prompt"].as_str())
        .collect();
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    assert_eq!(prompts[0], "take notes");
    assert!(
        prompts[1].starts_with("take notes\n\n[capfleet: this turn was interrupted")
            && prompts[1].contains("Tools it had already started")
            && prompts[1].contains("Write notes.md")
            && prompts[1].contains("writing notes"),
        "the re-issued prompt names the write: {}",
        prompts[1]
    );
    assert_eq!(
        f.read(&format!(".cap-worktrees/{}/a/notes.md", f.run_id())),
        "n\n"
    );
    assert_eq!(crate::common::run_ended(&j).as_deref(), Some("completed"));
    assert!(m.processes().is_empty());
}
