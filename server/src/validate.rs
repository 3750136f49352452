//! `POST /v1/fleets/validate`: a fleet checked exactly as a submission is — written
//! with its files into a directory of its own (gone with the request), loaded and
//! validated as `run --dry-run` does, sandboxed as the caller's submission would be
//! (`sandbox = "none"` a finding unless its token may ask for it; no backend here:
//! `503 no_sandbox`) — and nothing run: its findings (each with its line and key),
//! its warnings, and whether this server would take its sessions.
//! The web console shows the findings against the fleet's lines before it submits.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Caller;
use super::error::{ApiError, ErrorBody, Finding, json_response};
use super::state::Server;
use capfleet_app::submission::{FLEET_FILE, INPUT_DIR, SubmissionError};

/// What a validation found.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Validation {
    /// No findings: a submission of it would be taken.
    pub valid: bool,
    /// The fleet's name, when it loaded.
    pub fleet: Option<String>,
    /// Its sessions, when it loaded.
    pub sessions: usize,
    /// Every finding, as `run --dry-run` prints them (with line and key).
    #[schema(value_type = Vec<crate::schema::Finding>)]
    pub findings: Vec<Finding>,
    /// Unknown keys and the like: what a submission is warned about.
    pub warnings: Vec<String>,
}

/// Check a fleet as a submission would be checked; run nothing.
#[utoipa::path(post, path = "/v1/fleets/validate", operation_id = "validate_fleet", tag = "runs",
    request_body(description = "What `POST /v1/runs` takes: a fleet.toml, or JSON with the fleet's text, a task and files beside it",
        content((crate::schema::Submission = "application/json"), (String = "application/toml"))),
    responses(
        (status = 200, description = "Checked: `valid`, else the findings", body = Validation),
        (status = 400, description = "A body that is no submission (not UTF-8, bad JSON, a bad file name)", body = ErrorBody),
        (status = 415, description = "Neither TOML nor JSON", body = ErrorBody),
        (status = 503, description = "`no_sandbox`: this host has no sandbox backend for the sessions", body = ErrorBody),
    ))]
pub(crate) async fn validate(
    State(server): State<Arc<Server>>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let submission = super::body::submission(&headers, &body)?;
    let cwd = match submission.cwd(&server.allow_roots) {
        Ok(c) => c,
        Err(e) => return Ok(invalid(vec![finding(&e)])),
    };
    let dir = tempfile::Builder::new()
        .prefix("capfleet-validate-")
        .tempdir()
        .map_err(|e| ApiError::Internal(format!("cannot make a directory to validate in: {e}")))?;
    let input = dir.path().join(INPUT_DIR);
    submission.write(&input)?;
    let confinement = server.confinement(Some(caller.role));
    let loaded = match submission
        .load(&input, cwd.as_deref(), &server.allow_roots, &confinement)
        .await
    {
        Ok(l) => l,
        Err(SubmissionError::InvalidFleet(findings)) => return Ok(invalid(findings)),
        Err(e) => return Err(e.into()),
    };
    let (sessions, max) = (loaded.fleet.sessions.len(), server.limits.max_sessions);
    let mut findings = Vec::new();
    if sessions > max {
        findings.push(finding(&ApiError::TooManySessions { sessions, max }));
    }
    Ok(json_response(
        StatusCode::OK,
        &Validation {
            valid: findings.is_empty(),
            fleet: Some(loaded.fleet.name.clone()),
            sessions,
            findings,
            warnings: loaded.warnings.iter().map(ToString::to_string).collect(),
        },
    ))
}

/// A refusal that is about the fleet as a whole, as a finding.
fn finding(e: &dyn std::fmt::Display) -> Finding {
    Finding {
        origin: FLEET_FILE.into(),
        line: None,
        key: String::new(),
        message: e.to_string(),
    }
}

fn invalid(findings: Vec<Finding>) -> Response {
    json_response(
        StatusCode::OK,
        &Validation {
            valid: false,
            fleet: None,
            sessions: 0,
            findings,
            warnings: Vec::new(),
        },
    )
}
