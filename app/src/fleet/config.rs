//! `fleet.toml` as written: every section and key, each value with the location it
//! came from (file, line, dotted key) so that later checks can name it.

use std::time::Duration;

use capfleet_engine::answerer::CommandRules;
use capfleet_engine::protocol::{PermissionMode, RiskLevel};
use capfleet_engine::router::QueueOrder;
use capfleet_engine::router::{CollectMode, Split};
use capfleet_engine::tomldoc::Location;
use capfleet_engine::workspace::TestCommand;
use capfleet_wire::supervision::Restart;
use capfleet_wire::supervision::rate_limit::OnRateLimit;

pub(crate) use super::answerer::{AnswererSection, AutoAnswer};

/// A value and where it was written.
#[derive(Debug, Clone)]
pub(crate) struct At<T> {
    pub value: T,
    pub at: Location,
}

/// What happens to the run when a session fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// The other sessions go on; the run exits 1 at the end.
    #[default]
    Continue,
    /// The first failed session ends the run.
    Abort,
}

impl OnError {
    pub(crate) const WIRE: &[(OnError, &str)] =
        &[(OnError::Continue, "continue"), (OnError::Abort, "abort")];

    pub fn as_str(self) -> &'static str {
        match self {
            OnError::Continue => "continue",
            OnError::Abort => "abort",
        }
    }
}

/// The whole file.
#[derive(Debug, Clone)]
pub(crate) struct FleetFile {
    pub fleet: FleetSection,
    pub sessions: Vec<SessionEntry>,
    pub routes: Vec<RouteEntry>,
    /// `[answerer]`: the research answerer, if any.
    pub answerer: Option<AnswererSection>,
    /// `[notify]`: the run's webhook, if any.
    pub notify: Option<super::notify::NotifySection>,
    /// `[chaos]`: the run's faults, if any.
    pub chaos: Option<capfleet_engine::chaos::ChaosSpec>,
    /// `[sandbox]`: the details of the sessions' sandbox, if any.
    pub sandbox: Option<capfleet_wire::process::sandbox::SandboxSpec>,
}

/// `[fleet]`.
#[derive(Debug, Clone)]
pub(crate) struct FleetSection {
    /// The `[fleet]` header (or the document start when absent).
    pub at: Location,
    pub name: Option<At<String>>,
    /// `start`: a session or a list of them.
    pub start: Option<At<Vec<String>>>,
    /// `task`, as written (`@file` not yet read).
    pub task: Option<At<String>>,
    pub budget_usd: Option<At<f64>>,
    pub max_concurrent: Option<usize>,
    pub on_error: OnError,
    /// `true`, `false` or `"research"`, where it was written.
    pub auto_answer: At<AutoAnswer>,
    pub allow_tools: Vec<String>,
    pub deny_tools: Vec<String>,
    /// `allow_commands`, `deny_commands`: command-line patterns, compiled.
    pub allow_commands: CommandRules,
    pub deny_commands: CommandRules,
    pub max_risk: Option<RiskLevel>,
    pub turn_timeout_s: Option<At<f64>>,
    /// The git revision coding sessions' worktrees branch from (default `HEAD`).
    pub base: Option<At<String>>,
    /// One run's journal at most, in MiB (default 1024).
    pub journal_max_mb: Option<At<u64>>,
    /// A busy session's queue: `plan_first` (default) or `arrival`.
    pub queue: QueueOrder,
    /// What a rate limit does: `pause` (default) or `fail`.
    pub on_rate_limit: OnRateLimit,
    /// The longest a session pauses in all (default 6 h).
    pub max_pause: Option<Duration>,
    /// The first backoff step when the agent gives no reset time (default 1 min).
    pub rate_limit_backoff: Option<Duration>,
    /// The session whose final text is the fleet's answer when it answers as one
    /// agent (`capfleet speak --fleet`, `capfleet acp --fleet`); default: the first
    /// start session.
    pub answer_from: Option<At<String>>,
    /// How long a question waits for a remote answer (`capfleet serve`) before its
    /// fail-safe answer (default: the server's `--ask-timeout`).
    pub ask_timeout: Option<Duration>,
    /// `sandbox = "workspace"` (true) or `"none"`: the sessions' default.
    pub sandbox: Option<At<bool>>,
}

/// A session's `agent` names a manifest file (relative to the fleet file), not a
/// registry key.
pub fn names_manifest(agent: &str) -> bool {
    agent.contains('/') || agent.ends_with(".toml")
}

/// One `[[sessions]]` entry.
#[derive(Debug, Clone)]
pub(crate) struct SessionEntry {
    /// The entry's first key.
    pub at: Location,
    pub name: At<String>,
    /// A registry key, or a manifest path relative to the fleet file.
    pub agent: At<String>,
    /// Relative to the fleet file.
    pub cwd: Option<At<String>>,
    pub model: Option<String>,
    pub argv: Option<Vec<String>>,
    pub system_prompt: Option<String>,
    pub max_turns: Option<u32>,
    pub permission_mode: Option<PermissionMode>,
    pub restart: Option<Restart>,
    pub max_restarts: Option<u32>,
    pub restart_window_s: Option<At<f64>>,
    pub budget_usd: Option<At<f64>>,
    /// A simulator script, relative to the fleet file.
    pub script: Option<At<String>>,
    /// The fleet a capfleet agent answers as (`capfleet speak --fleet`), relative to
    /// the fleet file: sets `CAPFLEET_SPEAK_FLEET` for the agent.
    pub fleet: Option<At<String>>,
    pub env: Vec<(String, String)>,
    /// Declared paths (globs relative to the workspace root): changes elsewhere are
    /// flagged.
    pub paths: Vec<String>,
    /// Run in the session's workspace after the run (`test_result`).
    pub test_command: Option<TestCommand>,
    /// A PTY session's raw terminal output journaled too (`cap.pty.raw_bytes`).
    pub raw_bytes: bool,
    /// `sandbox = "workspace"` (true) or `"none"`, over the fleet's default.
    pub sandbox: Option<At<bool>>,
}

/// One `[[routes]]` entry.
#[derive(Debug, Clone)]
pub(crate) struct RouteEntry {
    /// Session names (`.done` and `cap://<fleet>/` stripped); more than one = a join.
    pub when: At<Vec<String>>,
    pub action: ActionEntry,
}

#[derive(Debug, Clone)]
pub(crate) enum ActionEntry {
    To(At<String>),
    FanOut {
        to: At<Vec<String>>,
        split: Split,
    },
    /// `picker` is `human` or a session.
    Collect {
        picker: At<String>,
        mode: CollectMode,
    },
}

impl ActionEntry {
    /// The sessions this action hands output to, with where each was named.
    pub(crate) fn targets(&self) -> Vec<(&str, &Location)> {
        match self {
            ActionEntry::To(to) => vec![(to.value.as_str(), &to.at)],
            ActionEntry::FanOut { to, .. } => {
                to.value.iter().map(|t| (t.as_str(), &to.at)).collect()
            }
            ActionEntry::Collect { picker, .. } if picker.value == HUMAN => Vec::new(),
            ActionEntry::Collect { picker, .. } => vec![(picker.value.as_str(), &picker.at)],
        }
    }
}

/// The picker name for the human at the terminal.
pub(crate) const HUMAN: &str = "human";

/// A session reference as written: `a`, `a.done`, `cap://<fleet>/a` or
/// `cap://<fleet>/a.done`, reduced to the session name.
pub(crate) fn session_ref(s: &str) -> String {
    let s = s.strip_suffix(".done").unwrap_or(s);
    let s = match s.strip_prefix("cap://") {
        Some(rest) => rest.rsplit('/').next().unwrap_or(rest),
        None => s,
    };
    s.to_owned()
}
