//! A fleet taken in, whoever brought it: `POST /v1/runs` and MCP's `start_run` (over
//! `/mcp`, or `capfleet mcp`'s local server) both come here. A submission is
//! written to a new run's `input/`, validated as `run --dry-run` does (confined to
//! `--allow-root`, every session sandboxed unless an admin token on a server started
//! with `--allow-unsandboxed` asks for `none`), kept on disk as queued ([`super::queued`]) and admitted: run now,
//! queued, or refused; with `--nats` it is queued in JetStream instead. A fleet file
//! named by path (`capfleet mcp` only: its user's own file, as `capfleet run` takes
//! it) is loaded where it is, its relative paths its own.

use std::path::Path;
use std::sync::Arc;

use super::auth::Role;
use super::driver;
use super::error::ApiError;
use super::state::{Admission, Pending, RunState, Server};
use super::view::{Created, Links};
use capfleet_app::enqueue::QueueError;
use capfleet_app::fleet::{Loaded, RunDir};
use capfleet_app::sandboxing::SandboxRule;
use capfleet_app::submission::{self, FLEET_FILE, INPUT_DIR, Submission, SubmissionError};

/// Take `submission` in on behalf of `by` (a token of `role`; `None`: an MCP caller,
/// who cannot lower the sandbox), continuing the trace `traceparent`. Every session
/// is sandboxed as [`Server::confinement`] says.
pub(crate) async fn submitted(
    server: &Arc<Server>,
    submission: Submission,
    by: &str,
    role: Option<Role>,
    traceparent: Option<String>,
) -> Result<Created, ApiError> {
    let refused = |result: &str, e: ApiError| {
        server.metrics.submitted(result);
        e
    };
    if server.draining() {
        return Err(refused("draining", ApiError::Draining));
    }
    if let Some((nats, replicas)) = &server.queue {
        let sandbox = server.confinement(role).rule;
        return queue(
            server,
            nats,
            *replicas,
            &submission,
            by,
            traceparent,
            sandbox,
        )
        .await;
    }
    let cwd = submission
        .cwd(&server.allow_roots)
        .map_err(|e| refused("invalid", e.into()))?;
    let run = RunDir::create_in(&server.runs_dir)
        .map_err(|e| ApiError::Internal(format!("cannot make the run directory: {e}")))?;
    let discard = |e: ApiError, result: &str| {
        if let Err(io) = std::fs::remove_dir_all(&run.path) {
            tracing::error!(run = %run.id, "removing a refused run's directory: {io}");
        }
        refused(result, e)
    };
    let input = run.path.join(INPUT_DIR);
    if let Err(e) = submission.write(&input) {
        return Err(discard(e.into(), "invalid"));
    }
    let confinement = server.confinement(role);
    let loaded = match submission
        .load(&input, cwd.as_deref(), &server.allow_roots, &confinement)
        .await
    {
        Ok(l) => l,
        Err(e @ SubmissionError::NoSandbox(_)) => return Err(discard(e.into(), "no_sandbox")),
        Err(e) => return Err(discard(e.into(), "invalid")),
    };
    // On disk before it is answered: a stop leaves it queued for the next start.
    let queued = |created_ms| super::queued::Queued {
        submitted_by: by.to_owned(),
        created_ms,
        task: submission.task.clone(),
        cwd: cwd.clone(),
        traceparent: traceparent.clone(),
    };
    admit(
        server,
        loaded,
        &run,
        &input.join(FLEET_FILE),
        by,
        traceparent.clone(),
        Some(&queued),
    )
    .map_err(|(e, result)| discard(e, result))
}

/// Take in the fleet file at `path` (relative to the working directory) on behalf
/// of `by`, loaded as `capfleet run` loads it.
pub(crate) async fn from_file(
    server: &Arc<Server>,
    path: &Path,
    task: Option<&str>,
    by: &str,
) -> Result<Created, ApiError> {
    if server.draining() {
        server.metrics.submitted("draining");
        return Err(ApiError::Draining);
    }
    let loaded = submission::load_file(path, task).await.map_err(|e| {
        server.metrics.submitted("invalid");
        ApiError::from(e)
    })?;
    let run = RunDir::create_in(&server.runs_dir)
        .map_err(|e| ApiError::Internal(format!("cannot make the run directory: {e}")))?;
    admit(server, loaded, &run, path, by, None, None).map_err(|(e, result)| {
        server.metrics.submitted(result);
        if let Err(io) = std::fs::remove_dir_all(&run.path) {
            tracing::error!(run = %run.id, "removing a refused run's directory: {io}");
        }
        e
    })
}

/// What [`super::queued::Queued`] a run keeps on disk, made at its creation time.
type QueuedOf<'a> = dyn Fn(u64) -> super::queued::Queued + 'a;

/// Lock, keep on disk (a submission), and admit the validated `loaded` in `run`;
/// refused with the submission metric's result.
fn admit(
    server: &Arc<Server>,
    loaded: Loaded,
    run: &RunDir,
    fleet_file: &Path,
    by: &str,
    traceparent: Option<String>,
    queued: Option<&QueuedOf<'_>>,
) -> Result<Created, (ApiError, &'static str)> {
    let (sessions, max) = (loaded.fleet.sessions.len(), server.limits.max_sessions);
    if sessions > max {
        return Err((ApiError::TooManySessions { sessions, max }, "invalid"));
    }
    let lock = run
        .lock(fleet_file)
        .map_err(|e| (ApiError::Internal(e.to_string()), "invalid"))?;
    let (entry, stops) = Server::entry(&loaded.fleet, run, by);
    if let Some(queued) = queued
        && let Err(e) = queued(entry.created_ms).write(run)
    {
        let e = ApiError::Internal(format!("cannot keep the run on disk: {e}"));
        return Err((e, "invalid"));
    }
    let pending = Pending {
        entry: entry.clone(),
        fleet: loaded.fleet,
        run: run.clone(),
        lock,
        stops,
        hooks: driver::RunHooks::default(),
        traceparent,
    };
    let (state, position) = match server.admit(pending) {
        Admission::Now(p) => {
            server.metrics.submitted("admitted");
            driver::spawn(server.clone(), *p);
            (RunState::Running, None)
        }
        Admission::Queued(position) => {
            server.metrics.submitted("queued");
            (RunState::Queued, Some(position))
        }
        Admission::Full { running, queued } => {
            return Err((ApiError::Full { running, queued }, "refused"));
        }
        Admission::Draining => return Err((ApiError::Draining, "draining")),
    };
    tracing::info!(run = %entry.id, fleet = %entry.fleet, by, state = state.as_str(), "run submitted");
    Ok(Created {
        links: Links::of(&entry.id),
        id: entry.id.clone(),
        fleet: entry.fleet.clone(),
        state,
        queue_position: position,
        warnings: loaded.warnings.iter().map(ToString::to_string).collect(),
    })
}

/// With `--nats`: the validated submission queued in JetStream for the workers.
async fn queue(
    server: &Server,
    nats: &capfleet_app::nats::Nats,
    replicas: usize,
    submission: &Submission,
    by: &str,
    traceparent: Option<String>,
    sandbox: SandboxRule,
) -> Result<Created, ApiError> {
    let queued =
        capfleet_app::enqueue::enqueue(nats, replicas, submission, &[], traceparent, sandbox)
            .await
            .map_err(|e| {
                server.metrics.submitted("invalid");
                match e {
                    QueueError::Invalid(e) => e.into(),
                    QueueError::Labels(e) => ApiError::BadRequest(e.to_string()),
                    QueueError::Nats(e) => ApiError::Internal(e.to_string()),
                }
            })?;
    server.metrics.submitted("queued");
    tracing::info!(run = %queued.id, fleet = %queued.fleet, by, subject = %queued.subject, "run queued in NATS");
    Ok(Created {
        links: Links::of(&queued.id),
        id: queued.id,
        fleet: queued.fleet,
        state: RunState::Queued,
        queue_position: None,
        warnings: queued.warnings,
    })
}
