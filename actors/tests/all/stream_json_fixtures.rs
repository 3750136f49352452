//! Replays Claude Code 2.1.197's recorded stream-json frames
//! (`tests/fixtures/claude/*.ndjson`) through the mapper, and checks outbound
//! frames and argv against what the recording driver wrote.

use capfleet_actors::bindings::stream_json::{
    ArgvError, ArgvWarning, ControlAck, MapperStats, Output, PendingKind, ResponseError,
    StreamJsonMapper, build_argv, outbound,
};
use capfleet_actors::manifest::Manifest;
use capfleet_actors::protocol::{
    CapCode, CapEvent, Decision, ErrorKind, HasMeta, PermissionMode, PermissionScope, RiskLevel,
    SessionConfig, StopReason, UserInputInject,
};
use serde_json::{Value, json};

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/claude/",
            $name
        ))
    };
}

fn replay_into(m: &mut StreamJsonMapper, src: &str) -> Vec<Output> {
    let mut out = Vec::new();
    for line in src.lines() {
        m.on_line(line.as_bytes(), &mut out);
    }
    out
}

fn replay(src: &str) -> (Vec<Output>, StreamJsonMapper) {
    let mut m = StreamJsonMapper::new();
    let out = replay_into(&mut m, src);
    (out, m)
}

/// One compact line per output: kind and key fields.
fn summary(out: &[Output]) -> Vec<String> {
    out.iter()
        .map(|o| match o {
            Output::Event(e) => match e {
                CapEvent::SessionReady(r) => format!("ready {}", r.session_id.as_deref().unwrap()),
                CapEvent::TextChunk(t) => {
                    format!("text {} {}", t.message_id.as_deref().unwrap(), t.text)
                }
                CapEvent::Thought(t) => format!("thought {}", t.text),
                CapEvent::ToolCallStart(t) => format!("tool_start {} {}", t.call_id, t.name),
                CapEvent::ToolCallEnd(t) => {
                    format!("tool_end {} error={}", t.call_id, t.is_error.get().unwrap())
                }
                CapEvent::PermissionRequest(p) => format!(
                    "permission {} {} {} {}",
                    p.req_id.get(..8).unwrap_or(&p.req_id),
                    p.tool,
                    p.scope.unwrap(),
                    p.risk_level
                ),
                CapEvent::AskUser(a) => format!("ask {} {}", a.ask_id, a.prompt),
                CapEvent::Usage(u) => format!(
                    "usage in={} out={} stop={}",
                    u.input_tokens.get().map_or("-".into(), u64::to_string),
                    u.output_tokens.get().map_or("-".into(), u64::to_string),
                    u.stop_reason.unwrap()
                ),
                CapEvent::Error(e) => format!("error {}", e.code),
                other => format!("other {}", other.kind()),
            },
            Output::TurnEnd(t) => format!("turn_end {} {}", t.stop_reason, t.subtype),
            Output::PermissionWithdrawn {
                req_id,
                tool_use_id,
            } => format!(
                "withdrawn {} {}",
                req_id.get(..8).unwrap_or(req_id),
                tool_use_id.as_deref().unwrap_or("-")
            ),
            Output::ControlAck(a) => format!("ack {} ok={}", a.request_id, a.result.is_ok()),
            Output::UnsupportedControlRequest { subtype, .. } => format!("unsupported {subtype}"),
        })
        .collect()
}

fn events(out: &[Output]) -> impl Iterator<Item = &CapEvent> {
    out.iter().filter_map(|o| match o {
        Output::Event(e) => Some(e),
        _ => None,
    })
}

fn joined_text(out: &[Output]) -> String {
    events(out)
        .filter_map(|e| match e {
            CapEvent::TextChunk(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

fn costs(out: &[Output]) -> Vec<f64> {
    events(out)
        .filter_map(|e| match e {
            CapEvent::Usage(u) => u.cost_usd(),
            _ => None,
        })
        .collect()
}

fn last_total_cost(src: &str) -> f64 {
    src.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|v| v["type"] == "result")
        .and_then(|v| v["total_cost_usd"].as_f64())
        .unwrap()
}

fn assert_costs_sum(out: &[Output], src: &str) {
    let sum: f64 = costs(out).iter().sum();
    let total = last_total_cost(src);
    assert!((sum - total).abs() < 1e-9, "deltas {sum} != total {total}");
}

const ALLOW_TURN_1: [&str; 8] = [
    "ready 30361b88-c98a-436a-885a-1a2bcf35918d",
    "text msg_fake0001 I'll create the file.",
    "tool_start toolu_fake0002 Bash",
    "permission ab8b690a Bash execute medium",
    "tool_end toolu_fake0002 error=false",
    "text msg_fake0003 Created out.txt.",
    "usage in=38305 out=20 stop=end_turn",
    "turn_end end_turn success",
];

#[test]
fn allow() {
    let src = fixture!("allow.ndjson");
    let (out, m) = replay(src);
    let mut want: Vec<&str> = ALLOW_TURN_1.to_vec();
    want.extend([
        "text msg_fake0004 Second answer.",
        "usage in=19187 out=10 stop=end_turn",
        "turn_end end_turn success",
    ]);
    assert_eq!(summary(&out), want);
    assert_eq!(costs(&out), vec![0.192025, 0.096185]);
    assert_costs_sum(&out, src);
    let stats = m.stats();
    assert_eq!(
        stats,
        MapperStats {
            frames: 10,
            ignored_frames: 0,
            malformed_frames: 0,
            stray_frames: 0,
            events: 9
        }
    );
    let s = m.session();
    assert_eq!(s.model.as_deref(), Some("claude-opus-4-8[1m]"));
    assert_eq!(s.cwd.as_deref(), Some("/tmp/WORKDIR"));
    assert_eq!(s.permission_mode.as_deref(), Some("default"));
    assert_eq!(s.tools.len(), 27);

    // Key fields of the events themselves.
    let all: Vec<_> = events(&out).collect();
    let CapEvent::ToolCallStart(start) = all[2] else {
        panic!()
    };
    assert_eq!(
        start.input.get(),
        Some(&json!({"command": "echo hello > out.txt", "description": "Create out.txt"}))
    );
    let CapEvent::PermissionRequest(p) = all[3] else {
        panic!()
    };
    assert_eq!(p.intent.get(), start.input.get());
    assert_eq!(
        p.meta().unwrap()["claude.tool_use_id"],
        json!("toolu_fake0002")
    );
    let CapEvent::ToolCallEnd(end) = all[4] else {
        panic!()
    };
    assert_eq!(
        end.output.get(),
        Some(&json!("(Bash completed with no output)"))
    );
    assert!(end.duration_ms.is_set());
    let CapEvent::Usage(u) = all[5 + 1] else {
        panic!()
    };
    assert_eq!(u.model_id.as_deref(), Some("claude-opus-4-8"));
    assert_eq!(u.cache_read_tokens.get(), Some(&0));
    assert_eq!(u.cache_creation_tokens.get(), Some(&0));
    assert_eq!(u.duration_ms.get(), Some(&193));
    assert!(u.thinking_tokens.is_absent());
    let Output::TurnEnd(t) = &out[7] else {
        panic!()
    };
    assert_eq!(t.result_text.as_deref(), Some("Created out.txt."));
    assert!(!t.is_error);
    // Every event validates and round-trips through the CAP decoder.
    for e in events(&out) {
        let v = serde_json::to_value(e).unwrap();
        let back: CapEvent = serde_json::from_value(v).unwrap();
        assert_eq!(&back, e);
    }
}

#[test]
fn deny() {
    let src = fixture!("deny.ndjson");
    let (out, _) = replay(src);
    let s = summary(&out);
    assert_eq!(s[0], "ready a92d1d59-d32a-4b82-97cf-bc46a60addc2");
    assert_eq!(s[3], "permission 6b1de983 Bash execute medium");
    assert_eq!(s[4], "tool_end toolu_fake0002 error=true");
    assert_eq!(s[5], "text msg_fake0003 Understood, I did not run it.");
    let end = events(&out)
        .find_map(|e| match e {
            CapEvent::ToolCallEnd(t) => Some(t),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        end.output.get(),
        Some(&json!("Denied by the capfleet test driver"))
    );
    assert_eq!(
        s.iter()
            .filter(|l| l.starts_with("turn_end end_turn"))
            .count(),
        2
    );
    assert!(!s.iter().any(|l| l.starts_with("error")));
    assert_costs_sum(&out, src);
}

#[test]
fn partial_matches_non_partial_without_duplication() {
    let src = fixture!("partial.ndjson");
    let (out, m) = replay(src);
    let (plain, _) = replay(fixture!("allow.ndjson"));
    assert_eq!(joined_text(&out), joined_text(&plain));
    assert_eq!(
        joined_text(&out),
        "I'll create the file.Created out.txt.Second answer."
    );
    let s = summary(&out);
    assert_eq!(
        s,
        [
            "ready e46f406b-e61a-45ef-a02e-7b31d7883d15",
            "text msg_fake0001 I'll create the ",
            "text msg_fake0001 file.",
            "tool_start toolu_fake0002 Bash",
            "permission 8bb38b78 Bash execute medium",
            "tool_end toolu_fake0002 error=false",
            "text msg_fake0003 Created out.txt.",
            "usage in=38308 out=20 stop=end_turn",
            "turn_end end_turn success",
            "text msg_fake0004 Second answer.",
            "usage in=19188 out=10 stop=end_turn",
            "turn_end end_turn success",
        ]
    );
    assert_eq!(s.iter().filter(|l| l.starts_with("tool_start")).count(), 1);
    assert_costs_sum(&out, src);
    // status, message_start(handled), content_block_start/stop, input_json_delta,
    // message_delta, message_stop are ignored: nothing is malformed.
    assert_eq!(m.stats().malformed_frames, 0);
    assert!(m.stats().ignored_frames > 10);
}

#[test]
fn snapshot_longer_than_stream_emits_only_the_suffix() {
    let mut m = StreamJsonMapper::new();
    let lines = [
        r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1"}}}"#,
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}}"#,
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hel"}}}"#,
        r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"thinking","thinking":"hmm."}]}}"#,
        r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Hello"}]}}"#,
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo"}}}"#,
        r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"Fresh"}]}}"#,
    ];
    let out = replay_into(&mut m, &lines.join("\n"));
    assert_eq!(
        summary(&out),
        [
            "thought hm",
            "text m1 Hel",
            "thought m.",
            "text m1 lo",
            "text m2 Fresh"
        ]
    );
}

#[test]
fn interrupt_is_a_cancellation_not_an_error() {
    let src = fixture!("interrupt.ndjson");
    let (out, m) = replay(src);
    let s = summary(&out);
    assert_eq!(
        s,
        [
            "ready f8190435-f2d1-47cd-8287-ce1c3cdd1052",
            "text msg_fake0001 word0 word",
            "text msg_fake0001 1 word2 wo",
            "text msg_fake0001 rd3 word4 ",
            "text msg_fake0001 word5 word",
            "ack x ok=true",
            "usage in=0 out=0 stop=cancelled",
            "turn_end cancelled error_during_execution",
            "text msg_fake0002 After the interr",
            "text msg_fake0002 upt.",
            "usage in=19162 out=10 stop=end_turn",
            "turn_end end_turn success",
        ]
    );
    assert_eq!(costs(&out), vec![0.0, 0.09606]);
    assert_costs_sum(&out, src);
    assert_eq!(m.stats().malformed_frames, 0);
}

#[test]
fn interrupt_while_permission_pending_withdraws_it() {
    let src = fixture!("interrupt-permission.ndjson");
    let (out, m) = replay(src);
    assert_eq!(
        summary(&out),
        [
            "ready 0efd5348-8313-4068-a50b-8a1c28286011",
            "text msg_fake0001 I'll create the file.",
            "tool_start toolu_fake0002 Bash",
            "permission cbe537d8 Bash execute medium",
            "withdrawn cbe537d8 toolu_fake0002",
            "ack x ok=true",
            "tool_end toolu_fake0002 error=true",
            "usage in=19145 out=10 stop=cancelled",
            "turn_end cancelled error_during_execution",
            "text msg_fake0003 After the interrupt.",
            "usage in=19249 out=10 stop=end_turn",
            "turn_end end_turn success",
        ]
    );
    assert_eq!(m.pending_ids().count(), 0);
    assert_costs_sum(&out, src);
}

#[test]
fn eof_turn_completes() {
    let (out, _) = replay(fixture!("eof.ndjson"));
    assert_eq!(
        summary(&out),
        [
            "ready 5f8a76ee-0b50-4433-81f5-4e19a38ee14d",
            "text msg_fake0001 Slow answer Slow answer Slow answer Slow answer Slow answer Slow answer Slow answer Slow answer ",
            "usage in=19127 out=10 stop=end_turn",
            "turn_end end_turn success",
        ]
    );
}

#[test]
fn resume_new_process_same_session() {
    let src1 = fixture!("resume-1.ndjson");
    let src2 = fixture!("resume-2.ndjson");
    let mut m = StreamJsonMapper::new();
    let out1 = replay_into(&mut m, src1);
    let first_id = m.session().session_id.clone().unwrap();
    m.process_restarted();
    let out2 = replay_into(&mut m, src2);
    let sid = "db6fc24a-0cc3-4f6a-bd3f-873a0fb6930b";
    assert_eq!(first_id, sid);
    assert_eq!(summary(&out1)[0], format!("ready {sid}"));
    assert_eq!(summary(&out2)[0], format!("ready {sid}"));
    assert_eq!(summary(&out2)[1], "text msg_fake0002 The number was 42.");
    // Cost counters restart with the process: the delta is the new total.
    assert_eq!(costs(&out1), vec![0.09591]);
    assert_eq!(costs(&out2), vec![0.09594]);
    assert_eq!(m.session().model.as_deref(), Some("claude-opus-4-8"));
    // Without the restart the second init would not be a new ready.
    let mut same = StreamJsonMapper::new();
    replay_into(&mut same, src1);
    let again = replay_into(&mut same, src2);
    assert!(!summary(&again).iter().any(|l| l.starts_with("ready")));
}

#[test]
fn every_fixture_replays_cleanly() {
    for src in [
        fixture!("allow.ndjson"),
        fixture!("deny.ndjson"),
        fixture!("partial.ndjson"),
        fixture!("interrupt.ndjson"),
        fixture!("interrupt-permission.ndjson"),
        fixture!("eof.ndjson"),
        fixture!("resume-1.ndjson"),
        fixture!("resume-2.ndjson"),
    ] {
        let (out, m) = replay(src);
        let s = summary(&out);
        assert_eq!(s.iter().filter(|l| l.starts_with("ready")).count(), 1);
        let results = src
            .lines()
            .filter(|l| l.contains(r#""type": "result""#) || l.contains(r#""type":"result""#))
            .count();
        assert_eq!(s.iter().filter(|l| l.starts_with("usage")).count(), results);
        assert_eq!(
            s.iter().filter(|l| l.starts_with("turn_end")).count(),
            results
        );
        assert!(!s.iter().any(|l| l.starts_with("error")));
        // Tool calls pair up by id.
        let starts: Vec<_> = s
            .iter()
            .filter_map(|l| l.strip_prefix("tool_start "))
            .map(|r| r.split(' ').next().unwrap())
            .collect();
        let ends: Vec<_> = s
            .iter()
            .filter_map(|l| l.strip_prefix("tool_end "))
            .map(|r| r.split(' ').next().unwrap())
            .collect();
        assert_eq!(starts, ends);
        assert_eq!(m.stats().malformed_frames, 0);
        assert_costs_sum(&out, src);
    }
}

#[test]
fn malformed_unknown_and_oversize_lines_are_counted() {
    let mut m = StreamJsonMapper::new().with_max_line_bytes(1000);
    let long = format!(r#"{{"type":"assistant","pad":"{}"}}"#, "x".repeat(2000));
    let lines = [
        "",
        "   ",
        "not json",
        "[1,2]",
        "42",
        r#"{"type":"assistant""#,
        r#"{"type":"rate_limit_event","rate_limit_info":{}}"#,
        r#"{"type":"system","subtype":"status","status":"requesting"}"#,
        r#"{"type":"system","subtype":"compact_boundary"}"#,
        r#"{"no_type":true}"#,
        r#"{"type":"stream_event","event":{"type":"ping"}}"#,
        r#"{"type":"assistant","message":"oops"}"#,
        long.as_str(),
    ];
    let out = replay_into(&mut m, &lines.join("\n"));
    let stats = m.stats();
    assert_eq!(stats.frames, 11);
    assert_eq!(stats.malformed_frames, 6);
    assert_eq!(stats.ignored_frames, 5);
    let errors: Vec<_> = events(&out)
        .map(|e| match e {
            CapEvent::Error(e) => e,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(errors.len(), 6);
    for e in &errors {
        assert_eq!(e.code, ErrorKind::ParseFailed);
        let excerpt = e.details.get().unwrap()["excerpt"].as_str().unwrap();
        assert!(excerpt.len() <= 200);
    }
    assert!(errors[5].message.contains("exceeds the 1000-byte limit"));
    // A multi-byte character at the cut is never split.
    let mut m = StreamJsonMapper::new();
    let line = format!("{}é garbage", "ü".repeat(150));
    let out = replay_into(&mut m, &line);
    let Some(Output::Event(CapEvent::Error(e))) = out.first() else {
        panic!()
    };
    let excerpt = e.details.get().unwrap()["excerpt"].as_str().unwrap();
    assert!(excerpt.len() <= 200 && excerpt.chars().all(|c| c == 'ü'));
}

#[test]
fn every_truncation_of_every_fixture_line_is_safe() {
    for src in [
        fixture!("allow.ndjson"),
        fixture!("partial.ndjson"),
        fixture!("interrupt-permission.ndjson"),
    ] {
        for line in src.lines() {
            let bytes = line.as_bytes();
            let mut m = StreamJsonMapper::new();
            let mut out = Vec::new();
            for cut in 0..bytes.len() {
                m.on_line(&bytes[..cut], &mut out);
                m.on_line(&bytes[cut..], &mut out);
            }
            assert!(m.stats().frames > 0 || bytes.is_empty());
        }
    }
}

#[test]
fn result_errors_and_api_failures() {
    let cases = [
        (
            r#"{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":5}"#,
            Some(ErrorKind::Other("max_turns".into())),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"error_max_budget_usd","is_error":true}"#,
            Some(ErrorKind::Other("budget_exceeded".into())),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["boom"]}"#,
            Some(ErrorKind::Other("execution_error".into())),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"error_something_new","is_error":true}"#,
            Some(ErrorKind::Other("agent_error".into())),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429"}"#,
            Some(ErrorKind::RateLimit),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":401}"#,
            Some(ErrorKind::AuthError),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"success","is_error":true,"result":"Prompt is too long: prompt is too long"}"#,
            Some(ErrorKind::ContextOverflow),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"success","is_error":false,"stop_reason":"max_tokens","total_cost":0.5}"#,
            None,
            StopReason::MaxTokens,
        ),
    ];
    for (line, code, stop) in cases {
        let mut m = StreamJsonMapper::new();
        let out = replay_into(&mut m, line);
        let errs: Vec<_> = events(&out)
            .filter_map(|e| match e {
                CapEvent::Error(e) => Some(e.code.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(errs, code.into_iter().collect::<Vec<_>>(), "{line}");
        let Some(Output::TurnEnd(t)) = out.last() else {
            panic!("{line}")
        };
        assert_eq!(t.stop_reason, stop, "{line}");
    }
    // Older cost spellings are cumulative too.
    let mut m = StreamJsonMapper::new();
    let out = replay_into(
        &mut m,
        "{\"type\":\"result\",\"subtype\":\"success\",\"cost_usd\":0.25}\n{\"type\":\"result\",\"subtype\":\"success\",\"cost_usd\":0.75}",
    );
    assert_eq!(costs(&out), vec![0.25, 0.5]);
    // An interrupted turn reports a cumulative 0: no negative delta, and the next
    // turn's delta is over the highest total seen.
    let mut m = StreamJsonMapper::new();
    let out = replay_into(
        &mut m,
        &[
            r#"{"type":"result","subtype":"success","total_cost_usd":0.1}"#,
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"terminal_reason":"aborted_streaming","total_cost_usd":0}"#,
            r#"{"type":"result","subtype":"success","total_cost_usd":0.3}"#,
        ]
        .join("\n"),
    );
    assert_eq!(costs(&out), vec![0.1, 0.0, 0.2]);
    assert!(!events(&out).any(|e| matches!(e, CapEvent::Error(_))));
}

#[test]
fn ask_user_question_and_unsupported_control_requests() {
    let mut m = StreamJsonMapper::new();
    let ask = json!({"type": "control_request", "request_id": "q1", "request": {
    "subtype": "can_use_tool", "tool_name": "AskUserQuestion", "tool_use_id": "toolu_q",
    "input": {"questions": [
        {"question": "Which DB?", "header": "DB", "multiSelect": false,
         "options": [{"label": "pg", "description": "Postgres"}, {"label": "sqlite"}]},
        {"question": "Which extras?", "header": "Extras", "multiSelect": true,
         "options": [{"label": "a"}, {"label": "b"}]}
    ]}}});
    let hook =
        r#"{"type":"control_request","request_id":"h1","request":{"subtype":"hook_callback"}}"#;
    let out = replay_into(&mut m, &format!("{ask}\n{hook}"));
    assert_eq!(
        summary(&out),
        [
            "ask q1 Which DB?\nWhich extras?",
            "unsupported hook_callback"
        ]
    );
    let Output::Event(CapEvent::AskUser(a)) = &out[0] else {
        panic!()
    };
    let form = a.form.get().unwrap();
    assert_eq!(form["properties"]["Which DB?"]["oneOf"][0]["const"], "pg");
    assert_eq!(form["properties"]["Which extras?"]["type"], "array");
    assert_eq!(m.pending("q1").unwrap().kind, PendingKind::Ask);

    let err = m
        .respond_permission("q1", Decision::AllowOnce, None)
        .unwrap_err();
    assert_eq!(err, ResponseError::NotAPermission("q1".into()));
    let bad = m.respond_ask("q1", &json!("pg")).unwrap_err();
    assert_eq!(bad.code(), CapCode::InvalidAnswer);
    let line = m
        .respond_ask(
            "q1",
            &json!({"Which DB?": "pg", "Which extras?": ["a", "b"]}),
        )
        .unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    let r = &v["response"]["response"];
    assert_eq!(r["behavior"], "allow");
    assert_eq!(
        r["updatedInput"]["answers"],
        json!({"Which DB?": "pg", "Which extras?": "a, b"})
    );
    assert_eq!(r["updatedInput"]["questions"][0]["header"], "DB");
    assert_eq!(
        m.respond_ask("q1", &json!({})).unwrap_err(),
        ResponseError::UnknownRequest("q1".into())
    );
    let line = outbound::control_error_response("h1", "unsupported");
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["response"]["subtype"], "error");
}

fn stdin_lines(src: &str) -> Vec<Value> {
    src.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn parse_line(line: &str) -> Value {
    assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
    serde_json::from_str(line).unwrap()
}

#[test]
fn outbound_frames_equal_what_claude_was_sent() {
    // allow: prompt, permission allow (via the mapper's pending input), prompt.
    let sent = stdin_lines(fixture!("allow.stdin.ndjson"));
    let mut m = StreamJsonMapper::new();
    replay_into(
        &mut m,
        fixture!("allow.ndjson")
            .lines()
            .take(4)
            .collect::<Vec<_>>()
            .join("\n")
            .as_str(),
    );
    assert_eq!(
        parse_line(&outbound::user_frame("Create out.txt containing hello.")),
        sent[0]
    );
    let req = "ab8b690a-0191-4731-87e1-245305f55ca2";
    assert_eq!(
        parse_line(
            &m.respond_permission(req, Decision::AllowOnce, None)
                .unwrap()
        ),
        sent[1]
    );
    assert_eq!(
        m.respond_permission(req, Decision::AllowOnce, None)
            .unwrap_err()
            .code(),
        CapCode::UnknownPermission
    );
    let inject = UserInputInject::text("Now just say something.");
    assert_eq!(parse_line(&outbound::user_inject(&inject)), sent[2]);

    // deny with a message.
    let sent = stdin_lines(fixture!("deny.stdin.ndjson"));
    let input = json!({"command": "echo hello > out.txt", "description": "Create out.txt"});
    let line = outbound::permission_response(
        "6b1de983-a354-4478-b2fb-c054801b3104",
        Decision::Deny,
        &input,
        Some("Denied by the capfleet test driver"),
    );
    assert_eq!(parse_line(&line), sent[1]);

    // interrupt.
    let sent = stdin_lines(fixture!("interrupt.stdin.ndjson"));
    assert_eq!(parse_line(&outbound::interrupt_request("x")), sent[1]);
    let sent = stdin_lines(fixture!("interrupt-permission.stdin.ndjson"));
    assert_eq!(parse_line(&outbound::interrupt_request("x")), sent[1]);

    // Block content other than one text block is passed through.
    let blocks = json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]);
    let inject = UserInputInject {
        content: blocks.clone(),
        meta: None,
        extra: Default::default(),
    };
    assert_eq!(
        parse_line(&outbound::user_inject(&inject))["message"]["content"],
        blocks
    );
}

const MANIFEST: &str = r#"
[agent]
name = "claude-code"
binary = "claude"
profiles = []

[startup]
command = ["claude"]
ready_when = { silence_ms = 100 }
{STARTUP}

[fast_path]
stream_json = ["claude", "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"{PROMPT}]

[pty]
cols = 80
rows = 24

[capabilities]
streaming_output = true
"#;

fn manifest(startup: &str, prompt_tool: bool) -> Manifest {
    let prompt = if prompt_tool {
        r#", "--permission-prompt-tool", "stdio""#
    } else {
        ""
    };
    let src = MANIFEST
        .replace("{STARTUP}", startup)
        .replace("{PROMPT}", prompt);
    Manifest::parse(&src, "test").unwrap().manifest
}

const FULL: &str = r#"model_arg = "--model"
resume_arg = "--resume"
permission_mode_arg = "--permission-mode"
cwd_arg = "--cwd=""#;

#[test]
fn argv_table() {
    let base = "claude -p --input-format stream-json --output-format stream-json --verbose --permission-prompt-tool stdio";
    let sid = "db6fc24a-0cc3-4f6a-bd3f-873a0fb6930b";
    let cases: Vec<(&str, SessionConfig, String)> = vec![
        ("", SessionConfig::new("/w"), base.to_owned()),
        (FULL, SessionConfig::new("/w"), format!("{base} --cwd=/w")),
        (
            FULL,
            SessionConfig::new("/w").with_model("claude-opus-4-8"),
            format!("{base} --cwd=/w --model claude-opus-4-8"),
        ),
        (
            FULL,
            SessionConfig::new("/w").with_resume(sid),
            format!("{base} --cwd=/w --resume {sid}"),
        ),
        (
            FULL,
            SessionConfig::new("/w").with_permission_mode(PermissionMode::None),
            format!("{base} --cwd=/w --permission-mode bypassPermissions"),
        ),
        (
            FULL,
            SessionConfig::new("/w").with_permission_mode(PermissionMode::Confirm),
            format!("{base} --cwd=/w --permission-mode default"),
        ),
        (
            FULL,
            SessionConfig::new("/w").with_permission_mode(PermissionMode::Interactive),
            format!("{base} --cwd=/w --permission-mode default"),
        ),
        (
            "",
            SessionConfig::new("/w").with_permission_mode(PermissionMode::Interactive),
            base.to_owned(),
        ),
    ];
    for (startup, config, want) in cases {
        let got = build_argv(&manifest(startup, true), &config).unwrap();
        assert_eq!(got.argv.join(" "), want, "{startup} {config:?}");
        assert!(got.warnings.is_empty(), "{:?}", got.warnings);
    }
    // The resume argv is exactly what the recording used.
    let llm: Value = serde_json::from_str(fixture!("resume-2.llm.json")).unwrap();
    let got = build_argv(
        &manifest(FULL.lines().nth(1).unwrap(), true),
        &SessionConfig::new("/w").with_resume(sid),
    )
    .unwrap();
    assert_eq!(serde_json::to_value(&got.argv).unwrap(), llm["argv"][0]);
}

#[test]
fn argv_errors_and_warnings() {
    let bare = manifest("", false);
    assert_eq!(
        build_argv(&bare, &SessionConfig::new("/w").with_model("m")),
        Err(ArgvError::MissingManifestKey {
            field: "model",
            key: "startup.model_arg"
        })
    );
    assert_eq!(
        build_argv(&bare, &SessionConfig::new("/w").with_resume("s")),
        Err(ArgvError::MissingManifestKey {
            field: "session_resume_id",
            key: "startup.resume_arg"
        })
    );
    let c = SessionConfig::new("/w")
        .with_permission_mode(PermissionMode::None)
        .with_system_prompt("be brief")
        .with_max_turns(3)
        .with_budget_usd(1.0);
    let got = build_argv(&bare, &c).unwrap();
    assert_eq!(
        got.warnings,
        [
            ArgvWarning::Ignored {
                field: "permission_mode",
                key: "startup.permission_mode_arg"
            },
            ArgvWarning::Inexpressible("system_prompt"),
            ArgvWarning::Inexpressible("max_turns"),
            ArgvWarning::Inexpressible("budget_usd"),
        ]
    );
    let got = build_argv(
        &bare,
        &SessionConfig::new("/w").with_permission_mode(PermissionMode::Interactive),
    )
    .unwrap();
    assert_eq!(
        got.warnings,
        [ArgvWarning::PromptsNotRouted(PermissionMode::Interactive)]
    );
    let mut none = bare.clone();
    none.fast_path.stream_json = Default::default();
    assert_eq!(
        build_argv(&none, &SessionConfig::new("/w")),
        Err(ArgvError::Unsupported)
    );
}

#[test]
fn permission_scope_and_risk_on_the_wire() {
    let mut m = StreamJsonMapper::new();
    let line = json!({"type": "control_request", "request_id": "r1", "request": {
        "subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": "rm -rf /"}}});
    let out = replay_into(&mut m, &line.to_string());
    let Output::Event(CapEvent::PermissionRequest(p)) = &out[0] else {
        panic!()
    };
    assert_eq!(
        (p.scope, p.risk_level),
        (Some(PermissionScope::Execute), RiskLevel::High)
    );
    let out = replay_into(
        &mut m,
        r#"{"type":"control_response","response":{"subtype":"error","request_id":"i1","error":"nope"}}"#,
    );
    assert_eq!(
        out,
        [Output::ControlAck(ControlAck {
            request_id: "i1".into(),
            result: Err("nope".into())
        })]
    );
    // A turn end withdraws what is still pending.
    let out = replay_into(&mut m, r#"{"type":"result","subtype":"success"}"#);
    assert_eq!(summary(&out)[1], "withdrawn r1 -");
}

/// Throughput against parsing the same lines into `serde_json::Value` (target: at
/// least half as fast). Run with
/// `cargo test --release -p capfleet-actors --test stream_json_fixtures -- --ignored`.
#[test]
#[ignore = "timing; run in release"]
fn throughput_vs_value_parsing() {
    use std::time::Instant;
    let src = [fixture!("partial.ndjson"), fixture!("allow.ndjson")].concat();
    let lines: Vec<&[u8]> = src.lines().map(str::as_bytes).collect();
    let rounds = 1_000_000 / lines.len() + 1;
    let start = Instant::now();
    let mut n = 0usize;
    for _ in 0..rounds {
        for l in &lines {
            n += serde_json::from_slice::<Value>(l)
                .map_or(0, |v| v.as_object().map_or(0, |o| o.len()));
        }
    }
    let raw = start.elapsed();
    let mut m = StreamJsonMapper::new();
    let mut out = Vec::new();
    let start = Instant::now();
    for _ in 0..rounds {
        for l in &lines {
            m.on_line(l, &mut out);
            out.clear();
        }
        m.process_restarted();
    }
    let mapped = start.elapsed();
    let frames = rounds * lines.len();
    eprintln!("{frames} frames: Value {raw:?}, mapper {mapped:?} ({n})");
    assert_eq!(m.stats().malformed_frames, 0);
    assert!(
        mapped.as_secs_f64() <= 2.0 * raw.as_secs_f64(),
        "mapper slower than half of Value parsing"
    );
}
