//! A run queued in NATS JetStream (`crate::nats::queue`) for a `capfleet worker`
//! with the labels it requires: by `capfleet submit --nats URL` and by
//! `capfleet serve --nats URL`'s `POST /v1/runs` ([`enqueue`]). The fleet is checked
//! first as a worker will check it (each finding with its line and key, a
//! `sandbox = "none"` the run's [`SandboxRule`] refuses among them), so an invalid
//! fleet is never queued; its agents and its sandbox's backend are the workers' to
//! have. The rule travels in the message (`sandbox`): `capfleet submit --nats` sends
//! `workspace`, `serve --nats` what the submitter's token may ask for. The run's id
//! is made here and answered at once.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::fleet::RunDir;
use crate::nats::queue::{self, RunMessage};
use crate::nats::status::Submitted;
use crate::nats::{Nats, NatsError};
use crate::sandboxing::{Confinement, SandboxRule};
use crate::submission::{INPUT_DIR, Submission, SubmissionError};

/// Why a run was not queued.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The submission or its fleet is invalid (the findings inside).
    #[error("{0}")]
    Invalid(SubmissionError),
    #[error("{0}")]
    Labels(#[from] queue::LabelError),
    #[error("{0}")]
    Nats(#[from] NatsError),
}

/// A run queued: its id, its fleet's name and warnings, its subject.
pub struct Queued {
    pub id: String,
    pub fleet: String,
    pub warnings: Vec<String>,
    pub subject: String,
}

/// Check `submission` and queue it as a new run requiring `labels`, its sessions
/// sandboxed as `sandbox` says (the worker obeys it).
pub async fn enqueue(
    nats: &Nats,
    replicas: usize,
    submission: &Submission,
    labels: &[String],
    traceparent: Option<String>,
    sandbox: SandboxRule,
) -> Result<Queued, QueueError> {
    let labels = queue::labels(labels)?;
    let (fleet, warnings) = check(submission, sandbox)
        .await
        .map_err(QueueError::Invalid)?;
    let body = serde_json::to_value(submission)
        .map_err(|e| QueueError::Invalid(SubmissionError::Internal(e.to_string())))?;
    let subject = queue::subject(&labels);
    let run = RunMessage {
        id: RunDir::new_id(),
        labels,
        traceparent,
        submitted_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        submission: body,
        sandbox,
    };
    // Noted first: the run's state is readable from any host once its id is answered.
    let note = Submitted {
        fleet: fleet.clone(),
        labels: run.labels.clone(),
        submitted_ms: run.submitted_ms,
    };
    nats.note_submitted(&run.id, &note, replicas).await?;
    nats.enqueue(&run, replicas).await?;
    Ok(Queued {
        id: run.id,
        fleet,
        warnings,
        subject,
    })
}

/// The submission's fleet loaded and validated in a scratch directory, as a worker
/// will (its agents and sandbox backend aside: the worker's to have): its name and
/// warnings, or the findings (a `sandbox = "none"` that `sandbox` refuses among them).
async fn check(
    submission: &Submission,
    sandbox: SandboxRule,
) -> Result<(String, Vec<String>), SubmissionError> {
    let confinement = Confinement {
        rule: sandbox,
        hidden: Vec::new(),
    };
    let scratch = std::env::temp_dir().join(format!(
        "capfleet-submit-{}-{}",
        std::process::id(),
        RunDir::new_id()
    ));
    let input = scratch.join(INPUT_DIR);
    let checked = match submission.write(&input) {
        Ok(()) => submission
            .load_fleet(&input, None, None, &confinement)
            .await
            .map(|l| {
                (
                    l.fleet.name.clone(),
                    l.warnings.iter().map(ToString::to_string).collect(),
                )
            }),
        Err(e) => Err(e),
    };
    if let Err(e) = std::fs::remove_dir_all(&scratch) {
        tracing::warn!("removing {}: {e}", scratch.display());
    }
    checked
}
