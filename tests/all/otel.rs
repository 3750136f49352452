//! `capfleet run` exporting its trace to a real OTLP receiver: the in-process collector
//! of `fake-opentelemetry-collector` over gRPC, and a plain HTTP/protobuf endpoint.
//! The demo fleet (a crash and restart, a permission decided by policy, routes and a
//! mention) must arrive as one tree; the budget exit and Ctrl-C must lose nothing; a
//! dead endpoint must not hold the fleet up.

use std::path::Path;
use std::time::{Duration, Instant};

use common::otel::{
    Collector, ExportedSpan, Tree, attr, capfleet, check_trace, demo, failing_fleet, finish, kind,
};

use crate::common;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn session_named<'a>(t: &'a Tree, name: &str) -> &'a ExportedSpan {
    t.named("session")
        .into_iter()
        .find(|s| attr(s, "cap.session.name") == name)
        .unwrap_or_else(|| panic!("a session span for {name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_fleet_is_one_trace_over_grpc_with_restarts_and_genai_attributes() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = capfleet(dir.path());
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_SERVICE_NAME", "capfleet-test")
        .arg("run")
        .arg(demo())
        .args(["--otlp", collector.endpoint()]);
    let out = finish(cmd, Duration::from_secs(60)).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let t = collector.spans().await;

    // One trace, rooted at fleet.run; ractor's own per-actor spans stay out of it.
    assert!(t.named("Actor").is_empty(), "{:?}", t.names());
    let run = t.one("fleet.run");
    assert_eq!(run.parent_span_id, "", "fleet.run is the root");
    // Named and attributed per the GenAI conventions, and every span as long as its work.
    assert_eq!(run.name, "invoke_workflow demo");
    assert_eq!(attr(run, "gen_ai.workflow.name"), "demo");
    check_trace(&t.nodes());
    assert!(
        t.spans.iter().all(|s| s.trace_id == run.trace_id),
        "one trace"
    );
    assert_eq!(attr(run, "cap.fleet"), "demo");
    assert_eq!(attr(run, "cap.run.outcome"), "completed");

    // run -> session -> turn -> tool call, for every session.
    let sessions = t.named("session");
    assert_eq!(sessions.len(), 4, "{:?}", t.names());
    for s in &sessions {
        assert_eq!(s.parent_span_id, run.span_id, "session under the run");
        let name = attr(s, "cap.session.name");
        assert_eq!(s.name, name, "a session span is named after its session");
        assert_eq!(attr(s, "gen_ai.agent.name"), name);
        assert_eq!(attr(s, "gen_ai.agent.id"), attr(s, "cap.session.urn"));
        assert_eq!(attr(s, "cap.agent.type"), "sim");
        assert_eq!(attr(s, "gen_ai.provider.name"), "stream_json");
        assert_eq!(attr(s, "cap.binding"), "stream_json");
        assert_eq!(attr(s, "cap.session.state"), "closed");
        assert!(
            !t.children(s, "turn").is_empty(),
            "{} ran a turn",
            attr(s, "cap.session.name")
        );
    }
    for turn in t.named("turn") {
        let session = t.parent(turn).expect("a turn has its session");
        assert_eq!(kind(session), "session");
        assert_eq!(attr(turn, "gen_ai.operation.name"), "invoke_agent");
        assert_eq!(turn.name, format!("invoke_agent {}", session.name));
        for key in [
            "gen_ai.agent.name",
            "gen_ai.agent.id",
            "gen_ai.provider.name",
        ] {
            assert_eq!(attr(turn, key), attr(session, key), "{key}");
        }
        assert!(!attr(turn, "gen_ai.conversation.id").is_empty());
        for key in [
            "gen_ai.usage.cache_read.input_tokens",
            "gen_ai.usage.cache_creation.input_tokens",
        ] {
            attr(turn, key).parse::<u64>().unwrap();
        }
        assert!(
            attr(turn, "gen_ai.usage.input_tokens")
                .parse::<u64>()
                .unwrap()
                > 0
        );
        assert!(
            attr(turn, "gen_ai.usage.output_tokens")
                .parse::<u64>()
                .unwrap()
                > 0
        );
        assert!(attr(turn, "gen_ai.response.model").starts_with("sim-"));
        assert_eq!(
            attr(turn, "gen_ai.response.finish_reasons"),
            r#"["end_turn"]"#
        );
        assert!(attr(turn, "cap.cost_usd").parse::<f64>().unwrap() > 0.0);
        assert!(attr(turn, "cap.prompt.bytes").parse::<u64>().unwrap() > 0);
        // The route that delivered the prompt is linked.
        let linked: Vec<&ExportedSpan> = turn
            .links
            .iter()
            .filter_map(|l| t.spans.iter().find(|s| s.span_id == l.span_id))
            .collect();
        assert!(
            linked.iter().any(|r| r.name == "route"),
            "turn links to its route: {:?}",
            turn.links
        );
    }
    let tools = t.named("tool_call");
    assert!(!tools.is_empty());
    for tool in &tools {
        assert_eq!(t.parent(tool).map(kind), Some("turn"));
        assert_eq!(attr(tool, "gen_ai.operation.name"), "execute_tool");
        assert!(!attr(tool, "gen_ai.tool.name").is_empty());
        assert_eq!(
            tool.name,
            format!("execute_tool {}", attr(tool, "gen_ai.tool.name"))
        );
    }

    // worker-a crashes once (the sim is killed by signal 9) and is restarted in its turn.
    let restart = t.one("restart");
    assert_eq!(attr(restart, "cap.restart.cause"), "signaled");
    assert_eq!(attr(restart, "cap.restart.attempt"), "1");
    assert_eq!(attr(restart, "cap.restart.backoff_ms"), "0");
    let turn = t.parent(restart).expect("restart has a parent");
    assert_eq!(kind(turn), "turn");
    assert_eq!(attr(turn, "cap.turn.restarts"), "1");
    assert_eq!(
        t.parent(turn).unwrap().span_id,
        session_named(&t, "worker-a").span_id
    );

    // A permission decided by the answerer actor, under the session's turn.
    let decide = t.one("decide");
    assert_eq!(attr(decide, "cap.decision.by"), "policy");
    let permission = t.parent(decide).expect("decide under its permission");
    assert_eq!(kind(permission), "permission");
    // A permission is no tool execution.
    assert!(!permission.attributes.contains_key("gen_ai.tool.name"));
    assert_eq!(
        permission.name,
        format!("permission {}", attr(permission, "cap.permission.tool"))
    );
    assert_eq!(
        attr(permission, "cap.permission.rule"),
        attr(decide, "cap.permission.rule")
    );
    assert_eq!(attr(permission, "cap.permission.decision"), "allow_once");
    assert_eq!(t.parent(permission).map(kind), Some("turn"));

    // Routes (the task, the plan, the mention, the join) hang under the run.
    let routes = t.named("route");
    assert!(routes.iter().all(|r| r.parent_span_id == run.span_id));
    let mention = routes
        .iter()
        .find(|r| attr(r, "cap.route.via") == "mention")
        .expect("worker-a's mention of worker-b");
    assert_eq!(attr(mention, "cap.route.from"), "worker-a");
    assert_eq!(attr(mention, "cap.route.to"), "worker-b");
    assert!(
        routes
            .iter()
            .any(|r| attr(r, "cap.route.to") == "reviewer" && attr(r, "cap.route.via") == "route")
    );
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_budget_exit_still_exports_the_budget_span_and_every_session() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "spend.toml",
        "[[turn]]\nsteps = [{ sleep_ms = 500 }, { usage = { input_tokens = 10, output_tokens = 10, cost_usd = 0.4 } }, { say = \"spent\" }]\n",
    );
    // The spend waits half a second so that the other session's turn is in flight
    // when the budget stops the run.
    write(d, "wait.toml", "[[turn]]\nsteps = [{ sleep_ms = 20000 }]\n");
    write(
        d,
        "fleet.toml",
        "[fleet]\nname = \"b\"\nstart = [\"spend\", \"wait\"]\ntask = \"go\"\nbudget_usd = 0.25\n\n\
         [[sessions]]\nname = \"spend\"\nagent = \"sim\"\nscript = \"spend.toml\"\n\n\
         [[sessions]]\nname = \"wait\"\nagent = \"sim\"\nscript = \"wait.toml\"\n",
    );
    let mut cmd = capfleet(d);
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint())
        .args(["run", "fleet.toml"]);
    let out = finish(cmd, Duration::from_secs(30)).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let t = collector.spans().await;
    check_trace(&t.nodes());
    let run = t.one("fleet.run");
    assert_eq!(attr(run, "cap.run.outcome"), "budget_exceeded");
    assert_eq!(attr(run, "error.type"), "budget_exceeded");
    let budget = t.one("budget");
    assert_eq!(budget.parent_span_id, run.span_id);
    assert_eq!(attr(budget, "cap.budget.scope"), "fleet");
    assert_eq!(attr(budget, "cap.budget.action"), "stop_run");
    assert_eq!(attr(budget, "cap.budget.limit_usd"), "0.25");
    // The waiting session's turn was cut short and still arrived.
    let wait = session_named(&t, "wait");
    let turns = t.children(wait, "turn");
    assert_eq!(turns.len(), 1, "{:?}", t.names());
    assert_ne!(attr(turns[0], "cap.turn.outcome"), "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_mid_turn_loses_no_span() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = common::EnvMarker::new("otel-sigint");
    let (k, v) = m.pair();
    write(
        d,
        "long.toml",
        "[[turn]]\nsteps = [{ tool = \"Read\", input = { file_path = \"a\" }, duration_ms = 20000 }]\n",
    );
    write(
        d,
        "fleet.toml",
        &format!(
            "[fleet]\nname = \"c\"\nstart = [\"a\", \"b\"]\ntask = \"go\"\n\n\
             [[sessions]]\nname = \"a\"\nagent = \"sim\"\nscript = \"long.toml\"\nenv = {{ {k} = \"{v}\" }}\n\n\
             [[sessions]]\nname = \"b\"\nagent = \"sim\"\nscript = \"long.toml\"\nenv = {{ {k} = \"{v}\" }}\n"
        ),
    );
    let mut cmd = capfleet(d);
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc").args([
        "run",
        "fleet.toml",
        "--otlp",
        collector.endpoint(),
    ]);
    let out = tokio::task::spawn_blocking(move || {
        let child = cmd.spawn().unwrap();
        assert!(
            common::wait_until(Duration::from_secs(10), Duration::from_millis(20), || m
                .processes()
                .len()
                == 2),
            "two agents run"
        );
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let t = collector.spans().await;
    check_trace(&t.nodes());
    let run = t.one("fleet.run");
    assert_eq!(attr(run, "cap.run.outcome"), "interrupted");
    for name in ["a", "b"] {
        let s = session_named(&t, name);
        assert_eq!(s.parent_span_id, run.span_id);
        let turns = t.children(s, "turn");
        assert_eq!(turns.len(), 1, "{name}'s interrupted turn was exported");
        assert_ne!(attr(turns[0], "cap.turn.outcome"), "completed");
        // The tool call still open when the run stopped ends with its turn.
        assert_eq!(t.children(turns[0], "tool_call").len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_session_and_run_are_errors_with_a_type_and_a_message() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let fleet = failing_fleet(dir.path());
    let mut cmd = capfleet(dir.path());
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .arg("run")
        .arg(&fleet)
        .args(["--otlp", collector.endpoint()]);
    let out = finish(cmd, Duration::from_secs(30)).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let t = collector.spans().await;
    check_trace(&t.nodes());
    let nodes = t.nodes();
    let of = |kind_: &str| {
        let s = t.one(kind_);
        nodes
            .iter()
            .find(|n| n.span_id == s.span_id)
            .unwrap()
            .clone()
    };
    for (k, error_type) in [
        ("fleet.run", "session_failed"),
        ("session", "session_failed"),
        ("turn", "turn_failed"),
    ] {
        let n = of(k);
        assert_eq!(n.status, "ERROR", "{k}: {n:?}");
        assert_eq!(n.attr("error.type"), Some(error_type), "{k}: {n:?}");
    }
    assert!(
        of("session")
            .status_message
            .contains("exited with status 3"),
        "{:?}",
        of("session")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoint_does_not_hold_the_fleet_and_losses_are_reported() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = capfleet(dir.path());
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "500")
        .arg("run")
        .arg(demo())
        .args(["--otlp", &format!("http://127.0.0.1:{port}")]);
    let started = Instant::now();
    let out = finish(cmd, Duration::from_secs(60)).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    let err = stderr(&out);
    assert!(
        err.contains("spans exported")
            && err.contains("dropped (the trace endpoint was slow or unreachable)"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_never_answers_costs_one_bounded_queue_and_a_bounded_exit() {
    // Accepts connections and never says a word (a hung collector).
    let hole = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = hole.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut conns = Vec::new();
        while let Ok((c, _)) = hole.accept().await {
            conns.push(c);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = capfleet(dir.path());
    cmd.env("OTEL_BSP_MAX_QUEUE_SIZE", "4")
        .arg("run")
        .arg(demo())
        .args(["--otlp", &format!("http://{addr}")]);
    let started = Instant::now();
    let out = finish(cmd, Duration::from_secs(60)).await;
    held.abort();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The demo takes about a second; the exit waits at most the 5 s shutdown bound.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.contains("spans exported"))
        .unwrap_or_else(|| panic!("the losses are reported: {err}"));
    assert!(line.starts_with("capfleet: 0 spans exported, "), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_protobuf_delivers_the_same_tree_and_a_trace_file_matches_it() {
    let (endpoint, received) = common::otel::http_receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spans.jsonl");
    let mut cmd = capfleet(dir.path());
    cmd.env(
        "TRACEPARENT",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )
    .arg("run")
    .arg(demo())
    .args(["--otlp", &endpoint])
    .arg("--trace-file")
    .arg(&file);
    let out = finish(cmd, Duration::from_secs(60)).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let over_http = received.collect().await;
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(
        over_http.len(),
        lines.len(),
        "both destinations got every span"
    );
    // The run continues the trace capfleet was started in.
    let run = lines
        .iter()
        .find(|l| l["name"] == "invoke_workflow demo")
        .unwrap();
    assert_eq!(run["trace_id"], "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(run["parent_span_id"], "b7ad6b7169203331");
    // Array attributes are JSON arrays in the file, as OTLP carries them.
    let turn = lines
        .iter()
        .find(|l| l["attributes"]["gen_ai.response.finish_reasons"].is_array())
        .expect("a turn span with its finish reasons as an array");
    assert!(
        turn["attributes"]["gen_ai.response.finish_reasons"][0].is_string(),
        "{turn}"
    );
    assert!(
        lines
            .iter()
            .all(|l| !l["attributes"]["gen_ai.response.finish_reasons"].is_string()),
        "no finish reasons written as a string"
    );
    for l in &lines {
        assert_eq!(l["trace_id"], run["trace_id"]);
        for k in [
            "name",
            "span_id",
            "start_unix_nano",
            "end_unix_nano",
            "status",
            "attributes",
        ] {
            assert!(!l[k].is_null(), "{k} in {l}");
        }
    }
    let mut names: Vec<String> = over_http.iter().map(|(n, _)| n.clone()).collect();
    let mut file_names: Vec<String> = lines
        .iter()
        .map(|l| l["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    file_names.sort();
    assert_eq!(names, file_names);
    let http_run = over_http
        .iter()
        .find(|(n, _)| n == "invoke_workflow demo")
        .unwrap();
    assert_eq!(http_run.1, "capfleet", "service.name defaults to capfleet");
}

/// Tool calls' arguments and results reach the trace only when the GenAI
/// instrumentations' content switch says so (content may hold secrets).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_call_content_is_recorded_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let mut tools = Vec::new();
    for capture in [None, Some("true")] {
        let file = dir
            .path()
            .join(format!("spans-{}.jsonl", capture.is_some()));
        let mut cmd = capfleet(dir.path());
        cmd.arg("run").arg(demo()).arg("--trace-file").arg(&file);
        if let Some(on) = capture {
            cmd.env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", on);
        }
        let out = finish(cmd, Duration::from_secs(60)).await;
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let spans: Vec<serde_json::Value> = std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .filter(|l: &serde_json::Value| {
                l["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("execute_tool "))
            })
            .collect();
        assert!(!spans.is_empty(), "the demo runs tools");
        tools.push(spans);
    }
    let has = |s: &serde_json::Value, k: &str| s["attributes"].to_string().contains(k);
    for s in &tools[0] {
        assert!(!has(s, "gen_ai.tool.call.arguments"), "off by default: {s}");
        assert!(!has(s, "gen_ai.tool.call.result"), "off by default: {s}");
    }
    assert!(
        tools[1]
            .iter()
            .all(|s| has(s, "gen_ai.tool.call.arguments")),
        "{:#?}",
        tools[1]
    );
    assert!(
        tools[1].iter().any(|s| has(s, "gen_ai.tool.call.result")),
        "{:#?}",
        tools[1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_traces_its_turn_and_hands_the_agent_its_traceparent() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("traceparent.txt");
    // The agent: the simulator, behind a shell that notes the TRACEPARENT it was given.
    let agent = format!(
        "echo \"$TRACEPARENT\" > '{}'; exec '{}' sim --mode stream-json",
        seen.display(),
        common::BIN
    );
    let mut cmd = capfleet(dir.path());
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .args([
            "chat",
            "sim",
            "--task",
            "hello",
            "--otlp",
            collector.endpoint(),
        ])
        .args(["--argv", "sh", "-c", &agent]);
    let out = finish(cmd, Duration::from_secs(30)).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let t = collector.spans().await;
    let chat = t.one("fleet.run");
    assert_eq!(chat.name, "invoke_workflow chat");
    assert_eq!(attr(chat, "cap.agent.type"), "sim");
    assert_eq!(chat.parent_span_id, "");
    let session = t.one("session");
    assert_eq!(session.parent_span_id, chat.span_id);
    let turn = t.one("turn");
    assert_eq!(turn.parent_span_id, session.span_id);
    assert_eq!(attr(turn, "cap.turn.outcome"), "completed");
    // W3C: 00-<trace id>-<the session span's id>-01.
    let tp = std::fs::read_to_string(&seen).unwrap();
    assert_eq!(
        tp.trim(),
        format!("00-{}-{}-01", session.trace_id, session.span_id),
        "the agent runs inside its session's span"
    );
}
