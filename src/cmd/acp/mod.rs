//! `capfleet acp`: capfleet as an ACP agent on stdio (the Agent Client Protocol, v1),
//! so an editor that drives ACP agents (Zed, JetBrains, neovim plugins) drives any
//! agent capfleet can drive, over any binding, under the full supervision tree.
//!
//! - [`server`]: the ACP agent side on the official `agent-client-protocol` crate;
//! - [`hosting`]: what is hosted, one agent's sessions or a fleet's conversations;
//! - [`host`]: the hosted sessions (one capfleet session per ACP session);
//! - [`fleet`]: the hosted fleet conversations (`--fleet`: a run per prompt);
//! - [`updates`]: the sessions' events as `session/update`s;
//! - [`store`]: what `session/load` needs once this process is gone;
//! - [`wire`]: stdio, bounded both ways.
//!
//! stdout carries protocol messages only; diagnostics go to stderr.
//!
//! `capfleet acp` (`src/cmd/acp/`) is capfleet as an ACP agent on the official
//! `agent-client-protocol` crate's agent side (`server.rs`): one tree per process,
//! one session of the agent per ACP session (`host.rs`, started through the tree's
//! `Spawner`), each session's events forwarded as `session/update`s by a task of its
//! own (`updates.rs`: chunks of a burst joined, tool calls, plans) and counted, so a
//! `session/prompt` is answered only after its turn's updates (usage and cost in
//! `_meta`). The SDK queues outgoing messages without a bound; `wire.rs` counts
//! updates queued against lines written and a forwarder waits past 64, so a client
//! that stops reading stalls the inner agent's output, not capfleet's memory.
//! Permissions the policy leaves open go to the client as
//! `session/request_permission`; asks are declined (ACP v1 has no way to put them).
//! After each turn the session's record (agent, inner conversation id, the
//! conversation's text up to 256 KiB) is written whole under the state dir
//! (`store.rs`); `session/load` in another process replays it and resumes the
//! inner agent natively. With `--fleet` the conversations are `fleet.rs`'s (below);
//! `hosting.rs` is the one face the server sees of either: it reads a loaded
//! session's record (refused when another agent's or fleet's) and hands it, its cwd
//! the client's, to the agent's host or the fleet's to replay and go on with. ACP
//! runs on stdio, one client a process: a fleet conversation keeps that connection
//! for the updates of its runs.

mod fleet;
mod host;
mod hosting;
mod server;
mod store;
mod updates;
mod wire;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use capfleet_engine::answerer::Policy;
use capfleet_engine::protocol::PermissionMode;
use tokio::sync::mpsc;

use capfleet_app::agents::registry;
use capfleet_app::signals::StopSignals;
use capfleet_app::style::{ColorChoice, Style};
use capfleet_app::telemetry::Telemetry;

/// Exit codes.
const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
capfleet as an ACP agent (Agent Client Protocol v1, JSON-RPC on stdio): an editor \
that runs ACP agents runs `capfleet acp --agent NAME` and drives any agent capfleet \
can drive — a stream-json, ACP, A2A or PTY-only one — under capfleet's supervision \
(a crash inside is a restart, invisible to the editor but for a note on stderr).

Examples:
  capfleet acp --fleet review.toml
      a whole fleet as one ACP agent
  capfleet acp --agent claude-code
      Claude Code behind ACP
  capfleet acp --agent aider --allow-tool Read
      a TUI agent spoken to as ACP, its Read permissions granted
  Zed's settings.json:
      \"agent_servers\": { \"capfleet\": { \"command\": \"capfleet\", \"args\": [\"acp\", \"--agent\", \"codex\"] } }

Sessions: each `session/new` starts one session of the agent in the client's cwd. \
After each turn the session's record (the agent's own conversation id, the \
conversation's text) is saved under --state-dir, so `session/load` in a later \
process replays the conversation and resumes the agent natively where its binding \
can (stream-json `--resume`, ACP `session/load`).

A fleet (--fleet): each ACP session is a conversation with the fleet, its id the \
first run's; each `session/prompt` is one run of the fleet in the client's cwd with \
the prompt as its task (run directories under it, read by `capfleet log`). The \
updates are the `[fleet].answer_from` session's, and the fleet's plans; the coding \
sessions keep their worktrees, and the final diff is offered as ACP `diff` content \
(a completed `edit` \
tool call per worktree). The fleet's policy decides permissions first; what it \
leaves open is asked of the client. `session/cancel` cancels every inner session's \
turn; the prompt response's `_meta` holds the fleet's usage and the run \
(`capfleet.run`: id, journal, outcome); a failed or over-budget run is an error \
response saying why. `session/load` goes on with the conversation's runs.

Permissions: --deny-tool, then --allow-tool decide first; what they leave open is \
asked of the client (`session/request_permission`). Questions an agent asks are \
declined: ACP v1 cannot put them to a client.

Turns: `session/prompt` answers with the stop reason and the turn's usage and cost \
in `_meta.\"capfleet.usage\"`; a failed turn is an error response saying why. \
`session/cancel` cancels the turn.

Exit codes: 0 the client closed the connection, 1 a failure (the journal could not \
be written), 2 bad usage, 130 SIGINT or SIGTERM (every inner agent's process group \
is killed first).")]
pub(crate) struct AcpArgs {
    /// The agent that answers: a registry name (see `capfleet resolve`) or a manifest path.
    #[arg(long, env = "CAPFLEET_ACP_AGENT", required_unless_present = "fleet")]
    pub agent: Option<String>,
    /// A whole fleet answers instead of one agent: each prompt is one run of this
    /// fleet file with the prompt as its task.
    #[arg(long, env = "CAPFLEET_ACP_FLEET", value_name = "FLEET_TOML")]
    pub fleet: Option<PathBuf>,
    /// Simulator script (sets CAPFLEET_SIM_SCRIPT for the agent).
    #[arg(long, conflicts_with = "fleet")]
    pub script: Option<PathBuf>,
    /// Append every event of every session to this JSONL journal.
    #[arg(long, conflicts_with = "fleet")]
    pub journal: Option<PathBuf>,
    /// The model to ask the agent for.
    #[arg(long, conflicts_with = "fleet")]
    pub model: Option<String>,
    /// The agent's CAP permission mode (`none` runs it unattended).
    #[arg(long, value_parser = parse_mode, conflicts_with = "fleet")]
    pub permission_mode: Option<PermissionMode>,
    /// Grant this tool's permission requests without asking (repeatable).
    #[arg(long = "allow-tool", value_name = "TOOL", conflicts_with = "fleet")]
    pub allow_tools: Vec<String>,
    /// Deny this tool's permission requests without asking (repeatable).
    #[arg(long = "deny-tool", value_name = "TOOL", conflicts_with = "fleet")]
    pub deny_tools: Vec<String>,
    /// Where session records for `session/load` are kept
    /// [default: $XDG_STATE_HOME/capfleet/acp, else ~/.local/state/capfleet/acp].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    #[command(flatten)]
    pub telemetry: capfleet_app::telemetry::TelemetryArgs,
}

fn parse_mode(s: &str) -> Result<PermissionMode, String> {
    PermissionMode::parse(s).ok_or_else(|| format!("expected a CAP permission mode, got {s:?}"))
}

impl AcpArgs {
    fn state_dir(&self) -> Result<PathBuf, String> {
        if let Some(dir) = &self.state_dir {
            return Ok(dir.clone());
        }
        let env = |k| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        env("XDG_STATE_HOME")
            .or_else(|| env("HOME").map(|h| h.join(".local/state")))
            .map(|d| d.join("capfleet/acp"))
            .ok_or_else(|| "no --state-dir, and neither XDG_STATE_HOME nor HOME is set".into())
    }
}

pub(crate) fn run(args: AcpArgs, color: ColorChoice) -> ExitCode {
    let telemetry = args.telemetry.clone();
    capfleet_app::runtime::run_verb(color, &telemetry, async |t| acp(args, color, t).await)
}

async fn acp(args: AcpArgs, color: ColorChoice, telemetry: &Telemetry) -> ExitCode {
    let err = Style::for_stderr(color);
    let usage = |e: String| {
        eprintln!("{} {e}", err.err("error:"));
        ExitCode::from(EXIT_USAGE)
    };
    let state_dir = match args.state_dir() {
        Ok(d) => d,
        Err(e) => return usage(e),
    };
    if let Some(fleet) = &args.fleet {
        return acp_fleet(fleet, state_dir, err, telemetry).await;
    }
    let agent = args.agent.clone().unwrap_or_default();
    let manifest = match registry().resolve(&agent).await {
        Ok(r) => Arc::new(r.manifest),
        Err(e) => return usage(e.to_string()),
    };
    let script = match &args.script {
        Some(s) => match std::fs::canonicalize(s) {
            Ok(p) => Some(p),
            Err(e) => return usage(format!("--script {}: {e}", s.display())),
        },
        None => None,
    };
    // Before any agent exists: from here on the signals end the sessions first.
    let mut signals = StopSignals::all();
    let (human_tx, questions) = mpsc::channel(16);
    let setup = capfleet_app::one_session::Setup {
        verb: "acp",
        agent_type: &agent,
        journal: args.journal.clone(),
        policy: Policy {
            deny_tools: args.deny_tools.clone(),
            allow_tools: args.allow_tools.clone(),
            max_risk: None,
            ..Policy::default()
        },
        human: Some(human_tx),
        traceparent: telemetry.traceparent(),
    };
    let (orchestrator, mut faults) = match capfleet_app::one_session::tree(setup, err).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    let backlog = Arc::new(wire::Backlog::default());
    let launch = host::Launch {
        agent,
        manifest,
        model: args.model.clone(),
        permission_mode: args.permission_mode,
        script,
    };
    let host = Arc::new(hosting::Hosting::Agent(host::Host::new(
        orchestrator.spawner(),
        launch,
        store::Store::new(state_dir),
        backlog.clone(),
    )));
    let code = tokio::select! {
        served = server::serve(host, backlog, questions) => served_code(served, err),
        Some(fault) = faults.recv() => {
            eprintln!("{} {fault}; the sessions are stopped (kept: {})", err.err("error:"), fault.kept);
            ExitCode::from(EXIT_FAILED)
        }
        signal = signals.recv() => {
            StopSignals::escalate(signal);
            ExitCode::from(EXIT_INTERRUPTED)
        }
    };
    capfleet_app::one_session::finish(orchestrator, code, err).await
}

/// How the connection ended, as the exit code.
fn served_code(served: Result<(), agent_client_protocol::Error>, err: Style) -> ExitCode {
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{} the ACP connection failed: {e}", err.err("error:"));
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// A fleet answers: each prompt one run of it (its own supervision tree), each
/// conversation's permissions put to the client by the conversation itself.
async fn acp_fleet(
    fleet: &std::path::Path,
    state_dir: PathBuf,
    err: Style,
    telemetry: &Telemetry,
) -> ExitCode {
    let path = match std::path::absolute(fleet) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{} --fleet {}: {e}", err.err("error:"), fleet.display());
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Err(e) = capfleet_app::one_fleet::FleetAgent::check(&path).await {
        eprintln!("{} {e}", err.err("error:"));
        return ExitCode::from(EXIT_USAGE);
    }
    // Before any agent exists: from here on the signals stop the runs first.
    let mut signals = StopSignals::all();
    let backlog = Arc::new(wire::Backlog::default());
    let host = fleet::FleetHost::new(
        path,
        telemetry.traceparent(),
        store::Store::new(state_dir),
        backlog.clone(),
    );
    // No tree of the process asks anything: each conversation asks the client itself.
    let (_none, questions) = mpsc::channel(1);
    let host = Arc::new(hosting::Hosting::Fleet(host));
    let stopping = host.clone();
    tokio::select! {
        served = server::serve(host, backlog, questions) => served_code(served, err),
        signal = signals.recv() => {
            StopSignals::escalate(signal);
            if let hosting::Hosting::Fleet(h) = &*stopping {
                h.stop_all(signal).await;
            }
            ExitCode::from(EXIT_INTERRUPTED)
        }
    }
}
