//! The output loop of every line-oriented wire, written once: read the agent's
//! bounded lines, let the binding map each one into [`DriverOutput`]s, send them in
//! credit-bounded batches (flushed when the reader has nothing more buffered or a
//! batch is full), and say at the end what the lines taught.

use tokio::io::AsyncRead;

use super::sink::MAX_BATCH;
use super::wire::OutputEnd;
use super::{DriverOutput, OutputSink};
use crate::process::lines::{LineItem, LineReader};

/// What an output loop learns on the way: whether a turn ended, and the id to
/// resume the conversation with.
#[derive(Debug, Default)]
pub(crate) struct Learned {
    pub turn_ended: bool,
    pub resume_id: Option<String>,
}

/// Read `reader` to its end, mapping every item with `map` (which pushes onto the
/// batch and records what it learned).
pub(crate) async fn pump<R, F>(mut reader: LineReader<R>, sink: OutputSink, mut map: F) -> OutputEnd
where
    R: AsyncRead + Unpin,
    F: FnMut(LineItem, &mut Vec<DriverOutput>, &mut Learned),
{
    // Grows to the largest burst seen (usually a few items), not to a guess.
    let mut batch = Vec::new();
    let mut learned = Learned::default();
    loop {
        let item = match reader.next().await {
            Ok(Some(item)) => item,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("agent output read failed: {e}");
                break;
            }
        };
        map(item, &mut batch, &mut learned);
        let flush = batch.len() >= MAX_BATCH || !reader.has_buffered();
        if flush && !sink.send(std::mem::take(&mut batch)).await {
            return OutputEnd::SessionGone;
        }
    }
    if !batch.is_empty() {
        sink.send(batch).await;
    }
    OutputEnd::Closed {
        turn_ended: learned.turn_ended,
        resume_id: learned.resume_id,
    }
}
