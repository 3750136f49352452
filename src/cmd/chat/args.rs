//! `capfleet chat` arguments and the session spec they describe.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use capfleet_engine::answerer::{CommandRules, Policy};
use capfleet_engine::protocol::{PermissionMode, RiskLevel};
use capfleet_engine::session::SessionSpec;
use capfleet_wire::supervision::rate_limit::OnRateLimit;
use capfleet_wire::supervision::{Restart, RestartPolicy};

use capfleet_app::agents::{SessionRequest, registry, session_spec};
use capfleet_app::sandboxing::{SandboxFlags, SandboxMode};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  capfleet chat sim --task 'hello'
      one turn with the simulator, then exit
  capfleet chat sim --script config/sim/flaky.toml
      the simulator following a script
  capfleet chat claude-code
      a REPL with Claude Code (stdin a terminal)
  echo 'fix the tests' | capfleet chat sim --json
      every CAP event as NDJSON

Permission requests: --deny-tool, then --allow-tool, then --max-risk decide first; \
what they leave open is asked at the terminal, or, with no terminal, denied (fail-safe). \
Every decision is recorded with the rule that made it. Ctrl-C cancels the turn; again, \
ends the session.

Sandbox: --sandbox workspace confines the agent, its terminals and all they run to --cwd: \
they write only there, in a private TMPDIR and in the agent's own state paths (its \
manifest's [sandbox]); they cannot see the rest of the home, the temporary directory or \
the repository (bubblewrap) or read it (Landlock). --sandbox-network none leaves them \
their own loopback only; --sandbox-writable / --sandbox-readable PATH add a path; \
--sandbox-backend picks bubblewrap or Landlock (default: bubblewrap where it can make its \
namespaces). A host with neither refuses the chat before anything starts (exit 2). \
`capfleet resolve AGENT --sandbox` says what the agent would get; docs/guide/sandboxing.md.

Traces: --otlp URL (or OTEL_EXPORTER_OTLP_ENDPOINT) exports one trace per chat, rooted \
at `chat`; --trace-file writes the same spans as JSON lines. The agent gets TRACEPARENT.

Exit codes: 0 the last turn completed, 1 it failed (or the session did), 2 bad usage, \
130 interrupted (Ctrl-C), 129 / 143 ended by SIGHUP / SIGTERM (the agent is shut down \
with the session either way).")]
pub(crate) struct ChatArgs {
    /// The agent: a registry name (see `capfleet resolve`) or a manifest path.
    pub agent: String,
    /// Run this task (repeatable: one turn each) and exit, instead of a REPL.
    #[arg(long, short = 't')]
    pub task: Vec<String>,
    /// Print every event as NDJSON (session events wrapping CAP events) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also print the agent's thoughts.
    #[arg(long)]
    pub show_thoughts: bool,
    /// The agent's working directory (default: the current directory).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// The model to ask the agent for.
    #[arg(long)]
    pub model: Option<String>,
    /// none | confirm | interactive (how the agent asks for permissions).
    #[arg(long, value_parser = parse_mode)]
    pub permission_mode: Option<PermissionMode>,
    /// Replace the manifest's command line (e.g. an ACP server's argv).
    #[arg(long, num_args = 1.., allow_hyphen_values = true, value_name = "ARG")]
    pub argv: Option<Vec<String>>,
    /// Restart policy when the agent dies: permanent | transient | temporary.
    #[arg(long, value_parser = parse_restart, default_value = "transient")]
    pub restart: Restart,
    /// Restarts allowed within the window before the session fails.
    #[arg(long, default_value_t = 3)]
    pub max_restarts: u32,
    /// The restart window, in seconds.
    #[arg(long, default_value_t = 60.0)]
    pub restart_window_s: f64,
    /// Seconds a turn may take before the agent counts as hung (killed, restarted).
    #[arg(long, default_value_t = 600.0)]
    pub turn_timeout_s: f64,
    /// What a rate limit does: pause (until the limit resets, then the turn is
    /// re-issued) | fail (the turn fails).
    #[arg(long, value_parser = parse_on_rate_limit, default_value = "pause")]
    pub on_rate_limit: OnRateLimit,
    /// Turns allowed in this session.
    #[arg(long)]
    pub max_turns: Option<u32>,
    /// Approve this tool's permission requests without asking (repeatable; a high
    /// risk still needs `--max-risk high`).
    #[arg(long = "allow-tool", value_name = "TOOL")]
    pub allow_tools: Vec<String>,
    /// Deny this tool's permission requests (repeatable; `*` = every tool). Wins
    /// over everything else.
    #[arg(long = "deny-tool", value_name = "TOOL")]
    pub deny_tools: Vec<String>,
    /// Approve a permission request whose command lines all match this regular
    /// expression (repeatable; anywhere in the line unless anchored; a high risk
    /// still needs `--max-risk high`).
    #[arg(long = "allow-command", value_name = "REGEX", value_parser = parse_pattern)]
    pub allow_commands: Vec<String>,
    /// Deny a permission request carrying a command line this regular expression
    /// matches (repeatable; after `--deny-tool`, before anything approves).
    #[arg(long = "deny-command", value_name = "REGEX", value_parser = parse_pattern)]
    pub deny_commands: Vec<String>,
    /// Approve any permission request up to this risk: low | medium | high.
    #[arg(long, value_parser = parse_risk)]
    pub max_risk: Option<RiskLevel>,
    /// Append every event to this JSONL journal.
    #[arg(long)]
    pub journal: Option<PathBuf>,
    /// Simulator script (sets CAPFLEET_SIM_SCRIPT for the agent).
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Mirror the agent's terminal live (PTY agents: `cap.pty.raw_bytes` to stdout).
    #[arg(long)]
    pub raw: bool,
    /// Extra environment for the agent, KEY=VALUE (repeatable).
    #[arg(long, value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    /// none (default) | workspace: the agent and everything it runs confined to --cwd
    /// (see below).
    #[arg(long, value_enum, default_value = "none", value_name = "MODE")]
    pub sandbox: SandboxMode,
    #[command(flatten)]
    pub sandbox_details: SandboxFlags,
    #[command(flatten)]
    pub telemetry: capfleet_app::telemetry::TelemetryArgs,
}

fn parse_mode(s: &str) -> Result<PermissionMode, String> {
    PermissionMode::parse(s)
        .ok_or_else(|| format!("expected none | confirm | interactive, got {s:?}"))
}

fn parse_pattern(s: &str) -> Result<String, String> {
    CommandRules::new(&[s])
        .map(|_| s.to_owned())
        .map_err(|e| format!("not a regular expression: {}", e.reason))
}

fn parse_risk(s: &str) -> Result<RiskLevel, String> {
    RiskLevel::parse(s).ok_or_else(|| format!("expected low | medium | high, got {s:?}"))
}

fn parse_restart(s: &str) -> Result<Restart, String> {
    match s {
        "permanent" => Ok(Restart::Permanent),
        "transient" => Ok(Restart::Transient),
        "temporary" => Ok(Restart::Temporary),
        _ => Err(format!(
            "expected permanent | transient | temporary, got {s:?}"
        )),
    }
}

fn parse_on_rate_limit(s: &str) -> Result<OnRateLimit, String> {
    OnRateLimit::NAMES
        .iter()
        .find(|(_, name)| *name == s)
        .map(|(on, _)| *on)
        .ok_or_else(|| format!("expected pause | fail, got {s:?}"))
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))
}

fn seconds(what: &str, s: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s).map_err(|_| format!("{what}: {s} is not a duration in seconds"))
}

impl ChatArgs {
    /// The answerer's policy from the flags.
    pub(crate) fn policy(&self) -> Policy {
        let rules = |patterns: &[String]| {
            CommandRules::new(patterns).expect("each pattern was checked by the flag's parser")
        };
        Policy {
            deny_tools: self.deny_tools.clone(),
            allow_tools: self.allow_tools.clone(),
            deny_commands: rules(&self.deny_commands),
            allow_commands: rules(&self.allow_commands),
            max_risk: self.max_risk,
        }
    }

    /// Resolve the agent and build the session spec.
    pub(crate) async fn session_spec(&self) -> Result<SessionSpec, String> {
        let resolved = registry()
            .resolve(&self.agent)
            .await
            .map_err(|e| e.to_string())?;
        let manifest = Arc::new(resolved.manifest);
        let cwd = match &self.cwd {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().map_err(|e| format!("current directory: {e}"))?,
        };
        let cwd =
            std::fs::canonicalize(&cwd).map_err(|e| format!("--cwd {}: {e}", cwd.display()))?;
        let script = match &self.script {
            Some(s) => Some(
                std::fs::canonicalize(s).map_err(|e| format!("--script {}: {e}", s.display()))?,
            ),
            None => None,
        };
        let mut spec = session_spec(SessionRequest {
            fleet: "chat",
            name: manifest.agent.name.clone(),
            manifest,
            cwd: &cwd,
            model: self.model.clone(),
            system_prompt: None,
            permission_mode: self.permission_mode,
            argv: self.argv.clone(),
            env: self.env.clone(),
            script: script.as_deref(),
        });
        spec.launch.raw_bytes = self.raw;
        spec.policy = RestartPolicy {
            restart: self.restart,
            max_restarts: self.max_restarts,
            window: seconds("--restart-window-s", self.restart_window_s)?,
            ..RestartPolicy::default()
        };
        spec.turn_timeout = seconds("--turn-timeout-s", self.turn_timeout_s)?;
        spec.max_turns = self.max_turns;
        spec.rate_limit.on = self.on_rate_limit;
        if self.sandbox == SandboxMode::Workspace {
            spec.launch.sandbox = Some(self.sandbox_details.spec(&spec.launch.env));
            // Refused here, before anything spawns, when it cannot be had.
            let refused = |e: String| {
                format!(
                    "--sandbox workspace: this host cannot give it: {e} (install bubblewrap, \
                     or run on a kernel with Landlock; or --sandbox none)"
                )
            };
            let sandbox = spec
                .launch
                .resolved_sandbox()
                .map_err(|e| refused(e.to_string()))?;
            if let Some(sb) = sandbox {
                let tried = sb.confine(&spec.launch.program());
                tried.map_err(|e| refused(e.to_string()))?;
            }
        }
        Ok(spec)
    }
}
