//! Orchestrator-to-agent events except `cap.session.config` (core §7.5–§7.8):
//! input injection, cancellation and the answers to asks and permission requests.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::meta::{Meta, impl_has_meta};
use super::nullable::Nullable;
use super::vocab::{CancelScope, Decision};

/// `cap.user_input.inject`: user input pushed into a running session (typed into
/// the PTY, or sent as a new prompt on fast paths).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserInputInject {
    /// Content blocks (`[{"type": "text", "text": ...}]`), opaque to core.
    pub content: Value,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl UserInputInject {
    /// One text block.
    pub fn text(text: &str) -> Self {
        UserInputInject {
            content: json!([{ "type": "text", "text": text }]),
            meta: None,
            extra: Map::new(),
        }
    }

    /// The text of all `text` blocks joined by newlines (a bare string content
    /// counts as one block).
    pub fn plain_text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    }
}

/// `cap.cancel`: stop the current turn or the whole session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cancel {
    /// Whether to stop only the current turn or the whole session.
    pub scope: CancelScope,
    /// Why, e.g. `user`.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub reason: Nullable<String>,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.ask_user.answer`: the answer to the `cap.ask_user` with the same `ask_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskUserAnswer {
    /// The `cap.ask_user` this answers.
    pub ask_id: String,
    /// Validated against the ask's form by the receiver.
    pub value: Value,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.permission.response`: the decision on the `cap.permission.request` with the
/// same `req_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionResponse {
    /// The `cap.permission.request` this decides.
    pub req_id: String,
    /// Allow once, allow always, or deny.
    pub decision: Decision,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl_has_meta!(UserInputInject, Cancel, AskUserAnswer, PermissionResponse);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inject_text_round_trip() {
        let e = UserInputInject::text("wait, use postcard");
        assert_eq!(e.plain_text(), "wait, use postcard");
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            json!({"content": [{"type": "text", "text": "wait, use postcard"}]})
        );
    }
}
