//! The shipped example fleets run end to end with simulator agents (no API key) and
//! their journals show what each example is for.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{run_journal, sandboxed};

/// Run `config/fleets/<name>.toml` in a fresh directory: its exit code and its
/// journal's records.
fn run(name: &str) -> (Option<i32>, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let fleet = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("config/fleets/{name}.toml"));
    let started = Instant::now();
    let out = sandboxed(dir.path())
        .arg("run")
        .arg(&fleet)
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{name} took {:?}",
        started.elapsed()
    );
    (out.status.code(), run_journal(dir.path()))
}

/// Run an example that must complete (exit 0).
fn run_ok(name: &str) -> Vec<Value> {
    let (code, records) = run(name);
    assert_eq!(code, Some(0), "{name}: {records:#?}");
    assert!(ended_completed(&records), "{name}");
    records
}

fn routed<'a>(records: &'a [Value], via: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["type"] == "routed" && r["via"] == via)
        .collect()
}

fn ended_completed(records: &[Value]) -> bool {
    records
        .iter()
        .any(|r| r["type"] == "run_ended" && r["outcome"] == "completed")
}

#[test]
fn demo_plans_restarts_mentions_and_joins() {
    let records = run_ok("demo");
    let restarts: Vec<_> = records.iter().filter(|r| r["type"] == "restart").collect();
    assert_eq!(restarts.len(), 1, "worker-a crashes once");
    assert_eq!(restarts[0]["urn"], "cap://demo/worker-a");
    let plan = routed(&records, "plan");
    assert_eq!(plan.len(), 2, "{plan:?}");
    let mention = routed(&records, "mention");
    assert_eq!(mention.len(), 1);
    assert_eq!(mention[0]["to"], "worker-b");
    let join = routed(&records, "route");
    assert_eq!(join.len(), 1);
    assert_eq!(join[0]["to"], "reviewer");
    assert_eq!(join[0]["from"], serde_json::json!(["worker-a", "worker-b"]));
}

#[test]
fn pipeline_and_by_subtask_run() {
    let records = run_ok("pipeline");
    let steps: Vec<_> = routed(&records, "route")
        .iter()
        .map(|r| r["to"].clone())
        .collect();
    assert_eq!(steps, ["code", "test"]);

    let records = run_ok("by_subtask");
    let mut subtasks: Vec<_> = routed(&records, "subtask")
        .iter()
        .map(|r| r["to"].clone())
        .collect();
    subtasks.sort_by_key(|v| v.to_string());
    assert_eq!(subtasks, ["printer", "tokenizer"]);
    assert_eq!(routed(&records, "route")[0]["to"], "merger");
}

#[test]
fn race_hands_the_first_result_to_the_judge() {
    // The loser's turn is cancelled by the router itself: no failure, exit 0.
    let (code, records) = run("race");
    assert_eq!(code, Some(0));
    let collect = routed(&records, "collect");
    assert_eq!(collect.len(), 1);
    assert_eq!(collect[0]["to"], "judge");
    assert_eq!(collect[0]["from"], serde_json::json!(["fast"]));
}
