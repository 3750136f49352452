//! The tools' inputs and outputs: each a JSON Schema in `tools/list` (derived with
//! `schemars`), each output an object (MCP's `structuredContent`). A refusal is no
//! output of these: it is a tool error ([`crate::ToolError`]).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One run, as `capfleet runs` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunSummary {
    /// The run's id (`.capfleet/runs/<run>`).
    pub run: String,
    /// Its fleet's name, when known.
    pub fleet: Option<String>,
    /// `queued`, `running`, `completed`, `failed` or `interrupted`.
    pub state: String,
    /// The engine's outcome once it ended (`completed`, `session_failed`, …).
    pub outcome: Option<String>,
    /// What its agents cost so far (their usage estimates), in USD.
    pub cost_usd: f64,
    /// How many sessions it has.
    pub sessions: usize,
    /// When it started (ms since the epoch).
    pub started_ms: Option<u64>,
    pub ended_ms: Option<u64>,
}

/// The runs of the working directory's data dir (or the server's), oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunList {
    pub runs: Vec<RunSummary>,
}

/// A fleet to start: a fleet file's path, or a fleet's TOML with the files it names.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRun {
    /// A fleet.toml's path, relative to the directory `capfleet mcp` works in (stdio
    /// only: a server takes a fleet's text).
    #[serde(default)]
    pub fleet_path: Option<String>,
    /// A fleet.toml's text.
    #[serde(default)]
    pub fleet_toml: Option<String>,
    /// Files beside an inline fleet (relative path -> text), e.g. the sim's scripts.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Replaces the fleet's task.
    #[serde(default)]
    pub task: Option<String>,
}

/// Where a fleet to start comes from (checked from a [`StartRun`]).
#[derive(Debug, Clone)]
pub enum FleetSource {
    Path(String),
    Toml {
        fleet: String,
        files: BTreeMap<String, String>,
    },
}

/// A run started: it goes on in the background.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Started {
    pub run: String,
    pub fleet: String,
    /// `running`, or `queued` (the server's admission).
    pub state: String,
    /// The fleet's warnings, as `run --dry-run` prints them.
    pub warnings: Vec<String>,
}

/// A run, named by its id.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRef {
    pub run: String,
}

/// One session of a run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SessionStatus {
    pub name: String,
    /// Its lifecycle state (`starting`, `idle`, `busy`, `closed`, `failed`, …).
    pub state: String,
    pub turns: u32,
    pub cost_usd: f64,
    pub restarts: u32,
    /// The last lines its agent wrote (at most a few, oldest first).
    pub last_lines: Vec<String>,
}

/// Where a run stands, and each of its sessions.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunStatus {
    pub run: String,
    pub fleet: Option<String>,
    pub state: String,
    pub outcome: Option<String>,
    pub exit_code: Option<u8>,
    pub cost_usd: f64,
    /// Why it failed before any agent ran, if it did.
    pub error: Option<String>,
    /// Who cancelled it, if someone did.
    pub cancelled_by: Option<String>,
    /// Its sessions (empty for a run known only by its journal).
    pub sessions: Vec<SessionStatus>,
}

/// A run to wait for, at most `timeout_s` seconds.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitRun {
    pub run: String,
    /// Seconds to wait at most (default 60, at most 600).
    #[serde(default)]
    pub timeout_s: Option<u64>,
}

/// One question a run's session waits on: a permission request or an ask.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OpenAsk {
    /// What `answer_ask` names: `<session>.<request id>`.
    pub ask_id: String,
    /// `permission` (answer with `decision`) or `ask` (`answer`, or `decline`).
    pub kind: String,
    /// The asking session's URN.
    pub urn: String,
    /// When it is answered fail-safe (deny, decline) unless answered before (ms).
    pub deadline_ms: u64,
    /// A permission's tool.
    pub tool: Option<String>,
    /// What the tool would do.
    pub intent: Option<Value>,
    /// A permission's risk (`low`, `medium`, `high`, `critical`).
    pub risk: Option<String>,
    /// An ask's question.
    pub prompt: Option<String>,
    /// An ask's form (the answers it takes).
    pub form: Option<Value>,
}

/// A run's open questions, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AskList {
    pub run: String,
    pub asks: Vec<OpenAsk>,
}

/// A permission's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    AllowOnce,
    AllowAlways,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::AllowOnce => "allow_once",
            Decision::AllowAlways => "allow_always",
            Decision::Deny => "deny",
        }
    }
}

/// An answer to one open question: `decision` for a permission, `answer` (or
/// `decline`) for an ask.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerAsk {
    pub run: String,
    pub ask_id: String,
    #[serde(default)]
    pub decision: Option<Decision>,
    /// The value the ask's form takes; free text when it has none.
    #[serde(default)]
    pub answer: Option<Value>,
    #[serde(default)]
    pub decline: bool,
}

/// An answered question: the answer reached the session, journaled with who gave it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Answered {
    pub run: String,
    pub ask_id: String,
    /// Who answered (journaled as the rule `remote:<by>`).
    pub by: String,
}

/// A session of a run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionRef {
    pub run: String,
    pub session: String,
}

/// A session's workspace diff against its base (stored when the run collects it).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Diff {
    pub run: String,
    pub session: String,
    /// A unified diff.
    pub patch: String,
    /// The files it touches.
    pub files: usize,
}
