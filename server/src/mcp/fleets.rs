//! The tools' view of a server's runs ([`Fleets`]): each tool acts as the API's
//! route of the same change does, its refusals the route's errors (same code,
//! message and detail).

use std::path::{Path, PathBuf};

use capfleet_app::fleet::RunDir;
use capfleet_app::runs;
use capfleet_app::submission::Submission;
use capfleet_engine::run::calls::OutsideCall;
use capfleet_mcp::types::{
    AnswerAsk, Answered, AskList, Diff, FleetSource, OpenAsk, RunList, RunStatus, RunSummary,
    SessionStatus, Started,
};
use capfleet_mcp::{Caller, Fleets, Reply, ToolError};
use serde_json::json;
use std::sync::Arc;

use crate::asks::{AnswerRequest, AskKind};
use crate::error::ApiError;
use crate::state::{Cancelled, RunEntry, Server, valid_id};
use crate::view::{Created, RunView};

/// The tools' view of a server's runs.
pub(super) struct ServerFleets {
    server: Arc<Server>,
    /// Fleet files by path are taken (`capfleet mcp`'s local server only).
    local_files: bool,
    /// The data dir's runs that this server does not run, each journal read as far
    /// as the last look (a client's polls read what was appended since).
    rows: Arc<runs::Rows>,
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
    pub(super) fn new(server: Arc<Server>, local_files: bool) -> ServerFleets {
        ServerFleets {
            server,
            local_files,
            rows: Arc::default(),
        }
    }

    /// Every run: this server's (as it tracks them) and the data dir's others (as
    /// their journals say), by id.
    fn summaries(server: &Server, rows: &runs::Rows) -> RunList {
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
        for run in &rows.all_in(&server.runs_dir).unwrap_or_default() {
            if known.contains(&run.id) {
                continue;
            }
            let row = rows.row(run);
            runs.push(RunSummary {
                run: row.run,
                fleet: None,
                state: crate::state::RunState::from(row.state).as_str().to_owned(),
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
    fn status_on_disk(
        server: &Server,
        rows: &runs::Rows,
        id: &str,
    ) -> Result<RunStatus, ToolError> {
        let dir = server.runs_dir.join(id);
        if !valid_id(id) || !dir.is_dir() {
            return Err(refused(ApiError::NoRun(id.to_owned())));
        }
        let row = rows.row(&RunDir {
            id: id.to_owned(),
            path: dir,
        });
        Ok(RunStatus {
            run: row.run,
            fleet: None,
            state: crate::state::RunState::from(row.state).as_str().to_owned(),
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
        let (server, rows) = (self.server.clone(), self.rows.clone());
        Box::pin(async move {
            joined(
                tokio::task::spawn_blocking(move || ServerFleets::summaries(&server, &rows)).await,
            )
        })
    }

    fn start(&self, fleet: FleetSource, task: Option<String>, by: Caller) -> Reply<Started> {
        let (server, local_files) = (self.server.clone(), self.local_files);
        Box::pin(async move {
            let created = match fleet {
                FleetSource::Path(path) if local_files => {
                    crate::start::from_file(&server, Path::new(&path), task.as_deref(), &by.name)
                        .await
                }
                FleetSource::Path(_) => Err(ApiError::BadRequest(
                    "`fleet_path`: a server takes a fleet's text (`fleet_toml`), not a path on its disk".into(),
                )),
                FleetSource::Toml { fleet, files } => {
                    let value = json!({ "fleet": fleet, "files": files, "task": task });
                    match Submission::from_json(value) {
                        Ok(s) => crate::start::submitted(&server, s, &by.name, None, None).await,
                        Err(e) => Err(e.into()),
                    }
                }
            };
            created.map(started).map_err(refused)
        })
    }

    fn status(&self, run: String) -> Reply<RunStatus> {
        let (server, rows) = (self.server.clone(), self.rows.clone());
        Box::pin(async move {
            if let Some(e) = server.get(&run) {
                return Ok(ServerFleets::status_of(&e, &server));
            }
            joined(
                tokio::task::spawn_blocking(move || {
                    ServerFleets::status_on_disk(&server, &rows, &run)
                })
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
            let bytes = crate::artifacts::session_diff(&server, &run, &session)
                .await
                .map_err(refused)?;
            let patch = String::from_utf8_lossy(&bytes).into_owned();
            let files = patch
                .lines()
                .filter(|l| l.starts_with("diff --git "))
                .count();
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
