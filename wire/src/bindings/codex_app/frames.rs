//! The `codex app-server` frames capfleet reads and writes, typed after the pinned
//! Codex's own schema (`codex app-server generate-json-schema`, 0.171.0; the files
//! used are in `tests/fixtures/codex_app_server/0.171.0/`). JSONL, one JSON-RPC
//! message per line without the `jsonrpc` member; field names in camelCase. Only the
//! fields capfleet uses are typed: Codex adds fields freely, and unknown ones are
//! ignored.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// A JSON-RPC request id: Codex numbers its own requests (`0`, `1`, …); ours are
/// numbers too, but a string is legal.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Num(i64),
    Str(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Num(n) => write!(f, "{n}"),
            RequestId::Str(s) => f.write_str(s),
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct RpcError {
    pub code: i64,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// The error code of Codex's backpressure: its queue is full, try again later.
pub const SERVER_OVERLOADED: i64 = -32001;
/// The `cap.error` code that says a request was answered [`SERVER_OVERLOADED`] and
/// is retried (a binding's own code; the run's telemetry counts it).
pub const SERVER_OVERLOADED_CODE: &str = "server_overloaded";

/// One line from the app-server, classified by its members. A request's and a
/// notification's params are left unparsed, borrowed from the line: each is read
/// once, straight into the type its method wants.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame<'a> {
    /// The answer to one of our requests.
    Response {
        id: RequestId,
        result: Result<Value, RpcError>,
    },
    /// A request of the server's (an approval): it waits for our response.
    Request {
        id: RequestId,
        method: Cow<'a, str>,
        params: Params<'a>,
    },
    Notification {
        method: Cow<'a, str>,
        params: Params<'a>,
    },
}

/// A message's `params`, unparsed (absent: `null`).
#[derive(Debug, Clone, Copy)]
pub struct Params<'a>(Option<&'a RawValue>);

impl<'a> Params<'a> {
    /// Unparsed JSON as params (a member read in a second step: an item).
    pub fn of(raw: &'a RawValue) -> Self {
        Params(Some(raw))
    }

    /// The params as JSON text.
    pub fn json(&self) -> &'a str {
        self.0.map_or("null", RawValue::get)
    }

    /// The params as `T` (which may borrow from the line).
    pub fn parse<T: Deserialize<'a>>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.json())
    }
}

impl PartialEq for Params<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

#[derive(Deserialize)]
struct Raw<'a> {
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<RpcError>,
}

/// Why a line is no frame.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("not a JSON-RPC message: {0}")]
    Json(#[from] serde_json::Error),
    #[error("a JSON-RPC message with neither a method nor a result or error")]
    Shapeless,
}

impl<'a> Frame<'a> {
    /// Classify one line.
    pub fn parse(line: &'a [u8]) -> Result<Frame<'a>, FrameError> {
        let raw: Raw<'a> = serde_json::from_slice(line)?;
        let params = Params(raw.params);
        Ok(match (raw.id, raw.method) {
            (Some(id), Some(method)) => Frame::Request { id, method, params },
            (None, Some(method)) => Frame::Notification { method, params },
            (Some(id), None) => match (raw.error, raw.result) {
                (Some(e), _) => Frame::Response { id, result: Err(e) },
                (None, Some(r)) => Frame::Response { id, result: Ok(r) },
                (None, None) => return Err(FrameError::Shapeless),
            },
            (None, None) => return Err(FrameError::Shapeless),
        })
    }
}

/// A request of ours, as written (no `jsonrpc` member: the app-server omits it).
#[derive(Debug, Serialize)]
pub struct OutRequest<'a, P> {
    pub id: i64,
    pub method: &'a str,
    pub params: P,
}

/// A notification of ours (`initialized`).
#[derive(Debug, Serialize)]
pub struct OutNotification<'a> {
    pub method: &'a str,
}

/// Our response to a server request.
#[derive(Debug, Serialize)]
pub struct OutResponse<'a> {
    pub id: &'a RequestId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
}

// --- client -> server -------------------------------------------------------

/// `initialize` (v1 `InitializeParams`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    pub client_info: ClientInfo,
    /// `null`: no experimental API, no attestation requests.
    pub capabilities: Option<Value>,
}

#[derive(Debug, Serialize)]
pub struct ClientInfo {
    pub name: String,
    pub title: Option<String>,
    pub version: String,
}

/// `thread/start` (`ThreadStartParams`) and, with `threadId`, `thread/resume`
/// (`ThreadResumeParams`): the settings capfleet sets; Codex's config gives the rest.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub cwd: String,
    /// `AskForApproval`: `untrusted`, `on-request`, `never`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<&'static str>,
    /// `SandboxMode`: `read-only`, `workspace-write`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<&'static str>,
}

/// `UserInput` (the text variant: all capfleet sends).
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename = "text")]
pub struct TextInput {
    pub text: String,
    pub text_elements: Vec<Value>,
}

impl TextInput {
    pub fn new(text: String) -> Self {
        TextInput {
            text,
            text_elements: Vec::new(),
        }
    }
}

/// `turn/start` (`TurnStartParams`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartParams {
    pub thread_id: String,
    pub input: Vec<TextInput>,
}

/// `turn/steer` (`TurnSteerParams`): more input for the running turn.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteerParams {
    pub thread_id: String,
    pub input: Vec<TextInput>,
    pub expected_turn_id: String,
}

/// `turn/interrupt` (`TurnInterruptParams`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptParams {
    pub thread_id: String,
    pub turn_id: String,
}

// --- server -> client: responses --------------------------------------------

/// `ThreadStartResponse` / `ThreadResumeResponse`: the thread.
#[derive(Debug, Deserialize)]
pub struct ThreadResponse {
    pub thread: IdOnly,
}

/// `TurnStartResponse`: the turn.
#[derive(Debug, Deserialize)]
pub struct TurnResponse {
    pub turn: IdOnly,
}

#[derive(Debug, Deserialize)]
pub struct IdOnly {
    pub id: String,
}

// --- server -> client: notifications ----------------------------------------

/// `item/started`, `item/completed` (`ItemStartedNotification`, …): the item is a
/// `ThreadItem`, read by its `type`.
#[derive(Debug, Deserialize)]
pub struct ItemNotification<'a> {
    /// Unparsed: [`ItemHead`] first, the whole item only where its type needs it.
    #[serde(borrow)]
    pub item: &'a RawValue,
}

/// What every `ThreadItem` is read for first: its type, its id and (an agent
/// message's, a plan's) text, borrowed from the line.
#[derive(Debug, Deserialize)]
pub struct ItemHead<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    #[serde(default, borrow)]
    pub id: Cow<'a, str>,
    #[serde(default, borrow)]
    pub text: Option<Cow<'a, str>>,
}

/// `item/agentMessage/delta`, `item/commandExecution/outputDelta`,
/// `item/reasoning/textDelta`, `item/reasoning/summaryTextDelta`, …
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeltaNotification<'a> {
    #[serde(borrow)]
    pub item_id: Cow<'a, str>,
    pub delta: String,
}

/// `turn/started`, `turn/completed`.
#[derive(Debug, Deserialize)]
pub struct TurnNotification {
    pub turn: Turn,
}

/// `Turn`: its id, status and error.
#[derive(Debug, Deserialize)]
pub struct Turn {
    pub id: String,
    pub status: TurnStatus,
    #[serde(default)]
    pub error: Option<TurnError>,
}

/// `TurnStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnStatus {
    Completed,
    Interrupted,
    Failed,
    InProgress,
}

/// `TurnError`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnError {
    pub message: String,
    #[serde(default)]
    pub codex_error_info: Option<Value>,
}

/// `error` (`ErrorNotification`): `willRetry` says Codex retries by itself.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorNotification {
    pub error: TurnError,
    #[serde(default)]
    pub will_retry: bool,
}

/// `thread/tokenUsage/updated`: `last` is the latest model call's, `total` the
/// thread's.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsageNotification {
    pub turn_id: String,
    pub token_usage: ThreadTokenUsage,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTokenUsage {
    pub last: TokenUsageBreakdown,
    #[serde(default)]
    pub model_context_window: Option<u64>,
}

/// `TokenUsageBreakdown`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TokenUsageBreakdown {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_output_tokens: u64,
}

/// `turn/plan/updated`.
#[derive(Debug, Deserialize)]
pub struct PlanNotification {
    pub plan: Vec<PlanStep>,
}

/// `TurnPlanStep`: `status` is `pending`, `inProgress` or `completed`.
#[derive(Debug, Deserialize)]
pub struct PlanStep {
    pub step: String,
    pub status: String,
}

/// `account/rateLimits/updated` (a sparse rolling update).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitsNotification {
    pub rate_limits: RateLimitSnapshot,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitSnapshot {
    #[serde(default)]
    pub limit_id: Option<String>,
    #[serde(default)]
    pub primary: Option<RateLimitWindow>,
    #[serde(default)]
    pub secondary: Option<RateLimitWindow>,
    /// Set when a limit is reached (`RateLimitReachedType`).
    #[serde(default)]
    pub rate_limit_reached_type: Option<Value>,
}

/// `RateLimitWindow`: `resetsAt` in Unix seconds.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitWindow {
    pub used_percent: f64,
    #[serde(default)]
    pub window_duration_mins: Option<u64>,
    #[serde(default)]
    pub resets_at: Option<i64>,
}

/// `serverRequest/resolved`: a request of the server's is no longer open (answered,
/// or withdrawn by an interrupt).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedNotification {
    pub request_id: RequestId,
}

// --- server -> client: requests ---------------------------------------------

/// `item/commandExecution/requestApproval`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandApprovalParams {
    pub item_id: String,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// `item/fileChange/requestApproval`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeApprovalParams {
    pub item_id: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub grant_root: Option<String>,
}

/// `item/permissions/requestApproval`: more sandbox permissions.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionsApprovalParams {
    pub item_id: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// `RequestPermissionProfile` (`network`, `fileSystem`), granted as asked.
    pub permissions: Value,
}

/// The v1 approvals (`execCommandApproval`, `applyPatchApproval`), which a v1
/// conversation still sends.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyApprovalParams {
    pub call_id: String,
    #[serde(default)]
    pub command: Option<Vec<String>>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub file_changes: Option<Value>,
}
