//! `GET /v1/runs/{id}/changes`: what each coding session changed, for review — its
//! final diff (the `diff.patch` artifact, where to get it and its size) and the
//! vetting findings on it (likely secrets, large binaries, deletions, files outside
//! its declared paths), each naming its file. The findings are the journal's
//! `cap.error` `git_dirty` records, which the workspace collection publishes after
//! the run; the journal is read as it is on disk.

use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::path::Path;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::artifacts::{DIFF, artifacts_dir};
use super::error::{ApiError, ErrorBody, json_response};
use super::extract::ApiPath;
use super::state::Server;
use capfleet_app::fleet::run_dir::JOURNAL_FILE;
use capfleet_app::fleet::run_dir::files;

/// The code of a vetting finding's `cap.error`, as it appears in a journal line.
const VETTING: &str = "\"git_dirty\"";

/// A vetting finding on a file of a session's diff.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct VetFinding {
    /// The file, relative to the workspace (as the diff names it).
    pub path: String,
    /// `secret`, `large_binary`, `deleted` or `outside_paths`.
    pub reason: String,
    /// The finding, for people.
    pub message: String,
    /// A likely secret's line in the new file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

/// What one coding session changed.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct SessionChanges {
    pub session: String,
    /// Where its unified diff is (none: it changed nothing).
    pub diff: Option<String>,
    /// The diff's size.
    pub bytes: u64,
    pub findings: Vec<VetFinding>,
}

/// Every session's changes, by session name.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Changes {
    pub sessions: Vec<SessionChanges>,
}

/// Each coding session's final diff and the vetting findings on it.
#[utoipa::path(get, path = "/v1/runs/{id}/changes", operation_id = "get_changes", tag = "artifacts",
    params(("id" = String, Path, description = "The run's id")),
    responses(
        (status = 200, description = "The sessions that changed something or were flagged", body = Changes),
        (status = 404, description = "No such run", body = ErrorBody),
    ))]
pub(crate) async fn show(
    State(server): State<Arc<Server>>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    let root = artifacts_dir(&server, &id)?;
    let changes = tokio::task::spawn_blocking(move || collect(&id, &root))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(json_response(StatusCode::OK, &changes))
}

fn collect(id: &str, artifacts: &Path) -> Changes {
    let mut by: BTreeMap<String, SessionChanges> = BTreeMap::new();
    let empty = |session: &str| SessionChanges {
        session: session.to_owned(),
        diff: None,
        bytes: 0,
        findings: Vec::new(),
    };
    for (name, bytes) in files(artifacts) {
        if let Some(session) = name.strip_suffix(&format!("/{DIFF}")) {
            let s = by
                .entry(session.to_owned())
                .or_insert_with(|| empty(session));
            s.diff = Some(format!("/v1/runs/{id}/diff/{session}"));
            s.bytes = bytes;
        }
    }
    let journal = artifacts.with_file_name(JOURNAL_FILE);
    for (session, finding) in findings(&journal) {
        by.entry(session.clone())
            .or_insert_with(|| empty(&session))
            .findings
            .push(finding);
    }
    Changes {
        sessions: by.into_values().collect(),
    }
}

/// The vetting findings journaled at `journal`, with their sessions.
fn findings(journal: &Path) -> Vec<(String, VetFinding)> {
    let Ok(file) = std::fs::File::open(journal) else {
        return Vec::new();
    };
    std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter(|line| line.contains(VETTING))
        .filter_map(|line| serde_json::from_str::<Value>(&line).ok())
        .filter_map(|rec| {
            let e = &rec["event"];
            if e["kind"] != "cap.error" || e["code"] != "git_dirty" {
                return None;
            }
            let d = &e["details"];
            let session = d["session"].as_str()?.to_owned();
            Some((
                session,
                VetFinding {
                    path: d["path"].as_str()?.to_owned(),
                    reason: d["reason"].as_str().unwrap_or("flagged").to_owned(),
                    message: e["message"].as_str().unwrap_or_default().to_owned(),
                    line: d["line"].as_u64(),
                },
            ))
        })
        .collect()
}
