//! The command line: verbs, global flags and their dispatch.

use std::io::Write as _;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::cmd;
use capfleet_app::shipped::OWN_MANIFEST;
use capfleet_app::style::ColorChoice;

const AFTER_HELP: &str = "\
Getting started:
  capfleet run config/fleets/demo.toml
      a fleet of simulator agents (no API key needed)
  capfleet resolve sim
      where the `sim` agent's manifest comes from, and the binding chosen
  capfleet manifest validate my.toml
      check a cap-agent.toml, every error with file, line and key
  capfleet sim --mode tui
      the scripted simulator agent, as a terminal program

Manifests are looked up in order: `cap-agent.toml` beside the agent's binary on PATH, \
~/.config/cap/agents/<name>.toml, /usr/share/cap-agents/<name>.toml, the manifests shipped \
in capfleet, then `<binary> --cap-manifest` (5 s timeout).

Environment: NO_COLOR disables colour (as does --color never); CAPFLEET_LOG sets the \
diagnostics filter on stderr (default `warn`; e.g. CAPFLEET_LOG=debug). Traces: `run` and \
`chat` export spans over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT (or --otlp) is set, with \
OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf or grpc), OTEL_SERVICE_NAME and \
OTEL_RESOURCE_ATTRIBUTES as usual.

The user guide, a page per topic with examples: docs/guide/README.md in capfleet's source.";

/// capfleet: drive fleets of command-line AI agents over CAP (cap-protocol/v1).
#[derive(Debug, Parser)]
#[command(name = "capfleet", version, about, long_about = None, after_help = AFTER_HELP)]
#[command(arg_required_else_help = true)]
pub(crate) struct Cli {
    /// Print capfleet's own CAP manifest (capfleet as an agent) and exit.
    #[arg(long, exclusive = true)]
    cap_manifest: bool,

    /// When to colour output: auto (stdout a terminal and NO_COLOR unset), always, never.
    // A global option is listed in every verb's help: its values are named in the one
    // line above, not as a block of possible values repeated under every verb.
    #[arg(
        long,
        value_enum,
        value_name = "WHEN",
        default_value_t,
        global = true,
        hide_possible_values = true
    )]
    color: ColorChoice,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Find an agent's manifest, validate it and show the binding that would drive it.
    Resolve(cmd::resolve::ResolveArgs),
    /// Work with agent manifests (cap-agent.toml).
    #[command(subcommand)]
    Manifest(cmd::manifest::ManifestCommand),
    /// Talk to one agent: a task once (`--task`) or a REPL; streams its answer.
    Chat(Box<cmd::chat::ChatArgs>),
    /// Be a Claude-compatible stream-json agent: one session of any agent, driven as Claude Code.
    Speak(Box<cmd::speak::SpeakArgs>),
    /// Be an ACP agent on stdio (Agent Client Protocol): one session of any agent per ACP session, for editors.
    Acp(Box<cmd::acp::AcpArgs>),
    /// Run a fleet of agents from a fleet.toml (`--dry-run`: validate and print the plan).
    Run(Box<cmd::run::RunArgs>),
    /// List the runs started here: state (completed, failed, interrupted, running), cost, sessions, start.
    Runs(cmd::runs::RunsArgs),
    /// Print a run's journal readably (`latest` or a run id; `--follow`, `--session`, `--json`).
    Log(cmd::log::LogArgs),
    /// Look at chaos runs: `chaos report <run>` (faults, recovery times, invariants).
    #[command(subcommand)]
    Chaos(cmd::chaos::ChaosCommand),
    /// Show a run's workspace diffs against their base (all sessions, or one).
    Diff(cmd::worktree::diff::DiffArgs),
    /// Merge a session's branch into the current branch (conflicts are reported, never resolved).
    Merge(cmd::worktree::merge::MergeArgs),
    /// Remove a run's worktrees and branches; refuses when work would be lost (`--force`).
    Clean(cmd::worktree::clean::CleanArgs),
    /// Serve the HTTP API: fleets submitted, watched and cancelled remotely (tokens, admission, drain).
    Serve(Box<cmd::serve::ServeArgs>),
    /// Serve MCP on stdio: an assistant starts, watches, answers and cancels fleets here through tools.
    Mcp(Box<cmd::mcp::McpArgs>),
    /// Submit a fleet to a `capfleet serve` (`--wait`: follow it, exit with its code).
    Submit(Box<cmd::submit::SubmitArgs>),
    /// Take runs queued in NATS JetStream (`submit --nats`) and run them here (labels, leases, drain).
    Worker(Box<cmd::worker::WorkerArgs>),
    /// List the workers present in NATS: labels, runs held, last heartbeat; the queue's depth.
    Workers(cmd::workers::WorkersArgs),
    /// Run the scripted simulator agent (stream-json or terminal UI).
    Sim(Box<capfleet_sim::SimArgs>),
    /// Print a shell completion script: `capfleet completions bash > /etc/bash_completion.d/capfleet`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

pub(crate) fn main() -> ExitCode {
    let cli = Cli::parse();
    if !drives_agents(cli.command.as_ref()) {
        quiet_on_closed_stdout();
    }
    if cli.cap_manifest {
        return print_own_manifest();
    }
    // A supervising `run --resume-on-crash` drives no agent itself: its child runs do.
    if matches!(cli.command, Some(Command::Run(ref a)) if !a.dry_run && !a.resume_on_crash)
        || matches!(
            cli.command,
            Some(
                Command::Chat(_)
                    | Command::Speak(_)
                    | Command::Acp(_)
                    | Command::Worker(_)
                    | Command::Mcp(_)
            )
        )
        || matches!(cli.command, Some(Command::Serve(ref a)) if a.command.is_none())
    {
        start_keeper();
    }
    // `run`, `chat`, `serve` and `worker` set up diagnostics with their span pipeline, inside
    // their runtime.
    if !matches!(
        cli.command,
        Some(
            Command::Run(_)
                | Command::Chat(_)
                | Command::Speak(_)
                | Command::Acp(_)
                | Command::Serve(_)
                | Command::Worker(_)
                | Command::Mcp(_)
        )
    ) {
        capfleet_app::logging::init(cli.color);
    }
    match cli.command {
        Some(Command::Resolve(args)) => cmd::resolve::run(args, cli.color),
        Some(Command::Manifest(command)) => cmd::manifest::run(command, cli.color),
        Some(Command::Chat(args)) => cmd::chat::run(*args, cli.color),
        Some(Command::Speak(args)) => cmd::speak::run(*args, cli.color),
        Some(Command::Acp(args)) => cmd::acp::run(*args, cli.color),
        Some(Command::Run(args)) => cmd::run::run(*args, cli.color),
        Some(Command::Log(args)) => cmd::log::run(args, cli.color),
        Some(Command::Runs(args)) => cmd::runs::run(args, cli.color),
        Some(Command::Chaos(command)) => cmd::chaos::run(command, cli.color),
        Some(Command::Serve(args)) => cmd::serve::run(*args, cli.color),
        Some(Command::Mcp(args)) => cmd::mcp::run(*args, cli.color),
        Some(Command::Submit(args)) => cmd::submit::run(*args, cli.color),
        Some(Command::Worker(args)) => cmd::worker::run(*args, cli.color),
        Some(Command::Workers(args)) => cmd::workers::run(args, cli.color),
        Some(Command::Diff(args)) => cmd::worktree::diff::run(args, cli.color),
        Some(Command::Merge(args)) => cmd::worktree::merge::run(args, cli.color),
        Some(Command::Clean(args)) => cmd::worktree::clean::run(args, cli.color),
        Some(Command::Sim(args)) => capfleet_sim::run(*args),
        Some(Command::Completions { shell }) => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "capfleet",
                &mut std::io::stdout(),
            );
            ExitCode::SUCCESS
        }
        None => {
            // Only `--color` without a verb gets here.
            eprintln!("{}", Cli::command().render_help());
            ExitCode::from(2)
        }
    }
}

/// The verbs that drive agents: `run` (not `--dry-run`), `chat`, and the simulator
/// (an agent itself, whose stdout is its orchestrator's pipe).
fn drives_agents(command: Option<&Command>) -> bool {
    match command {
        Some(Command::Run(args)) => !args.dry_run,
        Some(Command::Serve(args)) => args.command.is_none(),
        Some(
            Command::Chat(_)
            | Command::Speak(_)
            | Command::Acp(_)
            | Command::Sim(_)
            | Command::Worker(_)
            | Command::Mcp(_),
        ) => true,
        _ => false,
    }
}

/// Before any agent can start (and before any thread): the keeper that kills every
/// agent group this process leaves behind when it dies (`process::keeper`). Without
/// one (the binary cannot be re-executed) the run goes on, with a warning.
fn start_keeper() {
    let started =
        std::env::current_exe().and_then(|exe| capfleet_wire::process::keeper::start(&exe));
    if let Err(e) = started {
        eprintln!(
            "capfleet: warning: cannot start the keeper ({e}): agents would outlive a capfleet killed outright"
        );
    }
}

/// A closed stdout (`capfleet resolve sim | head -1`) ends every other verb quietly,
/// as it ends `cat` or `git log`: the default action of `SIGPIPE` (the Rust runtime
/// ignores it, so that each `println!` would panic on `EPIPE` with exit 101 instead).
/// Restoring the default once, here, covers every print of these verbs and of the
/// libraries they print with (clap's help, `clap_complete`), with nothing to forget on
/// a new one; and the shell takes a death by `SIGPIPE` as the normal end of a pipeline.
/// The verbs that drive agents keep `SIGPIPE` ignored — an agent's closed stdin must
/// not kill the orchestrator — and stop printing at a write error instead (their
/// views), carrying on so that their agents are still shut down.
fn quiet_on_closed_stdout() {
    // SAFETY: setting a signal's disposition to its default, before any thread is
    // started, has no memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// `--cap-manifest`: print and exit, touching neither disk nor network.
fn print_own_manifest() -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out
        .write_all(OWN_MANIFEST.as_bytes())
        .and_then(|()| out.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
