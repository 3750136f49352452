//! The queue of runs: a JetStream stream with work-queue retention (a message is
//! removed once a worker acks it), one subject per set of required labels
//! (`capfleet.runs.any`, `capfleet.runs.gpu`, `capfleet.runs.big.gpu`: the labels
//! sorted, joined by dots), and one durable pull consumer per subject, shared by every
//! worker that may take such runs (a work-queue stream allows one consumer per
//! subject). A worker with labels `{gpu, big}` pulls from the consumers of every
//! subset of its labels: a run that requires nothing, `gpu`, `big`, or both.
//!
//! A run's message ([`RunMessage`]) is the submission's JSON body (`serve`'s
//! `POST /v1/runs` body: the fleet, its task and files) with the run's id, its
//! labels and the submitter's trace context; its `Nats-Msg-Id` is the run id, so a
//! submission retried within the stream's duplicate window is queued once.

use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, PullConsumer, pull};
use async_nats::jetstream::stream::{Config, RetentionPolicy, StorageType, Stream};
use serde::{Deserialize, Serialize};

use super::{Nats, NatsError};
use crate::sandboxing::SandboxRule;

/// The stream of queued runs.
pub(crate) const STREAM: &str = "CAPFLEET_RUNS";
/// Every run subject starts with this.
const SUBJECT_PREFIX: &str = "capfleet.runs";
/// The key of a run that requires no label.
const ANY: &str = "any";
/// At most this many labels per worker or run (a worker pulls from 2^n consumers).
pub(crate) const MAX_LABELS: usize = 4;
/// The consumers' own bound on runs handed out and not yet acked, over all workers
/// (each worker bounds its own share, `--max-runs`, by pulling only that many).
const MAX_ACK_PENDING: i64 = 10_000;

/// One queued run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunMessage {
    /// The run's id (its directory's name on the worker that runs it).
    pub id: String,
    /// The labels a worker must have to take it (sorted, no repeats).
    #[serde(default)]
    pub labels: Vec<String>,
    /// The submitter's W3C trace context: the run's spans continue its trace.
    #[serde(default)]
    pub traceparent: Option<String>,
    /// When it was queued (ms since the epoch).
    pub submitted_ms: u64,
    /// `POST /v1/runs`'s JSON body: `{fleet, task, files, cwd}`.
    pub submission: serde_json::Value,
    /// How the worker sandboxes its sessions: `workspace` (every one; missing, as
    /// from a capfleet before it, means this) or `none_allowed` (the fleet's
    /// `sandbox = "none"` honoured: an admin token on a server started with
    /// `--allow-unsandboxed`).
    #[serde(default)]
    pub sandbox: SandboxRule,
}

/// A label that cannot be one.
#[derive(Debug, thiserror::Error)]
pub enum LabelError {
    #[error(
        "label `{0}`: a label is 1 to 32 of a-z, 0-9, `-`, `_` (starting with a letter or digit), not `any`"
    )]
    Invalid(String),
    #[error("{0} labels: at most {MAX_LABELS}")]
    TooMany(usize),
}

/// `labels` sorted, without repeats, each checked.
pub fn labels(given: &[String]) -> Result<Vec<String>, LabelError> {
    let mut out: Vec<String> = given.to_vec();
    out.sort();
    out.dedup();
    if out.len() > MAX_LABELS {
        return Err(LabelError::TooMany(out.len()));
    }
    for l in &out {
        let ok = (1..=32).contains(&l.len())
            && l != ANY
            && l.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !ok {
            return Err(LabelError::Invalid(l.clone()));
        }
    }
    Ok(out)
}

/// The key of a run requiring `labels` (sorted): `any`, or the labels joined by dots.
fn key(labels: &[String]) -> String {
    if labels.is_empty() {
        ANY.to_owned()
    } else {
        labels.join(".")
    }
}

/// The subject of a run requiring `labels` (sorted).
pub(crate) fn subject(labels: &[String]) -> String {
    format!("{SUBJECT_PREFIX}.{}", key(labels))
}

/// The keys a worker with `labels` (sorted) takes runs of: every subset's.
fn keys_of(labels: &[String]) -> Vec<String> {
    (0u32..1 << labels.len())
        .map(|mask| {
            let subset: Vec<String> = labels
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, l)| l.clone())
                .collect();
            key(&subset)
        })
        .collect()
}

impl Nats {
    /// The runs stream, made when missing (`replicas` copies on a cluster).
    pub async fn runs_stream(&self, replicas: usize) -> Result<Stream, NatsError> {
        self.js
            .get_or_create_stream(Config {
                name: STREAM.to_owned(),
                subjects: vec![format!("{SUBJECT_PREFIX}.>")],
                retention: RetentionPolicy::WorkQueue,
                storage: StorageType::File,
                num_replicas: replicas,
                ..Config::default()
            })
            .await
            .map_err(|e| NatsError::js(format!("the stream {STREAM}"), e))
    }

    /// Queue `run`; returns once JetStream has stored it (retried while JetStream
    /// does not answer: the run id deduplicates a retry of a publish that was stored).
    pub(crate) async fn enqueue(&self, run: &RunMessage, replicas: usize) -> Result<(), NatsError> {
        let payload = serde_json::to_vec(run).map_err(|e| NatsError::js("the run message", e))?;
        let what = format!("queueing run {}", run.id);
        super::retrying(|| async {
            self.runs_stream(replicas).await?;
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Msg-Id", run.id.as_str());
            self.js
                .publish_with_headers(subject(&run.labels), headers, payload.clone().into())
                .await
                .map_err(|e| NatsError::js(&what, e))?
                .await
                .map_err(|e| NatsError::js(&what, e))?;
            Ok(())
        })
        .await
    }

    /// The consumers a worker with `labels` pulls runs from, made when missing. A run
    /// held without a word for `ack_wait` (the lease's TTL: the worker says "in
    /// progress" with each heartbeat) is handed to another worker.
    pub async fn run_consumers(
        &self,
        labels: &[String],
        replicas: usize,
        ack_wait: Duration,
    ) -> Result<Vec<PullConsumer>, NatsError> {
        let stream = self.runs_stream(replicas).await?;
        let mut consumers = Vec::new();
        for key in keys_of(labels) {
            let name = format!("runs-{}", key.replace('.', "_"));
            let consumer = stream
                .get_or_create_consumer(
                    &name,
                    pull::Config {
                        durable_name: Some(name.clone()),
                        filter_subject: format!("{SUBJECT_PREFIX}.{key}"),
                        ack_policy: AckPolicy::Explicit,
                        ack_wait,
                        max_ack_pending: MAX_ACK_PENDING,
                        ..pull::Config::default()
                    },
                )
                .await
                .map_err(|e| NatsError::js(format!("the consumer {name}"), e))?;
            consumers.push(consumer);
        }
        Ok(consumers)
    }

    /// How many runs wait in the queue (not yet handed to a worker).
    pub async fn queue_depth(&self, replicas: usize) -> Result<u64, NatsError> {
        let mut stream = self.runs_stream(replicas).await?;
        let info = stream
            .info()
            .await
            .map_err(|e| NatsError::js(format!("the stream {STREAM}"), e))?;
        Ok(info.state.messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn labels_are_sorted_checked_and_bounded() {
        assert_eq!(
            labels(&s(&["gpu", "big", "gpu"])).unwrap(),
            s(&["big", "gpu"])
        );
        for bad in ["any", "GPU", "a.b", "", "-x", &"x".repeat(33)] {
            assert!(labels(&s(&[bad])).is_err(), "{bad}");
        }
        assert!(matches!(
            labels(&s(&["a", "b", "c", "d", "e"])),
            Err(LabelError::TooMany(5))
        ));
    }

    #[test]
    fn a_message_without_a_sandbox_rule_is_sandboxed() {
        let m: RunMessage = serde_json::from_value(serde_json::json!({
            "id": "r", "submitted_ms": 1, "submission": {"fleet": ""}
        }))
        .unwrap();
        assert_eq!(m.sandbox, SandboxRule::Workspace);
        let m: RunMessage = serde_json::from_value(serde_json::json!({
            "id": "r", "submitted_ms": 1, "submission": {}, "sandbox": "none_allowed"
        }))
        .unwrap();
        assert_eq!(m.sandbox, SandboxRule::NoneAllowed);
        let sent = serde_json::to_value(&m).unwrap();
        assert_eq!(sent["sandbox"], "none_allowed");
    }

    #[test]
    fn a_worker_takes_the_runs_of_every_subset_of_its_labels() {
        assert_eq!(subject(&[]), "capfleet.runs.any");
        assert_eq!(subject(&s(&["big", "gpu"])), "capfleet.runs.big.gpu");
        let mut keys = keys_of(&s(&["big", "gpu"]));
        keys.sort();
        assert_eq!(keys, s(&["any", "big", "big.gpu", "gpu"]));
        assert_eq!(keys_of(&[]), s(&["any"]));
    }
}
