//! The journal actor: an append-only JSONL record of every published session event.
//!
//! Sessions publish into the journal's bounded channel like any subscriber; a writer
//! task appends one JSON object per line through a buffer and, every [`FLUSH_EVERY`],
//! writes out and syncs what is new, so at most that much of the record is at risk
//! in a crash. Stopping drains what is queued, then flushes and syncs.
//!
//! Disk use is proportional to what happened ([`batch`]): consecutive text chunks of
//! one message within a flush batch are one record (the text joined byte for byte,
//! `chunks` and `last_seq` saying how many events it stands for), and past the run's
//! limit ([`JournalSpec::max_bytes`], fleet.toml's `journal_max_mb`) text bodies are
//! cut, each cut said by a `journal_cut` record with the bytes and chunks it left out.
//! A write that fails (ENOSPC, EIO, a read-only disk) is a [`DiskFault`] reported to
//! the run, which fails with it; the writer keeps draining (no publisher blocks) and
//! counts what it could not write. No descriptor free (`EMFILE`, `ENFILE`) is not a
//! fault: opening and syncing are tried again (a sync request waits) for up to
//! [`DESCRIPTOR_PATIENCE`].
//!
//! What a resume needs is on disk before it takes effect: [`Durable::sync`] returns
//! once everything published before the call is written and synced (the router calls
//! it between a delivery's `routed` record and the turn it starts). A turn's prompt
//! past [`Prompt::INLINE_MAX`](capfleet_wire::events::Prompt::INLINE_MAX) bytes is kept by
//! reference, in a content-addressed file beside the journal ([`blobs`]), synced
//! before the record naming it. [`replay`] reads a journal back, a torn last line
//! reported and left out.

mod batch;
pub(crate) mod blobs;
pub mod replay;

use std::path::PathBuf;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::error::JournalOpen;
use crate::fault::{DESCRIPTOR_PATIENCE, DiskFault, FaultSink, out_of_descriptors};
use capfleet_wire::events::{Durable, JOURNAL_MAX_BYTES, Published, SUBSCRIBER_CAPACITY};

/// The longest a record waits in memory before it is written and synced.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Where the journal goes and how large it may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalSpec {
    pub path: PathBuf,
    /// Past this many bytes, text bodies are cut (with a `journal_cut` record).
    pub max_bytes: u64,
    /// A copy of the journal kept elsewhere, told of every flush.
    pub replica: Option<ReplicaHook>,
}

impl From<PathBuf> for JournalSpec {
    fn from(path: PathBuf) -> Self {
        JournalSpec {
            path,
            max_bytes: JOURNAL_MAX_BYTES,
            replica: None,
        }
    }
}

/// A replica of the journal kept elsewhere (another host's copy of a distributed
/// run), told after each flush how many bytes this writer has written and synced; it
/// reads the new lines from the file at its own pace. A `watch` never blocks the
/// writer and never grows: a slow replica reads a longer stretch at its next turn,
/// so the journal neither waits for it nor loses a record because of it. The
/// engine knows nothing of where the copy goes.
#[derive(Debug, Clone)]
pub struct ReplicaHook(watch::Sender<u64>);

impl ReplicaHook {
    /// A hook, and the receiver its replica watches.
    pub fn new() -> (ReplicaHook, watch::Receiver<u64>) {
        let (tx, rx) = watch::channel(0);
        (ReplicaHook(tx), rx)
    }

    fn synced(&self, bytes: u64) {
        self.0.send_replace(bytes);
    }
}

impl PartialEq for ReplicaHook {
    fn eq(&self, other: &Self) -> bool {
        self.0.same_channel(&other.0)
    }
}

impl Eq for ReplicaHook {}

/// The journal's start arguments: its spec and where a failed write is reported.
#[derive(Debug, Clone)]
pub struct JournalArgs {
    pub spec: JournalSpec,
    pub faults: Option<FaultSink>,
}

impl From<PathBuf> for JournalArgs {
    fn from(path: PathBuf) -> Self {
        JournalArgs {
            spec: path.into(),
            faults: None,
        }
    }
}

/// What the journal did with the events it was given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalTally {
    /// Events received.
    pub events: u64,
    /// Records (lines) on disk, synced.
    pub records: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Text bytes cut past the limit (each cut said by a `journal_cut` record).
    pub cut_bytes: u64,
    /// Events not on disk because a write failed.
    pub lost: u64,
}

pub struct Journal;

/// Sync requests waiting for the writer, at most (only the router makes them).
const SYNCS_CAPACITY: usize = 64;

pub enum JournalMsg {
    /// A sender for a new publisher (a session, the router, the workspace stream).
    Subscribe(RpcReplyPort<mpsc::Sender<Published>>),
    /// A handle to wait for what was published to be on disk.
    Durable(RpcReplyPort<Durable>),
    /// Stop accepting, write everything queued, sync; reply with what was kept.
    Finish(RpcReplyPort<JournalTally>),
}

pub struct JournalState {
    tx: Option<mpsc::Sender<Published>>,
    syncs: Option<mpsc::Sender<oneshot::Sender<()>>>,
    writer: Option<JoinHandle<JournalTally>>,
}

impl Actor for Journal {
    type Msg = JournalMsg;
    type State = JournalState;
    type Arguments = JournalArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<JournalMsg>,
        args: JournalArgs,
    ) -> Result<JournalState, ActorProcessingErr> {
        let path = args.spec.path.clone();
        let writer = open(args)
            .await
            .map_err(|source| JournalOpen { path, source })?;
        let (tx, rx) = mpsc::channel(SUBSCRIBER_CAPACITY);
        let (syncs, sync_rx) = mpsc::channel(SYNCS_CAPACITY);
        let writer = tokio::spawn(write_loop(writer, rx, sync_rx));
        Ok(JournalState {
            tx: Some(tx),
            syncs: Some(syncs),
            writer: Some(writer),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<JournalMsg>,
        msg: JournalMsg,
        st: &mut JournalState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            JournalMsg::Subscribe(reply) => {
                if let Some(tx) = &st.tx {
                    let _caller_gone = reply.send(tx.clone());
                }
            }
            JournalMsg::Durable(reply) => {
                if let Some(tx) = &st.syncs {
                    let _caller_gone = reply.send(Durable::new(tx.clone()));
                }
            }
            JournalMsg::Finish(reply) => {
                let kept = st.finish().await;
                let _caller_gone = reply.send(kept);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<JournalMsg>,
        st: &mut JournalState,
    ) -> Result<(), ActorProcessingErr> {
        st.finish().await;
        Ok(())
    }
}

impl JournalState {
    async fn finish(&mut self) -> JournalTally {
        self.tx = None;
        self.syncs = None;
        let Some(writer) = self.writer.take() else {
            return JournalTally::default();
        };
        writer.await.unwrap_or_else(|e| {
            tracing::error!("journal writer panicked: {e}");
            JournalTally::default()
        })
    }
}

/// Receive and append; every [`FLUSH_EVERY`] write out and sync what is new. A sync
/// request first takes every event already queued (published before it was made),
/// then writes out and syncs, then answers.
async fn write_loop(
    mut writer: batch::Writer,
    mut rx: mpsc::Receiver<Published>,
    mut syncs: mpsc::Receiver<oneshot::Sender<()>>,
) -> JournalTally {
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut waiting = Vec::new();
    loop {
        tokio::select! {
            event = rx.recv() => match event {
                Some(event) => writer.push(event),
                None => break,
            },
            Some(done) = syncs.recv() => {
                // Every request made so far, then every event queued before them: one sync answers them all.
                waiting.push(done);
                while let Ok(done) = syncs.try_recv() {
                    waiting.push(done);
                }
                while let Ok(event) = rx.try_recv() {
                    writer.push(event);
                }
                flushed(writer.flush().await, &mut waiting);
            }
            _ = tick.tick() => flushed(writer.flush().await, &mut waiting),
        }
    }
    // The end: tried until synced or the descriptors' patience is out.
    while writer.flush().await == batch::Flushed::Retry {
        tokio::time::sleep(FLUSH_EVERY).await;
    }
    flushed(batch::Flushed::Done, &mut waiting);
    writer.tally()
}

/// Answer the sync requests once a flush has synced (or failed for good); while it
/// waits for a descriptor they wait with it.
fn flushed(flushed: batch::Flushed, waiting: &mut Vec<oneshot::Sender<()>>) {
    if flushed == batch::Flushed::Done {
        for done in waiting.drain(..) {
            let _caller_gone = done.send(());
        }
    }
}

/// Open the journal's writer; with no descriptor free, tried again every
/// [`FLUSH_EVERY`] for up to [`DESCRIPTOR_PATIENCE`].
async fn open(args: JournalArgs) -> std::io::Result<batch::Writer> {
    let started = std::time::Instant::now();
    loop {
        let path = &args.spec.path;
        let opened = match path.parent() {
            Some(dir) => std::fs::create_dir_all(dir),
            None => Ok(()),
        }
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        })
        .and_then(|file| batch::Writer::new(file, args.spec.clone(), args.faults.clone()));
        match opened {
            Err(e) if out_of_descriptors(&e) && started.elapsed() < DESCRIPTOR_PATIENCE => {
                tracing::warn!(path = %path.display(), "opening the journal waits for a descriptor: {e}");
                tokio::time::sleep(FLUSH_EVERY).await;
            }
            opened => return opened,
        }
    }
}

/// A fault of the journal at `path`.
fn fault(path: &std::path::Path, error: std::io::Error, kept: &JournalTally) -> DiskFault {
    DiskFault {
        what: "journal",
        path: path.to_owned(),
        error: std::sync::Arc::new(error),
        kept: format!(
            "{} records ({} bytes) written and synced before the fault",
            kept.records, kept.bytes
        ),
    }
}

#[cfg(test)]
mod tests;
