//! The output loop of every line-oriented wire, written once: read the agent's
//! lines bounded by the launch's cap (an oversize line is reported here, the same
//! way for every binding), let the binding map each line into [`DriverOutput`]s,
//! send them in credit-bounded batches (flushed when the reader has nothing more
//! buffered or a batch is full), and say at the end what the lines taught.

use tokio::io::AsyncRead;

use super::sink::MAX_BATCH;
use super::wire::OutputEnd;
use super::{DriverOutput, OutputSink, TurnEnd};
use crate::process::lines::{LineConfig, LineItem, LineReader};

/// What an output loop learns on the way: whether a turn ended, and the id to
/// resume the conversation with.
#[derive(Debug, Default)]
pub(crate) struct Learned {
    pub turn_ended: bool,
    pub resume_id: Option<String>,
}

impl Learned {
    /// The wire named the id to resume the conversation with: learn it and tell the
    /// session.
    pub(crate) fn resume_id(&mut self, id: String, batch: &mut Vec<DriverOutput>) {
        self.resume_id = Some(id.clone());
        batch.push(DriverOutput::ResumeId(id));
    }

    /// The wire ended the turn: learn it and tell the session.
    pub(crate) fn turn_end(&mut self, end: TurnEnd, batch: &mut Vec<DriverOutput>) {
        self.turn_ended = true;
        batch.push(DriverOutput::TurnEnd(end));
    }
}

/// Read `out` to its end in lines of at most `max_line` bytes, mapping every line
/// with `map` (which pushes onto the batch and records what it learned).
pub(crate) async fn pump<R, F>(out: R, max_line: usize, sink: OutputSink, mut map: F) -> OutputEnd
where
    R: AsyncRead + Unpin,
    F: FnMut(&[u8], &mut Vec<DriverOutput>, &mut Learned),
{
    let config = LineConfig {
        max_line,
        ..LineConfig::default()
    };
    let mut reader = LineReader::with_config(out, config);
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
        match item {
            LineItem::Line(line) | LineItem::Unterminated(line) => {
                map(&line, &mut batch, &mut learned)
            }
            LineItem::Oversize { len, terminated } => {
                let event = super::oversize_line(len, max_line, terminated);
                batch.push(DriverOutput::Event(event));
            }
        }
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
