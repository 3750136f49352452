//! The output loop of every line-oriented wire, written once: read the agent's
//! lines bounded by the launch's cap (an oversize line is reported here, the same
//! way for every binding), let the binding map each line into [`DriverOutput`]s,
//! send them in credit-bounded batches (flushed when the reader has nothing more
//! buffered or a batch is full), and say at the end what the lines taught.
//!
//! A line dropped over the cap may have been the turn's end (a long `result`, a
//! `turn.completed`): when the output then ends with no turn end after the dropped
//! line, the loop says so ([`super::lost_turn_end`], naming the cap and its manifest
//! key) and counts the turn as ended by the wire, so that one process per turn is no
//! clean end of its turn; the session fails the turn on that report if the line was
//! dropped in its running attempt (else the report is moot: the turn ended already),
//! instead of letting the exit pass for a crash to restart. An agent that stays alive
//! but quiet after such a line is the session's to judge too (`session/dropped.rs`).

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
    /// Turn ends seen so far.
    ends: u32,
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
        self.ends += 1;
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
    // The last dropped line's length and the turn ends seen before it.
    let mut dropped: Option<(u64, u32)> = None;
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
                dropped = Some((len, learned.ends));
            }
        }
        let flush = batch.len() >= MAX_BATCH || !reader.has_buffered();
        if flush && !sink.send(std::mem::take(&mut batch)).await {
            return OutputEnd::SessionGone;
        }
    }
    if let Some((len, ends)) = dropped
        && ends == learned.ends
    {
        let max = u64::try_from(max_line).unwrap_or(u64::MAX);
        let event = super::lost_turn_end(len, max, "ended its output");
        batch.push(DriverOutput::Event(event));
        learned.turn_ended = true;
    }
    if !batch.is_empty() {
        sink.send(batch).await;
    }
    OutputEnd::Closed {
        turn_ended: learned.turn_ended,
        resume_id: learned.resume_id,
    }
}
