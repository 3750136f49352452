//! The Claude Code stream-json frames `speak` writes (spec Appendix C.1), in the
//! shapes capfleet's own stream-json driver and the Claude Agent SDK read.

use capfleet_wire::events::UsageTotals;
use serde_json::{Value, json};

/// Bytes of a `result`'s text at most (the rest is cut, and said): the line stays far
/// below a reader's 1 MiB line limit even fully escaped. The text itself came in the
/// turn's `assistant` frames.
const RESULT_MAX: usize = 128 << 10;

/// Facts every frame of the session repeats.
#[derive(Debug, Clone)]
pub(super) struct Speaker {
    /// The conversation id reported upstream.
    pub session_id: String,
    pub model: String,
    seq: u64,
}

impl Speaker {
    pub(super) fn new(session_id: String, model: String) -> Self {
        Speaker {
            session_id,
            model,
            seq: 0,
        }
    }

    /// A uuid-shaped id, unique within the process.
    pub(super) fn uuid(&mut self) -> String {
        self.seq += 1;
        format!(
            "00000000-0000-4000-8000-{:012x}",
            self.seq & 0xffff_ffff_ffff
        )
    }

    /// A fresh message id.
    pub(super) fn message_id(&mut self) -> String {
        self.seq += 1;
        format!("msg_capfleet_{:06}", self.seq)
    }

    /// `system`/`init`: once, before the first turn's frames.
    pub(super) fn init(&mut self, cwd: &str, permission_mode: &str) -> Value {
        json!({
            "type": "system",
            "subtype": "init",
            "cwd": cwd,
            "session_id": self.session_id,
            "tools": [],
            "mcp_servers": [],
            "model": self.model,
            "permissionMode": permission_mode,
            "slash_commands": [],
            "apiKeySource": "none",
            "claude_code_version": env!("CARGO_PKG_VERSION"),
            "output_style": "default",
            "uuid": self.uuid(),
        })
    }

    /// An `assistant` frame with one content block.
    pub(super) fn assistant(&mut self, message_id: &str, block: Value) -> Value {
        json!({
            "type": "assistant",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [block],
                "stop_reason": null,
                "stop_sequence": null,
            },
            "parent_tool_use_id": null,
            "session_id": self.session_id,
            "uuid": self.uuid(),
        })
    }

    /// A `user` frame carrying one `tool_result` block.
    pub(super) fn tool_result(
        &mut self,
        tool_use_id: &str,
        content: Value,
        is_error: bool,
    ) -> Value {
        json!({
            "type": "user",
            "message": {
                "role": "user",
                "content": [{
                    "type": "tool_result",
                    "tool_use_id": tool_use_id,
                    "content": content,
                    "is_error": is_error,
                }],
            },
            "parent_tool_use_id": null,
            "session_id": self.session_id,
            "uuid": self.uuid(),
        })
    }

    /// A `stream_event` frame wrapping an Anthropic API stream event.
    pub(super) fn stream_event(&mut self, event: Value) -> Value {
        json!({
            "type": "stream_event",
            "event": event,
            "session_id": self.session_id,
            "parent_tool_use_id": null,
            "uuid": self.uuid(),
        })
    }

    /// The `result` frame closing a turn.
    pub(super) fn result(&mut self, end: &TurnEnd) -> Value {
        let mut cut = end.text.len().min(RESULT_MAX);
        while !end.text.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut frame = json!({
            "type": "result",
            "subtype": end.subtype,
            "is_error": end.error.is_some(),
            "duration_ms": end.duration_ms,
            "duration_api_ms": end.duration_ms,
            "num_turns": end.num_turns,
            "result": &end.text[..cut],
            "session_id": self.session_id,
            "total_cost_usd": end.total_cost_usd,
            "usage": usage_json(&end.usage),
            "permission_denials": end.denials,
            "uuid": self.uuid(),
        });
        if let Some(error) = &end.error {
            frame["errors"] = json!([error]);
        }
        if end.interrupted {
            frame["interrupted"] = json!(true);
        }
        if cut < end.text.len() {
            frame["result_truncated_bytes"] = json!(end.text.len() - cut);
        }
        frame
    }
}

/// What a `result` frame reports.
#[derive(Debug, Clone)]
pub(super) struct TurnEnd {
    /// `success`, `error_during_execution`, `error_max_turns`, `error_max_budget_usd`.
    pub subtype: &'static str,
    pub error: Option<String>,
    pub interrupted: bool,
    pub text: String,
    pub duration_ms: u64,
    pub num_turns: u32,
    pub usage: UsageTotals,
    /// Cumulative over the process, as Claude reports it.
    pub total_cost_usd: f64,
    pub denials: Vec<Value>,
}

/// Usage in the Anthropic API's field names.
fn usage_json(u: &UsageTotals) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_read_input_tokens": u.cache_read_tokens,
        "cache_creation_input_tokens": u.cache_creation_tokens,
    })
}

/// The `artifact` frame naming a fleet run's journal, so the driver's own journal
/// refers to it (`_meta."capfleet.run"`: id, journal, outcome).
pub(super) fn journal_artifact(end: &capfleet_app::one_fleet::FleetEnd) -> Value {
    json!({
        "type": "artifact",
        "artifact_id": format!("{}/journal", end.run_id),
        "mime_type": "application/x-ndjson",
        "name": "journal.jsonl",
        "uri": format!("file://{}", end.journal.display()),
        "_meta": {"capfleet.run": end.meta()},
    })
}

/// A `control_request` `can_use_tool` asking upstream for a permission.
pub(super) fn can_use_tool(
    request_id: &str,
    tool: &str,
    input: &Value,
    tool_use_id: &str,
) -> Value {
    json!({
        "type": "control_request",
        "request_id": request_id,
        "request": {
            "subtype": "can_use_tool",
            "tool_name": tool,
            "input": input,
            "permission_suggestions": null,
            "tool_use_id": tool_use_id,
        },
    })
}
