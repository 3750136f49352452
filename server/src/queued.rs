//! Queued runs kept across a stop. A submission is on disk before it is answered:
//! its fleet and files in `input/`, and [`QUEUED_FILE`] with what it starts with
//! (the task, the checked cwd, who submitted it, when, its trace context), synced.
//! The marker goes when the run starts. SIGTERM leaves the queued runs queued (their
//! markers stay); the next `capfleet serve` on the data dir [`resume`]s them, oldest
//! first, checked again as a submission is, before it takes new ones: sandboxed as
//! a submission of its token would be now (its role read from the token file of this
//! start, `--allow-unsandboxed` of this start). A run that no longer passes (its
//! agent gone, a `sandbox = "none"` no longer allowed, no sandbox backend) ends as
//! failed, saying why.
//!
//! [`QUEUED_FILE`]: capfleet_app::fleet::run_dir::QUEUED_FILE

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::driver::{self, RunHooks};
use super::state::{Admission, Pending, Server};
use capfleet_app::fleet::run_dir::{RunDir, RunDirError};
use capfleet_app::launch::EXIT_INVALID;
use capfleet_app::submission::{FLEET_FILE, INPUT_DIR, Submission};

/// What a queued run starts with (beside its `input/`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Queued {
    /// The token that submitted it.
    pub submitted_by: String,
    pub created_ms: u64,
    /// The submission's `task`, replacing the fleet's.
    pub task: Option<String>,
    /// The submission's `cwd`, as checked against `--allow-root`.
    pub cwd: Option<PathBuf>,
    pub traceparent: Option<String>,
}

impl Queued {
    /// Put it on disk in `run` (synced when this returns).
    pub(crate) fn write(&self, run: &RunDir) -> Result<(), RunDirError> {
        run.mark_queued(&json!(self))
    }
}

/// The run starts: it waits no more (a failure is logged: at worst the next start
/// finds a run that ended, and leaves it).
pub(crate) fn started(run: &RunDir) {
    if let Err(e) = run.unmark_queued() {
        tracing::error!(run = %run.id, "the started run's queued marker: {e}");
    }
}

/// At start: the data dir's queued runs (a stopped server's), oldest first, admitted
/// again — run now or queued as before, beyond `--queue` if need be (they were
/// answered `queued`). Said on stderr.
pub(crate) async fn resume(server: &Arc<Server>) {
    let runs = RunDir::all_in(&server.runs_dir).unwrap_or_default();
    for run in runs.into_iter().filter(|r| r.is_queued()) {
        if server.get(&run.id).is_some() {
            continue;
        }
        match pending(server, &run).await {
            Ok(Some(p)) => {
                let id = p.entry.id.clone();
                match server.readmit(p) {
                    Admission::Now(p) => {
                        eprintln!("capfleet: run {id}, queued before the last stop, starts");
                        driver::spawn(server.clone(), *p);
                    }
                    Admission::Queued(position) => eprintln!(
                        "capfleet: run {id}, queued before the last stop, is queued again ({position} in line)"
                    ),
                    Admission::Full { .. } | Admission::Draining => {}
                }
            }
            // Another server holds it.
            Ok(None) => {}
            Err(why) => {
                eprintln!(
                    "capfleet: run {}, queued before the last stop, cannot start: {why}",
                    run.id
                );
                let record = json!({
                    "type": "run_ended",
                    "run_id": run.id,
                    "exit_code": EXIT_INVALID,
                    "outcome": "invalid",
                    "reason": format!("queued before a stop, it could not start after it: {why}"),
                });
                if let Err(e) = run.append(record) {
                    tracing::error!(run = %run.id, "ending a queued run that cannot start: {e}");
                }
                started(&run);
            }
        }
    }
}

/// A queued run of the data dir, loaded and checked again; `None` when another
/// process holds its lock.
async fn pending(server: &Server, run: &RunDir) -> Result<Option<Pending>, String> {
    let queued: Queued = run
        .queued()
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or("its queued.json cannot be read")?;
    let input = run.path.join(INPUT_DIR);
    let submission = Submission {
        task: queued.task.clone(),
        ..Submission::default()
    };
    // Sandboxed as a submission by that token would be now (a token removed or no
    // longer admin, or a server started without --allow-unsandboxed, refuses the
    // `sandbox = "none"` it was queued with).
    let confinement = server.confinement(server.tokens.role_of(&queued.submitted_by));
    let loaded = submission
        .load(
            &input,
            queued.cwd.as_deref(),
            &server.allow_roots,
            &confinement,
        )
        .await
        .map_err(|e| match e {
            capfleet_app::submission::SubmissionError::InvalidFleet(findings) => findings
                .iter()
                .map(|f| f.message.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            other => other.to_string(),
        })?;
    let (sessions, max) = (loaded.fleet.sessions.len(), server.limits.max_sessions);
    if sessions > max {
        return Err(format!(
            "the fleet has {sessions} sessions; this server runs at most {max} at once"
        ));
    }
    let Ok(lock) = run.lock(&input.join(FLEET_FILE)) else {
        return Ok(None);
    };
    let (entry, stops) =
        Server::entry_created(&loaded.fleet, run, &queued.submitted_by, queued.created_ms);
    Ok(Some(Pending {
        entry,
        fleet: loaded.fleet,
        run: run.clone(),
        lock,
        stops,
        hooks: RunHooks::default(),
        traceparent: queued.traceparent,
    }))
}
