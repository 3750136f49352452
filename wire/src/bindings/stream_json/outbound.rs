//! Frames we write to the agent's stdin. Each function returns one NDJSON line,
//! newline included, shaped as Claude Code 2.1 reads it (see
//! `tests/fixtures/claude/*.stdin.ndjson`).

use serde_json::{Map, Value, json};

use crate::protocol::{Decision, UserInputInject};

/// Deny message sent when the orchestrator gives none.
pub(crate) const DEFAULT_DENY_MESSAGE: &str = "Denied by the user";

fn line(v: Value) -> String {
    let mut s = v.to_string();
    s.push('\n');
    s
}

/// A user prompt: `{"type":"user","message":{"role":"user","content":"<text>"}}`.
pub fn user_frame(text: &str) -> String {
    user_content(Value::from(text))
}

/// A user prompt carrying the W3C `traceparent` of the turn that sends it, for an
/// agent whose manifest says it reads one (`fast_path.x-stream_json_traceparent`):
/// `{"type":"user","message":{...},"traceparent":"00-…"}`.
pub(crate) fn user_frame_traced(text: &str, traceparent: &str) -> String {
    line(json!({
        "type": "user",
        "message": {"role": "user", "content": text},
        "traceparent": traceparent,
    }))
}

/// A user message with arbitrary content (a string or content blocks).
pub(crate) fn user_content(content: Value) -> String {
    line(json!({"type": "user", "message": {"role": "user", "content": content}}))
}

/// The text of a user frame's `message.content`, read as Claude reads its input: a
/// string, or the `text` blocks joined by `\n` (`None` for any other JSON).
pub fn user_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => Some(
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// `cap.user_input.inject` → a user frame: a single text block is sent as a bare
/// string (as Claude's own clients do), anything else as the blocks given.
pub fn user_inject(inject: &UserInputInject) -> String {
    match &inject.content {
        Value::Array(blocks)
            if blocks.len() == 1
                && blocks[0].get("type").and_then(Value::as_str) == Some("text") =>
        {
            user_frame(blocks[0].get("text").and_then(Value::as_str).unwrap_or(""))
        }
        other => user_content(other.clone()),
    }
}

/// A successful `control_response` to the request `request_id`.
pub fn control_success(request_id: &str, response: Value) -> String {
    line(json!({
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": response}
    }))
}

/// The answer to a `can_use_tool` request. Allowing (`allow_once` and
/// `allow_always` alike: remembering is the orchestrator's policy) sends the
/// original input back as `updatedInput`; denying sends `message` (or
/// [`DEFAULT_DENY_MESSAGE`]), which Claude passes verbatim to the model.
pub fn permission_response(
    request_id: &str,
    decision: Decision,
    original_input: &Value,
    message: Option<&str>,
) -> String {
    let body = match decision {
        Decision::AllowOnce | Decision::AllowAlways => {
            json!({"behavior": "allow", "updatedInput": original_input})
        }
        Decision::Deny => {
            json!({"behavior": "deny", "message": message.unwrap_or(DEFAULT_DENY_MESSAGE)})
        }
    };
    control_success(request_id, body)
}

/// The answer to an `AskUserQuestion` `can_use_tool`: allow with the original
/// input plus `answers` (question text → chosen label; several labels are joined
/// with `", "`).
pub(crate) fn ask_answer(
    request_id: &str,
    original_input: &Value,
    answers: &Map<String, Value>,
) -> String {
    let mut input = original_input.as_object().cloned().unwrap_or_default();
    let answers: Map<String, Value> = answers
        .iter()
        .map(|(q, a)| {
            let text = match a {
                Value::String(s) => s.clone(),
                Value::Array(items) => items
                    .iter()
                    .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(", "),
                other => other.to_string(),
            };
            (q.clone(), Value::from(text))
        })
        .collect();
    input.insert("answers".to_owned(), Value::Object(answers));
    control_success(
        request_id,
        json!({"behavior": "allow", "updatedInput": Value::Object(input)}),
    )
}

/// `{"type":"control_request","request_id":…,"request":{"subtype":"interrupt"}}`:
/// stops the current turn; the agent acks with a `control_response` and ends the
/// turn with a cancelled `result`.
pub fn interrupt_request(request_id: &str) -> String {
    line(json!({
        "type": "control_request",
        "request_id": request_id,
        "request": {"subtype": "interrupt"}
    }))
}

/// Refuses a control request this binding does not handle.
pub fn control_error_response(request_id: &str, error: &str) -> String {
    line(json!({
        "type": "control_response",
        "response": {"subtype": "error", "request_id": request_id, "error": error}
    }))
}
