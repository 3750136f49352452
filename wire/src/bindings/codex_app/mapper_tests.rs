use serde_json::{Value, json};

use super::*;
use crate::bindings::codex_app::approvals::{ApprovalKind, approval};
use crate::bindings::codex_app::frames;
use crate::protocol::{Decision, StopReason};

const FIXTURES: &str = "../../../../tests/fixtures/codex_app_server/0.171.0";
/// The lines a real `codex app-server` 0.171.0 wrote (paths scrubbed): two turns on
/// one thread against the fake LLM, a command asked for and approved in the first.
const FRAMES: &str =
    include_str!("../../../../tests/fixtures/codex_app_server/0.171.0/frames.jsonl");

fn map(lines: &[&str]) -> (Vec<Output>, AppMapper) {
    let mut m = AppMapper::new(0, None);
    let mut out = Vec::new();
    for l in lines {
        m.on_line(l.as_bytes(), &mut out);
    }
    (out, m)
}

fn events(out: &[Output]) -> Vec<&CapEvent> {
    out.iter()
        .filter_map(|o| match o {
            Output::Event(e) => Some(e),
            _ => None,
        })
        .collect()
}

fn ends(out: &[Output]) -> Vec<&TurnEnd> {
    out.iter()
        .filter_map(|o| match o {
            Output::TurnEnd(e) => Some(e),
            _ => None,
        })
        .collect()
}

#[test]
fn the_recorded_frames_of_0_171_map_to_two_turns_with_an_approved_command() {
    let lines: Vec<&str> = FRAMES.lines().collect();
    let (out, m) = map(&lines);
    assert_eq!(m.stats().malformed, 0, "{out:#?}");
    assert_eq!(m.stats().unknown, 0);
    assert_eq!(m.turn(), 2);
    let responses: Vec<&RequestId> = out
        .iter()
        .filter_map(|o| match o {
            Output::Response { id, result: Ok(_) } => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(
        responses,
        [
            &RequestId::Num(1),
            &RequestId::Num(2),
            &RequestId::Num(3),
            &RequestId::Num(4)
        ]
    );
    let approvals: Vec<&crate::bindings::codex_app::Approval> = out
        .iter()
        .filter_map(|o| match o {
            Output::Approval(a) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].id, RequestId::Num(0));
    assert_eq!(approvals[0].tool, "command_execution");
    assert!(
        approvals[0].intent["command"]
            .as_str()
            .unwrap_or("")
            .contains("echo hi from shell")
    );
    assert_eq!(approvals[0].intent["tool_call_id"], "t1.call_fake0003");
    assert!(out.contains(&Output::Resolved(RequestId::Num(0))));
    let ev = events(&out);
    let json: Vec<Value> = ev
        .iter()
        .map(|e| serde_json::to_value(e).expect("json"))
        .collect();
    let kinds: Vec<&str> = json.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "cap.error", // the fake model's missing metadata: a warning
            "cap.tool_call.start",
            "cap.tool_call.delta",
            "cap.tool_call.end",
            "cap.text_chunk",
            "cap.usage",
            "cap.error",
            "cap.text_chunk",
            "cap.usage",
        ],
        "{json:#?}"
    );
    let end = &json[3];
    assert_eq!(
        (&end["is_error"], &end["output"]["exit_code"]),
        (&json!(false), &json!(0))
    );
    assert_eq!(json[2]["output_chunk"], "hi from shell\n");
    // Usage per turn: the sum of its calls' `last` (8703 + 8772; 8801).
    assert_eq!(
        (&json[5]["input_tokens"], &json[5]["output_tokens"]),
        (&json!(17475), &json!(20))
    );
    assert_eq!(json[8]["input_tokens"], 8801);
    let ends = ends(&out);
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[0].result_text.as_deref(), Some("Done."));
    assert_eq!(ends[1].stop_reason, StopReason::EndTurn);
}

/// The `properties` and `required` of a schema file of the fixtures.
fn schema(name: &str) -> (Vec<String>, Vec<String>, Value) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/bindings/codex_app")
        .join(FIXTURES)
        .join("schema")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let s: Value = serde_json::from_str(&text).expect("schema");
    let props = s["properties"]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    let required = s["required"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (props, required, s)
}

fn conforms(name: &str, value: &Value) {
    let (props, required, _) = schema(name);
    let keys: Vec<&String> = value.as_object().expect("object").keys().collect();
    for k in &keys {
        assert!(
            props.contains(k),
            "{name}: we send {k}, which the schema does not have"
        );
    }
    for r in &required {
        assert!(keys.contains(&r), "{name}: we leave out the required {r}");
    }
}

/// Every string of a schema's enums and consts, anywhere in it.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, v) in o {
                match (k.as_str(), v) {
                    ("enum", Value::Array(a)) => {
                        out.extend(a.iter().filter_map(|s| s.as_str().map(str::to_owned)))
                    }
                    ("const", Value::String(s)) => out.push(s.clone()),
                    ("required", Value::Array(a)) => {
                        out.extend(a.iter().filter_map(|s| s.as_str().map(str::to_owned)))
                    }
                    _ => strings(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        _ => {}
    }
}

#[test]
fn what_we_send_is_what_the_pinned_schema_takes() {
    let init = frames::InitializeParams {
        client_info: frames::ClientInfo {
            name: "capfleet".into(),
            title: None,
            version: "0".into(),
        },
        capabilities: None,
    };
    conforms(
        "InitializeParams.json",
        &serde_json::to_value(init).expect("json"),
    );
    let start = frames::ThreadParams {
        model: Some("m".into()),
        cwd: "/w".into(),
        approval_policy: Some("untrusted"),
        sandbox: Some("workspace-write"),
        ..Default::default()
    };
    let start = serde_json::to_value(start).expect("json");
    conforms("ThreadStartParams.json", &start);
    let mut resume = start.clone();
    resume["threadId"] = json!("t");
    conforms("ThreadResumeParams.json", &resume);
    let turn = frames::TurnStartParams {
        thread_id: "t".into(),
        input: vec![frames::TextInput::new("hi".into())],
    };
    let turn = serde_json::to_value(turn).expect("json");
    conforms("TurnStartParams.json", &turn);
    let (_, _, s) = schema("TurnStartParams.json");
    let text_variant = s["definitions"]["UserInput"]["oneOf"]
        .as_array()
        .expect("variants")
        .iter()
        .find(|v| v["properties"]["type"]["enum"][0] == "text")
        .expect("the text input")
        .clone();
    let input = &turn["input"][0];
    for r in text_variant["required"].as_array().expect("required") {
        assert!(
            input.get(r.as_str().expect("name")).is_some(),
            "text input lacks {r}"
        );
    }
    let steer = frames::TurnSteerParams {
        thread_id: "t".into(),
        input: vec![frames::TextInput::new("more".into())],
        expected_turn_id: "u".into(),
    };
    conforms(
        "TurnSteerParams.json",
        &serde_json::to_value(steer).expect("json"),
    );
    let interrupt = frames::TurnInterruptParams {
        thread_id: "t".into(),
        turn_id: "u".into(),
    };
    conforms(
        "TurnInterruptParams.json",
        &serde_json::to_value(interrupt).expect("json"),
    );
    // Every decision we answer is one the schema names.
    let decisions = [
        Some(Decision::AllowOnce),
        Some(Decision::AllowAlways),
        Some(Decision::Deny),
        None,
    ];
    for (file, kind) in [
        (
            "CommandExecutionRequestApprovalResponse.json",
            ApprovalKind::Item,
        ),
        ("FileChangeRequestApprovalResponse.json", ApprovalKind::Item),
        ("ExecCommandApprovalResponse.json", ApprovalKind::Legacy),
    ] {
        let (_, _, s) = schema(file);
        let mut names = Vec::new();
        strings(&s, &mut names);
        for d in decisions {
            let r = kind.response(d);
            conforms(file, &r);
            let said = match &r["decision"] {
                Value::String(s) => s.clone(),
                Value::Object(o) => o.keys().next().expect("a variant").clone(),
                other => panic!("{file}: decision {other}"),
            };
            assert!(names.contains(&said), "{file}: {said} not in {names:?}");
        }
    }
    let asked = json!({"network": null, "fileSystem": {"write": ["/w"]}});
    for d in decisions {
        let r = ApprovalKind::Permissions(asked.clone()).response(d);
        conforms("PermissionsRequestApprovalResponse.json", &r);
    }
}

#[test]
fn bad_lines_are_counted_never_a_panic() {
    let (out, m) = map(&[
        "not json",
        "{}",
        r#"{"method":"item/agentMessage/delta","params":{"delta":5}}"#,
        r#"{"id":7,"method":"item/fileChange/requestApproval","params":{}}"#,
        r#"{"id":8,"method":"item/tool/requestUserInput","params":{}}"#,
        r#"{"method":"thread/realtime/sdp","params":{}}"#,
    ]);
    assert_eq!(m.stats().malformed, 4, "{out:#?}");
    assert_eq!(m.stats().ignored, 1);
    let refused: Vec<i64> = out
        .iter()
        .filter_map(|o| match o {
            Output::Refused { refusal, .. } => Some(refusal.code()),
            _ => None,
        })
        .collect();
    assert_eq!(refused, [-32602, -32601]);
}

#[test]
fn an_interrupted_turn_is_cancelled_and_a_failed_one_an_error_said_once() {
    let started = r#"{"method":"turn/started","params":{"threadId":"th","turn":{"id":"u1","status":"inProgress","items":[]}}}"#;
    let interrupted = r#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"u1","status":"interrupted","error":null,"items":[]}}}"#;
    let error = r#"{"method":"error","params":{"error":{"message":"stream disconnected","codexErrorInfo":null},"willRetry":false,"threadId":"th","turnId":"u2"}}"#;
    let failed = r#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"u2","status":"failed","error":{"message":"stream disconnected"},"items":[]}}}"#;
    let (out, _) = map(&[started, interrupted, started, error, failed]);
    let ends = ends(&out);
    assert_eq!(ends[0].stop_reason, StopReason::Cancelled);
    assert_eq!(
        (ends[1].stop_reason, ends[1].is_error),
        (StopReason::Error, true)
    );
    let errors = events(&out)
        .into_iter()
        .filter(|e| matches!(e, CapEvent::Error(_)))
        .count();
    assert_eq!(errors, 1, "the failure repeats the error: said once");
}

#[test]
fn a_reached_rate_limit_is_a_rate_limit_error_with_its_reset_said_on_change() {
    let update = |pct: f64, reached: Value| {
        json!({"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex",
            "primary":{"usedPercent":pct,"windowDurationMins":300,"resetsAt":1796660000},
            "secondary":null,"rateLimitReachedType":reached}}})
        .to_string()
    };
    let lines = [
        update(10.0, Value::Null),
        update(95.0, Value::Null),
        update(96.0, Value::Null),
        update(100.0, json!("rateLimitReached")),
    ];
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let (out, _) = map(&lines);
    let errors: Vec<Value> = events(&out)
        .iter()
        .map(|e| serde_json::to_value(e).expect("json"))
        .collect();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert_eq!(
        errors[0]["code"],
        crate::supervision::rate_limit::RATE_LIMIT_WARNING
    );
    assert_eq!(
        (&errors[1]["code"], &errors[1]["retryable"]),
        (&json!("rate_limit"), &json!(true))
    );
    assert_eq!(errors[1]["details"]["resets_at"], 1796660000);
    assert_eq!(errors[1]["details"]["source"], "rate_limit_event");
}

/// `approval` of `method` with `params`, as the mapper reads them off a line.
fn approval_of(
    id: RequestId,
    method: &str,
    params: Value,
    prefix: &str,
) -> Result<Approval, Refusal> {
    let line = json!({ "id": 0, "method": method, "params": params }).to_string();
    let Ok(Frame::Request { params, .. }) = Frame::parse(line.as_bytes()) else {
        panic!("a request: {line}")
    };
    approval(id, method, params, prefix)
}

#[test]
fn approvals_of_each_kind_and_their_answers() {
    let cmd = approval_of(
        RequestId::Num(3),
        "item/commandExecution/requestApproval",
        json!({"itemId":"c1","command":"rm -rf x","cwd":"/w","threadId":"t","turnId":"u","startedAtMs":0,"environmentId":null,"kind":"command"}),
        "t2.",
    )
    .expect("approval");
    assert_eq!(cmd.intent["tool_call_id"], "t2.c1");
    assert_eq!(
        cmd.kind.response(Some(Decision::Deny)),
        json!({"decision": "decline"})
    );
    assert_eq!(cmd.kind.response(None), json!({"decision": "cancel"}));
    let legacy = approval_of(
        RequestId::Str("x".into()),
        "execCommandApproval",
        json!({"conversationId":"t","callId":"c","approvalId":null,"command":["ls","-l"],"cwd":"/w","reason":null,"parsedCmd":[]}),
        "t1.",
    )
    .expect("approval");
    assert_eq!(legacy.intent["command"], "ls -l");
    assert_eq!(
        legacy.kind.response(Some(Decision::AllowAlways)),
        json!({"decision": "approved_for_session"})
    );
    assert!(
        legacy.kind.response(Some(Decision::Deny))["decision"]["denied"]["rejection"].is_string()
    );
}
