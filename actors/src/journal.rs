//! The journal actor: an append-only JSONL record of every published session event.
//!
//! Sessions publish into the journal's bounded channel like any subscriber; a writer
//! task appends one JSON object per line through a buffer and, every [`FLUSH_EVERY`],
//! writes out and syncs what is new, so at most that much of the record is at risk
//! in a crash. Stopping drains what
//! is queued, then flushes and syncs.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::error::JournalOpen;
use crate::events::{Published, SUBSCRIBER_CAPACITY};

/// The longest a record waits in memory before it is written and synced.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

pub struct Journal;

pub enum JournalMsg {
    /// A sender for a new publisher (a session, the router, the workspace stream).
    Subscribe(RpcReplyPort<mpsc::Sender<Published>>),
    /// Stop accepting, write everything queued, sync; reply with the records written.
    Finish(RpcReplyPort<u64>),
}

pub struct JournalState {
    tx: Option<mpsc::Sender<Published>>,
    writer: Option<JoinHandle<std::io::Result<u64>>>,
    path: PathBuf,
}

impl Actor for Journal {
    type Msg = JournalMsg;
    type State = JournalState;
    type Arguments = PathBuf;

    async fn pre_start(
        &self,
        _myself: ActorRef<JournalMsg>,
        path: PathBuf,
    ) -> Result<JournalState, ActorProcessingErr> {
        let opened = match path.parent() {
            Some(dir) => std::fs::create_dir_all(dir),
            None => Ok(()),
        }
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
        });
        let file = opened.map_err(|source| JournalOpen {
            path: path.clone(),
            source,
        })?;
        let (tx, rx) = mpsc::channel(SUBSCRIBER_CAPACITY);
        let writer = tokio::spawn(write_loop(file, rx));
        Ok(JournalState {
            tx: Some(tx),
            writer: Some(writer),
            path,
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
            JournalMsg::Finish(reply) => {
                let written = st.finish().await;
                let _caller_gone = reply.send(written);
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
    async fn finish(&mut self) -> u64 {
        self.tx = None;
        let Some(writer) = self.writer.take() else {
            return 0;
        };
        match writer.await {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => {
                tracing::error!(path = %self.path.display(), "journal write failed: {e}");
                0
            }
            Err(e) => {
                tracing::error!("journal writer panicked: {e}");
                0
            }
        }
    }
}

/// Receive and append; every [`FLUSH_EVERY`] write out and sync what is new.
async fn write_loop(
    file: std::fs::File,
    mut rx: mpsc::Receiver<Published>,
) -> std::io::Result<u64> {
    let sync_handle = file.try_clone()?;
    let mut out = std::io::BufWriter::with_capacity(256 << 10, file);
    let mut written = 0u64;
    let mut dirty = false;
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            event = rx.recv() => {
                let Some(event) = event else { break };
                serde_json::to_writer(&mut out, &*event)?;
                out.write_all(b"\n")?;
                written += 1;
                dirty = true;
            }
            _ = tick.tick() => {
                if std::mem::take(&mut dirty) {
                    out.flush()?;
                    sync(&sync_handle).await?;
                }
            }
        }
    }
    out.flush()?;
    sync(&sync_handle).await?;
    Ok(written)
}

/// `fsync` off the async threads.
async fn sync(file: &std::fs::File) -> std::io::Result<()> {
    let handle = file.try_clone()?;
    tokio::task::spawn_blocking(move || handle.sync_data())
        .await
        .map_err(std::io::Error::other)?
}
