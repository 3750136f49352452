//! capfleet driving capfleet three levels deep: an outer fleet whose session is
//! `capfleet speak --fleet` (the shipped `config/fleets/nested.toml`, or fleets
//! written here) whose sessions are simulator agents. The inner answer and cost come
//! up, the outer journal names the inner run's journal, the whole is one trace (the
//! inner run under the outer turn that sent it its message);
//! the outer budget and a Ctrl-C at the top stop the inner fleet, nothing left.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::EnvMarker;
use common::chat::assert_no_survivor;
use common::otel::{Collector, attr};
use common::repo::cap_events;

use crate::common;

/// Every run under `dir` by its fleet's name (from the URNs its journal records; a
/// line being written is left out). The inner fleet's runs are in its session's
/// workspace (`.cap-worktrees/<run>/<session>/.capfleet/runs`), so all are searched.
fn runs_by_fleet(dir: &Path) -> Vec<(String, PathBuf, Vec<Value>)> {
    let mut runs = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.file_name().is_some_and(|n| n == "journal.jsonl")
                && path
                    .parent()
                    .and_then(Path::parent)
                    .is_some_and(|p| p.ends_with(".capfleet/runs"))
            {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let records: Vec<Value> = text
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect();
                let fleet = records
                    .iter()
                    .find_map(|r| r["urn"].as_str()?.strip_prefix("cap://")?.split('/').next())
                    .unwrap_or("")
                    .to_owned();
                let run = path.parent().expect("a run directory").to_path_buf();
                runs.push((fleet, run, records));
            }
        }
    }
    runs
}

fn cost(records: &[Value], urn: Option<&str>) -> f64 {
    records
        .iter()
        .filter(|r| urn.is_none_or(|u| r["urn"] == u))
        .filter(|r| r["type"] == "cap" && r["event"]["kind"] == "cap.usage")
        .filter_map(|r| {
            r["event"]["cost_usd"]
                .as_f64()
                .or(r["event"]["cost_usd_estimate"].as_f64())
        })
        .sum()
}

fn nested() -> PathBuf {
    common::repo_root().join("config/fleets/nested.toml")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nested_example_answers_up_names_the_inner_journal_and_is_one_trace() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let marker = EnvMarker::new("nested-example");
    let mut cmd = common::sandboxed(dir.path());
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .env(marker.key.as_str(), marker.value.as_str())
        .arg("run")
        .arg(nested());
    let out =
        tokio::task::spawn_blocking(move || common::output_within(cmd, Duration::from_secs(30)))
            .await
            .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let runs = runs_by_fleet(dir.path());
    let (_, _, outer) = runs
        .iter()
        .find(|(f, ..)| f == "nested")
        .expect("the outer run");
    let (_, inner_dir, inner) = runs
        .iter()
        .find(|(f, ..)| f == "team")
        .expect("the inner run");
    assert_eq!(common::run_ended(outer).as_deref(), Some("completed"));
    assert_eq!(common::run_ended(inner).as_deref(), Some("completed"));
    // The team's answer is its reviewer's final text.
    let team_text: String = outer
        .iter()
        .filter(|r| r["urn"] == "cap://nested/team")
        .filter(|r| r["type"] == "cap" && r["event"]["kind"] == "cap.text_chunk")
        .filter_map(|r| r["event"]["text"].as_str())
        .collect();
    assert_eq!(
        team_text, "Reviewed: /health is correct. Approved.",
        "{outer:#?}"
    );
    // Its cost came up: what the inner run's journal recorded, the coder's too.
    let up = cost(outer, Some("cap://nested/team"));
    let inside = cost(inner, None);
    assert!((inside - 0.05).abs() < 1e-9, "{inside}");
    assert!((up - inside).abs() < 1e-9, "{up} vs {inside}");
    // The outer journal names the inner run's journal.
    let named: Vec<&Value> = cap_events(outer, "cap.artifact")
        .into_iter()
        .filter(|a| a["_meta"]["capfleet.run"].is_object())
        .collect();
    assert_eq!(named.len(), 1, "{outer:#?}");
    let run = &named[0]["_meta"]["capfleet.run"];
    assert_eq!(
        Path::new(run["journal"].as_str().unwrap()),
        inner_dir.join("journal.jsonl")
    );
    assert_eq!(run["outcome"], "completed");
    // Nothing outlived the run, and nothing the inner fleet wrote was malformed.
    assert!(marker.processes().is_empty(), "{:?}", marker.processes());
    assert!(cap_events(outer, "cap.error").is_empty(), "{outer:#?}");

    // One trace: the inner run's workflow span is a child of the outer turn that
    // sent the message (its user frame carried the turn's traceparent), inside the
    // outer team session.
    let t = collector.spans().await;
    let runs = t.named("fleet.run");
    assert_eq!(runs.len(), 2, "{:#?}", t.names());
    let outer_run = runs
        .iter()
        .find(|s| s.name == "invoke_workflow nested")
        .expect("outer");
    let inner_run = runs
        .iter()
        .find(|s| s.name == "invoke_workflow team")
        .expect("inner");
    assert_eq!(inner_run.trace_id, outer_run.trace_id);
    let turn = t
        .parent(inner_run)
        .expect("the inner run's parent was exported");
    assert_eq!(common::otel::kind(turn), "turn", "{:#?}", t.names());
    assert_eq!(attr(turn, "gen_ai.agent.id"), "cap://nested/team");
    let outer_turns: Vec<_> = t
        .named("turn")
        .into_iter()
        .filter(|s| attr(s, "gen_ai.agent.id") == "cap://nested/team")
        .collect();
    assert_eq!(outer_turns.len(), 1, "{:#?}", t.names());
    assert_eq!(outer_turns[0].span_id, turn.span_id);
    let session = t.parent(turn).expect("the outer turn's session");
    assert_eq!(attr(session, "cap.session.urn"), "cap://nested/team");
    assert!(t.spans.iter().all(|s| s.trace_id == outer_run.trace_id));
    // The inner sessions' turns hang under the inner run.
    let inner_sessions: Vec<_> = t
        .named("session")
        .into_iter()
        .filter(|s| attr(s, "cap.session.urn").starts_with("cap://team/"))
        .collect();
    assert_eq!(inner_sessions.len(), 2);
    assert!(
        inner_sessions
            .iter()
            .all(|s| s.parent_span_id == inner_run.span_id)
    );
}

/// An outer fleet: `team` (capfleet speak --fleet over the inner fleet, whose coder
/// spends $0.05 then works 20 s) and `spender` beside it (after `spend_after_ms`,
/// $0.30), with `budget` in `[fleet]`.
fn outer_fleet(dir: &Path, budget: &str, spend_after_ms: u64) -> PathBuf {
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write(
        "coder.toml",
        "[[turn]]\nsteps = [{ usage = { input_tokens = 5, output_tokens = 5, cost_usd = 0.05 } }, { say = \"working\" }, { sleep_ms = 20000 }, { say = \"never\" }]\n",
    );
    write("reviewer.toml", "[[turn]]\nsteps = [{ say = \"ok\" }]\n");
    write(
        "spender.toml",
        &format!(
            "[[turn]]\nsteps = [{{ sleep_ms = {spend_after_ms} }}, {{ usage = {{ input_tokens = 1, output_tokens = 1, cost_usd = 0.30 }} }}, {{ say = \"spent\" }}]\n"
        ),
    );
    write(
        "team.toml",
        "[fleet]\nname = \"team\"\nstart = \"coder\"\nanswer_from = \"reviewer\"\nauto_answer = true\n\n\
         [[sessions]]\nname = \"coder\"\nagent = \"sim\"\nscript = \"coder.toml\"\n\n\
         [[sessions]]\nname = \"reviewer\"\nagent = \"sim\"\nscript = \"reviewer.toml\"\n\n\
         [[routes]]\nwhen = \"coder.done\"\nroute_to = \"reviewer\"\n",
    );
    let path = dir.join("outer.toml");
    write(
        "outer.toml",
        &format!(
            "[fleet]\nname = \"outer\"\nstart = [\"team\", \"spender\"]\ntask = \"go\"\nauto_answer = true\n{budget}\n\n\
             [[sessions]]\nname = \"team\"\nagent = \"capfleet\"\nfleet = \"team.toml\"\n\n\
             [[sessions]]\nname = \"spender\"\nagent = \"sim\"\nscript = \"spender.toml\"\n"
        ),
    );
    path
}

/// Wait until the inner coder is at work (its journal says "working").
fn inner_at_work(dir: &Path) -> bool {
    common::wait_until(Duration::from_secs(20), Duration::from_millis(50), || {
        runs_by_fleet(dir).iter().any(|(f, _, records)| {
            f == "team" && records.iter().any(|r| r["event"]["text"] == "working")
        })
    })
}

#[test]
fn the_outer_budget_stops_the_inner_fleet_and_its_cost_comes_up() {
    let dir = tempfile::tempdir().unwrap();
    let marker = EnvMarker::new("nested-budget");
    let fleet = outer_fleet(dir.path(), "budget_usd = 0.20", 1500);
    let mut cmd = common::sandboxed(dir.path());
    cmd.env(marker.key.as_str(), marker.value.as_str())
        .arg("run")
        .arg(&fleet);
    let started = Instant::now();
    let out = common::output_within(cmd, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(3), "the budget exit: {stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let runs = runs_by_fleet(dir.path());
    let (_, _, outer) = runs.iter().find(|(f, ..)| f == "outer").expect("outer run");
    let (_, _, inner) = runs.iter().find(|(f, ..)| f == "team").expect("inner run");
    assert_eq!(common::run_ended(outer).as_deref(), Some("budget_exceeded"));
    // The inner fleet was stopped mid-work by the outer budget.
    assert_eq!(
        common::run_ended(inner).as_deref(),
        Some("interrupted"),
        "{inner:#?}"
    );
    assert!(!inner.iter().any(|r| r["event"]["text"] == "never"));
    // What the inner fleet recorded as spent before it was stopped came up to the
    // outer journal (the coder's $0.05 when its cancelled turn's report was read in
    // time: on a loaded machine the stop may come first, then both are nothing).
    let up = cost(outer, Some("cap://outer/team"));
    let inside = cost(inner, None);
    assert!((inside - up).abs() < 1e-9, "{up} vs {inside}: {outer:#?}");
    assert!(up < 0.05 + 1e-9, "{up}");
    assert_no_survivor(&marker);
}

#[test]
fn ctrl_c_at_the_top_reaches_the_innermost_agents_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = EnvMarker::new("nested-ctrl-c");
    // The spender waits past the test: only Ctrl-C stops this run.
    let fleet = outer_fleet(dir.path(), "", 60_000);
    let mut child = common::sandboxed(dir.path())
        .env(marker.key.as_str(), marker.value.as_str())
        .arg("run")
        .arg(&fleet)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(inner_at_work(dir.path()), "the inner coder started");
    let stopped = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = common::wait_within(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(130), "{status}");
    assert!(
        stopped.elapsed() < Duration::from_secs(10),
        "{:?}",
        stopped.elapsed()
    );
    let runs = runs_by_fleet(dir.path());
    let (_, _, inner) = runs.iter().find(|(f, ..)| f == "team").expect("inner run");
    assert_eq!(
        common::run_ended(inner).as_deref(),
        Some("interrupted"),
        "{inner:#?}"
    );
    assert_no_survivor(&marker);
}
