//! `capfleet mcp`'s server: a server of its own over the working directory's
//! `.capfleet/runs` (no HTTP, no token), its caller the local user, who may
//! everything `capfleet run` may (fleet files by path included). The client closing
//! stdin, or SIGTERM/SIGINT, cancels what still runs and waits for it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use capfleet_app::signals::StopSignals;
use capfleet_app::style::{ColorChoice, Style};
use capfleet_app::telemetry::{Telemetry, TelemetryArgs};
use capfleet_engine::telemetry::metrics::FleetMetrics;
use capfleet_mcp::{Access, Caller, FleetTools, Fleets, McpMetrics};

use super::fleets::ServerFleets;
use crate::auth;
use crate::state::{Limits, Server};

/// What `capfleet mcp` serves with.
#[derive(Debug, Clone)]
pub struct Local {
    /// The data dir (`<cwd>/.capfleet` unless said): its `runs/` holds the runs.
    pub data_dir: PathBuf,
    /// The directory its sessions work in and its fleets' `cwd`s stay inside.
    pub cwd: PathBuf,
    pub max_runs: usize,
    pub max_sessions: usize,
    /// How long a question waits for an answer before its fail-safe one.
    pub ask_timeout: Duration,
    pub telemetry: TelemetryArgs,
}

/// Why `capfleet mcp` does not start.
#[derive(Debug, thiserror::Error)]
enum LocalError {
    #[error("the data dir {}: {source}", path.display())]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--max-runs and --max-sessions must be at least 1")]
    Limits,
    #[error("{0}")]
    Telemetry(#[from] capfleet_engine::telemetry::TelemetryError),
}

/// `capfleet mcp`: serve the tools on stdin/stdout until the client goes (or a
/// signal), then cancel what still runs and wait for it.
pub fn stdio(local: Local, color: ColorChoice) -> ExitCode {
    let runtime = match capfleet_app::runtime::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        // Before anything: a signal ends the serving, not the process.
        let signals = StopSignals::all();
        match serve_local(local, color, signals).await {
            Ok(code) => code,
            Err(e) => {
                eprintln!("{} {e}", Style::for_stderr(color).err("error:"));
                ExitCode::from(capfleet_app::launch::EXIT_INVALID)
            }
        }
    })
}

async fn serve_local(
    local: Local,
    color: ColorChoice,
    mut signals: StopSignals,
) -> Result<ExitCode, LocalError> {
    if local.max_runs == 0 || local.max_sessions == 0 {
        return Err(LocalError::Limits);
    }
    let telemetry = Telemetry::start(color, &local.telemetry)?;
    let runs_dir = local.data_dir.join("runs");
    let canonical =
        std::fs::create_dir_all(&runs_dir).and_then(|()| std::fs::canonicalize(&runs_dir));
    let runs_dir = canonical.map_err(|source| LocalError::DataDir {
        path: runs_dir.clone(),
        source,
    })?;
    let limits = Limits {
        max_runs: local.max_runs,
        max_sessions: local.max_sessions,
        queue: usize::MAX,
    };
    let fleet_metrics = Arc::new(FleetMetrics::new(
        telemetry.span_stats().unwrap_or_default(),
    ));
    let mut server = Server::new(runs_dir, auth::Tokens::none(), limits, fleet_metrics);
    server.ask_timeout = local.ask_timeout;
    server.allow_roots = vec![local.cwd.clone()];
    let server = Arc::new(server);
    let fleets: Arc<dyn Fleets> = Arc::new(ServerFleets::new(server.clone(), true));
    let user = std::env::var("USER").unwrap_or_else(|_| "local".into());
    let caller = Caller {
        name: user,
        may: Access::Approve,
    };
    let tools = FleetTools::new(fleets, Some(caller), McpMetrics::default());
    tracing::info!(runs = %server.runs_dir.display(), "capfleet mcp: serving MCP on stdio");
    let code = tokio::select! {
        served = capfleet_mcp::serve_stdio(tools) => match served {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!("{e}");
                ExitCode::FAILURE
            }
        },
        signal = signals.recv() => {
            capfleet_app::logging::note(&format!("capfleet mcp: {signal}: cancelling every run"));
            ExitCode::from(signal.exit_code())
        }
    };
    // Nothing more comes: what still runs is cancelled, and waited for.
    server.drain();
    server.cancel_all("the MCP client's end");
    server.idle().await;
    capfleet_mcp::late_calls_written().await;
    telemetry.finish().await;
    Ok(code)
}
