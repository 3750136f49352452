//! `capfleet serve --expose` against real A2A clients: the official Python SDK
//! (a2a-sdk 1.3.0, `tests/support/a2a_py_client.py`) and JS SDK (@a2a-js/sdk 1.3.0,
//! `a2a_js_client.mjs`) each stream turns of an exposed sim agent — text, a tool call
//! as a marked data part, an artifact, usage on the completed state, the next turn in
//! the same context — in the 1.0 and 0.3 spellings, answer a permission the agent asks
//! through `input-required`, and run an exposed fleet (the answer its start session's
//! text, the usage the fleet's, a session's permission the task's `input-required`). Every RPC is authenticated (the card is public), and
//! the drain leaves no agent behind. And capfleet drives capfleet: a fleet run by one
//! server whose sessions are agents another server exposes, routed from one to the
//! other, in one trace across both.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::a2a::{ClientRun, Sdk, manifest, sdk_client};
use crate::common::chat::assert_no_survivor;
use crate::common::otel::{Collector, Tree, kind};
use crate::common::serve::{Server, add_token};
use crate::common::{EnvMarker, journal_records};

const SCRIPT: &str = r##"
[[turn]]
match = "permission"
steps = [{ say = "checking " }, { permission = "Bash", input = { command = "echo hi" }, risk = "high" }, { say = "after the tool" }, { usage = { input_tokens = 7, output_tokens = 3 } }]

[[turn]]
match = "slow"
steps = [{ say = "started" }, { sleep_ms = 30000 }, { say = "never" }]

[[turn]]
steps = [{ say = "hello from the sim", chunk = 5 }, { tool = "Bash", input = { command = "ls" }, output = "a" }, { artifact = "notes.md", mime_type = "text/markdown", content = "# Notes" }, { usage = { input_tokens = 5, output_tokens = 2 } }]

[[turn]]
steps = [{ say = "second turn" }]
"##;

/// A server exposing the sim (playing [`SCRIPT`]) with tokens; its approver's token.
fn exposing_sim(d: &Path, marker: &EnvMarker) -> (Server, String) {
    exposing_sim_with(d, marker, &[])
}

/// [`exposing_sim`] with `extra` flags.
fn exposing_sim_with(d: &Path, marker: &EnvMarker, extra: &[&str]) -> (Server, String) {
    std::fs::write(d.join("script.toml"), SCRIPT).unwrap();
    let token = add_token(d, "alice", "approve");
    let script = d.join("script.toml");
    let script = script.to_str().unwrap();
    let mut args = vec!["--token-file", "tokens.txt", "--expose", "sim"];
    args.extend_from_slice(extra);
    let server = Server::start_with(d, &args, &[("CAPFLEET_SIM_SCRIPT", script), marker.pair()]);
    (server, token)
}

fn url(server: &Server, name: &str) -> String {
    format!("http://127.0.0.1:{}/a2a/{name}", server.port)
}

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

/// The exposed tree's journal: the permission decisions (decision, rule).
fn decisions(d: &Path) -> Vec<(String, String)> {
    let dir = d.join(".capfleet/a2a");
    let mut out = Vec::new();
    for f in std::fs::read_dir(&dir).expect("the a2a journals") {
        for r in journal_records(&f.unwrap().path()) {
            let e = &r["event"];
            if e["kind"] == "cap.permission.response" {
                out.push((
                    e["decision"].as_str().unwrap_or("").to_owned(),
                    e["_meta"]["capfleet.rule"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                ));
            }
        }
    }
    out
}

/// SIGTERM: the server drains, exits 0, and no agent it started is left.
fn drain(mut server: Server, marker: &EnvMarker) {
    server.signal(libc::SIGTERM);
    let status = server.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
    assert_no_survivor(marker);
}

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

/// A JSON-RPC streaming request read by curl (a real SSE client): each event's data,
/// until one contains `cut_at` (then the connection is cut) or the stream's end.
fn rpc_stream(port: u16, token: &str, body: &Value, cut_at: Option<&str>) -> Vec<Value> {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new("curl")
        .args(["-sN", "--max-time", "60", "-X", "POST"])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args([
            "-H",
            "Content-Type: application/json",
            "-d",
            &body.to_string(),
        ])
        .arg(format!("http://127.0.0.1:{port}/a2a/sim/"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("curl");
    let mut events = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
    {
        if let Some(data) = line.strip_prefix("data:") {
            events.push(serde_json::from_str(data.trim()).expect("an event is JSON"));
            if cut_at.is_some_and(|c| data.contains(c)) {
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    events
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
    let (server, token) = exposing_sim(d, &m);
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
    let (server, token) = exposing_sim(d, &m);
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

/// A fleet of two sim sessions: `lead` (started) answers, then the route hands its
/// answer to `helper`.
fn fleet(d: &Path, marker: &EnvMarker) {
    std::fs::write(
        d.join("lead.toml"),
        "[[turn]]\nsteps = [{ say = \"the fleet's answer\" }, { usage = { input_tokens = 4, output_tokens = 1 } }]\n",
    )
    .unwrap();
    std::fs::write(
        d.join("helper.toml"),
        "[[turn]]\nsteps = [{ tool = \"Read\", input = { path = \"x\" }, output = \"y\" }, { permission = \"Bash\", input = { command = \"rm -rf build\" }, risk = \"high\" }, { say = \"helper done\" }, { usage = { input_tokens = 6, output_tokens = 2 } }]\n",
    )
    .unwrap();
    let (k, v) = marker.pair();
    std::fs::write(
        d.join("fleet.toml"),
        format!(
            "[fleet]\nname = \"pair\"\nstart = [\"lead\"]\ntask = \"unused\"\n\n\
             [[sessions]]\nname = \"lead\"\nagent = \"sim\"\nscript = \"lead.toml\"\nenv = {{ {k} = \"{v}\" }}\n\n\
             [[sessions]]\nname = \"helper\"\nagent = \"sim\"\nscript = \"helper.toml\"\nenv = {{ {k} = \"{v}\" }}\n\n\
             [[routes]]\nwhen = \"lead.done\"\nroute_to = \"helper\"\n"
        ),
    )
    .unwrap();
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

/// A message to an exposed fleet carrying a W3C `traceparent`: the run's span is a
/// child of the caller's span, in the caller's trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exposed_fleets_run_continues_the_callers_trace() {
    const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
    const SPAN: &str = "b7ad6b7169203331";
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_owned();
    let m = EnvMarker::new("a2a-fleet-trace");
    fleet(&d, &m);
    let otlp = collector.endpoint().to_owned();
    let mut server = tokio::task::spawn_blocking(move || {
        let env = [("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")];
        let server = Server::start_with(&d, &["--expose-fleet", "fleet.toml", "--otlp", &otlp], &env);
        let rpc = |body: Value| {
            let traceparent = format!("00-{TRACE}-{SPAN}-01");
            let headers = [("Content-Type", "application/json"), ("traceparent", traceparent.as_str())];
            let r = crate::common::fake_llm::http_with(server.port, "POST", "/a2a/pair/", &headers, body.to_string().as_bytes())
                .expect("the request");
            serde_json::from_str::<Value>(&r.body).expect("JSON")
        };
        let asked = rpc(json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message":
            {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "traced"}]}}}));
        let task = &asked["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{asked}");
        let done = rpc(json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message":
            {"messageId": "m2", "role": "ROLE_USER", "taskId": task["id"], "contextId": task["contextId"],
             "parts": [{"text": "deny"}]}}}));
        assert_eq!(done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
        server
    })
    .await
    .unwrap();
    server.signal(libc::SIGTERM);
    assert_eq!(server.wait(Duration::from_secs(30)).code(), Some(0));
    let tree = collector.spans().await;
    let run = tree.one("fleet.run");
    assert_eq!(
        (run.trace_id.as_str(), run.parent_span_id.as_str()),
        (TRACE, SPAN),
        "{:?}",
        tree.names()
    );
    assert_no_survivor(&m);
}

/// The spans of `tree` in trace `trace`, by kind.
fn in_trace<'a>(
    tree: &'a Tree,
    trace: &str,
    k: &str,
) -> Vec<&'a crate::common::otel::ExportedSpan> {
    tree.spans
        .iter()
        .filter(|s| s.trace_id == trace && kind(s) == k)
        .collect()
}

/// capfleet drives capfleet: server A runs a fleet whose two sessions are A2A peers
/// that server B exposes (`--expose sim`, tokens), routed from the first to the
/// second; the trace of A's run contains B's sessions and turns, each B context a
/// child of the A turn that sent its message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_agents_another_server_exposes_is_one_trace() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a_dir).unwrap();
    std::fs::create_dir_all(&b_dir).unwrap();
    let m = EnvMarker::new("a2a-two-servers");
    std::fs::write(b_dir.join("script.toml"), "[[turn]]\nsteps = [{ say = \"remote says hi\" }, { usage = { input_tokens = 3, output_tokens = 1 } }]\n").unwrap();
    let b_token = add_token(&b_dir, "server-a", "run");
    let otlp = collector.endpoint().to_owned();
    let b_script = b_dir.join("script.toml");
    let (a_dir2, b_dir2, b_token2, m2) = (
        a_dir.clone(),
        b_dir.clone(),
        b_token.clone(),
        m.value.clone(),
    );
    let (mut a, mut b, run) = tokio::task::spawn_blocking(move || {
        let otel = [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            (EnvMarker::KEY, m2.as_str()),
        ];
        let mut b_env = otel.to_vec();
        b_env.push(("CAPFLEET_SIM_SCRIPT", b_script.to_str().unwrap()));
        let b = Server::start_with(
            &b_dir2,
            &[
                "--token-file",
                "tokens.txt",
                "--expose",
                "sim",
                "--otlp",
                &otlp,
            ],
            &b_env,
        );
        let remote = manifest(
            &a_dir2,
            &format!("http://127.0.0.1:{}/a2a/sim/", b.port),
            "[x-a2a]\nsecret_env = \"B_TOKEN\"\n",
        );
        let mut a_env = otel.to_vec();
        a_env.push(("B_TOKEN", b_token2.as_str()));
        let a = Server::start_with(&a_dir2, &["--otlp", &otlp], &a_env);
        let fleet = format!(
            "[fleet]\nname = \"across\"\nstart = [\"first\"]\ntask = \"hello over there\"\n\n\
             [[sessions]]\nname = \"first\"\nagent = \"{0}\"\n\n\
             [[sessions]]\nname = \"second\"\nagent = \"{0}\"\n\n\
             [[routes]]\nwhen = \"first.done\"\nroute_to = \"second\"\n",
            remote.display()
        );
        let created = a.submit(None, &crate::common::serve::submission(&fleet, &[]));
        let id = created["id"].as_str().unwrap().to_owned();
        let run = a.wait_run(&id, None, Duration::from_secs(60));
        (a, b, run)
    })
    .await
    .unwrap();
    assert_eq!(
        run["state"],
        "completed",
        "{run}\n{}\n{}",
        a.stderr(),
        b.stderr()
    );
    for s in [&mut a, &mut b] {
        s.signal(libc::SIGTERM);
        assert_eq!(
            s.wait(Duration::from_secs(30)).code(),
            Some(0),
            "{}",
            s.stderr()
        );
    }
    assert!(!a.stderr().contains(&b_token), "the token shows nowhere");
    let tree = collector.spans().await;
    let contexts: Vec<_> = tree
        .spans
        .iter()
        .filter(|s| s.name == "a2a context sim")
        .collect();
    assert_eq!(
        contexts.len(),
        2,
        "one context per remote session: {:?}",
        tree.names()
    );
    let trace = contexts[0].trace_id.clone();
    let roots: Vec<&str> = tree
        .spans
        .iter()
        .filter(|s| s.trace_id == trace && s.parent_span_id.is_empty())
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(
        roots,
        ["serve.run"],
        "A's run is the root: {:?}",
        tree.names()
    );
    assert_eq!(
        in_trace(&tree, &trace, "fleet.run").len(),
        1,
        "{:?}",
        tree.names()
    );
    let a_turns = in_trace(&tree, &trace, "turn");
    for c in &contexts {
        assert_eq!(c.trace_id, trace, "B's context continues A's trace");
        let parent = tree.parent(c).expect("a parent in A");
        assert_eq!(kind(parent), "turn", "the A turn that sent the message");
    }
    // A's two turns and B's two, all in the one trace.
    assert_eq!(a_turns.len(), 4, "{:?}", tree.names());
    assert_eq!(
        in_trace(&tree, &trace, "session").len(),
        4,
        "{:?}",
        tree.names()
    );
    drop((a, b));
    assert_no_survivor(&m);
}
