//! `capfleet serve --expose` against real A2A clients: the official Python SDK
//! (a2a-sdk 1.3.0, `tests/support/a2a_py_client.py`) and JS SDK (@a2a-js/sdk 1.3.0,
//! `a2a_js_client.mjs`) each stream turns of an exposed sim agent — text, a tool call
//! as a marked data part, an artifact, usage on the completed state, the next turn in
//! the same context — in the 1.0 and 0.3 spellings, answer a permission the agent asks
//! through `input-required`, and run an exposed fleet (the answer its start session's
//! text, the usage the fleet's, a session's permission the task's `input-required`).
//! The Python SDK's client also sends what A2A 1.0's rules (issue 35, the TCK's
//! points) govern and a client can send: `returnImmediately`, `ListTasks` with its
//! filters and pages, `historyLength`, refused messages, the push-config and
//! extended-card methods, the root card; each error surfaces as the SDK's own type.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::a2a::{ClientRun, Sdk, sdk_client, sdk_conformance};
use crate::common::expose::{decisions, drain, exposing_sim_with, fleet, url};
use crate::common::serve::{Server, add_token};
use crate::common::{EnvMarker, journal_records};

/// The lines of turn `turn`.
fn turn(lines: &[Value], turn: u64) -> Vec<&Value> {
    lines.iter().filter(|l| l["turn"] == turn).collect()
}

/// The text the stream responses of `lines` said, in order.
fn said(lines: &[&Value]) -> String {
    lines
        .iter()
        .filter(|l| l["kind"] == "status")
        .flat_map(|l| l["texts"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect()
}

/// The CAP kinds of the marked data parts of `lines`.
fn cap_kinds<'a>(lines: &[&'a Value]) -> Vec<&'a str> {
    lines
        .iter()
        .flat_map(|l| l["data"].as_array().into_iter().flatten())
        .filter_map(|d| d["_meta"]["cap.kind"].as_str())
        .collect()
}

/// The last state of `lines`, and its line.
fn last_state<'a>(lines: &[&'a Value]) -> &'a Value {
    lines
        .iter()
        .rev()
        .find(|l| l["state"].is_string())
        .copied()
        .expect("a state")
}

/// Two turns in one context with the extension: text, a tool call, an artifact,
/// usage on the completed state; the task read back.
fn assert_two_turns(lines: &[Value]) {
    let first = turn(lines, 0);
    assert_eq!(said(&first), "hello from the sim", "{lines:#?}");
    assert!(
        cap_kinds(&first).contains(&"cap.tool_call.start"),
        "{first:#?}"
    );
    assert!(
        cap_kinds(&first).contains(&"cap.tool_call.end"),
        "{first:#?}"
    );
    let artifact = first
        .iter()
        .find(|l| l["kind"] == "artifact")
        .expect("an artifact");
    assert_eq!(artifact["texts"][0], "# Notes");
    let end = last_state(&first);
    assert_eq!(end["state"], "completed", "{first:#?}");
    let usage = end["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["_meta"]["cap.kind"] == "cap.usage");
    assert_eq!(
        usage.expect("usage on the completed state")["input_tokens"].as_f64(),
        Some(5.0)
    );
    let got = first
        .iter()
        .find(|l| l.get("got").is_some())
        .expect("GetTask");
    assert_eq!(got["got"]["state"], "completed");
    assert_eq!(got["got"]["artifacts"], 1);
    assert!(got["got"]["texts"].to_string().contains("hello"), "{got}");
    let second = turn(lines, 1);
    assert_eq!(said(&second), "second turn");
    assert_eq!(last_state(&second)["state"], "completed");
    let context = |l: &[&Value]| {
        l.iter()
            .find_map(|x| x["context"].as_str().map(str::to_owned))
    };
    assert_eq!(context(&first), context(&second), "one context, two turns");
    let task = |l: &[&Value]| l.iter().find_map(|x| x["task"].as_str().map(str::to_owned));
    assert_ne!(task(&first), task(&second), "a task per turn");
}

/// A permission asked through `input-required`, answered allow_once: the tool ran.
fn assert_permission_round_trip(lines: &[Value], extension: bool) {
    let all: Vec<&Value> = lines.iter().collect();
    let waited = all
        .iter()
        .find(|l| l["state"] == "input-required")
        .expect("input-required");
    assert!(said(&[waited]).contains("Allow Bash"), "{waited}");
    let answered = all
        .iter()
        .find(|l| l.get("answered").is_some())
        .expect("answered");
    if extension {
        assert_eq!(answered["answered"]["tool"], "Bash", "{answered}");
    }
    assert!(said(&all).contains("after the tool"), "{lines:#?}");
    assert_eq!(last_state(&all)["state"], "completed");
}

/// `sdk`'s client against `server`'s exposed sim: `prompts` in one context, each
/// task read back, an `input-required` answered with `answer`.
fn sim_client(
    sdk: Sdk,
    server: &Server,
    token: &str,
    spelling: &str,
    extension: bool,
    answer: &str,
    prompts: &[&str],
) -> Vec<Value> {
    sdk_client(
        sdk,
        &ClientRun {
            url: &url(server, "sim"),
            token: Some(token),
            spelling,
            extension,
            answer,
            get: true,
            prompts,
        },
    )
}

#[test]
fn the_python_sdk_streams_turns_and_answers_a_permission_in_both_spellings() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("a2a-py-client");
    // Its runs without the extension are plain A2A, which only --a2a-plain serves.
    let (server, token) = exposing_sim_with(d, &m, &["--a2a-plain"]);
    let run = |spelling, extension, prompts: &[&str]| {
        sim_client(
            Sdk::Python,
            &server,
            &token,
            spelling,
            extension,
            "allow_once",
            prompts,
        )
    };
    assert_two_turns(&run("1.0", true, &["hello", "again"]));
    assert_permission_round_trip(&run("1.0", true, &["permission please"]), true);
    // An ask, answered with the client's text.
    let asked = sim_client(
        Sdk::Python,
        &server,
        &token,
        "1.0",
        true,
        "blue",
        &["ask me"],
    );
    let all: Vec<&Value> = asked.iter().collect();
    let waited = all
        .iter()
        .find(|l| l["state"] == "input-required")
        .expect("input-required");
    assert_eq!(said(&[waited]), "Which colour?", "{asked:#?}");
    assert!(cap_kinds(&[waited]).contains(&"cap.ask_user"), "{waited}");
    // The sim's AskUserQuestion tool ends with the answer.
    let ended = all
        .iter()
        .flat_map(|l| l["data"].as_array().into_iter().flatten())
        .find(|d| d["_meta"]["cap.kind"] == "cap.tool_call.end")
        .expect("the ask's tool call ended");
    assert_eq!(ended["output"], "answer: blue", "{asked:#?}");
    assert_eq!(last_state(&all)["state"], "completed");
    // 0.3 through the SDK's compat transport, without the extension: text and
    // states only, no CAP data part.
    let plain = run("0.3", false, &["hello"]);
    let all: Vec<&Value> = plain.iter().collect();
    assert_eq!(said(&all), "hello from the sim", "{plain:#?}");
    assert!(cap_kinds(&all).is_empty(), "{plain:#?}");
    assert_eq!(last_state(&all)["state"], "completed");
    let allowed = vec![("allow_once".to_owned(), "a2a:alice".to_owned())];
    assert_eq!(decisions(d), allowed);
    drain(server, &m);
}

#[test]
fn the_js_sdk_streams_turns_and_answers_a_permission_in_both_spellings() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("a2a-js-client");
    // Its runs without the extension are plain A2A, which only --a2a-plain serves.
    let (server, token) = exposing_sim_with(d, &m, &["--a2a-plain"]);
    let two = sim_client(
        Sdk::Js,
        &server,
        &token,
        "1.0",
        true,
        "allow_once",
        &["hello", "again"],
    );
    assert_two_turns(&two);
    // A 0.3 client without the extension answers the question with text.
    let asked = sim_client(
        Sdk::Js,
        &server,
        &token,
        "0.3",
        false,
        "allow",
        &["permission please"],
    );
    assert_permission_round_trip(&asked, false);
    let allowed = vec![("allow_once".to_owned(), "a2a:alice".to_owned())];
    assert_eq!(decisions(d), allowed);
    drain(server, &m);
}

#[test]
fn both_sdks_run_an_exposed_fleet() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("a2a-fleet");
    fleet(d, &m);
    let token = add_token(d, "ci", "approve");
    let server = Server::start(
        d,
        &["--token-file", "tokens.txt", "--expose-fleet", "fleet.toml"],
    );
    let url = url(&server, "pair");
    for (sdk, spelling) in [(Sdk::Python, "1.0"), (Sdk::Js, "0.3")] {
        let lines = sdk_client(
            sdk,
            &ClientRun {
                url: &url,
                token: Some(&token),
                spelling,
                extension: true,
                answer: "deny",
                get: false,
                prompts: &["review the change"],
            },
        );
        let all: Vec<&Value> = lines.iter().collect();
        let end = last_state(&all);
        assert_eq!(end["state"], "completed", "{sdk:?}: {lines:#?}");
        assert_eq!(end["texts"][0], "the fleet's answer", "{sdk:?}");
        let usage = end["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["_meta"]["cap.kind"] == "cap.usage");
        let usage = usage.expect("the fleet's usage");
        assert_eq!(
            usage["input_tokens"].as_f64(),
            Some(10.0),
            "both sessions' usage: {usage}"
        );
        // The helper's tool call streamed, marked with its session.
        let tool = all
            .iter()
            .flat_map(|l| l["data"].as_array().into_iter().flatten())
            .find(|d| d["_meta"]["cap.kind"] == "cap.tool_call.start")
            .unwrap_or_else(|| panic!("{sdk:?}: {lines:#?}"));
        assert_eq!(tool["_meta"]["capfleet.session"], "helper");
        // The helper's permission was the task's input-required, denied by the client.
        let answered = all
            .iter()
            .find_map(|l| l.get("answered"))
            .expect("input-required");
        assert_eq!(answered["tool"], "Bash", "{sdk:?}: {lines:#?}");
        // The task is a run of the server, its task the message.
        let run_id = all.iter().find_map(|l| l["task"].as_str()).unwrap();
        let run = server.wait_run(run_id, Some(&token), Duration::from_secs(10));
        assert_eq!(run["state"], "completed", "{run}");
        let journal = std::fs::read_to_string(server.journal(run_id)).unwrap();
        assert!(
            journal.contains("review the change"),
            "the message is the run's task"
        );
        let denied = journal_records(&server.journal(run_id))
            .into_iter()
            .filter(|r| r["event"]["kind"] == "cap.permission.response")
            .map(|r| r["event"]["decision"].as_str().unwrap_or("").to_owned())
            .collect::<Vec<_>>();
        assert_eq!(denied, ["deny"], "{sdk:?}");
    }
    drain(server, &m);
}

/// The check `name` of `lines` (the Python client's `--conformance` output).
fn check<'a>(lines: &'a [Value], name: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["check"] == name)
        .unwrap_or_else(|| panic!("no check `{name}`: {lines:#?}"))
}

/// The text of a task's history, joined.
fn history_text(seen: &Value) -> String {
    seen["texts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

#[test]
fn the_python_sdk_sends_what_a2a_1_0_governs_and_gets_its_errors_as_its_types() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("a2a-py-conformance");
    let (server, token) = exposing_sim_with(dir.path(), &m, &["--a2a-plain"]);
    let lines = sdk_conformance(&url(&server, "sim"), &token);
    let refused = |name: &str, error: &str, code: i64| {
        let l = check(&lines, name);
        assert_eq!(
            (l["error"].as_str(), l["code"].as_i64()),
            (Some(error), Some(code)),
            "{l}"
        );
    };
    let done = check(&lines, "blocking");
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(history_text(done), "hello from the sim", "{done}");
    // returnImmediately: the task as it stands, its turn (30 s of sleep) still running.
    let slow = check(&lines, "return_immediately");
    assert!(
        ["submitted", "working"].contains(&slow["state"].as_str().unwrap_or("")),
        "{slow}"
    );
    assert!(slow["seconds"].as_f64().unwrap() < 10.0, "{slow}");
    // A message without a messageId or a role, one to an ended task (and a
    // subscription to it, the error an SSE event): refused, nothing run.
    refused("no_message_id", "InvalidParamsError", -32602);
    refused("no_role", "InvalidParamsError", -32602);
    refused("send_to_terminal", "UnsupportedOperationError", -32004);
    refused("subscribe_to_terminal", "UnsupportedOperationError", -32004);
    // ListTasks: by context, pages newest first, by state with artifacts.
    let by_context = check(&lines, "list_by_context");
    assert_eq!(by_context["tasks"], json!([slow["task"]]), "{by_context}");
    assert_eq!(by_context["total"], 1, "{by_context}");
    let page = check(&lines, "list_page");
    assert_eq!(page["tasks"], json!([slow["task"]]), "{page}");
    assert_eq!(
        (&page["total"], &page["page_size"]),
        (&json!(2), &json!(1)),
        "{page}"
    );
    assert_ne!(page["next"], "", "{page}");
    let next = check(&lines, "list_next_page");
    assert_eq!(next["tasks"], json!([done["task"]]), "{next}");
    assert_eq!(next["next"], "", "{next}");
    let completed = check(&lines, "list_completed");
    assert_eq!(completed["tasks"], json!([done["task"]]), "{completed}");
    assert_eq!(completed["artifacts"], json!([1]), "{completed}");
    refused("list_bad_token", "InvalidParamsError", -32602);
    // historyLength counts what a plain client is sent, and is never negative.
    let one = check(&lines, "get_history_1");
    assert_eq!(one["history"], 1, "{one}");
    assert_eq!(history_text(one), "hello from the sim", "{one}");
    refused("get_history_negative", "InvalidParamsError", -32602);
    for name in ["push_create", "push_get", "push_list", "push_delete"] {
        refused(name, "PushNotificationNotSupportedError", -32003);
    }
    // The card declares no extended card (the SDK then answers with it, sending
    // nothing); asked anyway, the server says UnsupportedOperation.
    let undeclared = check(&lines, "extended_card_undeclared");
    assert_eq!(undeclared["answer"]["name"], "sim", "{undeclared}");
    let declared = &undeclared["answer"]["capabilities"]["extendedAgentCard"];
    assert!(
        matches!(declared, Value::Null | Value::Bool(false)),
        "{undeclared}"
    );
    refused("extended_card", "UnsupportedOperationError", -32004);
    // The card at the root, naming the address the server listens on.
    let root = check(&lines, "root_card");
    let expected = format!("http://127.0.0.1:{}/a2a/sim/", server.port);
    assert_eq!(
        root["answer"]["supportedInterfaces"][0]["url"],
        expected.as_str(),
        "{root}"
    );
    let cancelled = check(&lines, "cancel");
    assert_eq!(
        cancelled["answer"]["status"]["state"], "TASK_STATE_CANCELED",
        "{cancelled}"
    );
    drain(server, &m);
}
