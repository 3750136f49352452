//! capfleet's traces in a real trace store, Arize Phoenix (the pinned `phoenix` peer,
//! on loopback): the demo fleet sent over OTLP/HTTP and over gRPC, each into a project
//! of its own (`openinference.project.name`), and a failing fleet, each read back
//! through Phoenix's API and checked as a user would look at it — one trace, the
//! spans named after what they are, every child inside its parent, turns as long as
//! they took, the restart under its crashed turn with its cause, errors with their type.

use std::path::Path;
use std::time::Duration;

use crate::common::otel::{Node, capfleet, check_trace, demo, failing_fleet, finish};
use crate::common::phoenix::Phoenix;

/// Run `fleet` exporting to `endpoint` over `protocol` into Phoenix project `project`
/// (and into a trace file, to know how many spans Phoenix must hold); its spans as
/// Phoenix stores them.
async fn run_into(
    phoenix: &Phoenix,
    dir: &Path,
    fleet: &Path,
    (protocol, endpoint): (&str, String),
    project: &str,
    expect_code: i32,
) -> Vec<Node> {
    let file = dir.join(format!("{project}.jsonl"));
    let mut cmd = capfleet(dir);
    cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            format!("openinference.project.name={project}"),
        )
        .env("CAPFLEET_OTEL_OPENINFERENCE", "true")
        .arg("run")
        .arg(fleet)
        .args(["--otlp", &endpoint])
        .arg("--trace-file")
        .arg(&file);
    let out = finish(cmd, Duration::from_secs(60)).await;
    assert_eq!(
        out.status.code(),
        Some(expect_code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let count = std::fs::read_to_string(&file).unwrap().lines().count();
    let spans = phoenix.spans(project, count);
    assert_eq!(spans.len(), count, "Phoenix holds every span of {project}");
    check_trace(&spans);
    spans
}

fn one<'a>(spans: &'a [Node], name: &str) -> &'a Node {
    let found: Vec<&Node> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(
        found.len(),
        1,
        "one {name}: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found[0]
}

fn parent<'a>(spans: &'a [Node], s: &Node) -> &'a Node {
    spans
        .iter()
        .find(|p| p.span_id == s.parent_span_id)
        .unwrap_or_else(|| panic!("{} has its parent", s.name))
}

fn the_demo_as_a_user_sees_it(spans: &[Node]) {
    let run = one(spans, "invoke_workflow demo");
    assert_eq!(run.attr("gen_ai.operation.name"), Some("invoke_workflow"));
    assert_eq!(run.attr("openinference.span.kind"), Some("CHAIN"));
    for name in ["planner", "worker-a", "worker-b", "reviewer"] {
        let session = one(spans, name);
        assert_eq!(session.parent_span_id, run.span_id);
        assert_eq!(session.attr("gen_ai.agent.name"), Some(name));
        assert_eq!(session.attr("cap.agent.type"), Some("sim"));
        assert_eq!(session.attr("openinference.span.kind"), Some("AGENT"));
        let turns: Vec<&Node> = spans
            .iter()
            .filter(|t| t.parent_span_id == session.span_id && t.name.starts_with("invoke_agent"))
            .collect();
        assert!(!turns.is_empty(), "{name} ran a turn");
        for t in turns {
            assert_eq!(t.name, format!("invoke_agent {name}"));
            assert_eq!(t.attr("gen_ai.agent.id"), session.attr("gen_ai.agent.id"));
            assert_eq!(t.attr("gen_ai.provider.name"), Some("stream_json"));
            assert_eq!(
                t.attr("gen_ai.response.finish_reasons"),
                Some(r#"["end_turn"]"#)
            );
            assert!(t.attr("gen_ai.conversation.id").is_some());
            assert_eq!(t.attr("openinference.span.kind"), Some("AGENT"));
        }
    }
    let tools: Vec<&Node> = spans
        .iter()
        .filter(|s| s.attr("gen_ai.operation.name") == Some("execute_tool"))
        .collect();
    assert!(!tools.is_empty());
    for tool in tools {
        assert_eq!(
            tool.name,
            format!("execute_tool {}", tool.attr("gen_ai.tool.name").unwrap())
        );
        assert_eq!(tool.attr("openinference.span.kind"), Some("TOOL"));
    }
    // worker-a's crash: the restart under its turn, with its cause.
    let restart = one(spans, "restart");
    assert_eq!(restart.attr("cap.restart.cause"), Some("signaled"));
    let turn = parent(spans, restart);
    assert_eq!(turn.name, "invoke_agent worker-a");
    assert_eq!(turn.attr("cap.turn.restarts"), Some("1"));
    // The permission decided by policy is no tool execution.
    let permission = spans
        .iter()
        .find(|s| s.name.starts_with("permission "))
        .expect("a permission span");
    assert!(permission.attr("gen_ai.tool.name").is_none());
    assert_eq!(
        permission.attr("cap.permission.decision"),
        Some("allow_once")
    );
    assert!(parent(spans, permission).name.starts_with("invoke_agent "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phoenix_stores_the_demo_over_http_and_grpc_and_a_failed_run_as_errors() {
    let phoenix = tokio::task::spawn_blocking(Phoenix::start).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    let over_http = run_into(
        &phoenix,
        d,
        &demo(),
        ("http/protobuf", phoenix.otlp_http()),
        "demo-http",
        0,
    )
    .await;
    the_demo_as_a_user_sees_it(&over_http);
    let over_grpc = run_into(
        &phoenix,
        d,
        &demo(),
        ("grpc", phoenix.otlp_grpc()),
        "demo-grpc",
        0,
    )
    .await;
    the_demo_as_a_user_sees_it(&over_grpc);

    let fleet = failing_fleet(d);
    let failed = run_into(
        &phoenix,
        d,
        &fleet,
        ("http/protobuf", phoenix.otlp_http()),
        "failing",
        1,
    )
    .await;
    for (name, error_type) in [
        ("invoke_workflow f", "session_failed"),
        ("a", "session_failed"),
        ("invoke_agent a", "turn_failed"),
    ] {
        let s = one(&failed, name);
        assert_eq!(s.status, "ERROR", "{s:?}");
        assert_eq!(s.attr("error.type"), Some(error_type), "{s:?}");
        assert!(!s.status_message.is_empty(), "{s:?}");
    }
}
