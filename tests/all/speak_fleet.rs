//! `capfleet speak --fleet`: a whole fleet as one Claude-compatible agent, each user
//! message one run of the fleet. Driven by the official Claude Agent SDK (two turns,
//! a permission of a non-answering session answered by `canUseTool`, an interrupt
//! reaching every inner session, the result's cost equal to the fleet's journals');
//! byte-level: every stdout line a frame, a crash inside only a restart note on
//! stderr; a budget stop is `error_max_budget_usd`, a failed fleet one error result;
//! SIGTERM leaves no inner agent.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use common::EnvMarker;
use common::chat::assert_no_survivor;

use crate::common;

/// The answering session: text, then (turn 2) 20 s of work.
const LEAD: &str = r#"
[[turn]]
match = "first"
steps = [{ usage = { input_tokens = 4, output_tokens = 2, cost_usd = 0.05 } }, { say = "lead says done" }]
[[turn]]
match = "second"
steps = [{ usage = { input_tokens = 3, output_tokens = 2, cost_usd = 0.02 } }, { say = "started" }, { sleep_ms = 20000 }, { say = "never" }]
"#;

/// A session beside it: a permission for Bash, the tool, $0.25; then (turn 2) work.
const HELPER: &str = r#"
[[turn]]
match = "first"
steps = [{ permission = "Bash", input = { command = "ls" } }, { tool = "Bash", input = { command = "ls" }, output = "a\nb" }, { usage = { input_tokens = 10, output_tokens = 5, cost_usd = 0.25 } }, { say = "helped" }]
[[turn]]
match = "second"
steps = [{ usage = { input_tokens = 1, output_tokens = 1, cost_usd = 0.01 } }, { say = "helping" }, { sleep_ms = 20000 }]
"#;

/// A fleet of two start sessions answered by `lead` (not the first start session:
/// `answer_from` decides), with `extra` in `[fleet]`; its path.
fn fleet(dir: &Path, lead: &str, helper: &str, extra: &str) -> PathBuf {
    std::fs::write(dir.join("lead.toml"), lead).unwrap();
    std::fs::write(dir.join("helper.toml"), helper).unwrap();
    let path = dir.join("duo.toml");
    std::fs::write(
        &path,
        format!(
            "[fleet]\nname = \"duo\"\nstart = [\"helper\", \"lead\"]\nanswer_from = \"lead\"\n{extra}\n\
             [[sessions]]\nname = \"lead\"\nagent = \"sim\"\nscript = \"lead.toml\"\n\n\
             [[sessions]]\nname = \"helper\"\nagent = \"sim\"\nscript = \"helper.toml\"\n"
        ),
    )
    .unwrap();
    path
}

/// The fleet answers its own permissions (Bash allowed).
const AUTO: &str = "auto_answer = true\nallow_tools = [\"Bash\"]";

/// The cost the journals of the conversation `id` (its runs `<id>`, `<id>.2`, …) record.
fn journals_cost(dir: &Path, id: &str) -> (usize, f64) {
    let runs = dir.join(".capfleet/runs");
    let mut total = 0.0;
    let mut n = 0;
    for name in std::iter::once(id.to_owned()).chain((2..10).map(|i| format!("{id}.{i}"))) {
        let journal = runs.join(&name).join("journal.jsonl");
        if !journal.exists() {
            break;
        }
        n += 1;
        let records = common::journal_records(&journal);
        total += common::repo::cap_events(&records, "cap.usage")
            .iter()
            .filter_map(|u| u["cost_usd"].as_f64().or(u["cost_usd_estimate"].as_f64()))
            .sum::<f64>();
    }
    (n, total)
}

#[test]
fn the_claude_agent_sdk_drives_a_fleet_a_permission_an_interrupt_and_the_fleets_cost() {
    let dir = tempfile::tempdir().unwrap();
    let marker = EnvMarker::new("speak-fleet-sdk");
    let fleet = fleet(dir.path(), LEAD, HELPER, "");
    // (The SDK adds `--permission-prompt-tool stdio` itself, for canUseTool.)
    let args = ["--fleet", fleet.to_str().expect("utf8")];
    let cli = common::speak::cli(dir.path(), &args, &marker);
    // The helper's permission (the fleet's policy leaves it open) reached canUseTool.
    let (got, id) = common::speak::drive_asking_bash(dir.path(), &cli);
    let id = id.as_str();
    let first = got["turns"][0].as_array().unwrap();
    // The answering session speaks; the other session's text stays inside.
    let texts: Vec<&Value> = first.iter().filter_map(|m| m["assistant"].get(0)).collect();
    assert!(
        texts.iter().any(|b| b["text"] == "lead says done"),
        "{first:?}"
    );
    assert!(!texts.iter().any(|b| b["text"] == "helped"), "{first:?}");
    let result = first.last().unwrap();
    assert_eq!(result["subtype"], "success", "{first:?}");
    assert_eq!(result["result"], "lead says done");
    assert_eq!(result["session_id"], id);
    // The whole fleet's usage: both sessions'.
    assert_eq!(result["usage"]["input_tokens"], 14, "{result:?}");
    let cost = result["total_cost_usd"].as_f64().unwrap();
    assert!((cost - 0.30).abs() < 1e-9, "{cost}");
    // The interrupt cancelled every inner session's turn of the second run.
    let second = got["turns"][1].as_array().unwrap();
    assert_eq!(second[0]["assistant"][0]["text"], "started", "{second:?}");
    let result = second.last().unwrap();
    assert_eq!(result["is_error"], true, "{second:?}");
    assert_eq!(result["num_turns"], 2);
    assert_eq!(result["session_id"], id);
    assert!(!second.iter().any(|m| m["assistant"][0]["text"] == "never"));
    // The SDK's cost is the fleet's: what the runs' journals recorded, cumulative.
    let total = result["total_cost_usd"].as_f64().unwrap();
    let (runs, journaled) = journals_cost(dir.path(), id);
    assert_eq!(runs, 2, "a run per message: {id} and {id}.2");
    assert!((total - journaled).abs() < 1e-9, "{total} vs {journaled}");
    assert!(total >= 0.30 - 1e-9, "{total}");
    assert_no_survivor(&marker);
}

/// `speak --fleet` on stream-json stdin (the prompts, then its end: the queued turns
/// run, then speak ends); every stdout line as a frame, stderr, the exit code.
fn speak(
    dir: &Path,
    fleet: &Path,
    prompts: &[&str],
    marker: &EnvMarker,
) -> (Vec<Value>, String, Option<i32>) {
    let input = dir.join("prompts.jsonl");
    let lines: Vec<String> = prompts
        .iter()
        .map(|p| format!(r#"{{"type":"user","message":{{"role":"user","content":"{p}"}}}}"#))
        .collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let mut cmd = Command::new(common::BIN);
    cmd.args(["speak", "--fleet"])
        .arg(fleet)
        .args([
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
        ])
        .env(marker.key.as_str(), marker.value.as_str())
        .current_dir(dir)
        .stdin(std::fs::File::open(&input).unwrap());
    let out = common::output_within(cmd, Duration::from_secs(60));
    let text = String::from_utf8(out.stdout).expect("utf8 stdout");
    let frames = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a frame: {e}: {l}")))
        .collect();
    (
        frames,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

/// What capfleet's own stream-json driver reads: JSON objects of these types.
const FRAME_TYPES: &[&str] = &[
    "system",
    "assistant",
    "user",
    "stream_event",
    "result",
    "control_request",
    "control_response",
    "artifact",
];

#[test]
fn a_crash_inside_is_a_restart_note_every_line_is_a_frame_and_the_journal_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let marker = EnvMarker::new("speak-fleet-crash");
    let lead = r#"
[[turn]]
match = "one"
steps = [{ say = "half" }, { crash = "sigkill", once = true }, { say = "whole" }]
[[turn]]
match = "two"
steps = [{ say = "again" }]
"#;
    let helper = "[[turn]]\nsteps = [{ say = \"h\" }]\n";
    let fleet = fleet(dir.path(), lead, helper, "");
    let (frames, stderr, code) = speak(dir.path(), &fleet, &["one", "two"], &marker);
    assert_eq!(code, Some(0), "{stderr}\n{frames:#?}");
    for f in &frames {
        let ty = f["type"].as_str().unwrap_or("");
        assert!(FRAME_TYPES.contains(&ty), "{f}");
    }
    let results: Vec<&Value> = frames.iter().filter(|f| f["type"] == "result").collect();
    assert_eq!(results.len(), 2, "{frames:#?}");
    // The crash is invisible upstream: the turn went on and succeeded.
    assert_eq!(results[0]["subtype"], "success", "{frames:#?}");
    assert!(results[0]["result"].as_str().unwrap().ends_with("whole"));
    assert_eq!(results[1]["result"], "again");
    assert!(stderr.contains("restarted"), "{stderr}");
    // Each run named by an artifact frame: its journal, in the conversation's runs.
    let id = frames[0]["session_id"].as_str().unwrap().to_owned();
    let journals: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "artifact" && f["name"] == "journal.jsonl")
        .collect();
    assert_eq!(journals.len(), 2, "{frames:#?}");
    let runs: Vec<&str> = journals
        .iter()
        .map(|j| j["_meta"]["capfleet.run"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(runs, [id.clone(), format!("{id}.2")]);
    // The runs' transcripts came up as artifacts too, their ids the runs'.
    let transcripts: Vec<&str> = frames
        .iter()
        .filter(|f| f["type"] == "artifact")
        .filter_map(|f| f["name"].as_str())
        .filter(|n| n.ends_with(".transcript.json"))
        .collect();
    assert_eq!(transcripts.len(), 4, "two sessions, two runs: {frames:#?}");
    for j in &journals {
        let path = j["_meta"]["capfleet.run"]["journal"].as_str().unwrap();
        assert!(Path::new(path).is_file(), "{path}");
        assert_eq!(j["_meta"]["capfleet.run"]["outcome"], "completed");
    }
    assert_no_survivor(&marker);
}

#[test]
fn a_budget_stop_is_error_max_budget_usd_and_a_failed_fleet_is_one_error_result() {
    let dir = tempfile::tempdir().unwrap();
    let marker = EnvMarker::new("speak-fleet-budget");
    let over = fleet(
        dir.path(),
        LEAD,
        HELPER,
        &format!("budget_usd = 0.10\n{AUTO}"),
    );
    let (frames, stderr, _) = speak(dir.path(), &over, &["first"], &marker);
    let result = frames
        .iter()
        .find(|f| f["type"] == "result")
        .expect(&stderr);
    assert_eq!(result["subtype"], "error_max_budget_usd", "{result}");
    assert_eq!(result["is_error"], true);
    assert!(
        result["errors"][0].as_str().unwrap().contains("budget"),
        "{result}"
    );
    assert_no_survivor(&marker);

    // An agent that dies at every start: the fleet fails, one error result, no hang.
    let dead = tempfile::tempdir().unwrap();
    let lead = "[[turn]]\nsteps = [{ crash = \"exit\" }]\n";
    let failing = fleet(dead.path(), lead, HELPER, AUTO);
    let (frames, stderr, code) = speak(dead.path(), &failing, &["first"], &marker);
    let results: Vec<&Value> = frames.iter().filter(|f| f["type"] == "result").collect();
    assert_eq!(results.len(), 1, "{stderr}\n{frames:#?}");
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(results[0]["subtype"], "error_during_execution");
    assert_eq!(code, Some(1), "{stderr}");
    assert_no_survivor(&marker);
}

#[test]
fn sigterm_of_speak_with_a_fleet_leaves_no_inner_agent() {
    let dir = tempfile::tempdir().unwrap();
    let marker = EnvMarker::new("speak-fleet-term");
    let fleet = fleet(dir.path(), LEAD, HELPER, AUTO);
    let mut cmd = Command::new(common::BIN);
    cmd.args(["speak", "--fleet"])
        .arg(&fleet)
        .args([
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
        ])
        .current_dir(dir.path());
    // Killed mid-run, both inner sessions at work: nothing of the fleet outlives speak.
    common::speak::sigterm_when_started(cmd, &["second"], &marker);
}

#[test]
fn resume_goes_on_with_the_conversation_and_its_inner_agents() {
    let dir = tempfile::tempdir().unwrap();
    let marker = EnvMarker::new("speak-fleet-resume");
    let lead = "[[turn]]\nmatch = \"one\"\nsteps = [{ say = \"first answer\" }]\n\
                [[turn]]\nmatch = \"two\"\nsteps = [{ say = \"second answer\" }]\n";
    let fleet = fleet(
        dir.path(),
        lead,
        "[[turn]]\nsteps = [{ say = \"h\" }]\n",
        "",
    );
    let (frames, stderr, code) = speak(dir.path(), &fleet, &["one"], &marker);
    assert_eq!(code, Some(0), "{stderr}");
    let id = frames[0]["session_id"].as_str().unwrap().to_owned();
    // The inner lead's own conversation id, as the first run learned it.
    let first = common::journal_records(
        &dir.path()
            .join(format!(".capfleet/runs/{id}/journal.jsonl")),
    );
    // (Learned mid-turn as a `resume_id` record, or known at start by `ready`.)
    let lead_ready = |records: &[Value]| -> Vec<String> {
        let mut ids: Vec<String> = records
            .iter()
            .filter(|r| r["urn"] == "cap://duo/lead")
            .filter_map(|r| match r["type"].as_str() {
                Some("resume_id") => r["id"].as_str(),
                _ => r["event"]["session_id"].as_str(),
            })
            .map(str::to_owned)
            .collect();
        ids.dedup();
        ids
    };
    let inner_id = lead_ready(&first).pop().expect("the inner session id");

    // A later process: `--resume <id>` goes on with run `<id>.2`.
    let input = dir.path().join("two.jsonl");
    let line =
        |p: &str| format!(r#"{{"type":"user","message":{{"role":"user","content":"{p}"}}}}"#);
    std::fs::write(&input, format!("{}\n{}\n", line("two"), line("three"))).unwrap();
    let mut cmd = Command::new(common::BIN);
    cmd.args(["speak", "--fleet"])
        .arg(&fleet)
        .args([
            "--resume",
            &id,
            "--max-turns",
            "1",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
        ])
        .env(marker.key.as_str(), marker.value.as_str())
        .current_dir(dir.path())
        .stdin(std::fs::File::open(&input).unwrap());
    let out = common::output_within(cmd, Duration::from_secs(30));
    // The last turn was refused: exit 1, as for any last turn that failed.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let frames: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames[0]["session_id"], id.as_str());
    let results: Vec<&Value> = frames.iter().filter(|f| f["type"] == "result").collect();
    assert_eq!(results[0]["result"], "second answer");
    assert_eq!(results[0]["session_id"], id.as_str());
    // `--max-turns 1`: the next message is refused as Claude refuses it, no run made.
    assert_eq!(results[1]["subtype"], "error_max_turns", "{frames:#?}");
    let third = dir.path().join(format!(".capfleet/runs/{id}.3"));
    assert!(!third.exists());
    let second = common::journal_records(
        &dir.path()
            .join(format!(".capfleet/runs/{id}.2/journal.jsonl")),
    );
    // The inner lead was resumed natively: the same conversation id.
    assert_eq!(lead_ready(&second), [inner_id], "{second:#?}");
    assert_no_survivor(&marker);
}

/// `speak --fleet` (lead script `lead`) on `-p go` in `dir`, SIGKILLed once its
/// lead said "started": the fleet file and the conversation's id; nothing left, the
/// run's journal without an end.
fn killed_mid_run(dir: &Path, lead: &str, marker: &EnvMarker) -> (PathBuf, String) {
    let fleet = fleet(dir, lead, "[[turn]]\nsteps = [{ say = \"h\" }]\n", "");
    let mut child = Command::new(common::BIN)
        .args(["speak", "--fleet"])
        .arg(&fleet)
        .args(["-p", "go", "--output-format", "stream-json"])
        .env(marker.key.as_str(), marker.value.as_str())
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let init: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let id = init["session_id"].as_str().unwrap().to_owned();
    for line in lines.by_ref() {
        if line.unwrap().contains("started") {
            break;
        }
    }
    // SIGKILL: speak gets no word in; its agents go with it (the keeper).
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    assert_no_survivor(marker);
    let journal = dir.join(format!(".capfleet/runs/{id}/journal.jsonl"));
    assert_eq!(common::run_ended(&common::journal_records(&journal)), None);
    (fleet, id)
}

#[test]
fn a_run_cut_by_a_kill_is_finished_by_the_next_resume() {
    let dir = tempfile::tempdir().unwrap();
    let marker = EnvMarker::new("speak-fleet-kill");
    let lead = "[[turn]]\nmatch = \"go\"\nsteps = [{ say = \"started\" }, { sleep_ms = 1500 }, { say = \"finished\" }]\n\
                [[turn]]\nmatch = \"next\"\nsteps = [{ say = \"next answer\" }]\n";
    let (fleet, id) = killed_mid_run(dir.path(), lead, &marker);
    let journal = dir
        .path()
        .join(format!(".capfleet/runs/{id}/journal.jsonl"));
    // `--resume <id>`: the cut run is finished first (as `capfleet run --resume`
    // does: its cut turn re-issued), then the new message is the next run.
    let out = crate::common::succeeded(
        common::capfleet(dir.path())
            .args(["speak", "--fleet"])
            .arg(&fleet)
            .args(["--resume", &id, "-p", "next"])
            .env(marker.key.as_str(), marker.value.as_str())
            .output()
            .unwrap(),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "next answer");
    let next = dir
        .path()
        .join(format!(".capfleet/runs/{id}.2/journal.jsonl"));
    assert_eq!(
        common::run_ended(&common::journal_records(&next)).as_deref(),
        Some("completed")
    );
    let records = common::journal_records(&journal);
    assert_eq!(common::run_ended(&records).as_deref(), Some("completed"));
    let said: String = common::repo::cap_events(&records, "cap.text_chunk")
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert!(said.contains("finished"), "{said}");
    assert_no_survivor(&marker);
}

#[test]
fn sigterm_while_a_cut_run_is_finished_stops_it_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = EnvMarker::new("speak-fleet-kill-term");
    let lead = "[[turn]]\nmatch = \"go\"\nsteps = [{ say = \"started\" }, { sleep_ms = 20000 }, { say = \"finished\" }]\n";
    let (fleet, id) = killed_mid_run(dir.path(), lead, &marker);
    let journal = dir
        .path()
        .join(format!(".capfleet/runs/{id}/journal.jsonl"));
    let mut child = common::capfleet(dir.path())
        .args(["speak", "--fleet"])
        .arg(&fleet)
        .args(["--resume", &id, "-p", "next", "--output-format", "json"])
        .env(marker.key.as_str(), marker.value.as_str())
        .spawn()
        .unwrap();
    // The cut turn, re-issued, is at work again ("started" after the `resumed` record;
    // the killed run's own text may never have reached its journal).
    let again = || {
        let text = std::fs::read_to_string(&journal).unwrap_or_default();
        text.split("\"type\":\"resumed\"")
            .nth(1)
            .is_some_and(|after| after.contains("\"text\":\"started\""))
    };
    let at_work = common::wait_until(Duration::from_secs(20), Duration::from_millis(50), again);
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = common::wait_within(&mut child, Duration::from_secs(10));
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(at_work, "{stderr}");
    assert_eq!(status.code(), Some(130), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).expect("the json result");
    assert_eq!(result["is_error"], true, "{result}");
    assert_no_survivor(&marker);
    // No run for the new message was left looking cut.
    let next = dir
        .path()
        .join(format!(".capfleet/runs/{id}.2/journal.jsonl"));
    assert!(common::run_ended(&common::journal_records(&next)).is_some() || !next.exists());
}
