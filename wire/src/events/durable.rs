//! The run's record on disk as its producers see it: the [`Durable`] barrier and the
//! journal's default bound, below the journal so that a producer (the workspace, the
//! router) never names the journal.

use tokio::sync::{mpsc, oneshot};

/// A run's journal at most, by default (`journal_max_mb = 1024`); the transcripts'
/// text copied to artifacts is bounded by the same figure.
pub const JOURNAL_MAX_BYTES: u64 = 1024 << 20;

/// A handle to wait for the journal to have everything published so far on disk:
/// made by the journal (a floor above), handed down to the producers that must
/// not go on before their records last (the router, the workspace collection).
#[derive(Debug, Clone)]
pub struct Durable {
    tx: mpsc::Sender<oneshot::Sender<()>>,
}

impl Durable {
    /// The handle of a writer that answers each sender it is sent once what was
    /// published before is written and synced.
    pub fn new(tx: mpsc::Sender<oneshot::Sender<()>>) -> Durable {
        Durable { tx }
    }

    /// Return once every event published (by anyone) before this call is written and
    /// synced. A journal that is gone or whose disk failed returns at once: the fault
    /// is the run's to report.
    pub async fn sync(&self) {
        let (done, synced) = oneshot::channel();
        if self.tx.send(done).await.is_ok() {
            let _writer_gone = synced.await;
        }
    }
}
