//! The mapper against lines as Codex CLI 0.171.0 writes them (captured offline
//! against the fake LLM), and the item shapes of its `exec` event schema.

use super::*;
use crate::protocol::{FsEvent, PlanStatus};

fn map(mapper: &mut CodexExecMapper, lines: &[&str]) -> Vec<Output> {
    let mut out = Vec::new();
    for line in lines {
        mapper.on_line(line.as_bytes(), &mut out);
    }
    out
}

fn events(out: &[Output]) -> Vec<&CapEvent> {
    out.iter()
        .filter_map(|o| match o {
            Output::Event(e) => Some(e),
            _ => None,
        })
        .collect()
}

const TURN_WITH_COMMAND: &[&str] = &[
    r#"{"type":"thread.started","thread_id":"01a232c9-4370-7e10-aede-aec44ce15a2b"}"#,
    r#"{"type":"turn.started"}"#,
    r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'echo hi from shell'","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#,
    r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'echo hi from shell'","aggregated_output":"hi from shell\n","exit_code":0,"status":"completed"}}"#,
    r#"{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Done: it said hi."}}"#,
    r#"{"type":"turn.completed","usage":{"input_tokens":17429,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":20,"reasoning_output_tokens":0}}"#,
];

#[test]
fn a_turn_with_a_command_maps_to_a_tool_call_text_usage_and_its_end() {
    let mut m = CodexExecMapper::new(1, Some("gpt-5-codex".into()), Totals::default());
    let out = map(&mut m, TURN_WITH_COMMAND);
    assert_eq!(
        out[0],
        Output::ThreadId("01a232c9-4370-7e10-aede-aec44ce15a2b".into())
    );
    let kinds: Vec<&str> = events(&out).iter().map(|e| e.kind()).collect();
    assert_eq!(
        kinds,
        [
            "cap.tool_call.start",
            "cap.tool_call.delta",
            "cap.tool_call.end",
            "cap.text_chunk",
            "cap.usage"
        ]
    );
    let CapEvent::ToolCallStart(start) = events(&out)[0] else {
        panic!("start")
    };
    assert_eq!(
        start.call_id, "t1.item_1",
        "ids of different turns never meet"
    );
    let CapEvent::ToolCallEnd(end) = events(&out)[2] else {
        panic!("end")
    };
    assert_eq!(end.is_error.get(), Some(&false));
    assert_eq!(end.output.get().expect("output")["exit_code"], 0);
    let CapEvent::Usage(u) = events(&out)[4] else {
        panic!("usage")
    };
    assert_eq!(
        (u.input_tokens.get(), u.output_tokens.get()),
        (Some(&17429), Some(&20))
    );
    assert_eq!(u.model_id.get().map(String::as_str), Some("gpt-5-codex"));
    assert_eq!(
        out.last(),
        Some(&Output::TurnEnd(TurnEnd {
            stop_reason: StopReason::EndTurn,
            is_error: false,
            result_text: Some("Done: it said hi.".into()),
        }))
    );
    assert_eq!(
        m.stats(),
        MapperStats {
            lines: 6,
            malformed: 0,
            unknown: 0
        }
    );
}

#[test]
fn usage_is_what_the_turn_added_to_the_threads_running_count() {
    // Codex 0.171.0: turn 1 reported 17409/20, the resumed turn 2 reported 26172/30.
    let turn = |input: u64, output: u64| {
        format!(
            r#"{{"type":"turn.completed","usage":{{"input_tokens":{input},"cached_input_tokens":100,"cache_write_input_tokens":0,"output_tokens":{output},"reasoning_output_tokens":0}}}}"#
        )
    };
    let mut first = CodexExecMapper::new(1, None, Totals::default());
    map(&mut first, &[&turn(17409, 20)]);
    let mut second = CodexExecMapper::new(2, None, first.totals());
    let out = map(&mut second, &[&turn(26172, 30)]);
    let CapEvent::Usage(u) = events(&out)[0] else {
        panic!("usage")
    };
    assert_eq!(
        u.input_tokens.get(),
        Some(&8763),
        "cache reads excluded: 26172-17409"
    );
    assert_eq!(u.output_tokens.get(), Some(&10));
    assert_eq!(u.cache_read_tokens.get(), Some(&0));
    assert_eq!(second.totals().input_tokens, 26172);
}

#[test]
fn streamed_states_of_an_item_are_said_once() {
    let mut m = CodexExecMapper::new(1, None, Totals::default());
    let out = map(
        &mut m,
        &[
            r#"{"type":"item.started","item":{"id":"m","type":"agent_message","text":""}}"#,
            r#"{"type":"item.updated","item":{"id":"m","type":"agent_message","text":"Hel"}}"#,
            r#"{"type":"item.updated","item":{"id":"m","type":"agent_message","text":"Hello"}}"#,
            r#"{"type":"item.completed","item":{"id":"m","type":"agent_message","text":"Hello, wörld"}}"#,
            r#"{"type":"item.updated","item":{"id":"r","type":"reasoning","text":"think"}}"#,
            r#"{"type":"item.completed","item":{"id":"r","type":"reasoning","text":"thinking"}}"#,
        ],
    );
    let texts: Vec<&str> = events(&out)
        .iter()
        .map(|e| match e {
            CapEvent::TextChunk(t) => t.text.as_str(),
            CapEvent::Thought(t) => t.text.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(texts, ["Hel", "lo", ", wörld", "think", "ing"]);
}

#[test]
fn file_changes_mcp_calls_searches_and_todos() {
    let mut m = CodexExecMapper::new(1, None, Totals::default());
    let out = map(
        &mut m,
        &[
            r#"{"type":"item.completed","item":{"id":"f","type":"file_change","changes":[{"path":"src/a.rs","kind":"update"},{"path":"b.txt","kind":"add"},{"path":"c","kind":"delete"}],"status":"completed"}}"#,
            r#"{"type":"item.started","item":{"id":"x","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"a"},"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"x","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"a"},"result":null,"error":{"message":"down"},"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"w","type":"web_search","query":"rust sse"}}"#,
            r#"{"type":"item.updated","item":{"id":"t","type":"todo_list","items":[{"text":"read","completed":true},{"text":"write","completed":false}]}}"#,
        ],
    );
    let ev = events(&out);
    let changes: Vec<(String, FsEvent)> = ev
        .iter()
        .filter_map(|e| match e {
            CapEvent::FsChange(c) => Some((c.path.clone(), c.event)),
            _ => None,
        })
        .collect();
    assert_eq!(
        changes,
        [
            ("src/a.rs".into(), FsEvent::Modified),
            ("b.txt".into(), FsEvent::Created),
            ("c".into(), FsEvent::Deleted)
        ]
    );
    let starts: Vec<&str> = ev
        .iter()
        .filter_map(|e| match e {
            CapEvent::ToolCallStart(s) => Some(s.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(starts, ["file_change", "mcp__docs__search", "web_search"]);
    let failed: Vec<bool> = ev
        .iter()
        .filter_map(|e| match e {
            CapEvent::ToolCallEnd(end) => end.is_error.get().copied(),
            _ => None,
        })
        .collect();
    assert_eq!(failed, [false, true, false]);
    let Some(CapEvent::Plan(plan)) = ev.last() else {
        panic!("plan")
    };
    assert_eq!(plan.entries.len(), 2);
    assert_eq!(plan.entries[0].status, PlanStatus::Completed);
}

#[test]
fn a_failed_turn_is_one_error_with_its_code_then_an_error_end() {
    let mut m = CodexExecMapper::new(1, None, Totals::default());
    let out = map(
        &mut m,
        &[
            r#"{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}"#,
            r#"{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}"#,
            r#"{"type":"error","message":"{\"error\": {\"message\": \"context length exceeded: prompt too long\", \"type\": \"invalid_request_error\", \"code\": null}}"}"#,
            r#"{"type":"turn.failed","error":{"message":"{\"error\": {\"message\": \"context length exceeded: prompt too long\", \"type\": \"invalid_request_error\", \"code\": null}}"}}"#,
        ],
    );
    let codes: Vec<(ErrorKind, bool)> = events(&out)
        .iter()
        .map(|e| match e {
            CapEvent::Error(e) => (e.code.clone(), e.retryable.get() == Some(&true)),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        codes,
        [
            (ErrorKind::Other("agent_error".into()), true),
            (ErrorKind::ContextOverflow, false)
        ]
    );
    assert!(matches!(
        out.last(),
        Some(Output::TurnEnd(TurnEnd {
            stop_reason: StopReason::Error,
            is_error: true,
            ..
        }))
    ));
    let mut m = CodexExecMapper::new(1, None, Totals::default());
    let out = map(
        &mut m,
        &[r#"{"type":"turn.failed","error":{"message":"429 Too Many Requests"}}"#],
    );
    let CapEvent::Error(e) = events(&out)[0] else {
        panic!("error")
    };
    assert_eq!(e.code, ErrorKind::RateLimit);
}

#[test]
fn garbage_is_counted_and_unknown_kinds_are_kept_verbatim_on_the_usage() {
    let mut m = CodexExecMapper::new(1, None, Totals::default());
    let mut lines = vec![
        "not json at all".to_owned(),
        r#"{"no_type":1}"#.to_owned(),
        r#"{"type":"item.completed","item":{"id":"z","type":"collab_tool_call","x":1}}"#.to_owned(),
    ];
    for i in 0..(KEPT_UNKNOWN + 4) {
        lines.push(format!(r#"{{"type":"future.event","n":{i}}}"#));
    }
    lines.push(
        r#"{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}"#.to_owned(),
    );
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let out = map(&mut m, &refs);
    let stats = m.stats();
    assert_eq!(stats.malformed, 2);
    assert_eq!(stats.unknown, 1 + KEPT_UNKNOWN as u64 + 4);
    let parse_failed = events(&out)
        .iter()
        .filter(|e| matches!(e, CapEvent::Error(x) if x.code == ErrorKind::ParseFailed))
        .count();
    assert_eq!(parse_failed, 2);
    let Some(CapEvent::Usage(u)) = events(&out).last().copied() else {
        panic!("usage")
    };
    let kept = u
        .meta
        .as_ref()
        .and_then(|m| m.get(META_UNKNOWN))
        .expect("kept");
    assert_eq!(kept.as_array().map(Vec::len), Some(KEPT_UNKNOWN));
    assert_eq!(kept[0]["type"], "collab_tool_call");
    assert_eq!(kept[0]["id"], "z", "kept verbatim, not renamed");
}
