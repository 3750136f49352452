//! What the API says of a run: its state (with its queue position while it waits),
//! each session's state, turns, tokens, cost and restarts, the budget, the outcome
//! and exit code once ended, and the links to its other routes. A run of the data
//! dir this server did not start (an earlier server, `capfleet run`) is described by
//! its journal, as `capfleet runs` lists it.

use serde::Serialize;
use utoipa::ToSchema;

use super::state::{RunEntry, RunState, Server};
use capfleet_app::runs::{self, RunRow};

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SessionView {
    pub name: String,
    pub urn: String,
    pub state: String,
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub restarts: u32,
    /// Rate-limit pauses so far.
    pub pauses: u32,
    /// While paused: when the turn is re-issued (Unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_until_ms: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Budget {
    pub limit_usd: Option<f64>,
    pub spent_usd: f64,
}

/// The run's other routes.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Links {
    #[serde(rename = "self")]
    pub this: String,
    pub events: String,
    pub asks: String,
    pub cancel: String,
}

impl Links {
    pub(crate) fn of(id: &str) -> Links {
        let this = format!("/v1/runs/{id}");
        Links {
            events: format!("{this}/events"),
            asks: format!("{this}/asks"),
            cancel: format!("{this}/cancel"),
            this,
        }
    }
}

/// A run: where it stands, its sessions, its budget, its links.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RunView {
    pub id: String,
    pub fleet: Option<String>,
    pub state: RunState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<usize>,
    pub submitted_by: Option<String>,
    pub created_ms: Option<u64>,
    pub started_ms: Option<u64>,
    pub ended_ms: Option<u64>,
    pub outcome: Option<String>,
    pub exit_code: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancelled_by: Option<String>,
    pub sessions: Vec<SessionView>,
    pub budget: Budget,
    pub links: Links,
    /// The run's trace in the Jaeger UI (`--trace-ui`, traces exported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_url: Option<String>,
}

impl RunView {
    pub(crate) fn of(entry: &RunEntry, server: &Server) -> RunView {
        let p = entry.progress();
        let sessions: Vec<SessionView> = entry
            .sessions
            .iter()
            .map(|(name, urn)| {
                let row = p.seen.rows.get(urn).cloned().unwrap_or_default();
                SessionView {
                    name: name.clone(),
                    urn: urn.to_string(),
                    state: row.state.as_str().to_owned(),
                    turns: row.turns,
                    input_tokens: row.input_tokens,
                    output_tokens: row.output_tokens,
                    cost_usd: row.cost_usd,
                    restarts: row.restarts,
                    pauses: row.pauses,
                    paused_until_ms: row
                        .paused_until_ms
                        .filter(|_| row.state == capfleet_wire::events::SessionState::Paused),
                }
            })
            .collect();
        let spent = p
            .spent_usd
            .unwrap_or_else(|| sessions.iter().map(|s| s.cost_usd).sum());
        RunView {
            id: entry.id.clone(),
            fleet: Some(entry.fleet.clone()),
            state: p.state,
            queue_position: server.position(&entry.id),
            submitted_by: Some(entry.submitted_by.clone()),
            created_ms: Some(entry.created_ms),
            started_ms: p.started_ms,
            ended_ms: p.ended_ms,
            outcome: p.outcome,
            exit_code: p.exit_code,
            error: p.error,
            cancelled_by: p.cancelled_by,
            sessions,
            budget: Budget {
                limit_usd: entry.budget_usd,
                spent_usd: spent,
            },
            links: Links::of(&entry.id),
            trace_url: server
                .trace_ui
                .as_ref()
                .zip(entry.trace_id.get())
                .map(|(ui, trace)| format!("{ui}/trace/{trace}")),
        }
    }

    /// A run of the data dir known only by its journal.
    pub(crate) fn of_row(row: RunRow) -> RunView {
        let state = RunState::from(row.state);
        RunView {
            links: Links::of(&row.run),
            id: row.run,
            fleet: None,
            state,
            queue_position: None,
            submitted_by: None,
            created_ms: row.started_ms,
            started_ms: row.started_ms,
            ended_ms: row.ended_ms,
            outcome: row.outcome,
            exit_code: row.exit_code,
            error: None,
            cancelled_by: None,
            sessions: Vec::new(),
            budget: Budget {
                limit_usd: None,
                spent_usd: row.cost_usd,
            },
            trace_url: None,
        }
    }
}

impl From<runs::RunState> for RunState {
    fn from(s: runs::RunState) -> RunState {
        match s {
            runs::RunState::Completed => RunState::Completed,
            runs::RunState::Failed => RunState::Failed,
            runs::RunState::Interrupted => RunState::Interrupted,
            runs::RunState::Running => RunState::Running,
            runs::RunState::Queued => RunState::Queued,
        }
    }
}

/// What `POST /v1/runs` answers (201).
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Created {
    pub id: String,
    pub fleet: String,
    /// `running`, or `queued` (then `queue_position` says where).
    pub state: RunState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<usize>,
    pub links: Links,
    /// The fleet's warnings, as `run --dry-run` prints them.
    pub warnings: Vec<String>,
}

/// A page of runs (`GET /v1/runs`), oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RunPage {
    pub runs: Vec<RunView>,
    /// The `after` of the next page, when there is one.
    pub next_after: Option<String>,
}

/// A probe's answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Status {
    /// `ok` (`/healthz`) or `ready` (`/readyz`).
    pub status: String,
}
