//! `capfleet serve --expose sim --a2a-plain` against A2A 1.0's rules the official
//! TCK checks (issue 35): the JSON-RPC envelope and a client's message refused
//! before anything runs, `ListTasks` with its filters and cursor pages,
//! `historyLength` counted among what a plain client sees (and never negative),
//! `returnImmediately`, a terminal task refusing messages and subscriptions
//! (`UnsupportedOperation`, sent as SSE to a streaming method), the push-config and
//! extended-card methods' errors, and the card at the root with URLs of the address
//! the server listens on, whatever `Host` says.

use serde_json::{Value, json};

use crate::common::EnvMarker;
use crate::common::expose::{drain, exposing_sim_with, rpc_stream};
use crate::common::fake_llm::http_with;
use crate::common::serve::Server;

/// A JSON-RPC request from a plain A2A client (no CAP extension); the answer.
fn plain(server: &Server, token: &str, body: &Value) -> Value {
    let bearer = format!("Bearer {token}");
    let r = http_with(
        server.port,
        "POST",
        "/a2a/sim/",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &bearer),
        ],
        body.to_string().as_bytes(),
    )
    .expect("the request");
    assert_eq!(r.status, 200, "{}", r.body);
    serde_json::from_str(&r.body).expect("JSON")
}

fn send(id: u64, text: &str, extra: Value) -> Value {
    let mut message =
        json!({"messageId": format!("m{id}"), "role": "ROLE_USER", "parts": [{"text": text}]});
    if let (Some(m), Some(e)) = (message.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "SendMessage", "params": {"message": message}})
}

fn code(answer: &Value) -> Option<i64> {
    answer["error"]["code"].as_i64()
}

fn list(server: &Server, token: &str, params: Value) -> Value {
    plain(
        server,
        token,
        &json!({"jsonrpc": "2.0", "id": "l", "method": "ListTasks", "params": params}),
    )
}

#[test]
fn the_envelope_and_the_message_are_checked_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("a2a-envelope");
    let (server, token) = exposing_sim_with(dir.path(), &m, &["--a2a-plain"]);
    let mut wrong_version = send(1, "hello", json!({}));
    wrong_version["jsonrpc"] = "1.0".into();
    assert_eq!(code(&plain(&server, &token, &wrong_version)), Some(-32600));
    let mut no_method = send(2, "hello", json!({}));
    no_method.as_object_mut().unwrap().remove("method");
    assert_eq!(code(&plain(&server, &token, &no_method)), Some(-32600));
    let mut object_id = send(3, "hello", json!({}));
    object_id["id"] = json!({"bad": "type"});
    let answer = plain(&server, &token, &object_id);
    assert_eq!(
        (code(&answer), &answer["id"]),
        (Some(-32600), &Value::Null),
        "{answer}"
    );
    let mut no_message_id = send(4, "hello", json!({}));
    no_message_id["params"]["message"]
        .as_object_mut()
        .unwrap()
        .remove("messageId");
    assert_eq!(code(&plain(&server, &token, &no_message_id)), Some(-32602));
    let bogus_role = send(5, "hello", json!({"role": "ROLE_BOGUS"}));
    assert_eq!(code(&plain(&server, &token, &bogus_role)), Some(-32602));
    // Nothing of the above ran.
    let none = list(&server, &token, json!({}));
    assert_eq!(none["result"]["totalSize"], 0, "{none}");
    assert_eq!(none["result"]["nextPageToken"], "", "{none}");
    // The push-config methods and the extended card: the spec's errors.
    for (method, expected) in [
        ("CreateTaskPushNotificationConfig", -32003),
        ("tasks/pushNotificationConfig/get", -32003),
        ("ListTaskPushNotificationConfigs", -32003),
        ("GetExtendedAgentCard", -32004),
    ] {
        let req = json!({"jsonrpc": "2.0", "id": 6, "method": method, "params": {"taskId": "t"}});
        assert_eq!(
            code(&plain(&server, &token, &req)),
            Some(expected),
            "{method}"
        );
    }
    // A streaming method's error before its stream is SSE too.
    let mut stream = no_message_id.clone();
    stream["method"] = "SendStreamingMessage".into();
    let events = rpc_stream(server.port, &token, &stream, None);
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(code(&events[0]), Some(-32602), "{events:#?}");
    drain(server, &m);
}

#[test]
fn list_tasks_history_return_immediately_and_terminal_tasks_as_v1_says() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("a2a-tck");
    let (server, token) = exposing_sim_with(dir.path(), &m, &["--a2a-plain"]);
    // A plain client's history window counts only what it is sent: the answer's text,
    // not the CAP-only parts (usage, tool calls) after it.
    let done = plain(&server, &token, &send(1, "hello", json!({})));
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let (first, context) = (
        task["id"].as_str().unwrap().to_owned(),
        task["contextId"].as_str().unwrap().to_owned(),
    );
    let get = |history: i64| {
        json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask",
            "params": {"id": first, "historyLength": history}})
    };
    let one = plain(&server, &token, &get(1));
    let history = one["result"]["history"].as_array().expect("a history");
    assert_eq!(history.len(), 1, "{one}");
    let said: String = history[0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(said, "hello from the sim", "{one}");
    assert_eq!(code(&plain(&server, &token, &get(-1))), Some(-32602));
    // A message to an ended task: UnsupportedOperation; a subscription too, as SSE.
    let again = send(3, "more", json!({"taskId": first, "contextId": context}));
    assert_eq!(code(&plain(&server, &token, &again)), Some(-32004));
    let subscribe =
        json!({"jsonrpc": "2.0", "id": 4, "method": "SubscribeToTask", "params": {"id": first}});
    let events = rpc_stream(server.port, &token, &subscribe, None);
    assert_eq!(code(&events[0]), Some(-32004), "{events:#?}");
    // returnImmediately: the task as it stands, the turn still running.
    let mut quick = send(5, "slow please", json!({}));
    quick["params"]["configuration"] = json!({"returnImmediately": true});
    let started = std::time::Instant::now();
    let answer = plain(&server, &token, &quick);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let slow = answer["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned();
    let state = answer["result"]["task"]["status"]["state"]
        .as_str()
        .unwrap();
    assert!(
        ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"].contains(&state),
        "{answer}"
    );
    // ListTasks: newest first, filters, cursor pages, no artifacts unless asked.
    let all = list(&server, &token, json!({}));
    let ids: Vec<&str> = all["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [slow.as_str(), first.as_str()], "{all}");
    assert!(
        all["result"]["tasks"][1].get("artifacts").is_none(),
        "{all}"
    );
    let with = list(
        &server,
        &token,
        json!({"includeArtifacts": true, "contextId": context}),
    );
    assert_eq!(with["result"]["totalSize"], 1, "{with}");
    assert!(
        with["result"]["tasks"][0]["artifacts"]
            .to_string()
            .contains("# Notes"),
        "{with}"
    );
    let completed = list(&server, &token, json!({"status": "TASK_STATE_COMPLETED"}));
    assert_eq!(
        completed["result"]["tasks"][0]["id"],
        first.as_str(),
        "{completed}"
    );
    assert_eq!(completed["result"]["totalSize"], 1);
    let page = list(&server, &token, json!({"pageSize": 1}));
    assert_eq!(page["result"]["pageSize"], 1);
    let token_next = page["result"]["nextPageToken"].as_str().unwrap().to_owned();
    assert!(!token_next.is_empty(), "{page}");
    let next = list(
        &server,
        &token,
        json!({"pageSize": 1, "pageToken": token_next}),
    );
    assert_eq!(next["result"]["tasks"][0]["id"], first.as_str(), "{next}");
    assert_eq!(next["result"]["nextPageToken"], "", "{next}");
    for bad in [
        json!({"pageToken": "invalid-token-xyz"}),
        json!({"pageSize": 0}),
        json!({"status": "INVALID_STATUS"}),
        json!({"statusTimestampAfter": "-1"}),
        json!({"historyLength": -1}),
    ] {
        assert_eq!(
            code(&list(&server, &token, bad.clone())),
            Some(-32602),
            "{bad}"
        );
    }
    let cancel = json!({"jsonrpc": "2.0", "id": 6, "method": "CancelTask", "params": {"id": slow}});
    let cancelled = plain(&server, &token, &cancel);
    assert_eq!(
        cancelled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{cancelled}"
    );
    drain(server, &m);
}

#[test]
fn the_card_is_at_the_root_and_names_the_listening_address_whatever_host_says() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("a2a-card-root");
    let (server, _token) = exposing_sim_with(dir.path(), &m, &["--a2a-plain"]);
    let expected = format!("http://127.0.0.1:{}/a2a/sim/", server.port);
    // A name the server answers to, but not the address it listens on: the card
    // names the latter (a rebinding page's name is refused before any route).
    let host = format!("Host: localhost:{}", server.port);
    for path in [
        "/.well-known/agent-card.json",
        "/a2a/sim/.well-known/agent-card.json",
    ] {
        let out = std::process::Command::new("curl")
            .args(["-sf", "--max-time", "20", "-H", &host])
            .arg(format!("http://127.0.0.1:{}{path}", server.port))
            .output()
            .expect("curl");
        let body = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{path}: {body}");
        let card: Value = serde_json::from_str(&body).expect("a card");
        assert_eq!(card["name"], "sim", "{card}");
        assert!(!body.contains("localhost"), "{path}: {body}");
        assert_eq!(
            card["supportedInterfaces"][0]["url"],
            expected.as_str(),
            "{card}"
        );
    }
    drain(server, &m);
}
