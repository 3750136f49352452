//! `capfleet serve --expose` on the wire: the card is public and every RPC is
//! authenticated by role (and counted in `/metrics`), both spellings on one URL, a
//! blocking send, a dropped stream read back (`tasks/get`), re-attached
//! (`SubscribeToTask`) and cancelled (`CancelTask`), the drain that cancels a turn
//! in flight after `--drain-timeout` and leaves no agent behind, and a full disk that
//! fails the turn.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::EnvMarker;
use crate::common::chat::assert_no_survivor;
use crate::common::disk::Tmpfs;
use crate::common::expose::{drain, exposing_sim, exposing_sim_with, rpc_stream};
use crate::common::serve::add_token;

#[test]
fn the_card_is_public_and_every_rpc_is_authenticated() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("a2a-auth");
    let reader = add_token(d, "viewer", "read");
    let (server, approver) = exposing_sim(d, &m);
    let (status, card) = server.json("GET", "/a2a/sim/.well-known/agent-card.json", None, None);
    assert_eq!(status, 200, "{card}");
    assert_eq!(card["name"], "sim");
    assert_eq!(
        card["capabilities"]["extensions"][0]["uri"],
        "cap-protocol/v1"
    );
    let interfaces = card["supportedInterfaces"].as_array().unwrap();
    let versions: Vec<&str> = interfaces
        .iter()
        .filter_map(|i| i["protocolVersion"].as_str())
        .collect();
    assert_eq!(versions, ["1.0", "0.3.0"]);
    assert!(
        interfaces[0]["url"]
            .as_str()
            .unwrap()
            .ends_with("/a2a/sim/")
    );
    assert_eq!(
        card["securitySchemes"]["token"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}});
    // Plain A2A (the CAP extension not activated) is refused by default (spec §13.5),
    // and the card says the extension is required.
    assert_eq!(card["capabilities"]["extensions"][0]["required"], true);
    let bearer = format!("Bearer {approver}");
    let plain = crate::common::fake_llm::http_with(
        server.port,
        "POST",
        "/a2a/sim/",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &bearer),
        ],
        send.to_string().as_bytes(),
    )
    .expect("the request");
    let refused: Value = serde_json::from_str(&plain.body).expect("JSON");
    assert_eq!(refused["error"]["code"], -32008, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--a2a-plain")),
        "{refused}"
    );
    let (status, body) = server.json("POST", "/a2a/sim/", None, Some(&send));
    assert_eq!(status, 401, "{body}");
    let (status, _) = server.json("POST", "/a2a/sim/", Some("cft_wrong"), Some(&send));
    assert_eq!(status, 401);
    let (status, body) = server.json("POST", "/a2a/sim/", Some(&reader), Some(&send));
    assert_eq!(status, 403, "a read token cannot send: {body}");
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": "nope"}});
    let (status, body) = server.json("POST", "/a2a/sim/", Some(&reader), Some(&get));
    assert_eq!(
        (status, body["error"]["code"].as_i64()),
        (200, Some(-32001)),
        "{body}"
    );
    let (status, _) = server.json("POST", "/a2a/nobody/", Some(&approver), Some(&get));
    assert_eq!(status, 404);
    // A blocking send in the 1.0 spelling: the task once completed.
    let (status, body) = server.json("POST", "/a2a/sim/", Some(&approver), Some(&send));
    assert_eq!(status, 200, "{body}");
    let task = &body["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
    let id = task["id"].as_str().unwrap();
    let get = json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": id}});
    let (_, body) = server.json("POST", "/a2a/sim/", Some(&reader), Some(&get));
    assert_eq!(body["result"]["kind"], "task", "0.3 spelled: {body}");
    assert_eq!(body["result"]["status"]["state"], "completed");
    let cancel = json!({"jsonrpc": "2.0", "id": 4, "method": "CancelTask", "params": {"id": id}});
    let (_, body) = server.json("POST", "/a2a/sim/", Some(&approver), Some(&cancel));
    assert_eq!(
        body["error"]["code"], -32002,
        "an ended task cannot be cancelled: {body}"
    );
    let metrics = server.request("GET", "/metrics", Some(&reader), "text/plain", b"");
    assert!(
        metrics
            .body
            .contains(r#"capfleet_server_a2a_tasks_total{name="sim",state="completed"} 1"#),
        "{}",
        metrics.body
    );
    assert!(
        metrics.body.contains(r#"route="/a2a/{name}/""#),
        "A2A requests are counted"
    );
    assert!(!server.stderr().contains(&approver) && !server.stderr().contains(&reader));
    drain(server, &m);
}

/// A client whose stream drops mid-turn reads the task back (`tasks/get`), re-attaches
/// (`SubscribeToTask`, the other spelling), and cancels the turn (`CancelTask`): the
/// re-attached stream ends `canceled`, and the context takes its next turn.
#[test]
fn a_dropped_stream_is_read_back_resubscribed_and_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("a2a-resubscribe");
    let (server, token) = exposing_sim(d, &m);
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message":
        {"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "slow please"}]}}});
    // The task, then "started": the connection drops.
    let first = rpc_stream(server.port, &token, &send, Some("started"));
    assert_eq!(first[0]["result"]["kind"], "task", "{first:#?}");
    let task = first[0]["result"]["id"].as_str().unwrap().to_owned();
    let context = first[0]["result"]["contextId"].as_str().unwrap().to_owned();
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task}});
    let (_, got) = server.json("POST", "/a2a/sim/", Some(&token), Some(&get));
    assert_eq!(got["result"]["status"]["state"], "working", "{got}");
    assert!(
        got["result"]["history"].to_string().contains("started"),
        "{got}"
    );
    let port = server.port;
    let (token2, task2) = (token.clone(), task.clone());
    let resubscribed = std::thread::spawn(move || {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "SubscribeToTask", "params": {"id": task2}});
        rpc_stream(port, &token2, &body, None)
    });
    std::thread::sleep(Duration::from_millis(300));
    let cancel = json!({"jsonrpc": "2.0", "id": 4, "method": "CancelTask", "params": {"id": task}});
    let (status, cancelled) = server.json("POST", "/a2a/sim/", Some(&token), Some(&cancel));
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(
        cancelled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{cancelled}"
    );
    let events = resubscribed.join().unwrap();
    assert_eq!(
        events[0]["result"]["task"]["status"]["state"], "TASK_STATE_WORKING",
        "{events:#?}"
    );
    let last = &events.last().unwrap()["result"]["statusUpdate"]["status"]["state"];
    assert_eq!(last, "TASK_STATE_CANCELED", "{events:#?}");
    assert!(!events.iter().any(|e| e.to_string().contains("never")));
    // The context goes on: its next turn.
    let next = json!({"jsonrpc": "2.0", "id": 5, "method": "message/send", "params": {"message":
        {"kind": "message", "messageId": "m2", "role": "user", "contextId": context,
         "parts": [{"kind": "text", "text": "hello"}]}}});
    let (_, done) = server.json("POST", "/a2a/sim/", Some(&token), Some(&next));
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
    assert_eq!(done["result"]["contextId"], context.as_str());
    drain(server, &m);
}

/// SIGTERM with an exposed turn in flight: the turn goes on for `--drain-timeout`,
/// then is cancelled (its stream ends `canceled`); the server exits 0, no agent left,
/// and took no new message meanwhile.
#[test]
fn the_drain_cancels_an_exposed_turn_after_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("a2a-drain");
    let (mut server, token) = exposing_sim_with(d, &m, &["--drain-timeout", "1s"]);
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message":
        {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "slow please"}]}}});
    let first = rpc_stream(server.port, &token, &send, Some("started"));
    let task = first[0]["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let port = server.port;
    let token2 = token.clone();
    let watched = std::thread::spawn(move || {
        let body =
            json!({"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task}});
        rpc_stream(port, &token2, &body, None)
    });
    std::thread::sleep(Duration::from_millis(200));
    server.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(200));
    let hello = json!({"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message":
        {"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}});
    let (status, refused) = server.json("POST", "/a2a/sim/", Some(&token), Some(&hello));
    assert_eq!(status, 503, "no new message while draining: {refused}");
    let events = watched.join().unwrap();
    let last = &events.last().unwrap()["result"]["statusUpdate"]["status"]["state"];
    assert_eq!(last, "TASK_STATE_CANCELED", "{events:#?}");
    let status = server.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
    assert_no_survivor(&m);
}

/// A full disk under an exposed agent (its journal on a 256 KiB tmpfs, a turn that
/// floods it): the turn fails saying so, the agent takes no further message, and the
/// drain still leaves no agent behind — a failed write is a failed turn.
#[test]
fn a_full_disk_fails_the_exposed_turn_loudly() {
    let disk = match Tmpfs::mount("256k", "") {
        Ok(t) => t,
        Err(why) => {
            eprintln!("no tmpfs ({why}): the journal fault is checked by disk::");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("a2a-full-disk");
    let data = disk.path().to_str().unwrap();
    let (server, token) = exposing_sim_with(d, &m, &["--data-dir", data]);
    let send = |text: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message":
            {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": text}]}}});
        server
            .json("POST", "/a2a/sim/", Some(&token), Some(&body))
            .1
    };
    let flooded = send("flood please");
    let status = &flooded["result"]["task"]["status"];
    assert_eq!(status["state"], "TASK_STATE_FAILED", "{flooded}");
    let why = status["message"]["parts"][0]["text"].as_str().unwrap_or("");
    assert!(
        why.contains("journal failed") && why.contains("No space left on device"),
        "{why}"
    );
    let refused = send("hello");
    let message = refused["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("stopped: its journal failed"), "{refused}");
    drain(server, &m);
}
