//! `capfleet serve --expose` in a trace: an exposed fleet's run continues the
//! caller's `traceparent`, and capfleet drives capfleet — a fleet run by one server
//! whose sessions are agents another server exposes, routed from one to the other, is
//! one trace across both.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::EnvMarker;
use crate::common::a2a::manifest;
use crate::common::chat::assert_no_survivor;
use crate::common::expose::fleet;
use crate::common::otel::{Collector, Tree, kind};
use crate::common::serve::{Server, add_token};

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
        let server = Server::start_env(&d, &["--expose-fleet", "fleet.toml", "--otlp", &otlp], &env);
        let rpc = |body: Value| {
            let traceparent = format!("00-{TRACE}-{SPAN}-01");
            let auth = format!("Bearer {}", server.admin());
            let headers = [
                ("Content-Type", "application/json"),
                ("A2A-Extensions", "cap-protocol/v1"),
                ("traceparent", traceparent.as_str()),
                ("Authorization", auth.as_str()),
            ];
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
    // The caller's span -> the server's `serve.run` (as for a submitted run) -> the
    // engine's run.
    let served = tree.one("serve.run");
    assert_eq!(
        (served.trace_id.as_str(), served.parent_span_id.as_str()),
        (TRACE, SPAN),
        "{:?}",
        tree.names()
    );
    let run = tree.one("fleet.run");
    assert_eq!(
        (run.trace_id.as_str(), run.parent_span_id.as_str()),
        (TRACE, served.span_id.as_str()),
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
        let b = Server::start_env(
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
        let a = Server::start_env(&a_dir2, &["--otlp", &otlp], &a_env);
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
    // The submit request's span is the root: A's run (`serve.run`) starts under it.
    assert_eq!(
        roots,
        ["POST /v1/runs"],
        "A's submission is the root: {:?}",
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
