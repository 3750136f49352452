//! The frame mapper on frames of both spellings.

use serde_json::{Value, json};

use super::datapart;
use super::frames::{FrameMapper, Mapped, PLAIN_ASK};
use crate::protocol::{CapEvent, ErrorKind, RiskLevel, StopReason};

fn map(plain: bool, frames: &[Value]) -> Vec<Mapped> {
    let mut m = FrameMapper::new(plain, 1 << 20);
    let mut out = Vec::new();
    for f in frames {
        m.on_frame(&json!({"jsonrpc": "2.0", "id": 1, "result": f}), &mut out);
    }
    out
}

fn events(out: &[Mapped]) -> Vec<&CapEvent> {
    out.iter()
        .filter_map(|m| match m {
            Mapped::Event(e) => Some(e),
            _ => None,
        })
        .collect()
}

#[test]
fn a_1_0_turn_maps_text_tool_calls_usage_and_completion() {
    let tool = datapart::encode(&CapEvent::tool_start(
        "c1",
        "Bash",
        json!({"command": "ls"}),
    ));
    let usage = json!({"_meta": {"cap.kind": "cap.usage"}, "input_tokens": 7, "output_tokens": 2});
    let out = map(
        false,
        &[
            json!({"task": {"id": "t1", "contextId": "ctx", "status": {"state": "TASK_STATE_SUBMITTED"}}}),
            json!({"message": {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "Hel"}, {"text": "lo"}, {"data": tool}]}}),
            json!({"statusUpdate": {"taskId": "t1", "contextId": "ctx", "status": {"state": "TASK_STATE_COMPLETED",
            "message": {"messageId": "m2", "role": "ROLE_AGENT", "parts": [{"data": usage}]}}}}),
        ],
    );
    assert_eq!(
        out[0],
        Mapped::Task {
            task_id: "t1".into(),
            context_id: Some("ctx".into())
        }
    );
    let ev = events(&out);
    assert!(matches!(ev[0], CapEvent::TextChunk(t) if t.text == "Hel"));
    assert!(matches!(ev[2], CapEvent::ToolCallStart(t) if t.name == "Bash"));
    assert!(matches!(ev[3], CapEvent::Usage(u) if u.input_tokens.get() == Some(&7)));
    assert_eq!(
        out.last(),
        Some(&Mapped::End {
            stop_reason: StopReason::EndTurn,
            is_error: false
        })
    );
}

#[test]
fn a_0_3_input_required_carries_the_permission_request_and_pauses() {
    let req = datapart::encode(&CapEvent::permission_request(
        "r1",
        "Bash",
        Some(json!({"command": "rm x"})),
        RiskLevel::High,
    ));
    let out = map(
        false,
        &[
            json!({"kind": "status-update", "taskId": "t9", "contextId": "c9", "final": true,
            "status": {"state": "input-required", "message": {"kind": "message", "messageId": "m", "role": "agent",
                "parts": [{"kind": "text", "text": "may I?"}, {"kind": "data", "data": req}]}}}),
        ],
    );
    let ev = events(&out);
    assert!(
        ev.iter()
            .any(|e| matches!(e, CapEvent::PermissionRequest(p) if p.req_id == "r1"))
    );
    assert!(!ev.iter().any(|e| matches!(e, CapEvent::AskUser(_))));
    assert_eq!(out.last(), Some(&Mapped::Paused));
}

#[test]
fn a_plain_agents_input_required_is_an_ask_of_its_text_and_data_parts_are_dropped() {
    let out = map(
        true,
        &[
            json!({"kind": "message", "messageId": "m", "role": "agent", "parts": [{"kind": "data", "data": {"_meta": {"cap.kind": "cap.usage"}}}]}),
            json!({"kind": "status-update", "taskId": "t", "status": {"state": "input-required",
            "message": {"kind": "message", "messageId": "q", "role": "agent", "parts": [{"kind": "text", "text": "Which DB?"}]}}}),
        ],
    );
    let ev = events(&out);
    assert!(!ev.iter().any(|e| matches!(e, CapEvent::Usage(_))));
    assert!(ev.iter().any(
        |e| matches!(e, CapEvent::AskUser(a) if a.ask_id == PLAIN_ASK && a.prompt == "Which DB?")
    ));
}

#[test]
fn auth_required_failed_and_errors_end_the_turn_with_a_cap_error() {
    let out = map(
        false,
        &[
            json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_AUTH_REQUIRED"}}}),
        ],
    );
    assert!(matches!(events(&out)[0], CapEvent::Error(e) if e.code == ErrorKind::AuthError));
    assert_eq!(
        out.last(),
        Some(&Mapped::End {
            stop_reason: StopReason::Error,
            is_error: true
        })
    );
    let out = map(
        false,
        &[
            json!({"kind": "status-update", "taskId": "t", "status": {"state": "canceled"}, "final": true}),
        ],
    );
    assert_eq!(
        out.last(),
        Some(&Mapped::End {
            stop_reason: StopReason::Cancelled,
            is_error: false
        })
    );
    let mut m = FrameMapper::new(false, 10);
    let mut out = Vec::new();
    m.on_frame(
        &json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "Task not found"}}),
        &mut out,
    );
    assert!(matches!(events(&out)[0], CapEvent::Error(e) if e.message.contains("Task not found")));
}

#[test]
fn artifact_chunks_are_joined_keeping_the_media_type_and_bounded() {
    let chunk = |text: &str, append: bool, last: bool| {
        json!({"kind": "artifact-update", "taskId": "t",
        "artifact": {"artifactId": "a1", "name": "diff.patch", "parts": [{"kind": "text", "text": text,
            "metadata": {"mimeType": "text/x-diff"}}]}, "append": append, "lastChunk": last})
    };
    let out = map(
        false,
        &[chunk("--- a", false, false), chunk("\n+++ b", true, true)],
    );
    let ev = events(&out);
    assert_eq!(ev.len(), 1);
    let CapEvent::Artifact(a) = ev[0] else {
        panic!("not an artifact")
    };
    assert_eq!(
        (a.mime_type.as_str(), a.content.get()),
        ("text/x-diff", Some(&json!("--- a\n+++ b")))
    );
    let mut m = FrameMapper::new(false, 8);
    let mut out = Vec::new();
    m.on_result(&chunk("0123456789", false, true), &mut out);
    assert!(matches!(events(&out)[0], CapEvent::Error(e) if e.code == ErrorKind::ParseFailed));
}

#[test]
fn a_1_0_artifact_whose_chunks_leave_out_last_chunk_ends_with_the_task() {
    // What a proto3 peer (the Python SDK) sends: a false `lastChunk` and `append` left out.
    let chunk = |text: &str, extra: Value| {
        let mut a = json!({"taskId": "t", "artifact": {"artifactId": "d", "name": "x.diff",
            "parts": [{"text": text, "mediaType": "text/x-diff"}]}});
        if let (Some(a), Some(extra)) = (a.as_object_mut(), extra.as_object()) {
            a.extend(extra.clone());
        }
        json!({ "artifactUpdate": a })
    };
    let out = map(
        false,
        &[
            chunk("--- a", json!({})),
            chunk("\n+++ b", json!({"append": true})),
            json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"}}}),
        ],
    );
    let ev = events(&out);
    assert_eq!(ev.len(), 1, "{ev:#?}");
    assert!(
        matches!(ev[0], CapEvent::Artifact(a) if a.content.get() == Some(&json!("--- a\n+++ b")) && a.mime_type == "text/x-diff")
    );
    assert!(matches!(out.last(), Some(Mapped::End { .. })));
}

#[test]
fn gemini_clis_turn_end_and_tool_approval_in_the_plain_mapping() {
    let status = |state: &str, parts: Value| {
        json!({"kind": "status-update", "taskId": "t", "contextId": "c", "final": state != "working",
            "status": {"state": state, "message": {"kind": "message", "messageId": "m", "role": "agent", "parts": parts}},
            "metadata": {"coderAgent": {"kind": "tool-call-confirmation"}}})
    };
    let call = json!({"request": {"callId": "sh-1", "name": "run_shell_command", "args": {"command": "ls"}},
        "status": "awaiting_approval", "confirmationDetails": {"type": "exec"}});
    // Text, then input-required asking nothing: the turn's end.
    let out = map(
        true,
        &[
            status("working", json!([{"kind": "text", "text": "hi"}])),
            json!({"kind": "status-update", "taskId": "t", "status": {"state": "input-required"}, "final": true}),
        ],
    );
    assert_eq!(out.last(), Some(&Mapped::Awaiting));
    assert!(
        !events(&out)
            .iter()
            .any(|e| matches!(e, CapEvent::AskUser(_)))
    );
    // A tool awaiting approval, then input-required: that approval is the question.
    let out = map(
        true,
        &[
            status("working", json!([{"kind": "data", "data": call}])),
            json!({"kind": "status-update", "taskId": "t", "status": {"state": "input-required"}, "final": true}),
        ],
    );
    assert!(events(&out).iter().any(
        |e| matches!(e, CapEvent::PermissionRequest(p) if p.req_id == "sh-1" && p.tool == "run_shell_command")
    ));
    assert_eq!(out.last(), Some(&Mapped::Paused));
}

#[test]
fn a_non_final_input_required_that_asks_nothing_is_progress() {
    let out = map(
        true,
        &[
            json!({"kind": "status-update", "taskId": "t", "status": {"state": "input-required"}, "final": false}),
            json!({"kind": "status-update", "taskId": "t", "status": {"state": "working",
                "message": {"kind": "message", "messageId": "m", "role": "agent", "parts": [{"kind": "text", "text": "ran"}]}}, "final": false}),
            json!({"kind": "status-update", "taskId": "t", "status": {"state": "input-required"}, "final": true}),
        ],
    );
    assert_eq!(
        out.iter().filter(|m| matches!(m, Mapped::Awaiting)).count(),
        1,
        "{out:#?}"
    );
    assert_eq!(out.last(), Some(&Mapped::Awaiting));
}

/// a2a-sdk's shape: the answer's stream opens with the Task as it stands, still
/// `input-required`, the same question in its status message.
fn asking_task(state: &str, parts: Value) -> Value {
    json!({"task": {"id": "t", "contextId": "c", "status": {"state": state,
        "message": {"messageId": "q", "taskId": "t", "role": "ROLE_AGENT", "parts": parts}}}})
}

fn mapped(m: &mut FrameMapper, frames: &[Value]) -> Vec<Mapped> {
    let mut out = Vec::new();
    for f in frames {
        m.on_frame(&json!({"jsonrpc": "2.0", "id": 1, "result": f}), &mut out);
    }
    out
}

#[test]
fn a_question_said_again_after_its_answer_is_not_raised_again() {
    let req = datapart::encode(&CapEvent::permission_request(
        "py-perm-1",
        "Bash",
        Some(json!({"command": "ls"})),
        RiskLevel::Low,
    ));
    let parts = json!([{"text": "May I run Bash: ls?"}, {"data": req}]);
    let mut m = FrameMapper::new(false, 1 << 20);
    let asking = json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": asking_task("TASK_STATE_INPUT_REQUIRED", parts.clone())["task"]["status"]}});
    let out = mapped(&mut m, &[asking]);
    assert_eq!(out.last(), Some(&Mapped::Paused));
    m.answered();
    let again = json!({"message": {"messageId": "q2", "taskId": "t", "role": "ROLE_AGENT", "parts": [{"data": req}]}});
    let out = mapped(
        &mut m,
        &[
            asking_task("TASK_STATE_INPUT_REQUIRED", parts),
            again,
            json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING",
                "message": {"messageId": "d", "role": "ROLE_AGENT", "parts": [{"text": "decision: allow_once"}]}}}}),
            json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"}}}),
        ],
    );
    let ev = events(&out);
    assert!(
        !ev.iter()
            .any(|e| matches!(e, CapEvent::PermissionRequest(_) | CapEvent::AskUser(_))),
        "{out:#?}"
    );
    let text: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            CapEvent::TextChunk(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        text,
        ["decision: allow_once"],
        "the question's text not again"
    );
    assert!(
        !out.iter()
            .any(|o| matches!(o, Mapped::Paused | Mapped::Awaiting))
    );
    assert_eq!(
        out.iter()
            .filter(|o| matches!(o, Mapped::Repeated(id) if id == "py-perm-1"))
            .count(),
        2,
        "{out:#?}"
    );
    assert_eq!(m.repeats(), 2);
    assert!(matches!(
        out.last(),
        Some(Mapped::End {
            is_error: false,
            ..
        })
    ));
    // Another task may use the same id: a new question.
    let mut other = asking_task("TASK_STATE_INPUT_REQUIRED", json!([{"data": req}]));
    other["task"]["id"] = json!("t2");
    other["task"]["status"]["message"]["taskId"] = json!("t2");
    other["task"]["status"]["message"]["messageId"] = json!("q3");
    let out = mapped(&mut m, &[other]);
    assert!(
        events(&out)
            .iter()
            .any(|e| matches!(e, CapEvent::PermissionRequest(_)))
    );
    assert_eq!(out.last(), Some(&Mapped::Paused));
}

#[test]
fn a_plain_question_said_again_and_a_past_one_in_a_task_read_whole_are_not_raised() {
    let parts = json!([{"text": "Which DB?"}]);
    let mut m = FrameMapper::new(true, 1 << 20);
    let out = mapped(
        &mut m,
        &[asking_task("TASK_STATE_INPUT_REQUIRED", parts.clone())],
    );
    assert_eq!(out.last(), Some(&Mapped::Paused));
    m.answered();
    let out = mapped(&mut m, &[asking_task("TASK_STATE_INPUT_REQUIRED", parts)]);
    assert!(events(&out).is_empty(), "{out:#?}");
    assert_eq!(out.last(), Some(&Mapped::Repeated("q".into())));
    // A task read whole, fresh: the question in its history is past.
    let req = datapart::encode(&CapEvent::permission_request(
        "p1",
        "Bash",
        None,
        RiskLevel::Low,
    ));
    let task = json!({"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}, "history": [
        {"messageId": "a", "role": "ROLE_AGENT", "parts": [{"text": "May I?"}, {"data": req}]},
        {"messageId": "b", "role": "ROLE_AGENT", "parts": [{"text": "done"}]}]});
    let mut m = FrameMapper::new(false, 1 << 20);
    let mut out = Vec::new();
    m.on_task(&task, &mut out);
    assert!(
        !events(&out)
            .iter()
            .any(|e| matches!(e, CapEvent::PermissionRequest(_)))
    );
    assert!(matches!(
        out.last(),
        Some(Mapped::End {
            is_error: false,
            ..
        })
    ));
}
