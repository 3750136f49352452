//! Who is working: each worker's presence in a JetStream key-value bucket
//! ([`BUCKET`]: key = worker name), put with every heartbeat — its labels, its
//! runs, whether it drains — and gone a few heartbeats after the worker is
//! (the bucket's `max_age`). `capfleet workers --nats` reads it.

use std::time::Duration;

use async_nats::jetstream::kv::Store;
use serde::{Deserialize, Serialize};

use super::{Nats, NatsError};

/// The presence bucket.
pub(crate) const BUCKET: &str = "CAPFLEET_WORKERS";

/// One worker, as it last said.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Presence {
    pub worker: String,
    pub labels: Vec<String>,
    pub max_runs: usize,
    /// The runs it holds.
    pub runs: Vec<String>,
    pub draining: bool,
    /// When it said so (ms since the epoch).
    pub beat_ms: u64,
}

impl Nats {
    /// The presence bucket, made when missing; an entry lapses after `ttl`.
    pub async fn presence(&self, ttl: Duration, replicas: usize) -> Result<Store, NatsError> {
        self.bucket(BUCKET, ttl, replicas)
            .await
            .map(|(store, _ttl)| store)
    }
}

/// Say `p` (its key: the worker's name, made a valid key).
pub async fn announce(store: &Store, p: &Presence) -> Result<(), NatsError> {
    let value = serde_json::to_vec(p).map_err(|e| NatsError::js("a presence", e))?;
    store
        .put(key(&p.worker), value.into())
        .await
        .map(|_revision| ())
        .map_err(|e| NatsError::js(format!("the presence of {}", p.worker), e))
}

/// Every worker present, by name.
pub async fn all(store: &Store) -> Result<Vec<Presence>, NatsError> {
    use futures::TryStreamExt as _;
    let keys: Vec<String> = store
        .keys()
        .await
        .map_err(|e| NatsError::js("the workers", e))?
        .try_collect()
        .await
        .map_err(|e| NatsError::js("the workers", e))?;
    let mut out = Vec::new();
    for k in keys {
        let value = store
            .get(&k)
            .await
            .map_err(|e| NatsError::js("a worker", e))?;
        if let Some(p) = value.and_then(|v| serde_json::from_slice::<Presence>(&v).ok()) {
            out.push(p);
        }
    }
    out.sort_by(|a, b| a.worker.cmp(&b.worker));
    Ok(out)
}

/// A key-value key for a worker's name (letters, digits, `-`, `_`, `=`, `.` kept).
fn key(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '=') {
                c
            } else {
                '_'
            }
        })
        .collect()
}
