//! `GET /v1/runs/{id}/fleet`: a run's fleet as a graph — its sessions (the nodes)
//! and its routes (the edges: a pipeline step, a join of several sessions, a fan-out,
//! a race or a collect) — taken from the validated fleet when the run was admitted.
//! What moves along it (each delivery, as `routed` and `delivered` records) is the
//! run's event stream.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use capfleet_engine::router::{CollectMode, Picker, RouteAction};
use serde::Serialize;
use utoipa::ToSchema;

use super::error::{ApiError, ErrorBody, json_response};
use super::extract::ApiPath;
use super::state::Server;
use capfleet_app::fleet::Fleet;

/// A session of the fleet: a node.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct GraphSession {
    pub name: String,
    /// The agent as the fleet names it.
    pub agent: String,
    /// It works in a workspace of its own (its diff is an artifact).
    pub coding: bool,
    pub budget_usd: Option<f64>,
}

/// What kind of route an edge is.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RouteKind {
    /// One session done hands its output to one session.
    Pipe,
    /// Several sessions, all done, hand their outputs to one.
    Join,
    /// The output goes to several sessions.
    FanOut,
    /// The first candidate done wins; the picker gets its result.
    Race,
    /// Every candidate's result goes to the picker.
    Collect,
}

/// A route of the fleet: edges from each of `when` to each of `to`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct GraphRoute {
    /// Its index in the fleet's `routes` (what `join` and `race_won` records name).
    pub index: usize,
    pub kind: RouteKind,
    /// The sessions that must be done.
    pub when: Vec<String>,
    /// The sessions it delivers to (empty: a race or collect the human picks).
    pub to: Vec<String>,
}

/// A run's fleet as a graph.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct FleetGraph {
    pub fleet: String,
    /// The sessions the task goes to first.
    pub start: Vec<String>,
    /// In the fleet's order.
    pub sessions: Vec<GraphSession>,
    pub routes: Vec<GraphRoute>,
}

impl FleetGraph {
    pub(crate) fn of(fleet: &Fleet) -> FleetGraph {
        let sessions = fleet
            .sessions
            .iter()
            .map(|s| GraphSession {
                name: s.spec.name.clone(),
                agent: s.agent.clone(),
                coding: s.coding,
                budget_usd: s.budget_usd,
            })
            .collect();
        let routes = fleet
            .routing
            .routes
            .iter()
            .enumerate()
            .map(|(index, r)| {
                let (kind, to) = match &r.action {
                    RouteAction::To(to) if r.when.len() > 1 => (RouteKind::Join, vec![to.clone()]),
                    RouteAction::To(to) => (RouteKind::Pipe, vec![to.clone()]),
                    RouteAction::FanOut { to, .. } => (RouteKind::FanOut, to.clone()),
                    RouteAction::Collect { picker, mode } => {
                        let kind = match mode {
                            CollectMode::First => RouteKind::Race,
                            CollectMode::All => RouteKind::Collect,
                        };
                        let to = match picker {
                            Picker::Session(s) => vec![s.clone()],
                            Picker::Human => Vec::new(),
                        };
                        (kind, to)
                    }
                };
                GraphRoute {
                    index,
                    kind,
                    when: r.when.clone(),
                    to,
                }
            })
            .collect();
        FleetGraph {
            fleet: fleet.name.clone(),
            start: fleet.routing.start.clone(),
            sessions,
            routes,
        }
    }
}

/// A run's fleet as a graph: its sessions and routes.
#[utoipa::path(get, path = "/v1/runs/{id}/fleet", operation_id = "get_run_fleet", tag = "runs",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The fleet's sessions and routes", body = FleetGraph),
        (status = 404, description = "No such run on this server", body = ErrorBody),
    ))]
pub(crate) async fn show(
    State(server): State<Arc<Server>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let entry = server.get(&id).ok_or(ApiError::NoRun(id))?;
    Ok(json_response(StatusCode::OK, &entry.graph))
}
