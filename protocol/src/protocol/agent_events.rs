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
    /// The protocol version the agent speaks (`cap-protocol/v1`).
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub version: Nullable<String>,
    /// A driver-local id of the spawned session (§7.0.0).
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub session_id: Nullable<String>,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.text_chunk`: a piece of the agent's streamed output for one message.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TextChunk {
    /// The message this chunk belongs to; chunks of one message share it.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub message_id: Nullable<String>,
    /// The chunk's text.
    pub text: String,
    /// Which stream the text is on: assistant, thought or system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<Channel>,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.tool_call.start`: the agent began a tool call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolCallStart {
    /// Identifies the call; its delta and end events carry the same id.
    pub call_id: String,
    /// The tool's name, e.g. `Bash`.
    pub name: String,
    /// The tool's arguments, as the agent sent them.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub input: Nullable<Value>,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.tool_call.delta`: streamed output of a running tool call (only when
/// `capabilities.streaming_tool_output`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolCallDelta {
    /// The call this output belongs to.
    pub call_id: String,
    /// A piece of the tool's output, in order.
    pub output_chunk: String,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.tool_call.end`: a tool call finished, with its result.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolCallEnd {
    /// The call that finished.
    pub call_id: String,
    /// The tool's result.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub output: Nullable<Value>,
    /// Whether the tool failed.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub is_error: Nullable<bool>,
    /// How long the call took, in milliseconds.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub duration_ms: Nullable<u64>,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.plan`: the full current plan; the latest emission replaces the previous one.
/// Also the payload of the coding `plan_doc` artifact and of a master plan (§10.2).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Plan {
    /// The whole plan, in order.
    pub entries: Vec<PlanEntry>,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One plan entry; `_meta` carries `cap.assigned_to` / `cap.depends_on` (§10.2),
/// read through [`super::HasMeta`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanEntry {
    /// Stable id of the entry across plan emissions.
    pub id: String,
    /// What the entry is about.
    pub content: String,
    /// Where the entry stands.
    pub status: PlanStatus,
    /// Absent means "unspecified"; never defaulted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl PlanEntry {
    /// An entry without priority, `_meta` or extra fields.
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
    /// The message this thought belongs to.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub message_id: Nullable<String>,
    /// The reasoning text.
    pub text: String,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.ask_user`: the agent needs a structured answer to proceed; answered by
/// `cap.ask_user.answer` with the same `ask_id`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AskUser {
    /// Identifies the question; the answer carries the same id.
    pub ask_id: String,
    /// The question shown to whoever answers.
    pub prompt: String,
    /// JSON Schema subset (ACP elicitation conventions), opaque here.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub form: Nullable<Value>,
    /// How long the agent waits for an answer; `null` means no limit.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub timeout_seconds: Nullable<u64>,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.permission.request`: a security decision the agent waits for; answered by
/// `cap.permission.response` with the same `req_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionRequest {
    /// Identifies the request; the response carries the same id.
    pub req_id: String,
    /// The tool asking for permission, e.g. `Bash`.
    pub tool: String,
    /// What the tool is about to do (its arguments), opaque here.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub intent: Nullable<Value>,
    /// The kind of access asked for: read, write, execute or network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<PermissionScope>,
    /// How risky the agent rates the action; `high` is never auto-approved.
    pub risk_level: RiskLevel,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.usage`: token and cost accounting, as progress or at session end.
/// `cost_usd_estimate` is a [`Number`] so integer and float spellings round-trip.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// The model that did the work.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub model_id: Nullable<String>,
    /// Prompt tokens, cache reads excluded.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub input_tokens: Nullable<u64>,
    /// Generated tokens.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub output_tokens: Nullable<u64>,
    /// Prompt tokens read from the provider's cache.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub cache_read_tokens: Nullable<u64>,
    /// Prompt tokens written to the provider's cache.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub cache_creation_tokens: Nullable<u64>,
    /// Reasoning tokens.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub thinking_tokens: Nullable<u64>,
    /// Estimated cost in US dollars.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub cost_usd_estimate: Nullable<Number>,
    /// Wall time of the accounted work, in milliseconds.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub duration_ms: Nullable<u64>,
    /// Why the model stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
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
    /// The error code: a registry symbol (§14.2) or a binding's own.
    pub code: ErrorKind,
    /// Human-readable description.
    pub message: String,
    /// Whether trying again may succeed.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub retryable: Nullable<bool>,
    /// Code-specific details, opaque here.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub details: Nullable<Value>,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.artifact`: a final output of the session (diff, PR link, test result, ...),
/// inline in `content` or fetched from `uri`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Artifact {
    /// Identifies the artifact within the session.
    pub artifact_id: String,
    /// The content's MIME type, e.g. a coding `application/vnd.cap.coding.*` type.
    pub mime_type: String,
    /// A display name, e.g. a file name.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub name: Nullable<String>,
    /// Size of the content in bytes.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub size: Nullable<u64>,
    /// Where the content can be fetched when it is not inline.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub uri: Nullable<String>,
    /// Inline content: text, or for `+json` types a JSON string or object.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub content: Nullable<Value>,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
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
    /// The watch subscription that saw the change.
    pub subscription_id: String,
    /// The path that changed.
    pub path: String,
    /// What happened to it.
    pub event: FsEvent,
    /// Only on `renamed`.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub new_path: Nullable<String>,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `cap.pty.raw_bytes`: one chunk of raw PTY output, in arrival order (opt-in only).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PtyRawBytes {
    /// The chunk, base64-encoded.
    pub bytes_b64: String,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl PtyRawBytes {
    /// The event for one chunk of raw output.
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
