//! `capfleet mcp` (stdio) driven by the official MCP Python SDK's client (`mcp`
//! 2.3.0): it lists the tools (each with its output schema), starts the demo fleet by
//! its path, polls it to completion, reads worker-a's diff, lists the runs, starts a
//! second fleet whose session asks leave for a tool, answers that permission, waits
//! for the run (progress notifications) and reads its journal as a resource. Every
//! call is an `mcp_call` record in the journal of the run it touched and an
//! `execute_tool` span; no agent outlives the server.

use std::time::Duration;

use serde_json::Value;

use crate::common::mcp::{TOOLS, asking, client, demo_path, step, write_json};
use crate::common::repo::Fixture;
use crate::common::{BIN, EnvMarker, journal_records};

/// The `mcp_call` records of a run's journal: (tool, ok).
fn calls(journal: &[Value]) -> Vec<(String, bool)> {
    journal
        .iter()
        .filter(|r| r["type"] == "mcp_call")
        .map(|r| {
            (
                r["tool"].as_str().unwrap_or("").to_owned(),
                r["ok"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

#[test]
fn the_python_sdk_drives_capfleet_mcp_on_stdio() {
    let repo = Fixture::git_repo(&[("README.md", "a service\n")]);
    let d = repo.path();
    let marker = EnvMarker::new("mcp-stdio");
    let demo = write_json(
        d,
        "demo.json",
        &serde_json::json!({ "fleet_path": demo_path() }),
    );
    let ask = write_json(d, "ask.json", &asking(&marker));
    let spans = d.join("spans.jsonl");
    let stdio_args = format!("--trace-file {}", spans.display());
    let lines = client(
        d,
        &[
            "--stdio",
            BIN,
            "--stdio-args",
            &stdio_args,
            "drive",
            "--demo",
            &demo,
            "--ask",
            &ask,
        ],
    );

    let tools = step(&lines, "tools");
    assert_eq!(tools["names"], serde_json::json!(TOOLS), "{tools}");
    assert_eq!(
        tools["with_output_schema"], tools["names"],
        "every tool has an output schema"
    );
    assert_eq!(
        tools["protocol"], "2026-07-28",
        "the current revision is negotiated"
    );

    let demo_run = step(&lines, "start_demo")["started"]["run"]
        .as_str()
        .expect("the demo's run id")
        .to_owned();
    let status = &step(&lines, "demo_status")["status"];
    assert_eq!(status["state"], "completed", "{status}");
    assert_eq!(
        status["sessions"].as_array().map(Vec::len),
        Some(4),
        "{status}"
    );
    let reviewer = status["sessions"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "reviewer"))
        .expect("the reviewer");
    assert!(
        reviewer["last_lines"].as_array().is_some_and(|l| l
            .iter()
            .any(|l| l.as_str().is_some_and(|l| l.contains("approved")))),
        "the reviewer's last lines: {reviewer}"
    );
    let diff = step(&lines, "diff");
    assert!(diff["files"].as_u64() >= Some(1), "{diff}");
    assert!(
        diff["patch"]
            .as_str()
            .is_some_and(|p| p.contains("src/health.rs")),
        "worker-a's diff: {diff}"
    );
    let runs = step(&lines, "runs")["runs"]
        .as_array()
        .expect("runs")
        .clone();
    assert!(
        runs.iter()
            .any(|r| r["run"] == demo_run.as_str() && r["state"] == "completed"),
        "{runs:?}"
    );

    let asks = &step(&lines, "asks")["asks"];
    assert_eq!(asks[0]["kind"], "permission", "{asks}");
    assert_eq!(asks[0]["tool"], "Bash", "{asks}");
    let user = std::env::var("USER").unwrap_or_else(|_| "local".into());
    assert_eq!(step(&lines, "answer")["answered"]["by"], user.as_str());
    let waited = step(&lines, "wait");
    assert_eq!(waited["status"]["state"], "completed", "{waited}");
    let journal = step(&lines, "journal");
    assert!(journal["records"].as_u64() > Some(5), "{journal}");

    // Journaled: the demo's calls in the demo's journal, the second run's in its own.
    let demo_journal = journal_records(
        &d.join(".capfleet/runs")
            .join(&demo_run)
            .join("journal.jsonl"),
    );
    let demo_calls = calls(&demo_journal);
    assert!(
        demo_calls.contains(&("start_run".into(), true)),
        "{demo_calls:?}"
    );
    assert!(
        demo_calls.contains(&("run_status".into(), true)),
        "{demo_calls:?}"
    );
    assert!(
        demo_calls.contains(&("session_diff".into(), true)),
        "{demo_calls:?}"
    );
    let second = step(&lines, "start_ask")["started"]["run"]
        .as_str()
        .expect("the second run's id");
    let second_journal =
        journal_records(&d.join(".capfleet/runs").join(second).join("journal.jsonl"));
    let second_calls = calls(&second_journal);
    assert!(
        second_calls.contains(&("answer_ask".into(), true)),
        "{second_calls:?}"
    );
    let answer = second_journal
        .iter()
        .find(|r| r["type"] == "mcp_call" && r["tool"] == "answer_ask")
        .expect("the answer's record");
    assert_eq!(answer["by"], user.as_str());
    assert!(answer["args_bytes"].as_u64() > Some(20), "{answer}");
    assert!(
        answer["urn"] == "cap://ask/mcp",
        "a live run's call is on its `…/mcp` stream: {answer}"
    );
    let decided = second_journal
        .iter()
        .find(|r| r["event"]["kind"] == "cap.permission.response")
        .expect("the permission's answer");
    assert_eq!(decided["event"]["decision"], "allow_once");
    assert_eq!(
        decided["event"]["_meta"]["capfleet.rule"],
        format!("remote:{user}")
    );

    // Traced: an `execute_tool` span per call, the refused ones failed.
    let spans = std::fs::read_to_string(&spans).expect("the trace file");
    let tools_traced: Vec<String> = spans
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|s| s["attributes"]["gen_ai.operation.name"] == "execute_tool")
        .filter_map(|s| {
            s["attributes"]["gen_ai.tool.name"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    for tool in [
        "start_run",
        "run_status",
        "session_diff",
        "list_asks",
        "answer_ask",
        "wait_run",
    ] {
        assert!(
            tools_traced.iter().any(|t| t == tool),
            "{tool} in {tools_traced:?}"
        );
    }
    marker.wait_gone(Duration::from_secs(10), "the agents ended with the server");
}
