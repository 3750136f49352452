//! `capfleet mcp`: capfleet as an MCP server on stdio, for an assistant (Claude
//! Code, Claude Desktop, any MCP client) to start, watch, answer and cancel fleets
//! with. Its runs are this directory's (`.capfleet/runs/`, as `capfleet run`'s); the
//! server is `capfleet-server`'s local one (`capfleet_server::mcp`), the tools
//! `capfleet-mcp`'s. stdout is the protocol's: everything else goes to stderr.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use capfleet_app::launch::EXIT_INVALID;
use capfleet_app::style::{ColorChoice, Style};
use capfleet_app::telemetry::TelemetryArgs;

/// `capfleet mcp`'s flags.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Tools: list_runs, start_run (a fleet.toml's path or text; the run id at once, the run \
goes on in the background), run_status (each session's last lines), wait_run (progress \
notifications), list_asks, answer_ask, session_diff, cancel_run. Resources: each run's \
journal (capfleet://runs/<run>/journal) and artifacts (capfleet://runs/<run>/artifacts/<path>).

Every tool call is journaled in the run it touches (who, which tool, the arguments' \
size, the result) and traced as an `execute_tool` span (--otlp, --trace-file).

When the client closes stdin (or on SIGTERM/SIGINT) the runs still going are \
cancelled, and capfleet exits once they have ended.

Claude Code: `claude mcp add capfleet -- capfleet mcp`.")]
pub(crate) struct McpArgs {
    /// Runs, journals and artifacts (runs/<run-id>/); default .capfleet/ here.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Runs at once, at most (the next ones wait their turn).
    #[arg(long, default_value_t = 4, value_name = "N")]
    max_runs: usize,
    /// Live sessions (all runs together), at most; a fleet with more is refused.
    #[arg(long, default_value_t = 64, value_name = "N")]
    max_sessions: usize,
    /// How long a permission request or ask waits for `answer_ask` before it is
    /// answered fail-safe (deny, or decline), unless the fleet says its own.
    #[arg(long, default_value = "10m", value_name = "DURATION", value_parser = capfleet_server::parse_duration)]
    ask_timeout: Duration,
    #[command(flatten)]
    telemetry: TelemetryArgs,
}

pub(crate) fn run(args: McpArgs, color: ColorChoice) -> ExitCode {
    let cwd = match std::env::current_dir().and_then(std::fs::canonicalize) {
        Ok(d) => d,
        Err(e) => {
            eprintln!(
                "{} the working directory: {e}",
                Style::for_stderr(color).err("error:")
            );
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let local = capfleet_server::mcp::Local {
        data_dir: args.data_dir.unwrap_or_else(|| cwd.join(".capfleet")),
        cwd,
        max_runs: args.max_runs,
        max_sessions: args.max_sessions,
        ask_timeout: args.ask_timeout,
        telemetry: args.telemetry,
    };
    capfleet_server::mcp::stdio(local, color)
}
