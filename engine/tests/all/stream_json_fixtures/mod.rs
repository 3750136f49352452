//! Replays Claude Code 2.1.197's recorded stream-json frames
//! (`tests/fixtures/claude/*.ndjson`) through the mapper, and checks outbound
//! frames and argv against what the recording driver wrote.

use capfleet_engine::manifest::Manifest;
use capfleet_engine::protocol::{
    CapCode, CapEvent, Decision, ErrorKind, HasMeta, PermissionMode, PermissionScope, RiskLevel,
    SessionConfig, StopReason, UserInputInject,
};
use capfleet_wire::bindings::stream_json::{
    ArgvError, ArgvWarning, ControlAck, MapperStats, Output, PendingKind, ResponseError,
    StreamJsonMapper, build_argv, outbound,
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

mod robustness;
mod written;

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
