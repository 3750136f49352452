//! A run's artifacts (its `artifacts/` files: transcripts, diffs, what the agents
//! emitted — files far larger than a NATS message may be) in the JetStream object
//! store [`BUCKET`], which chunks them: the run's `n`th file as the object
//! `<run-id>/<n>` (any path, whatever an object's name may hold), and the run's
//! list of them as `<run-id>.manifest` (JSON `[[path, bytes], …]`, in that order),
//! written last, so a listed artifact is always there. The worker puts them when
//! the run has ended and its journal is published; `serve --nats` reads them back
//! from any host.
//!
//! A journal record too large for a message ([`INLINE_MAX`]) goes there too, as the
//! object `<run-id>.journal.<offset>`; the replicated journal carries a pointer to
//! it ([`pointer`]), which its readers resolve ([`Nats::resolve`]).

use async_nats::jetstream::object_store::{self, GetErrorKind, ObjectStore};
use tokio::io::AsyncReadExt as _;

use super::{Nats, NatsError};

/// The artifacts' object store.
pub(crate) const BUCKET: &str = "CAPFLEET_ARTIFACTS";

/// A journal record larger than this is published as a pointer to an object (a
/// NATS server's default largest message is 1 MiB, headers included).
pub(crate) const INLINE_MAX: usize = 512 << 10;
/// How a pointer record starts (no journal record does: theirs start with `type`).
const POINTER: &[u8] = b"{\"cap_nats_object\":";

/// The pointer record for object `name` of `bytes` bytes.
pub(crate) fn pointer(name: &str, bytes: usize) -> Vec<u8> {
    serde_json::json!({ "cap_nats_object": name, "bytes": bytes })
        .to_string()
        .into_bytes()
}

fn manifest(run: &str) -> String {
    format!("{run}.manifest")
}

impl Nats {
    /// The artifacts' store, made when missing.
    async fn artifact_store(&self, replicas: usize) -> Result<ObjectStore, NatsError> {
        if let Ok(store) = self.js.get_object_store(BUCKET).await {
            return Ok(store);
        }
        self.js
            .create_object_store(object_store::Config {
                bucket: BUCKET.to_owned(),
                num_replicas: replicas,
                ..Default::default()
            })
            .await
            .map_err(|e| NatsError::js(format!("the object store {BUCKET}"), e))
    }

    /// Put `bytes` as the object `name`.
    pub(crate) async fn put_object(
        &self,
        name: &str,
        bytes: &[u8],
        replicas: usize,
    ) -> Result<(), NatsError> {
        let store = self.artifact_store(replicas).await?;
        store
            .put(name, &mut &bytes[..])
            .await
            .map(|_info| ())
            .map_err(|e| NatsError::js(format!("putting the object {name}"), e))
    }

    /// A journal record as published: itself, or the object its pointer names.
    pub(crate) async fn resolve(&self, record: Vec<u8>) -> Result<Vec<u8>, NatsError> {
        if !record.starts_with(POINTER) {
            return Ok(record);
        }
        let name = serde_json::from_slice::<serde_json::Value>(&record)
            .ok()
            .and_then(|v| v["cap_nats_object"].as_str().map(str::to_owned))
            .ok_or_else(|| NatsError::js("a journal record's pointer", "not a pointer"))?;
        self.object(&name)
            .await?
            .ok_or_else(|| NatsError::js(format!("the object {name}"), "missing"))
    }

    /// Put run `run`'s artifacts (`(path, file)` pairs, the path relative to its
    /// `artifacts/`), then their manifest; the bytes put.
    pub async fn put_artifacts(
        &self,
        run: &str,
        files: &[(String, std::path::PathBuf)],
        replicas: usize,
    ) -> Result<u64, NatsError> {
        let store = self.artifact_store(replicas).await?;
        let mut listed = Vec::with_capacity(files.len());
        let mut total = 0;
        for (n, (rel, path)) in files.iter().enumerate() {
            let what = || format!("putting the artifact {run}/{rel}");
            let mut file = tokio::fs::File::open(path)
                .await
                .map_err(|e| NatsError::js(what(), e))?;
            let info = store
                .put(format!("{run}/{n}").as_str(), &mut file)
                .await
                .map_err(|e| NatsError::js(what(), e))?;
            total += info.size as u64;
            listed.push((rel.clone(), info.size as u64));
        }
        let text = serde_json::to_vec(&listed).map_err(|e| NatsError::js("a manifest", e))?;
        store
            .put(manifest(run).as_str(), &mut text.as_slice())
            .await
            .map_err(|e| NatsError::js(format!("putting run {run}'s manifest"), e))?;
        Ok(total)
    }

    /// Run `run`'s artifacts as `(path, bytes)`, none when it has no manifest (yet).
    pub async fn artifact_list(&self, run: &str) -> Result<Option<Vec<(String, u64)>>, NatsError> {
        let Some(text) = self.object(&manifest(run)).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| NatsError::js(format!("run {run}'s manifest"), e))
    }

    /// The artifact `rel` of run `run`; none when it has no such artifact.
    pub async fn artifact(&self, run: &str, rel: &str) -> Result<Option<Vec<u8>>, NatsError> {
        let listed = self.artifact_list(run).await?.unwrap_or_default();
        match listed.iter().position(|(path, _)| path == rel) {
            Some(n) => self.object(&format!("{run}/{n}")).await,
            None => Ok(None),
        }
    }

    /// The object `name`, read whole; none when absent.
    async fn object(&self, name: &str) -> Result<Option<Vec<u8>>, NatsError> {
        let Ok(store) = self.js.get_object_store(BUCKET).await else {
            return Ok(None);
        };
        let what = || format!("the artifact {name}");
        let mut object = match store.get(name).await {
            Ok(o) => o,
            Err(e) if e.kind() == GetErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(NatsError::js(what(), e)),
        };
        let mut out = Vec::new();
        object
            .read_to_end(&mut out)
            .await
            .map_err(|e| NatsError::js(what(), e))?;
        Ok(Some(out))
    }
}
