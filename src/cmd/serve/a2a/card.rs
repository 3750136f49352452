//! The agent card of an exposed agent or fleet (spec §11.2): its name, a skill per
//! CAP profile of the agent (or the fleet's sessions), the `cap-protocol/v1`
//! extension, one JSON-RPC interface per spelling at `/a2a/<name>/` of the address
//! the client used, and the bearer scheme (the server always has tokens). The card is
//! public, as A2A discovery expects: it names no run, session or secret.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use capfleet_actors::bindings::a2a::Spelling;
use capfleet_actors::bindings::a2a::outbound::{self, Offer};

use super::{Exposed, Host};
use crate::cmd::serve::error::ApiError;

/// `GET /a2a/{name}/.well-known/agent-card.json`.
pub(super) async fn serve(
    State(exposed): State<Arc<Exposed>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(host) = exposed.hosts.get(&name) else {
        return ApiError::NoRoute.into_response();
    };
    let authority = headers
        .get("host")
        .and_then(|v| v.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".:-[]".contains(c))
        })
        .unwrap_or("127.0.0.1");
    let url = format!("http://{authority}/a2a/{name}/");
    let (description, skills) = match host {
        Host::Agent(a) => {
            let m = &a.manifest;
            let mut skills: Vec<(String, String, String)> = m
                .agent
                .profiles
                .iter()
                .map(|p| {
                    (
                        p.clone(),
                        format!("{p} profile"),
                        format!("CAP profile {p} of {}", m.agent.name),
                    )
                })
                .collect();
            skills.push((
                "turn".into(),
                "a turn".into(),
                format!(
                    "one turn of {} (`{}`), driven by capfleet",
                    m.agent.name, m.agent.binary
                ),
            ));
            (
                format!(
                    "the agent {} behind capfleet: one session per context, one turn per task",
                    m.agent.name
                ),
                skills,
            )
        }
        Host::Fleet(f) => (
            format!(
                "the capfleet fleet {}: each task is a run, its answer the start session's final text",
                f.name
            ),
            f.sessions
                .iter()
                .map(|(s, agent)| (s.clone(), s.clone(), format!("session {s} ({agent})")))
                .collect(),
        ),
    };
    let card = outbound::card(&Offer {
        name: &name,
        description: &description,
        version: env!("CARGO_PKG_VERSION"),
        url: &url,
        spellings: &[Spelling::V1, Spelling::V03],
        cap_extension: true,
        cap_required: !exposed.plain,
        bearer: true,
        skills,
    });
    ([("content-type", "application/json")], card.to_string()).into_response()
}
