//! The journal replicated: each run's journal lines published, as they are written,
//! to `capfleet.journal.<run-id>` of the stream [`STREAM`], so that a takeover
//! replays the journal from there ([`Nats::replay`]), not from the dead host's disk,
//! and `capfleet log --nats` reads it from any host.
//!
//! The publisher ([`Replica`]) follows the engine's [`ReplicaHook`]: told after each
//! flush, it reads the journal file's new whole lines from where it stopped and
//! publishes them one by one, each with `Nats-Expected-Last-Subject-Sequence` = the
//! sequence of the run's last record it (or the replay it continues) saw. JetStream
//! refuses a record from a worker whose view is stale — one that lost the run to
//! another worker, which has published since: that is the fence on the replica;
//! the publisher then stops ([`Ended::Fenced`]). A publish that fails otherwise
//! (NATS slow or away) is reported and retried from the same line at the next turn;
//! the journal never waits for it. Told to finish, it goes on retrying what is left
//! for a while (until fenced), so that a run's end reaches the stream through a
//! cluster's leader election. A record too large for a message is published
//! as a pointer to an object (`super::artifacts`), resolved by [`Nats::replay`] and
//! `Nats::follow`.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::stream::{Config, RetentionPolicy, StorageType, Stream};
use capfleet_engine::journal::ReplicaHook;
use tokio::sync::{oneshot, watch};

use super::artifacts::{INLINE_MAX, pointer};
use super::{Nats, NatsError};

/// The stream of replicated journals.
pub(crate) const STREAM: &str = "CAPFLEET_JOURNALS";
const SUBJECT_PREFIX: &str = "capfleet.journal";
/// A publisher with nothing new looks again this often anyway (the app's own
/// `run_ended` lines are written beside the engine's journal, not through it).
const POLL: Duration = Duration::from_millis(250);
/// A publisher told to finish with lines left retries them this often, for this
/// long (a cluster that lost a node elects new leaders within seconds).
const FINISH_PAUSE: Duration = Duration::from_millis(500);
const FINISH_FOR: Duration = Duration::from_secs(30);
/// A publish not acknowledged within this is retried.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(5);

/// The subject of run `id`'s journal.
pub(crate) fn subject(id: &str) -> String {
    format!("{SUBJECT_PREFIX}.{id}")
}

impl Nats {
    /// The journals' stream, made when missing.
    pub async fn journal_stream(&self, replicas: usize) -> Result<Stream, NatsError> {
        self.js
            .get_or_create_stream(Config {
                name: STREAM.to_owned(),
                subjects: vec![format!("{SUBJECT_PREFIX}.>")],
                retention: RetentionPolicy::Limits,
                storage: StorageType::File,
                num_replicas: replicas,
                ..Config::default()
            })
            .await
            .map_err(|e| NatsError::js(format!("the stream {STREAM}"), e))
    }

    /// Every record of run `id`'s replicated journal, in order, with the stream
    /// sequence of the last (0: none).
    pub async fn replay(
        &self,
        id: &str,
        replicas: usize,
    ) -> Result<(Vec<Vec<u8>>, u64), NatsError> {
        let stream = self.journal_stream(replicas).await?;
        let subject = subject(id);
        let mut lines = Vec::new();
        let mut next = 1;
        let mut last = 0;
        loop {
            match stream
                .get_first_raw_message_by_subject(&subject, next)
                .await
            {
                Ok(m) => {
                    last = m.sequence;
                    next = m.sequence + 1;
                    lines.push(self.resolve(m.payload.to_vec()).await?);
                }
                Err(e)
                    if e.kind()
                        == async_nats::jetstream::stream::RawMessageErrorKind::NoMessageFound =>
                {
                    return Ok((lines, last));
                }
                Err(e) => return Err(NatsError::js(format!("replaying run {id}'s journal"), e)),
            }
        }
    }
}

/// How a publisher ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// Every line of the journal is published.
    Done { lines: u64 },
    /// JetStream refused a line: another worker owns the run's journal now.
    Fenced { lines: u64 },
    /// Stopped with lines left unpublished (NATS away at the end).
    Behind { lines: u64, error: String },
}

/// A run's journal being published.
pub struct Replica {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Ended>,
}

impl Replica {
    /// Publish run `id`'s journal at `path` from byte `offset` on (what is before
    /// it is on the stream already), the run's last record on the stream being
    /// `last_seq`; the hook for the engine's journal. Once `fence` is set (by the
    /// lease's heartbeat, or here when JetStream refuses a record) nothing more is
    /// published.
    pub fn start(
        nats: &Nats,
        worker: &str,
        id: &str,
        at: (PathBuf, u64, u64),
        fence: watch::Sender<bool>,
        replicas: usize,
    ) -> (Replica, ReplicaHook) {
        let (path, offset, last_seq) = at;
        let (hook, flushed) = ReplicaHook::new();
        let (stop, stopped) = oneshot::channel();
        let publisher = Publisher {
            nats: nats.clone(),
            run: id.to_owned(),
            replicas,
            subject: subject(id),
            worker: worker.to_owned(),
            path,
            offset,
            last_seq,
            lines: 0,
        };
        let task = tokio::spawn(publisher.run(flushed, stopped, fence));
        (Replica { stop, task }, hook)
    }

    /// Publish what is left, then stop.
    pub async fn finish(self) -> Ended {
        let _already_ended = self.stop.send(());
        self.task.await.unwrap_or_else(|e| Ended::Behind {
            lines: 0,
            error: e.to_string(),
        })
    }
}

struct Publisher {
    nats: Nats,
    run: String,
    /// Copies JetStream keeps of the object store, when it makes it.
    replicas: usize,
    subject: String,
    path: PathBuf,
    /// This worker's name (its records' ids on the stream are its own).
    worker: String,
    offset: u64,
    last_seq: u64,
    lines: u64,
}

/// Why a turn of publishing stopped short.
enum Short {
    Fenced,
    Failed(String),
}

impl Publisher {
    async fn run(
        mut self,
        mut flushed: watch::Receiver<u64>,
        mut stopped: oneshot::Receiver<()>,
        fenced: watch::Sender<bool>,
    ) -> Ended {
        let mut last_error: Option<String> = None;
        // Since when it was told to finish (then it retries what is left, a while).
        let mut stopping: Option<std::time::Instant> = None;
        loop {
            let last = if stopping.is_some() {
                tokio::time::sleep(FINISH_PAUSE).await;
                true
            } else {
                tokio::select! {
                    _ = &mut stopped => true,
                    _ = flushed.changed() => false,
                    () = tokio::time::sleep(POLL) => false,
                }
            };
            if *fenced.borrow() {
                return Ended::Fenced { lines: self.lines };
            }
            match self.publish_new(&fenced).await {
                Ok(()) => last_error = None,
                Err(Short::Fenced) => {
                    tracing::error!(subject = %self.subject, "the run's journal has records from another worker: this one is fenced and publishes no more");
                    fenced.send_replace(true);
                    return Ended::Fenced { lines: self.lines };
                }
                Err(Short::Failed(e)) => {
                    if last_error.as_deref() != Some(e.as_str()) {
                        tracing::error!(subject = %self.subject, "publishing the journal: {e} (retried)");
                    }
                    last_error = Some(e);
                }
            }
            if last {
                let since = *stopping.get_or_insert_with(std::time::Instant::now);
                match last_error {
                    None => return Ended::Done { lines: self.lines },
                    // NATS away (a cluster electing a leader): tried again, until the
                    // run's lease is lost (the fence) or for FINISH_FOR.
                    Some(error) if since.elapsed() >= FINISH_FOR => {
                        return Ended::Behind {
                            lines: self.lines,
                            error,
                        };
                    }
                    Some(_) => {}
                }
            }
        }
    }

    /// Publish every whole line past the offset, until fenced.
    async fn publish_new(&mut self, fenced: &watch::Sender<bool>) -> Result<(), Short> {
        let text = read_from(&self.path, self.offset).map_err(|e| Short::Failed(e.to_string()))?;
        let mut start = 0;
        while let Some(end) = text[start..].iter().position(|&b| b == b'\n') {
            if *fenced.borrow() {
                return Err(Short::Fenced);
            }
            let line = &text[start..start + end];
            self.publish(line).await?;
            start += end + 1;
            self.offset += end as u64 + 1;
            self.lines += 1;
        }
        Ok(())
    }

    async fn publish(&mut self, line: &[u8]) -> Result<(), Short> {
        let mut headers = async_nats::HeaderMap::new();
        // A retry of a publish whose acknowledgement was lost is stored once.
        headers.insert(
            "Nats-Msg-Id",
            format!("{}:{}:{}", self.subject, self.worker, self.offset).as_str(),
        );
        headers.insert(
            "Nats-Expected-Last-Subject-Sequence",
            self.last_seq.to_string().as_str(),
        );
        // Too large for a message: the record in the object store, a pointer here.
        let payload = if line.len() > INLINE_MAX {
            let name = format!("{}.journal.{}", self.run, self.offset);
            self.nats
                .put_object(&name, line, self.replicas)
                .await
                .map_err(|e| Short::Failed(e.to_string()))?;
            pointer(&name, line.len())
        } else {
            line.to_vec()
        };
        let sent = self
            .nats
            .js
            .publish_with_headers(self.subject.clone(), headers, payload.into())
            .await
            .map_err(|e| Short::Failed(e.to_string()))?;
        match tokio::time::timeout(PUBLISH_TIMEOUT, sent).await {
            Ok(Ok(ack)) => {
                self.last_seq = ack.sequence;
                Ok(())
            }
            Ok(Err(e)) if e.kind() == PublishErrorKind::WrongLastSequence => Err(Short::Fenced),
            Ok(Err(e)) => Err(Short::Failed(e.to_string())),
            Err(_) => Err(Short::Failed(format!(
                "no acknowledgement within {}s",
                PUBLISH_TIMEOUT.as_secs()
            ))),
        }
    }
}

/// The bytes of `path` from `offset` to its end (none when it does not exist yet).
fn read_from(path: &Path, offset: u64) -> std::io::Result<Vec<u8>> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    file.seek(SeekFrom::Start(offset))?;
    let mut out = Vec::new();
    file.read_to_end(&mut out)?;
    Ok(out)
}
