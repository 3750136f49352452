//! The typed sections of a manifest (spec §5.1), with the §5.3 defaults applied.
//! Every field is documented with its default; serialization writes the effective values.

use std::collections::BTreeMap;

use serde::ser::{Serialize, SerializeSeq, Serializer};

use super::coding::CodingCaps;
use super::reader::Wire;

/// `[agent]`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Agent {
    /// Required. Unique within a registry.
    pub name: String,
    /// Required. Looked up on `PATH` unless absolute.
    pub binary: String,
    /// Optional regex on `--version` output (compiled in [`super::Patterns::version_match`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_match: Option<String>,
    /// Required (may be empty): declared profiles, e.g. `["coding"]`.
    pub profiles: Vec<String>,
    /// Optional, experimental (`x-` prefix, spec §14.1): how to install the binary
    /// (e.g. `npm install -g @anthropic-ai/claude-code`), said when it is not on `PATH`.
    #[serde(rename = "x-install", skip_serializing_if = "Option::is_none")]
    pub install: Option<String>,
    /// Optional, experimental (`x-` prefix): the GenAI provider the agent talks to, as the
    /// OpenTelemetry GenAI conventions name it (`gen_ai.provider.name`: `anthropic`,
    /// `openai`, `gcp.gemini`, ...). Unset for agents that can use any provider.
    #[serde(rename = "x-provider", skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// `[probe]`: how to ask the binary for its version. All optional.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Probe {
    /// The argv that prints the version, e.g. `["claude", "--version"]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Regex on the command's output whose first group is the version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_pattern: Option<String>,
    /// Experimental (`x-help_command`): the argv whose output lists the flags the
    /// installed version takes (e.g. `["gemini", "--help"]`), read for
    /// [`Probe::flag_fallbacks`].
    #[serde(rename = "x-help_command", skip_serializing_if = "Option::is_none")]
    pub help_command: Option<Vec<String>>,
    /// Experimental (`x-flag_fallbacks`, each `"NEW=OLD"`): a flag of the launch argvs
    /// that the help output does not list is replaced by its older spelling
    /// (`"--acp=--experimental-acp"`). Decided by the installed binary, not by a version.
    #[serde(rename = "x-flag_fallbacks", skip_serializing_if = "Vec::is_empty")]
    pub flag_fallbacks: Vec<String>,
    /// Experimental (`x-help_requires`, each `"FAST_PATH=WORD"`): a fast path kept only
    /// when the help output lists the word (`"x-codex_app_server=app-server"`); else it
    /// is dropped and selection falls to the next binding.
    #[serde(rename = "x-help_requires", skip_serializing_if = "Vec::is_empty")]
    pub help_requires: Vec<String>,
}

impl Probe {
    /// The `(new, old)` spellings of [`Probe::flag_fallbacks`] (validated `NEW=OLD`).
    pub fn fallbacks(&self) -> impl Iterator<Item = (&str, &str)> {
        self.flag_fallbacks.iter().filter_map(|f| f.split_once('='))
    }

    /// The `(fast path, word)` pairs of [`Probe::help_requires`].
    pub fn requires(&self) -> impl Iterator<Item = (&str, &str)> {
        self.help_requires.iter().filter_map(|f| f.split_once('='))
    }
}

/// `[startup]`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Startup {
    /// Required: argv prefix; the driver appends its own arguments.
    pub command: Vec<String>,
    /// Optional flag carrying the working directory; when unset the driver sets the
    /// child's cwd directly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd_arg: Option<String>,
    /// Optional flag injecting the model selection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_arg: Option<String>,
    /// Optional environment variable carrying the session id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id_env: Option<String>,
    /// Optional flag resuming a previous session natively (capfleet extension, not in
    /// the core spec; stored verbatim for drivers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_arg: Option<String>,
    /// Optional flag passing a permission mode (capfleet extension, stored verbatim).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_mode_arg: Option<String>,
    /// Seconds to wait for `ready_when`; default 60.
    pub init_timeout_seconds: u64,
    /// Required: how the driver knows initialization completed.
    pub ready_when: ReadyWhen,
}

/// Default `startup.init_timeout_seconds`.
pub const DEFAULT_INIT_TIMEOUT_SECONDS: u64 = 60;

/// `startup.ready_when`: at least one of `pattern` and `silence_ms`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReadyWhen {
    /// Regex on the ANSI-stripped screen (compiled in [`super::Patterns::ready_when`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Quiet period after which the agent counts as ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub silence_ms: Option<u64>,
}

/// A fast path given as an argv (`stream_json`, `x-codex_exec`); `false` or absent = unsupported.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ArgvFastPath {
    /// Not spoken (`false` or absent).
    #[default]
    Unsupported,
    /// Spoken by running this argv.
    Argv(Vec<String>),
}

/// A fast path given as an address or URL (`grpc`, `a2a_serve_at`); `false` or absent = unsupported.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AddressFastPath {
    /// Not spoken (`false` or absent).
    #[default]
    Unsupported,
    /// Served at this address or URL.
    Address(String),
}

/// `fast_path.acp_stdio`: `false`/absent, `true` (the startup command speaks ACP), or an argv.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AcpFastPath {
    /// Not spoken (`false` or absent).
    #[default]
    Unsupported,
    /// `true`: the startup command itself speaks ACP on stdio.
    StartupCommand,
    /// Spoken by running this argv.
    Argv(Vec<String>),
}

impl ArgvFastPath {
    /// True unless unsupported.
    pub fn is_supported(&self) -> bool {
        !matches!(self, ArgvFastPath::Unsupported)
    }
}

impl AddressFastPath {
    /// True unless unsupported.
    pub fn is_supported(&self) -> bool {
        !matches!(self, AddressFastPath::Unsupported)
    }
}

impl AcpFastPath {
    /// True unless unsupported.
    pub fn is_supported(&self) -> bool {
        !matches!(self, AcpFastPath::Unsupported)
    }
}

fn ser_argv<S: Serializer>(s: S, argv: &[String]) -> Result<S::Ok, S::Error> {
    let mut seq = s.serialize_seq(Some(argv.len()))?;
    for a in argv {
        seq.serialize_element(a)?;
    }
    seq.end()
}

impl Serialize for ArgvFastPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ArgvFastPath::Unsupported => s.serialize_bool(false),
            ArgvFastPath::Argv(a) => ser_argv(s, a),
        }
    }
}

impl Serialize for AddressFastPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            AddressFastPath::Unsupported => s.serialize_bool(false),
            AddressFastPath::Address(a) => s.serialize_str(a),
        }
    }
}

impl Serialize for AcpFastPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            AcpFastPath::Unsupported => s.serialize_bool(false),
            AcpFastPath::StartupCommand => s.serialize_bool(true),
            AcpFastPath::Argv(a) => ser_argv(s, a),
        }
    }
}

/// `[fast_path]`: every entry defaults to unsupported.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct FastPath {
    /// `stream_json`: Claude Code's stream-json protocol.
    pub stream_json: ArgvFastPath,
    /// `grpc`: the gRPC binding's address.
    pub grpc: AddressFastPath,
    /// `acp_stdio`: ACP over stdio.
    pub acp_stdio: AcpFastPath,
    /// `a2a_serve_at`: where the agent serves A2A.
    pub a2a_serve_at: AddressFastPath,
    /// `x-codex_exec` (a capfleet extension): the argv of one `codex exec --json`
    /// process per turn (the prompt on its stdin, `resume <thread id>` for the next).
    #[serde(rename = "x-codex_exec")]
    pub codex_exec: ArgvFastPath,
    /// `x-codex_app_server` (a capfleet extension): the argv of one long-lived
    /// `codex app-server` per session (JSON-RPC over stdio: a thread, turns on it).
    #[serde(rename = "x-codex_app_server")]
    pub codex_app_server: ArgvFastPath,
    /// `x-stream_json_traceparent` (a capfleet extension, default `false`): the agent
    /// reads a top-level `traceparent` (W3C) on each stream-json `user` frame and
    /// parents that message's work with it. Only then does the stream-json driver
    /// write one (Claude Code is sent no field it does not know).
    #[serde(rename = "x-stream_json_traceparent")]
    pub stream_json_traceparent: bool,
}

/// How a turn is cancelled: `graceful | hard | none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CancelMode {
    /// `graceful`: the agent finishes the turn cleanly when asked.
    Graceful,
    /// `hard`: the turn is cut off (e.g. Ctrl+C) and may leave partial output.
    Hard,
    /// `none`: a turn cannot be cancelled.
    None,
}

impl Wire for CancelMode {
    const ALL: &'static [(Self, &'static str)] = &[
        (CancelMode::Graceful, "graceful"),
        (CancelMode::Hard, "hard"),
        (CancelMode::None, "none"),
    ];
}

/// Serialize any [`Wire`] enum as its wire name.
macro_rules! wire_serialize {
    ($($t:ty),*) => {$(
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(crate::manifest::reader::Wire::wire(*self))
            }
        }
        impl $t {
            /// The wire name, e.g. `"graceful"`.
            pub fn as_str(self) -> &'static str {
                crate::manifest::reader::Wire::wire(self)
            }
        }
    )*};
}
pub(crate) use wire_serialize;

wire_serialize!(CancelMode);

/// `[pty]`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pty {
    /// Required: starting columns.
    pub cols: u16,
    /// Required: starting rows.
    pub rows: u16,
    /// Default false.
    pub bracketed_paste: bool,
    /// capfleet extension, default false: with `bracketed_paste`, every prompt is
    /// pasted, not only multi-line or long ones.
    pub paste_prompts: bool,
    /// Default `hard`.
    pub sigint_cancels_turn: CancelMode,
    /// Default false.
    pub queued_input_supported: bool,
}

/// The §5.3 default for `parse.idle`.
pub const DEFAULT_IDLE: [&str; 2] = ["^>\\s*$", "^❯\\s*$"];

/// `[parse]`: pattern sources (compiled forms live in [`super::Patterns`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Parse {
    /// A string or a list; default [`DEFAULT_IDLE`].
    pub idle: Vec<String>,
    /// Regex on a line that starts a tool call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_start: Option<String>,
    /// Regex on a line that ends a tool call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_end: Option<String>,
    /// Regex on the heading of a plan block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_section: Option<String>,
    /// Regex on the heading of a thinking block.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought_section: Option<String>,
    /// Regex on a yes/no question.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask_yes_no: Option<String>,
    /// Regex on a multiple-choice question.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ask_options: Option<String>,
    /// Default empty.
    pub error_lines: Vec<String>,
}

impl Default for Parse {
    fn default() -> Self {
        Parse {
            idle: DEFAULT_IDLE.iter().map(|s| (*s).to_owned()).collect(),
            tool_call_start: None,
            tool_call_end: None,
            plan_section: None,
            thought_section: None,
            ask_yes_no: None,
            ask_options: None,
            error_lines: Vec::new(),
        }
    }
}

/// `[capabilities.ask_user]`: all default false.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct AskUser {
    /// The agent asks yes/no questions.
    pub yes_no: bool,
    /// The agent asks multiple-choice questions.
    pub options: bool,
    /// The agent asks for free text.
    pub free_text: bool,
}

/// `[capabilities]`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Capabilities {
    /// Required.
    pub streaming_output: bool,
    /// Default false.
    pub streaming_tool_output: bool,
    /// Default false (not declared = not supported).
    pub queued_input: bool,
    /// Unset = not declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mid_turn_cancel: Option<CancelMode>,
    /// Default false.
    pub multi_session: bool,
    /// Unset = not declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_modalities: Option<Vec<String>>,
    /// Unset = not declared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_modalities: Option<Vec<String>>,
    /// `[capabilities.ask_user]`: the kinds of question the agent asks.
    pub ask_user: AskUser,
    /// The coding profile's section (coding §3), when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coding: Option<CodingCaps>,
    /// `[capabilities.x-binding.<binding>]` (a capfleet extension): what differs when
    /// the agent is driven over one binding, by the binding's wire name
    /// ([`BINDING_NAMES`]). Codex steers a running turn over `codex_app_server`
    /// (`turn/steer`), not over `codex_exec` (a process per turn).
    #[serde(rename = "x-binding", skip_serializing_if = "BTreeMap::is_empty")]
    pub by_binding: BTreeMap<String, BindingCaps>,
}

/// The bindings' wire names, as `[capabilities.x-binding]` keys them.
pub const BINDING_NAMES: &[&str] = &[
    "grpc",
    "stream_json",
    "codex_app_server",
    "codex_exec",
    "acp_stdio",
    "a2a",
    "pty",
];

/// `[capabilities.x-binding.<binding>]`: a capability as it is over that binding
/// (unset: the `[capabilities]` value).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct BindingCaps {
    /// `queued_input` over this binding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued_input: Option<bool>,
}

impl Capabilities {
    /// `queued_input` when the agent is driven over `binding` (a wire name): its
    /// `[capabilities.x-binding.<binding>]` value, else `[capabilities]`'.
    pub fn queued_input_over(&self, binding: &str) -> bool {
        self.by_binding
            .get(binding)
            .and_then(|b| b.queued_input)
            .unwrap_or(self.queued_input)
    }
}

/// `[cost]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Cost {
    /// Default false.
    pub metered: bool,
    /// The currency of its costs, e.g. `USD`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

/// Default `limits.max_line_bytes`: 1 MiB.
pub const DEFAULT_MAX_LINE_BYTES: u64 = 1 << 20;

/// `[limits]` (capfleet extension): bounds on the agent's output, on every binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Limits {
    /// The longest line of output accepted (newline excluded), default
    /// [`DEFAULT_MAX_LINE_BYTES`]; a longer one is dropped as it streams past and
    /// reported as `cap.error` `parse_failed`.
    pub max_line_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}
