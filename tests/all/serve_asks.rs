//! Remote approvals: a permission the fleet's policy leaves open waits (the turn
//! suspended, not failed) until a client answers it over the API — the tool then runs
//! and the turn completes, the answer journaled with the token's name — or, with no
//! answer within `--ask-timeout`, is denied fail-safe and journaled so; an answered or
//! timed-out ask is `409`; only an `approve` token may answer. An answer the question
//! does not take — a decision not offered, an ask's answer not of its form's shape —
//! is `422` saying what it takes, and the question stays open for a right one.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::serve::{PERMISSION, Server, add_token};
use crate::common::{EnvMarker, journal_records, wait_until};

/// The open asks of run `id`, once there is one.
fn open_ask(server: &Server, id: &str, token: &str) -> Value {
    let mut found = Value::Null;
    let path = format!("/v1/runs/{id}/asks");
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(20), || {
            let (status, body) = server.json("GET", &path, Some(token), None);
            assert_eq!(status, 200, "{body}");
            found = body["asks"][0].clone();
            !found.is_null()
        }),
        "the permission request is open\n{}",
        server.stderr()
    );
    found
}

/// The decisions journaled for run `id`: (decision, rule).
fn decisions(server: &Server, id: &str) -> Vec<(String, String)> {
    journal_records(&server.journal(id))
        .iter()
        .filter(|r| r["event"]["kind"] == "cap.permission.response")
        .map(|r| {
            let e = &r["event"];
            (
                e["decision"].as_str().unwrap_or("").to_owned(),
                e["_meta"]["capfleet.rule"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_remote_approval_runs_the_tool_and_is_journaled_with_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let runner = add_token(d, "ci", "run");
    let approver = add_token(d, "alice", "approve");
    let m = EnvMarker::new("serve-approve");
    let server = Server::start(d, &["--token-file", "tokens.txt"]);
    let id = server.submit_script(Some(&runner), m.pair(), PERMISSION);
    let ask = open_ask(&server, &id, &runner);
    assert_eq!(
        (ask["kind"].as_str(), ask["tool"].as_str()),
        (Some("permission"), Some("Bash")),
        "{ask}"
    );
    let path = format!("/v1/runs/{id}/asks/{}", ask["ask_id"].as_str().unwrap());
    // The turn waits, suspended.
    let (_, run) = server.json("GET", &format!("/v1/runs/{id}"), Some(&runner), None);
    assert_eq!(run["state"], "running");
    assert_eq!(run["sessions"][0]["state"], "input_required", "{run}");
    // A run token may not answer; a bad decision is refused; the approver's goes.
    let (status, _) = server.json(
        "POST",
        &path,
        Some(&runner),
        Some(&json!({"decision": "allow_once"})),
    );
    assert_eq!(status, 403);
    let (status, body) = server.json(
        "POST",
        &path,
        Some(&approver),
        Some(&json!({"decision": "maybe"})),
    );
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("invalid_answer")),
        "{body}"
    );
    assert_eq!(
        body["expected"]["decision"]["enum"],
        json!(["allow_once", "allow_always", "deny"])
    );
    assert_eq!(
        open_ask(&server, &id, &runner)["ask_id"],
        ask["ask_id"],
        "still open"
    );
    let (status, body) = server.json(
        "POST",
        &path,
        Some(&approver),
        Some(&json!({"decision": "allow_once"})),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.json(
        "POST",
        &path,
        Some(&approver),
        Some(&json!({"decision": "deny"})),
    );
    assert_eq!((status, body["code"].as_str()), (409, Some("ask_closed")));
    let run = server.wait_run(&id, Some(&runner), Duration::from_secs(60));
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(
        decisions(&server, &id),
        vec![("allow_once".to_owned(), "remote:alice".to_owned())]
    );
    let journal = std::fs::read_to_string(server.journal(&id)).unwrap();
    assert!(journal.contains("after the tool"), "the turn went on");
    assert!(!journal.contains(&approver));
}

#[test]
fn no_answer_in_time_is_denied_fail_safe() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("serve-ask-timeout");
    let server = Server::start(dir.path(), &["--ask-timeout", "1s"]);
    let id = server.submit_script(None, m.pair(), PERMISSION);
    let ask = open_ask(&server, &id, server.admin());
    let run = server.wait_run(&id, None, Duration::from_secs(60));
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(
        decisions(&server, &id),
        vec![("deny".to_owned(), "ask_timeout".to_owned())]
    );
    let path = format!("/v1/runs/{id}/asks/{}", ask["ask_id"].as_str().unwrap());
    let (status, body) = server.json(
        "POST",
        &path,
        None,
        Some(&json!({"decision": "allow_once"})),
    );
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("ask_closed")),
        "{body}"
    );
}

/// The sim asks (as Claude's `AskUserQuestion`: a form of one question whose `oneOf`
/// are its options, answered with an object question -> option). The wrong answers
/// of issue 35 are each `422` naming what the form takes, the ask still open; a right
/// one goes to the agent and the run completes with it.
#[test]
fn a_wrong_answer_is_refused_with_what_the_form_takes_and_the_ask_stays_open() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let runner = add_token(d, "ci", "run");
    let approver = add_token(d, "alice", "approve");
    let m = EnvMarker::new("serve-ask-shape");
    let server = Server::start(d, &["--token-file", "tokens.txt"]);
    let script = "[[turn]]\nsteps = [{ ask = \"Deploy where?\", options = [\"staging\", \"prod\"] }, { say = \"deploying\" }]\n";
    let id = server.submit_script(Some(&runner), m.pair(), script);
    let ask = open_ask(&server, &id, &runner);
    assert_eq!(ask["kind"], "ask", "{ask}");
    let form = ask["form"].clone();
    assert_eq!(
        form["properties"]["Deploy where?"]["oneOf"][1]["const"], "prod",
        "{ask}"
    );
    let path = format!("/v1/runs/{id}/asks/{}", ask["ask_id"].as_str().unwrap());
    for (wrong, said) in [
        (json!({"answer": "yes"}), "an object"),
        (json!({"answer": 5}), "an object"),
        (
            json!({"answer": {"Deploy where?": "moon"}}),
            "one of \"staging\", \"prod\"",
        ),
        (
            json!({"answer": {"Where?": "prod"}}),
            "not a question of this ask",
        ),
        (json!({"decision": "allow_once"}), "not a `decision`"),
        (json!({}), "is required"),
    ] {
        let (status, body) = server.json("POST", &path, Some(&approver), Some(&wrong));
        assert_eq!(
            (status, body["code"].as_str()),
            (422, Some("invalid_answer")),
            "{wrong}: {body}"
        );
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains(said), "{wrong}: {message}");
        assert_eq!(body["expected"]["answer"], form, "{body}");
        let still = open_ask(&server, &id, &runner);
        assert_eq!(
            still["ask_id"], ask["ask_id"],
            "{wrong}: the ask stays open"
        );
    }
    let (_, run) = server.json("GET", &format!("/v1/runs/{id}"), Some(&runner), None);
    assert_eq!(run["sessions"][0]["state"], "input_required", "{run}");
    let (status, body) = server.json(
        "POST",
        &path,
        Some(&approver),
        Some(&json!({"answer": {"Deploy where?": "prod"}})),
    );
    assert_eq!(status, 200, "{body}");
    let run = server.wait_run(&id, Some(&runner), Duration::from_secs(60));
    assert_eq!(run["state"], "completed", "{run}");
    let journal = std::fs::read_to_string(server.journal(&id)).unwrap();
    assert!(journal.contains("answer: prod"), "the agent got the answer");
    assert!(journal.contains("deploying"), "and went on");
    let answers: Vec<Value> = journal_records(&server.journal(&id))
        .into_iter()
        .filter(|r| r["event"]["kind"] == "cap.ask_user.answer")
        .collect();
    assert_eq!(
        answers.len(),
        1,
        "one answer reached the agent: {answers:?}"
    );
}
