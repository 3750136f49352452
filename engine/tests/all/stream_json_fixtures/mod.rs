//! Replays Claude Code 2.1.337's recorded stream-json frames
//! (`tests/fixtures/claude/*.ndjson`) through the mapper, and checks outbound
//! frames and argv against what the recording driver wrote. 2.1.197's recordings
//! whose cost reads otherwise (`tests/fixtures/claude/2.1.197/`: a per-process total
//! only, from zero in a resumed process; an interrupted request never billed) are
//! replayed too: an older Claude Code is still charged right.

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
    "ready 9d9ff890-91db-481d-82ee-71025d0dfe8f",
    "text msg_fake0001 I'll create the file.",
    "tool_start toolu_fake0002 Bash",
    "permission a72edca0 Bash execute medium",
    "tool_end toolu_fake0002 error=false",
    "text msg_fake0003 Created out.txt.",
    "usage in=23605 out=20 stop=end_turn",
    "turn_end end_turn success",
];

#[test]
fn allow() {
    let src = fixture!("allow.ndjson");
    let (out, m) = replay(src);
    let mut want: Vec<&str> = ALLOW_TURN_1.to_vec();
    want.extend([
        "text msg_fake0004 Second answer.",
        "usage in=11836 out=10 stop=end_turn",
        "turn_end end_turn success",
    ]);
    assert_eq!(summary(&out), want);
    assert_eq!(costs(&out), vec![0.09482, 0.047544]);
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
    assert_eq!(s.model.as_deref(), Some("claude-opus-5-5"));
    assert_eq!(s.cwd.as_deref(), Some("/tmp/WORKDIR"));
    assert_eq!(s.permission_mode.as_deref(), Some("default"));
    assert_eq!(s.tools.len(), 25);

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
    assert_eq!(u.model_id.as_deref(), Some("claude-opus-5-5"));
    assert_eq!(u.cache_read_tokens.get(), Some(&0));
    assert_eq!(u.cache_creation_tokens.get(), Some(&0));
    assert_eq!(u.duration_ms.get(), Some(&638));
    assert_eq!(u.thinking_tokens.get(), Some(&0));
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
    assert_eq!(s[0], "ready 0e5299b0-40f7-486a-b58f-b75a19a373ef");
    assert_eq!(s[3], "permission 753e84aa Bash execute medium");
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
            "ready 77ac6594-ceaa-4986-a16d-ff5117936015",
            "text msg_fake0001 I'll create the ",
            "text msg_fake0001 file.",
            "tool_start toolu_fake0002 Bash",
            "permission bda6c892 Bash execute medium",
            "tool_end toolu_fake0002 error=false",
            "text msg_fake0003 Created out.txt.",
            "usage in=23608 out=20 stop=end_turn",
            "turn_end end_turn success",
            "text msg_fake0004 Second answer.",
            "usage in=11838 out=10 stop=end_turn",
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

/// The interrupted turn's summary, its usage line aside, and its second turn.
fn interrupted(ready: &str, cancelled_usage: &str, usage_2: &str) -> Vec<String> {
    [
        ready,
        "text msg_fake0001 word0 word",
        "text msg_fake0001 1 word2 wo",
        "text msg_fake0001 rd3 word4 ",
        "text msg_fake0001 word5 word",
        "ack x ok=true",
        cancelled_usage,
        "turn_end cancelled error_during_execution",
        "text msg_fake0002 After the interr",
        "text msg_fake0002 upt.",
        usage_2,
        "turn_end end_turn success",
    ]
    .map(str::to_owned)
    .to_vec()
}

#[test]
fn interrupt_is_a_cancellation_not_an_error() {
    // 2.1.337 bills the interrupted request (its `usage` all zero, the tokens and
    // cost in `model_usage_since_last_result`); its `interrupt` reply has a body.
    let src = fixture!("interrupt.ndjson");
    let (out, m) = replay(src);
    assert_eq!(
        summary(&out),
        interrupted(
            "ready d062d416-d4bc-461d-ad2a-c1cd21452daf",
            "usage in=11784 out=13 stop=cancelled",
            "usage in=11812 out=10 stop=end_turn",
        )
    );
    assert_eq!(costs(&out), vec![0.047396, 0.047448]);
    assert_costs_sum(&out, src);
    assert_eq!(m.stats().malformed_frames, 0);
    // 2.1.197 billed nothing for it.
    let src = fixture!("2.1.197/interrupt.ndjson");
    let (out, _) = replay(src);
    assert_eq!(
        summary(&out),
        interrupted(
            "ready f8190435-f2d1-47cd-8287-ce1c3cdd1052",
            "usage in=0 out=0 stop=cancelled",
            "usage in=19162 out=10 stop=end_turn",
        )
    );
    assert_eq!(costs(&out), vec![0.0, 0.09606]);
    assert_costs_sum(&out, src);
}

#[test]
fn interrupt_while_permission_pending_withdraws_it() {
    let src = fixture!("interrupt-permission.ndjson");
    let (out, m) = replay(src);
    assert_eq!(
        summary(&out),
        [
            "ready 24ab43ea-624b-40d6-bb8c-cf358b09e4ca",
            "text msg_fake0001 I'll create the file.",
            "tool_start toolu_fake0002 Bash",
            "permission e4542879 Bash execute medium",
            "withdrawn e4542879 toolu_fake0002",
            "ack x ok=true",
            "tool_end toolu_fake0002 error=true",
            "usage in=11795 out=10 stop=cancelled",
            "turn_end cancelled error_during_execution",
            "text msg_fake0003 After the interrupt.",
            "usage in=11899 out=10 stop=end_turn",
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
            "ready 375a9a79-c423-4adc-945b-9666bc83d4ff",
            "text msg_fake0001 Slow answer Slow answer Slow answer Slow answer Slow answer Slow answer Slow answer Slow answer ",
            "usage in=11778 out=10 stop=end_turn",
            "turn_end end_turn success",
        ]
    );
}

/// `resume-1` then `resume-2` (a new process, `--resume`) through one mapper told of
/// the restart: the same session, a new ready, each turn's own cost. Returns the costs.
fn resume_pair(src1: &str, src2: &str, sid: &str) -> (Vec<f64>, Vec<f64>, StreamJsonMapper) {
    let mut m = StreamJsonMapper::new();
    let out1 = replay_into(&mut m, src1);
    assert_eq!(m.session().session_id.as_deref(), Some(sid));
    m.process_restarted();
    let out2 = replay_into(&mut m, src2);
    assert_eq!(summary(&out1)[0], format!("ready {sid}"));
    assert_eq!(summary(&out2)[0], format!("ready {sid}"));
    assert_eq!(summary(&out2)[1], "text msg_fake0002 The number was 42.");
    // Without the restart the second init would not be a new ready.
    let mut same = StreamJsonMapper::new();
    replay_into(&mut same, src1);
    let again = replay_into(&mut same, src2);
    assert!(!summary(&again).iter().any(|l| l.starts_with("ready")));
    (costs(&out1), costs(&out2), m)
}

#[test]
fn resume_new_process_same_session() {
    let (src1, src2) = (fixture!("resume-1.ndjson"), fixture!("resume-2.ndjson"));
    let sid = "dcdc10f5-cb9b-4b75-9301-311aedafc504";
    let (c1, c2, m) = resume_pair(src1, src2, sid);
    // 2.1.337: the resumed process's total (0.094708) also holds resume-1's cost; the
    // turn is charged only its own, so the conversation is charged its total once.
    assert_eq!(c1, vec![0.047328]);
    assert_eq!(c2, vec![0.04738]);
    assert!((c1[0] + c2[0] - last_total_cost(src2)).abs() < 1e-9);
    assert_eq!(m.session().model.as_deref(), Some("claude-opus-5-5"));

    // 2.1.197: the resumed process's total starts from zero.
    let (src1, src2) = (
        fixture!("2.1.197/resume-1.ndjson"),
        fixture!("2.1.197/resume-2.ndjson"),
    );
    let (c1, c2, m) = resume_pair(src1, src2, "db6fc24a-0cc3-4f6a-bd3f-873a0fb6930b");
    assert_eq!(c1, vec![0.09591]);
    assert_eq!(c2, vec![last_total_cost(src2)]);
    assert_eq!(m.session().model.as_deref(), Some("claude-opus-4-8"));
}

#[test]
fn every_fixture_replays_cleanly() {
    for (src, whole_total) in [
        (fixture!("allow.ndjson"), true),
        (fixture!("deny.ndjson"), true),
        (fixture!("partial.ndjson"), true),
        (fixture!("interrupt.ndjson"), true),
        (fixture!("interrupt-permission.ndjson"), true),
        (fixture!("eof.ndjson"), true),
        (fixture!("resume-1.ndjson"), true),
        // Its total also holds resume-1's cost: see resume_new_process_same_session.
        (fixture!("resume-2.ndjson"), false),
        (fixture!("2.1.197/interrupt.ndjson"), true),
        (fixture!("2.1.197/resume-1.ndjson"), true),
        (fixture!("2.1.197/resume-2.ndjson"), true),
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
        if whole_total {
            assert_costs_sum(&out, src);
        }
    }
}
