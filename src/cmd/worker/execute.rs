//! One queued run on this worker: its directory `.capfleet/runs/<run-id>/` (the id
//! the submitter gave it), the submission written into `input/` and validated as
//! `serve` validates a `POST /v1/runs` body (`capfleet_app::submission`: its
//! sessions sandboxed as the message's `sandbox` says, missing meaning every one;
//! this worker's runs and credentials hidden; no backend here refuses it), then
//! run to its end on the engine `serve` runs submissions on
//! (`capfleet_app::launch::in_process`), with nobody to ask (the policy's open
//! questions are answered fail-safe), its journal published as it is written
//! (`capfleet_app::nats::replica`).
//!
//! A run whose journal JetStream already has (its worker died, or lost its lease) is
//! taken over: the journal replayed from the stream into this worker's run directory,
//! then gone on with as `run --resume` does (its checks and recovery: no route twice,
//! the budget kept), a `lease_taken` record first, which also fences the old worker
//! out of the replicated journal. One that had ended is left as it is. A submission
//! no worker could run ends its journal with the reason.

use capfleet_engine::run::{RunTelemetry, Stop};
use capfleet_engine::workspace::RECORD_FILE;
use capfleet_wire::events::RunOutcome;
use capfleet_wire::events::trace::adopt_parent;
use tokio::sync::{mpsc, watch};
use tracing::Instrument as _;

use super::Worker;
use capfleet_app::fleet::RunDir;
use capfleet_app::fleet::run_dir::RUNS_DIR;
use capfleet_app::fleet::run_dir::{ARTIFACTS, files};
use capfleet_app::launch::{self, InProcess};
use capfleet_app::launch::{EXIT_INVALID, EXIT_SESSION_FAILED};
use capfleet_app::nats::queue::RunMessage;
use capfleet_app::nats::replica::{Ended, Replica};
use capfleet_app::resume::{self, Verdict};
use capfleet_app::sandboxing::Confinement;
use capfleet_app::submission::SubmissionError;
use capfleet_app::submission::{FLEET_FILE, INPUT_DIR, Submission};

/// Whether a run's outcome is journaled (then it may be acked).
#[derive(Debug)]
pub(super) enum Outcome {
    Journaled,
    NotJournaled,
    /// Stopped by the drain and journaled so (`handed_back`): for another worker to
    /// go on with.
    HandedBack,
    /// Run here to its end and journaled: its artifacts are put once it is acked
    /// ([`put_artifacts`]).
    Ran(RunDir),
}

/// Run `m` to its end (or until `stops` says, or `fence` is set).
pub(super) async fn execute(
    worker: &Worker,
    m: &RunMessage,
    stops: mpsc::Receiver<Stop>,
    fence: watch::Sender<bool>,
) -> Outcome {
    let span = tracing::info_span!("worker.run", cap.run.id = %m.id, worker = %worker.name);
    if let Some(tp) = &m.traceparent {
        adopt_parent(&span, tp);
    }
    run(worker, m, stops, fence).instrument(span).await
}

/// A run id that names a directory inside the runs directory and nothing else.
fn plain_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

async fn run(
    worker: &Worker,
    m: &RunMessage,
    stops: mpsc::Receiver<Stop>,
    fence: watch::Sender<bool>,
) -> Outcome {
    use Outcome::{Journaled, NotJournaled};
    if !plain_id(&m.id) {
        // Nowhere to journal it: dropped, said.
        tracing::error!(run = %m.id, "a queued run whose id is no plain name: dropped");
        return Journaled;
    }
    // What JetStream has of the run's journal (nothing for a new run).
    let (records, last_seq) = match worker.nats.replay(&m.id, worker.replicas).await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(run = %m.id, "{e}");
            return NotJournaled;
        }
    };
    let path = worker.dir.join(RUNS_DIR).join(&m.id);
    let here = path.is_dir();
    let again = here || !records.is_empty();
    let run = if here {
        RunDir {
            id: m.id.clone(),
            path,
        }
    } else {
        match RunDir::create_named(&worker.dir, &m.id) {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(run = %m.id, "{e}");
                return NotJournaled;
            }
        }
    };
    let input = run.path.join(INPUT_DIR);
    let submission = match Submission::from_json(m.submission.clone()) {
        Ok(s) => s,
        Err(e) => return refuse(worker, &run, &e),
    };
    if !here && let Err(e) = submission.write(&input) {
        return refuse(worker, &run, &e);
    }
    let fleet_file = input.join(FLEET_FILE);
    if !here && again {
        // Taken over: the journal as the stream has it, and what a resume needs.
        tracing::info!(run = %m.id, records = records.len(), "taking the run over: its journal replayed from JetStream");
        let written = write_journal(&run, &records).and_then(|()| {
            resume::remember(&run, &fleet_file, submission.task.clone(), false, None)
                .map_err(|e| e.to_string())
        });
        if let Err(e) = written {
            return end(&run, EXIT_SESSION_FAILED, &e);
        }
    }
    // Sandboxed as the message says (missing: every session); the worker's own
    // files hidden.
    let confinement = Confinement {
        rule: m.sandbox,
        hidden: worker.hidden.clone(),
    };
    let loaded = match submission.cwd(&worker.allow_roots) {
        Ok(cwd) => {
            submission
                .load(&input, cwd.as_deref(), &worker.allow_roots, &confinement)
                .await
        }
        Err(e) => Err(e),
    };
    let loaded = match loaded {
        Ok(l) => l,
        Err(e) => return refuse(worker, &run, &e),
    };
    let (lock, resume) = if again {
        let checked = resume::open_in(&worker.dir, &run.id)
            .and_then(|opened| resume::check(&opened, &loaded.fleet.name, false));
        match checked {
            Ok(Verdict::Go { lock, resume }) => {
                tracing::info!(
                    run = %run.id,
                    records = resume.recovered.tail.records,
                    "resuming the run from its journal"
                );
                (lock, Some(*resume))
            }
            Ok(Verdict::Ended(outcome)) => {
                // Delivered again after its end (an ack lost in a leader election):
                // nothing to do, and no copy of another worker's run left here.
                tracing::info!(run = %run.id, %outcome, "the run had ended");
                if !here && let Err(e) = std::fs::remove_dir_all(&run.path) {
                    tracing::warn!(run = %run.id, "removing the replayed copy: {e}");
                }
                return Journaled;
            }
            Err(e) => return end(&run, EXIT_SESSION_FAILED, &e.to_string()),
        }
    } else {
        let lock = match run.lock(&fleet_file) {
            Ok(l) => l,
            Err(e) => return end(&run, EXIT_SESSION_FAILED, &e.to_string()),
        };
        if let Err(e) = resume::remember(&run, &fleet_file, submission.task.clone(), false, None) {
            return end(&run, EXIT_SESSION_FAILED, &e.to_string());
        }
        (lock, None)
    };
    // The replica goes on after the lines the stream has (as they are here).
    let offset = prefix_len(&run.journal(), records.len());
    if again {
        let taken = run.append(serde_json::json!({
            "type": "lease_taken",
            "run_id": run.id,
            "worker": worker.name,
        }));
        if let Err(e) = taken {
            return end(&run, EXIT_SESSION_FAILED, &e.to_string());
        }
        worker.metrics.takeovers.inc();
    }
    let (replica, hook) = Replica::start(
        &worker.nats,
        &worker.name,
        &run.id,
        (run.journal(), offset, last_seq),
        fence,
        worker.replicas,
    );
    let mut fleet = loaded.fleet;
    fleet.bind_run_dir(&run);
    tracing::info!(run = %run.id, fleet = %fleet.name, "run started");
    let ended = launch::in_process(
        &mut fleet,
        &run,
        InProcess {
            human: None,
            // The run's span is under `worker.run`, which continues the submitter's
            // trace (`execute`).
            telemetry: RunTelemetry {
                metrics: Some(worker.fleet_metrics.clone()),
                traceparent: None,
            },
            resume,
            // A run taken over from another host gets workspaces of its own here
            // (what the dead host had not committed is gone with it).
            reuse_workspaces: run.path.join(RECORD_FILE).is_file(),
            taps: Vec::new(),
            stops,
            replica: Some(hook),
            calls: None,
        },
    )
    .await;
    drop(lock);
    tracing::info!(run = %run.id, exit_code = ended.code, outcome = ?ended.outcome, "run ended");
    // Stopped by the drain: said in the journal (then published), so that readers
    // know it goes on elsewhere.
    let handed_back = *worker.hand_back.borrow() && ended.outcome == Some(RunOutcome::Interrupted);
    if handed_back {
        let said = run.append(serde_json::json!({
            "type": "handed_back",
            "run_id": run.id,
            "worker": worker.name,
        }));
        if let Err(e) = said {
            tracing::error!(run = %run.id, "{e}");
        }
    }
    let published = replica.finish().await;
    let complete = match published {
        Ended::Done { lines } => {
            tracing::info!(run = %run.id, lines, "the journal is published");
            true
        }
        Ended::Fenced { lines } => {
            tracing::warn!(run = %run.id, lines, "the journal's replica was fenced");
            false
        }
        Ended::Behind { lines, error } => {
            tracing::error!(run = %run.id, lines, "the journal's replica is behind: {error}");
            false
        }
    };
    if complete && handed_back {
        Outcome::HandedBack
    } else if complete && ended.outcome != Some(RunOutcome::DiskFailed) {
        Outcome::Ran(run)
    } else {
        NotJournaled
    }
}

/// How long a run's artifacts may take to reach the object store.
const PUT_ARTIFACTS_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// The run's artifacts put in the JetStream object store, for any host to read
/// (`serve --nats`), once the run is acked (nothing a takeover needs waits for
/// them); a failure is said, the run's outcome stands.
pub(super) async fn put_artifacts(worker: &Worker, run: &RunDir) {
    let root = run.path.join(ARTIFACTS);
    let files: Vec<(String, std::path::PathBuf)> = {
        let root = root.clone();
        tokio::task::spawn_blocking(move || files(&root))
            .await
            .unwrap_or_default()
    }
    .into_iter()
    .map(|(rel, _bytes)| {
        let path = root.join(&rel);
        (rel, path)
    })
    .collect();
    let put = worker.nats.put_artifacts(&run.id, &files, worker.replicas);
    match tokio::time::timeout(PUT_ARTIFACTS_FOR, put).await {
        Ok(Ok(bytes)) => {
            tracing::info!(run = %run.id, files = files.len(), bytes, "the artifacts are in the object store")
        }
        Ok(Err(e)) => tracing::error!(run = %run.id, "{e}"),
        Err(_) => {
            tracing::error!(run = %run.id, "the artifacts were not put within {PUT_ARTIFACTS_FOR:?}")
        }
    }
}

/// Where a fenced run's directory goes on this host, beside the runs directory.
const FENCED_DIR: &str = ".capfleet/fenced";

/// A fenced run's directory here is not the run's any more (the stream's journal, the
/// new holder's, is): it may hold records JetStream never took, a `run_ended` among
/// them. It is moved to `.capfleet/fenced/<id>-<ms>`, kept for a look but never
/// resumed from (should the run come back to this worker, its journal is replayed
/// from the stream) nor listed as the run.
pub(super) fn set_aside(worker: &Worker, id: &str) {
    let from = worker.dir.join(RUNS_DIR).join(id);
    if !from.is_dir() {
        return;
    }
    let ms = capfleet_wire::clock::now_ms();
    let to = worker.dir.join(FENCED_DIR).join(format!("{id}-{ms}"));
    let moved = std::fs::create_dir_all(worker.dir.join(FENCED_DIR))
        .and_then(|()| std::fs::rename(&from, &to));
    match moved {
        Ok(()) => {
            tracing::warn!(run = %id, to = %to.display(), "the fenced run's directory set aside")
        }
        Err(e) => tracing::error!(run = %id, "setting {} aside: {e}", from.display()),
    }
}

/// Write `records` (the stream's) as the run's journal.
fn write_journal(run: &RunDir, records: &[Vec<u8>]) -> Result<(), String> {
    let mut text = Vec::with_capacity(records.iter().map(|r| r.len() + 1).sum());
    for r in records {
        text.extend_from_slice(r);
        text.push(b'\n');
    }
    let path = run.journal();
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The bytes of the first `lines` lines of the journal at `path` (all of it when
/// it has fewer).
fn prefix_len(path: &std::path::Path, lines: usize) -> u64 {
    let text = std::fs::read(path).unwrap_or_default();
    let end = text
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(lines.wrapping_sub(1))
        .map_or(text.len(), |(i, _)| i + 1);
    if lines == 0 { 0 } else { end as u64 }
}

/// A submission this worker cannot run: its journal says why, and ends.
fn refuse(worker: &Worker, run: &RunDir, e: &SubmissionError) -> Outcome {
    let reason = match e {
        SubmissionError::InvalidFleet(findings) => findings
            .iter()
            .map(|f| f.message.clone())
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    };
    let said = run.append(serde_json::json!({
        "type": "run_refused",
        "run_id": run.id,
        "worker": worker.name,
        "reason": reason,
    }));
    if let Err(e) = said {
        tracing::error!(run = %run.id, "{e}");
        return Outcome::NotJournaled;
    }
    end(run, EXIT_INVALID, &reason)
}

/// End the run's journal with `code`, `reason` said.
fn end(run: &RunDir, code: u8, reason: &str) -> Outcome {
    tracing::error!(run = %run.id, "the run cannot go on: {reason}");
    match run.record_end(code) {
        Ok(()) => Outcome::Journaled,
        Err(e) => {
            tracing::error!(run = %run.id, "{e}");
            Outcome::NotJournaled
        }
    }
}
