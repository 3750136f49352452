//! `capfleet serve`'s `/mcp` (Streamable HTTP) driven by the official MCP Python
//! SDK's client: with a `run` token it starts the demo fleet (inline, its scripts as
//! files), polls it to completion, reads a diff and starts a second fleet whose
//! permission only an `approve` token may answer (the `run` token is refused, the
//! `approve` one answers); a `read` token lists and reads but is refused starting,
//! cancelling and answering. The refusals are journaled and counted; the endpoint
//! passes the server's auth and origin checks like every route.

use serde_json::{Value, json};

use crate::common::mcp::{TOOLS, asking, client, demo_inline, step, write_json};
use crate::common::repo::Fixture;
use crate::common::serve::{Server, add_token};
use crate::common::{EnvMarker, journal_records, wait_until};

/// The refusal a step was answered with.
fn refusal(lines: &[Value], name: &str) -> Value {
    step(lines, name)["error"].clone()
}

#[test]
fn the_python_sdk_drives_serve_over_streamable_http_within_its_roles() {
    let repo = Fixture::git_repo(&[("README.md", "a service\n")]);
    let d = repo.path();
    let runner = add_token(d, "ci", "run");
    let approver = add_token(d, "alice", "approve");
    let viewer = add_token(d, "viewer", "read");
    let server = Server::start(d, &["--token-file", "tokens.txt"]);
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let marker = EnvMarker::new("mcp-http");
    let demo = write_json(d, "demo.json", &demo_inline());
    let ask = write_json(d, "ask.json", &asking(&marker));
    let lines = client(
        d,
        &[
            "--url",
            &url,
            "--token",
            &runner,
            "drive",
            "--demo",
            &demo,
            "--ask",
            &ask,
            "--approve-token",
            &approver,
        ],
    );
    assert_eq!(step(&lines, "tools")["names"], json!(TOOLS));
    let demo_run = step(&lines, "start_demo")["started"]["run"]
        .as_str()
        .expect("the demo's run id")
        .to_owned();
    assert_eq!(step(&lines, "demo_status")["status"]["state"], "completed");
    let diff = step(&lines, "diff");
    assert!(
        diff["patch"]
            .as_str()
            .is_some_and(|p| p.contains("src/health.rs")),
        "{diff}"
    );
    assert_eq!(refusal(&lines, "answer_as_runner"), "forbidden");
    assert_eq!(step(&lines, "answer")["answered"]["by"], "alice");
    assert_eq!(step(&lines, "wait")["status"]["state"], "completed");
    let second = step(&lines, "start_ask")["started"]["run"]
        .as_str()
        .expect("the second run")
        .to_owned();
    let decided: Vec<Value> = journal_records(&server.journal(&second))
        .into_iter()
        .filter(|r| r["event"]["kind"] == "cap.permission.response")
        .collect();
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(
        decided[0]["event"]["_meta"]["capfleet.rule"],
        "remote:alice"
    );

    // A `read` token: reads, and is refused the rest.
    let lines = client(
        d,
        &[
            "--url", &url, "--token", &viewer, "refused", "--run", &demo_run, "--ask-id", "s0.none",
        ],
    );
    assert!(
        step(&lines, "runs")["runs"].as_u64() >= Some(2),
        "{lines:?}"
    );
    assert_eq!(step(&lines, "status")["state"], "completed");
    for refused in ["start", "cancel", "answer"] {
        assert_eq!(
            refusal(&lines, refused),
            "forbidden",
            "{refused}: {lines:?}"
        );
    }
    // Journaled in the run it touched (ended: appended after the call), and counted.
    let journal = server.journal(&demo_run);
    let refused_cancel = |records: &[Value]| {
        records.iter().any(|r| {
            r["type"] == "mcp_call"
                && r["tool"] == "cancel_run"
                && r["by"] == "viewer"
                && r["ok"] == false
                && r["error"] == "forbidden"
        })
    };
    assert!(
        wait_until(
            std::time::Duration::from_secs(10),
            std::time::Duration::from_millis(50),
            || refused_cancel(&journal_records(&journal))
        ),
        "the refused cancel in the demo's journal"
    );
    let metrics = server.request("GET", "/metrics", Some(&viewer), "application/json", b"");
    assert!(
        metrics.body.contains(
            r#"capfleet_server_mcp_tool_calls_total{tool="start_run",result="forbidden"} 1"#
        ),
        "{}",
        metrics.body
    );

    // The endpoint passes the server's checks: no token, no entry; no foreign page.
    let anonymous = server.request("POST", "/mcp", None, "application/json", b"{}");
    assert_eq!(anonymous.status, 401);
    let foreign = crate::common::fake_llm::http_with(
        server.port,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Origin", "http://evil.example"),
            ("Authorization", &format!("Bearer {runner}")),
        ],
        b"{}",
    )
    .expect("a request");
    assert_eq!(foreign.status, 403);
}
