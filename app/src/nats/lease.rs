//! Leases: which worker holds which run, in a JetStream key-value bucket
//! ([`BUCKET`]: key = run id). A worker claims a run with a create (it succeeds only
//! when the key is absent: nobody holds the run, or its holder's lease expired),
//! renews it every third of the TTL with an update at the revision it last wrote
//! (compare-and-set), and deletes it, at that revision, when the run has ended. The
//! bucket's `max_age` is the TTL: a lease not renewed for a TTL is gone, and another
//! worker's claim succeeds. A renewal refused because the revision moved means
//! another worker claimed the run: this one is fenced out of it ([`Lost`]).

use std::time::Duration;

use async_nats::jetstream::kv::{self, CreateErrorKind, Store};
use capfleet_wire::clock::now_ms;
use serde::{Deserialize, Serialize};

use super::{Nats, NatsError};

/// The leases' bucket.
pub(crate) const BUCKET: &str = "CAPFLEET_LEASES";

/// What a lease's value says.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Holder {
    pub worker: String,
    /// When the worker took the run (ms since the epoch).
    pub since_ms: u64,
    /// Its last heartbeat.
    pub beat_ms: u64,
}

/// A lease held: the run and the revision this worker last wrote.
#[derive(Debug, Clone)]
pub struct Lease {
    pub run: String,
    pub revision: u64,
    holder: Holder,
}

/// The run was claimed by another worker since this one's last heartbeat.
#[derive(Debug, thiserror::Error)]
#[error("the lease of run {run} is lost: {why}")]
pub struct Lost {
    pub run: String,
    pub why: String,
}

/// The bucket, with its TTL.
#[derive(Clone)]
pub struct Leases {
    store: Store,
    pub ttl: Duration,
}

impl Nats {
    /// The leases' bucket, made when missing with `ttl` (an existing bucket keeps
    /// the TTL it was made with: that one is returned).
    pub async fn leases(&self, ttl: Duration, replicas: usize) -> Result<Leases, NatsError> {
        let (store, ttl) = self.bucket(BUCKET, ttl, replicas).await?;
        Ok(Leases { store, ttl })
    }
}

impl Leases {
    /// Claim `run` for `worker`: `None` while another worker holds it.
    pub async fn claim(&self, run: &str, worker: &str) -> Result<Option<Lease>, NatsError> {
        let now = now_ms();
        let holder = Holder {
            worker: worker.to_owned(),
            since_ms: now,
            beat_ms: now,
        };
        let value = serde_json::to_vec(&holder).map_err(|e| NatsError::js("a lease", e))?;
        match self.store.create(run, value.into()).await {
            Ok(revision) => Ok(Some(Lease {
                run: run.to_owned(),
                revision,
                holder,
            })),
            Err(e) if e.kind() == CreateErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(NatsError::js(format!("claiming run {run}"), e)),
        }
    }

    /// Renew `lease` (its revision moves on). `Err(Ok(Lost))` when another worker took
    /// the run; `Err(Err(_))` when NATS could not be asked (the lease may still hold).
    pub async fn renew(&self, lease: &mut Lease) -> Result<(), Result<Lost, NatsError>> {
        lease.holder.beat_ms = now_ms();
        let value =
            serde_json::to_vec(&lease.holder).map_err(|e| Err(NatsError::js("a lease", e)))?;
        match self
            .store
            .update(&lease.run, value.into(), lease.revision)
            .await
        {
            Ok(revision) => {
                lease.revision = revision;
                Ok(())
            }
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Err(Ok(Lost {
                run: lease.run.clone(),
                why: "another worker claimed the run".to_owned(),
            })),
            Err(e) => Err(Err(NatsError::js(
                format!("renewing the lease of {}", lease.run),
                e,
            ))),
        }
    }

    /// How long until another worker's lease on `run` lapses, if it does not renew
    /// it (at most the TTL; none when nobody holds it).
    pub async fn remaining(&self, run: &str) -> Result<Option<Duration>, NatsError> {
        let value = self
            .store
            .get(run)
            .await
            .map_err(|e| NatsError::js(format!("the lease of {run}"), e))?;
        Ok(value
            .and_then(|v| serde_json::from_slice::<Holder>(&v).ok())
            .map(|h| {
                let since = Duration::from_millis(now_ms().saturating_sub(h.beat_ms));
                self.ttl.saturating_sub(since)
            }))
    }

    /// Give `lease` up (only if it is still this worker's).
    pub async fn release(&self, lease: &Lease) -> Result<(), NatsError> {
        self.store
            .delete_expect_revision(&lease.run, Some(lease.revision))
            .await
            .map_err(|e| NatsError::js(format!("releasing the lease of {}", lease.run), e))
    }
}
