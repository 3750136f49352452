//! MCP over this server's runs (issue 40): `capfleet-mcp`'s tools ([`Fleets`]) acting
//! exactly as the API's routes do — `start_run` is a submission ([`super::start`]),
//! `answer_ask` the route's answer (checked against the question, journaled as
//! `remote:<caller>`), `cancel_run` the route's cancel — served two ways:
//!
//! - at [`PATH`] over Streamable HTTP ([`router`]), behind the origin checks and the
//!   bearer-token auth every route passes; the token's name and role reach the tools
//!   on the request ([`Caller`]), and each tool checks the role its route would need
//!   (`read`; `run` to start and cancel; `approve` to answer). A fleet file named by
//!   path is refused: a server takes a fleet's text, as `POST /v1/runs` does.
//! - on stdio for `capfleet mcp` ([`stdio`]): a server of its own over the working
//!   directory's `.capfleet/runs` (no HTTP, no token: its caller is the local user,
//!   who may everything `capfleet run` may, fleet files by path included). The client
//!   closing stdin, or SIGTERM/SIGINT, cancels what still runs and waits for it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use capfleet_app::runs;
use capfleet_app::signals::StopSignals;
use capfleet_app::style::{ColorChoice, Style};
use capfleet_app::submission::Submission;
use capfleet_app::telemetry::{Telemetry, TelemetryArgs};
use capfleet_engine::run::calls::OutsideCall;
use capfleet_engine::telemetry::metrics::FleetMetrics;
use capfleet_mcp::types::{
    AnswerAsk, AskList, Answered, Diff, FleetSource, OpenAsk, RunList, RunStatus, RunSummary,
    SessionStatus, Started,
};
use capfleet_mcp::{Access, Caller, FleetTools, Fleets, McpMetrics, Reply, ToolError};
use serde_json::json;

use super::asks::{AnswerRequest, AskKind};
use super::auth::{self, Role};
use super::error::ApiError;
use super::state::{Cancelled, Limits, RunEntry, Server, valid_id};
use super::view::{Created, RunView};
use capfleet_app::fleet::RunDir;

/// Where the server serves MCP.
pub(crate) use super::auth::MCP_PATH as PATH;

/// The tools' view of a server's runs.
struct ServerFleets {
    server: Arc<Server>,
    /// Fleet files by path are taken (`capfleet mcp`'s local server only).
    local_files: bool,
}

/// An API error as the tools say it: the same code, message and detail.
fn refused(e: ApiError) -> ToolError {
    let detail = match &e {
        ApiError::InvalidFleet(findings) => Some(json!({ "findings": findings })),
        ApiError::InvalidAnswer { expected, .. } => Some(json!({ "expected": expected })),
        ApiError::AskClosed {
            answered_by: Some(by),
            ..
        } => Some(json!({ "answered_by": by })),
        _ => None,
    };
    let code = serde_json::to_value(e.code())
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "internal".into());
    ToolError::Refused {
        code,
        message: e.to_string(),
        detail,
    }
}

fn joined<T>(r: Result<T, tokio::task::JoinError>) -> Result<T, ToolError> {
    r.map_err(|e| refused(ApiError::Internal(e.to_string())))
}

impl ServerFleets {
    /// Every run: this server's (as it tracks them) and the data dir's others (as
    /// their journals say), by id.
    fn summaries(server: &Server) -> RunList {
        let mut runs: Vec<RunSummary> = server
            .all()
            .iter()
            .map(|e| {
                let v = RunView::of(e, server);
                RunSummary {
                    run: v.id,
                    fleet: v.fleet,
                    state: v.state.as_str().to_owned(),
                    outcome: v.outcome,
                    cost_usd: v.budget.spent_usd,
                    sessions: v.sessions.len(),
                    started_ms: v.started_ms,
                    ended_ms: v.ended_ms,
                }
            })
            .collect();
        let known: std::collections::HashSet<String> = runs.iter().map(|r| r.run.clone()).collect();
        for run in RunDir::all_in(&server.runs_dir).unwrap_or_default() {
            if known.contains(&run.id) {
                continue;
            }
            let row = runs::row(&run);
            runs.push(RunSummary {
                run: row.run,
                fleet: None,
                state: super::state::RunState::from(row.state).as_str().to_owned(),
                outcome: row.outcome,
                cost_usd: row.cost_usd,
                sessions: row.sessions,
                started_ms: row.started_ms,
                ended_ms: row.ended_ms,
            });
        }
        runs.sort_by(|a, b| a.run.cmp(&b.run));
        RunList { runs }
    }

    /// A run of this server, with each session's last lines.
    fn status_of(entry: &RunEntry, server: &Server) -> RunStatus {
        let v = RunView::of(entry, server);
        let seen = entry.progress().seen;
        let sessions = entry
            .sessions
            .iter()
            .zip(v.sessions)
            .map(|((_, urn), s)| SessionStatus {
                last_lines: seen
                    .rows
                    .get(urn)
                    .map(|r| r.tail.lines())
                    .unwrap_or_default(),
                name: s.name,
                state: s.state,
                turns: s.turns,
                cost_usd: s.cost_usd,
                restarts: s.restarts,
            })
            .collect();
        RunStatus {
            run: v.id,
            fleet: v.fleet,
            state: v.state.as_str().to_owned(),
            outcome: v.outcome,
            exit_code: v.exit_code,
            cost_usd: v.budget.spent_usd,
            error: v.error,
            cancelled_by: v.cancelled_by,
            sessions,
        }
    }

    /// A run of the data dir this server did not start, as its journal says.
    fn status_on_disk(server: &Server, id: &str) -> Result<RunStatus, ToolError> {
        let dir = server.runs_dir.join(id);
        if !valid_id(id) || !dir.is_dir() {
            return Err(refused(ApiError::NoRun(id.to_owned())));
        }
        let row = runs::row(&RunDir {
            id: id.to_owned(),
            path: dir,
        });
        Ok(RunStatus {
            run: row.run,
            fleet: None,
            state: super::state::RunState::from(row.state).as_str().to_owned(),
            outcome: row.outcome,
            exit_code: row.exit_code,
            cost_usd: row.cost_usd,
            error: None,
            cancelled_by: None,
            sessions: Vec::new(),
        })
    }
}

fn started(c: Created) -> Started {
    Started {
        run: c.id,
        fleet: c.fleet,
        state: c.state.as_str().to_owned(),
        warnings: c.warnings,
    }
}

impl Fleets for ServerFleets {
    fn runs(&self) -> Reply<RunList> {
        let server = self.server.clone();
        Box::pin(async move {
            joined(tokio::task::spawn_blocking(move || ServerFleets::summaries(&server)).await)
        })
    }

    fn start(&self, fleet: FleetSource, task: Option<String>, by: Caller) -> Reply<Started> {
        let (server, local_files) = (self.server.clone(), self.local_files);
        Box::pin(async move {
            let created = match fleet {
                FleetSource::Path(path) if local_files => {
                    super::start::from_file(&server, Path::new(&path), task.as_deref(), &by.name)
                        .await
                }
                FleetSource::Path(_) => Err(ApiError::BadRequest(
                    "`fleet_path`: a server takes a fleet's text (`fleet_toml`), not a path on its disk".into(),
                )),
                FleetSource::Toml { fleet, files } => {
                    let value = json!({ "fleet": fleet, "files": files, "task": task });
                    match Submission::from_json(value) {
                        Ok(s) => super::start::submitted(&server, s, &by.name, None).await,
                        Err(e) => Err(e.into()),
                    }
                }
            };
            created.map(started).map_err(refused)
        })
    }

    fn status(&self, run: String) -> Reply<RunStatus> {
        let server = self.server.clone();
        Box::pin(async move {
            if let Some(e) = server.get(&run) {
                return Ok(ServerFleets::status_of(&e, &server));
            }
            joined(
                tokio::task::spawn_blocking(move || ServerFleets::status_on_disk(&server, &run))
                    .await,
            )?
        })
    }

    fn asks(&self, run: String) -> Reply<AskList> {
        let entry = self.server.get(&run);
        Box::pin(async move {
            let entry = entry.ok_or_else(|| refused(ApiError::NoRun(run.clone())))?;
            let asks = entry
                .asks
                .list()
                .into_iter()
                .map(|a| OpenAsk {
                    ask_id: a.ask_id,
                    kind: match a.kind {
                        AskKind::Permission => "permission",
                        AskKind::Ask => "ask",
                    }
                    .to_owned(),
                    urn: a.urn,
                    deadline_ms: a.deadline_ms,
                    tool: a.tool,
                    intent: a.intent,
                    risk: a.risk,
                    prompt: a.prompt,
                    form: a.form,
                })
                .collect();
            Ok(AskList { run, asks })
        })
    }

    fn answer(&self, answer: AnswerAsk, by: Caller) -> Reply<Answered> {
        let entry = self.server.get(&answer.run);
        Box::pin(async move {
            let entry = entry.ok_or_else(|| refused(ApiError::NoRun(answer.run.clone())))?;
            let body = AnswerRequest {
                decision: answer.decision.map(|d| d.as_str().to_owned()),
                answer: answer.answer,
                decline: answer.decline,
            };
            let done = entry
                .asks
                .answer(&answer.ask_id, &body, &by.name)
                .map_err(refused)?;
            Ok(Answered {
                run: answer.run,
                ask_id: done.ask_id,
                by: done.by,
            })
        })
    }

    fn diff(&self, run: String, session: String) -> Reply<Diff> {
        let server = self.server.clone();
        Box::pin(async move {
            let bytes = super::artifacts::session_diff(&server, &run, &session)
                .await
                .map_err(refused)?;
            let patch = String::from_utf8_lossy(&bytes).into_owned();
            let files = patch.lines().filter(|l| l.starts_with("diff --git ")).count();
            Ok(Diff {
                run,
                session,
                patch,
                files,
            })
        })
    }

    fn cancel(&self, run: String, by: Caller) -> Reply<RunStatus> {
        let server = self.server.clone();
        Box::pin(async move {
            match server.cancel(&run, &by.name) {
                Cancelled::NotFound => Err(refused(ApiError::NoRun(run))),
                Cancelled::Ended(state) => Err(refused(ApiError::Ended(state.as_str().to_owned()))),
                Cancelled::Dequeued | Cancelled::Stopping => {
                    tracing::info!(run = %run, by = %by.name, "run cancelled");
                    let entry = server
                        .get(&run)
                        .ok_or_else(|| refused(ApiError::NoRun(run.clone())))?;
                    Ok(ServerFleets::status_of(&entry, &server))
                }
            }
        })
    }

    fn run_dir(&self, run: &str) -> Option<PathBuf> {
        if let Some(e) = self.server.get(run) {
            return Some(e.dir.clone());
        }
        let dir = self.server.runs_dir.join(run);
        (valid_id(run) && dir.is_dir()).then_some(dir)
    }

    fn journal(&self, run: &str, call: OutsideCall) {
        match self.server.get(run) {
            Some(e) if e.calls.record(call.clone()) => {}
            Some(e) => capfleet_mcp::append_later(e.id.clone(), e.dir.clone(), vec![call]),
            None => {
                if let Some(dir) = self.run_dir(run) {
                    capfleet_mcp::append_later(run.to_owned(), dir, vec![call]);
                }
            }
        }
    }
}

/// A token's role as what the tools may.
fn access(role: Role) -> Access {
    match role {
        Role::Read => Access::Read,
        Role::Run => Access::Run,
        Role::Approve | Role::Admin => Access::Approve,
    }
}

/// The caller the auth found, handed to the tools on the request.
async fn hand_caller(mut request: Request, next: Next) -> Response {
    if let Some(c) = request.extensions().get::<auth::Caller>() {
        let caller = Caller {
            name: c.name.clone(),
            may: access(c.role),
        };
        request.extensions_mut().insert(caller);
    }
    next.run(request).await
}

/// `/mcp`: the tools over Streamable HTTP (the caller's auth layered on by
/// [`super::routes`]), counted into the server's registry.
pub(crate) fn router(server: Arc<Server>, metrics: McpMetrics) -> Router<Arc<Server>> {
    let fleets: Arc<dyn Fleets> = Arc::new(ServerFleets {
        server,
        local_files: false,
    });
    let service =
        capfleet_mcp::http_service(move || FleetTools::new(fleets.clone(), None, metrics.clone()));
    Router::new()
        .route_service(PATH, service)
        .layer(middleware::from_fn(hand_caller))
}

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
    let canonical = std::fs::create_dir_all(&runs_dir).and_then(|()| std::fs::canonicalize(&runs_dir));
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
    let fleets: Arc<dyn Fleets> = Arc::new(ServerFleets {
        server: server.clone(),
        local_files: true,
    });
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
    telemetry.finish().await;
    Ok(code)
}
