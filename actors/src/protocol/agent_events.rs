//! The 14 agent-to-orchestrator events (core §7.0.0–§7.12, coding §4.6/§6).
//!
//! Every struct carries `_meta` verbatim (`meta`) and keeps fields outside the spec
//! in `extra`, so a decoded frame re-encodes to an equal JSON value. OPTIONAL fields
//! are [`Nullable`] (absent / `null` / set) or, for vocabularies, `Option`.

use base64::Engine as _;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use super::errors::ErrorKind;
use super::meta::{Meta, impl_has_meta};
use super::nullable::Nullable;
use super::vocab::{
    Channel, FsEvent, PermissionScope, PlanStatus, Priority, RiskLevel, StopReason,
};

/// `cap.session.ready`: the agent reached its ready condition; the first event of
/// every session, before which no prompt may be sent.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SessionReady {
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub version: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub session_id: Nullable<String>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.text_chunk`: a piece of the agent's streamed output for one message.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TextChunk {
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub message_id: Nullable<String>,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<Channel>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.tool_call.start`: the agent began a tool call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolCallStart {
    pub call_id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub input: Nullable<Value>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.tool_call.delta`: streamed output of a running tool call (only when
/// `capabilities.streaming_tool_output`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolCallDelta {
    pub call_id: String,
    pub output_chunk: String,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.tool_call.end`: a tool call finished, with its result.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolCallEnd {
    pub call_id: String,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub output: Nullable<Value>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub is_error: Nullable<bool>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub duration_ms: Nullable<u64>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.plan`: the full current plan; the latest emission replaces the previous one.
/// Also the payload of the coding `plan_doc` artifact and of a master plan (§10.2).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Plan {
    pub entries: Vec<PlanEntry>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One plan entry; `_meta` carries `cap.assigned_to` / `cap.depends_on` (§10.2),
/// read through [`super::HasMeta`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanEntry {
    pub id: String,
    pub content: String,
    pub status: PlanStatus,
    /// Absent means "unspecified"; never defaulted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl PlanEntry {
    pub fn new(id: impl Into<String>, content: impl Into<String>, status: PlanStatus) -> Self {
        PlanEntry {
            id: id.into(),
            content: content.into(),
            status,
            priority: None,
            meta: None,
            extra: Map::new(),
        }
    }
}

/// `cap.thought`: the agent's reasoning; not echoed to end users by default.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Thought {
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub message_id: Nullable<String>,
    pub text: String,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.ask_user`: the agent needs a structured answer to proceed; answered by
/// `cap.ask_user.answer` with the same `ask_id`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AskUser {
    pub ask_id: String,
    pub prompt: String,
    /// JSON Schema subset (ACP elicitation conventions), opaque here.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub form: Nullable<Value>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub timeout_seconds: Nullable<u64>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.permission.request`: a security decision the agent waits for; answered by
/// `cap.permission.response` with the same `req_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionRequest {
    pub req_id: String,
    pub tool: String,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub intent: Nullable<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<PermissionScope>,
    pub risk_level: RiskLevel,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.usage`: token and cost accounting, as progress or at session end.
/// `cost_usd_estimate` is a [`Number`] so integer and float spellings round-trip.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub model_id: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub input_tokens: Nullable<u64>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub output_tokens: Nullable<u64>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub cache_read_tokens: Nullable<u64>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub cache_creation_tokens: Nullable<u64>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub thinking_tokens: Nullable<u64>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub cost_usd_estimate: Nullable<Number>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub duration_ms: Nullable<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Usage {
    /// `cost_usd_estimate` as `f64` when set.
    pub fn cost_usd(&self) -> Option<f64> {
        self.cost_usd_estimate.get().and_then(Number::as_f64)
    }
}

/// `cap.error`: a non-fatal error (fatal errors end the session).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEvent {
    pub code: ErrorKind,
    pub message: String,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub retryable: Nullable<bool>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub details: Nullable<Value>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.artifact`: a final output of the session (diff, PR link, test result, ...),
/// inline in `content` or fetched from `uri`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Artifact {
    pub artifact_id: String,
    pub mime_type: String,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub name: Nullable<String>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub size: Nullable<u64>,
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub uri: Nullable<String>,
    /// Inline content: text, or for `+json` types a JSON string or object.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub content: Nullable<Value>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Artifact {
    /// Parses inline JSON content (an object, or a string holding JSON) into a typed
    /// payload such as [`super::coding::PrLink`]; `None` when there is no inline
    /// content.
    pub fn json_content<T: DeserializeOwned>(&self) -> Option<Result<T, serde_json::Error>> {
        match self.content.get()? {
            Value::String(s) => Some(serde_json::from_str(s)),
            other => Some(T::deserialize(other)),
        }
    }
}

/// `cap.fs.change`: a watched path changed (coding §4.6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FsChange {
    pub subscription_id: String,
    pub path: String,
    pub event: FsEvent,
    /// Only on `renamed`.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub new_path: Nullable<String>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.pty.raw_bytes`: one chunk of raw PTY output, in arrival order (opt-in only).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PtyRawBytes {
    pub bytes_b64: String,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl PtyRawBytes {
    pub fn from_bytes(bytes: &[u8]) -> Self {
        PtyRawBytes {
            bytes_b64: base64::engine::general_purpose::STANDARD.encode(bytes),
            ..Default::default()
        }
    }

    /// The decoded chunk.
    pub fn bytes(&self) -> Result<Vec<u8>, base64::DecodeError> {
        base64::engine::general_purpose::STANDARD.decode(&self.bytes_b64)
    }
}

impl_has_meta!(
    SessionReady,
    TextChunk,
    ToolCallStart,
    ToolCallDelta,
    ToolCallEnd,
    Plan,
    PlanEntry,
    Thought,
    AskUser,
    PermissionRequest,
    Usage,
    ErrorEvent,
    Artifact,
    FsChange,
    PtyRawBytes,
);
