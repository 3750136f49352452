//! A run's state as any host reads it from NATS (`capfleet serve --nats`'s
//! `GET /v1/runs/{id}` and event stream): its submission's note in the key-value
//! bucket [`BUCKET`] (key = run id: the fleet, the labels, when; put when the run is
//! queued), its lease (which worker holds it now: `crate::nats::lease`), and its
//! journal as replicated (`crate::nats::replica`), read whole ([`Nats::replay`]) or
//! followed as it grows ([`Nats::follow`]: an ordered consumer of the run's subject,
//! each record once, in order).

use std::time::Duration;

use async_nats::jetstream::consumer::pull;
use futures::{Stream, StreamExt as _};
use serde::{Deserialize, Serialize};

use super::lease::{self, Holder};
use super::{Nats, NatsError};

/// The submitted runs' notes.
pub(crate) const BUCKET: &str = "CAPFLEET_SUBMITTED";
/// A note is kept this long after it was put (the journal stays as the stream keeps it).
const KEEP: Duration = Duration::from_secs(30 * 24 * 3600);

/// What the submitter said of a queued run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Submitted {
    pub fleet: String,
    pub labels: Vec<String>,
    /// When it was queued (ms since the epoch).
    pub submitted_ms: u64,
}

impl Nats {
    /// Note run `id` as submitted.
    pub(crate) async fn note_submitted(
        &self,
        id: &str,
        note: &Submitted,
        replicas: usize,
    ) -> Result<(), NatsError> {
        let (store, _keep) = self.bucket(BUCKET, KEEP, replicas).await?;
        let value = serde_json::to_vec(note).map_err(|e| NatsError::js("a run's note", e))?;
        store
            .put(id, value.into())
            .await
            .map(|_revision| ())
            .map_err(|e| NatsError::js(format!("noting run {id}"), e))
    }

    /// The note of run `id` (none: not queued here, or gone).
    pub async fn submitted(&self, id: &str) -> Result<Option<Submitted>, NatsError> {
        self.value(BUCKET, id).await
    }

    /// Who holds run `id`'s lease now (none: no worker runs it).
    pub async fn holder(&self, id: &str) -> Result<Option<Holder>, NatsError> {
        self.value(lease::BUCKET, id).await
    }

    /// The value of `key` in `bucket`, as JSON (none: no such bucket, key, or a
    /// value that is not one).
    async fn value<T: serde::de::DeserializeOwned>(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Option<T>, NatsError> {
        let Ok(store) = self.js.get_key_value(bucket).await else {
            return Ok(None);
        };
        let value = store
            .get(key)
            .await
            .map_err(|e| NatsError::js(format!("{key} in {bucket}"), e))?;
        Ok(value.and_then(|v| serde_json::from_slice(&v).ok()))
    }

    /// Run `id`'s journal records, from the first on, as they are published (the
    /// stream does not end by itself).
    pub async fn follow(
        &self,
        id: &str,
        replicas: usize,
    ) -> Result<impl Stream<Item = Result<Vec<u8>, NatsError>> + use<>, NatsError> {
        let what = || format!("following run {id}'s journal");
        let stream = self.journal_stream(replicas).await?;
        let consumer = stream
            .create_consumer(pull::OrderedConfig {
                filter_subject: super::replica::subject(id),
                ..pull::OrderedConfig::default()
            })
            .await
            .map_err(|e| NatsError::js(what(), e))?;
        let messages = consumer
            .messages()
            .await
            .map_err(|e| NatsError::js(what(), e))?;
        let what = what();
        let nats = self.clone();
        Ok(messages.then(move |m| {
            let (nats, what) = (nats.clone(), what.clone());
            async move {
                let m = m.map_err(|e| NatsError::js(&what, e))?;
                nats.resolve(m.payload.to_vec()).await
            }
        }))
    }
}
