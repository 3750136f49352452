//! The journal's writer: records into the file's buffer, text runs joined, text past
//! the limit cut, faults reported once.
//!
//! A text run is consecutive `cap.text_chunk` events of one stream, turn and message
//! (same `message_id`, channel and annotations, sequence numbers following on) within
//! one flush batch, at most [`RUN_MAX`] bytes: it is written as one record, the first
//! event's with the joined text and `"chunks": N, "last_seq": M` (a run of one chunk
//! is the event's own record, unchanged). Past the limit a run's text is counted, not
//! kept, and written as a `journal_cut` record. A turn's prompt past
//! [`Prompt::INLINE_MAX`] bytes goes to the blob store and the record names it.
//!
//! A process out of descriptors (`EMFILE`, `ENFILE`: a server flooded with sockets)
//! is a want, not a broken disk: a prompt that cannot be stored as a blob then is
//! kept inline, and a flush that cannot sync its blobs is tried again at the next
//! one (what waits for it, waits) for up to [`DESCRIPTOR_PATIENCE`]; only then is it a
//! fault. Syncing the journal itself needs no new descriptor.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;

use super::blobs::Blobs;
use super::{JournalSpec, JournalTally, fault};
use crate::fault::{self as disk, DESCRIPTOR_PATIENCE, FaultSink, out_of_descriptors};
use crate::protocol::{CapEvent, HasMeta, TextChunk};
use capfleet_wire::events::{EventBody, Prompt, Published, SessionEvent};

/// A text run is written once it holds this many bytes.
const RUN_MAX: usize = 1 << 20;

/// Consecutive chunks of one message, joined (or, past the limit, counted).
struct TextRun {
    first: Published,
    text: String,
    chunks: u64,
    last_seq: u64,
    /// Past the limit: `bytes` counted, the text not kept.
    cut: bool,
    bytes: u64,
}

impl TextRun {
    fn new(first: Published, chunk: &TextChunk, cut: bool) -> TextRun {
        let text = if cut {
            String::new()
        } else {
            chunk.text.clone()
        };
        TextRun {
            last_seq: first.seq,
            first,
            text,
            chunks: 1,
            cut,
            bytes: chunk.text.len() as u64,
        }
    }

    /// Whether `e` (a chunk) continues this run.
    fn continues(&self, e: &Published, chunk: &TextChunk, cut: bool) -> bool {
        let Some(head) = text_of(&self.first) else {
            return false;
        };
        // A chunk addressed to a session (`capfleet.message_to`) is a delivery of its
        // own: kept whole, as the router saw it, for a replay.
        self.cut == cut
            && head.message_to().is_none()
            && e.urn == self.first.urn
            && e.turn == self.first.turn
            && e.seq == self.last_seq + 1
            && chunk.message_id == head.message_id
            && chunk.channel == head.channel
            && chunk.meta == head.meta
            && chunk.extra == head.extra
    }

    fn add(&mut self, e: &Published, chunk: &TextChunk) {
        if !self.cut {
            self.text.push_str(&chunk.text);
        }
        self.bytes += chunk.text.len() as u64;
        self.chunks += 1;
        self.last_seq = e.seq;
    }
}

fn text_of(e: &Published) -> Option<&TextChunk> {
    match &e.body {
        EventBody::Cap {
            event: CapEvent::TextChunk(t),
        } => Some(t),
        _ => None,
    }
}

/// What a flush came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flushed {
    /// Everything written is synced (or the writer has failed: nothing more will be).
    Done,
    /// Out of descriptors: tried again at the next flush.
    Retry,
}

pub(super) struct Writer {
    out: std::io::BufWriter<std::fs::File>,
    /// The journal's file, for its syncs (shared, not duplicated: a sync takes no
    /// descriptor).
    sync: Arc<std::fs::File>,
    spec: JournalSpec,
    faults: Option<FaultSink>,
    blobs: Blobs,
    /// Records and bytes handed to the buffer.
    written: (u64, u64),
    tally: JournalTally,
    run: Option<TextRun>,
    dirty: bool,
    failed: bool,
    /// Since when flushes have found no descriptor free.
    wanting: Option<Instant>,
    line: Vec<u8>,
}

impl Writer {
    pub(super) fn new(
        file: std::fs::File,
        spec: JournalSpec,
        faults: Option<FaultSink>,
    ) -> std::io::Result<Writer> {
        Ok(Writer {
            sync: Arc::new(file.try_clone()?),
            out: std::io::BufWriter::with_capacity(256 << 10, file),
            blobs: Blobs::beside(&spec.path),
            spec,
            faults,
            written: (0, 0),
            tally: JournalTally::default(),
            run: None,
            dirty: false,
            failed: false,
            wanting: None,
            line: Vec::with_capacity(1024),
        })
    }

    pub(super) fn tally(&self) -> JournalTally {
        self.tally
    }

    /// Take one event: join it to the text run, or end the run and write it.
    pub(super) fn push(&mut self, e: Published) {
        self.tally.events += 1;
        if self.failed {
            self.tally.lost += 1;
            return;
        }
        if let Some(chunk) = text_of(&e) {
            let pending = self.run.as_ref().map_or(0, |r| r.text.len() as u64);
            let cut = self.written.1 + pending + chunk.text.len() as u64 > self.spec.max_bytes;
            if let Some(run) = self.run.as_mut()
                && run.continues(&e, chunk, cut)
            {
                run.add(&e, chunk);
                if run.text.len() >= RUN_MAX {
                    self.end_run();
                }
                return;
            }
            self.end_run();
            self.run = Some(TextRun::new(e.clone(), chunk, cut));
            return;
        }
        self.end_run();
        self.line.clear();
        let encoded = match self.by_reference(&e) {
            Ok(Some(stored)) => serde_json::to_writer(&mut self.line, &stored),
            Ok(None) => serde_json::to_writer(&mut self.line, &*e),
            Err(err) => return self.fail(err, 1),
        };
        if encoded.is_ok() {
            self.write_line();
        }
    }

    /// `e` with its large prompt stored as a blob and named, if it has one.
    fn by_reference(&mut self, e: &Published) -> std::io::Result<Option<SessionEvent>> {
        let EventBody::TurnStarted {
            prompt: Prompt::Text(text),
            prompt_bytes,
            attempt,
            text_from,
        } = &e.body
        else {
            return Ok(None);
        };
        if text.len() <= Prompt::INLINE_MAX {
            return Ok(None);
        }
        let reference = match self.blobs.store(text.as_bytes()) {
            Ok(r) => r,
            // No descriptor for the blob now: the prompt stays in the record.
            Err(e) if out_of_descriptors(&e) => {
                tracing::warn!(path = %self.spec.path.display(), "a large prompt kept inline: {e}");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let mut stored = (**e).clone();
        stored.body = EventBody::TurnStarted {
            prompt_bytes: *prompt_bytes,
            attempt: *attempt,
            prompt: Prompt::Stored(reference),
            text_from: text_from.clone(),
        };
        Ok(Some(stored))
    }

    /// Write the text run, if any: joined, as the event itself, or as its cut.
    fn end_run(&mut self) {
        let Some(run) = self.run.take() else {
            return;
        };
        self.line.clear();
        let encoded = if run.cut {
            self.tally.cut_bytes += run.bytes;
            let head = text_of(&run.first);
            let record = json!({
                "seq": run.first.seq,
                "urn": &*run.first.urn,
                "turn": run.first.turn,
                "ts_ms": run.first.ts_ms,
                "type": "journal_cut",
                "message_id": head.and_then(|t| t.message_id.get()),
                "cut_bytes": run.bytes,
                "chunks": run.chunks,
                "last_seq": run.last_seq,
                "reason": format!(
                    "the journal reached its limit (journal_max_mb = {}): this text is not kept",
                    self.spec.max_bytes >> 20
                ),
            });
            serde_json::to_writer(&mut self.line, &record)
        } else if run.chunks == 1 {
            serde_json::to_writer(&mut self.line, &*run.first)
        } else {
            let mut joined = (*run.first).clone();
            if let EventBody::Cap {
                event: CapEvent::TextChunk(t),
            } = &mut joined.body
            {
                t.text = run.text;
            }
            serde_json::to_writer(&mut self.line, &joined).map(|()| {
                // `{…}` gains its run's extent before the closing brace.
                self.line.pop();
                let extent = format!(",\"chunks\":{},\"last_seq\":{}}}", run.chunks, run.last_seq);
                self.line.extend_from_slice(extent.as_bytes());
            })
        };
        if encoded.is_ok() {
            self.write_line();
        }
    }

    fn write_line(&mut self) {
        self.line.push(b'\n');
        match self.out.write_all(&self.line) {
            Ok(()) => {
                self.written.0 += 1;
                self.written.1 += self.line.len() as u64;
                self.dirty = true;
            }
            Err(e) => self.fail(e, 1),
        }
    }

    /// Write out the buffer and sync; what is synced is kept.
    pub(super) async fn flush(&mut self) -> Flushed {
        self.end_run();
        if self.failed || !self.dirty {
            return Flushed::Done;
        }
        // The blobs first: a record on disk never names one that is not.
        let blobs = match self.blobs.pending_job() {
            Some(job) => tokio::task::spawn_blocking(job)
                .await
                .map_err(std::io::Error::other)
                .and_then(|r| r)
                .map(|()| self.blobs.synced()),
            None => Ok(()),
        };
        let synced = match blobs.and_then(|()| self.out.flush()) {
            Ok(()) => sync(&self.sync).await,
            Err(e) => Err(e),
        };
        match synced {
            Ok(()) => {
                self.dirty = false;
                if let Some(since) = self.wanting.take() {
                    tracing::info!(path = %self.spec.path.display(), waited_ms = since.elapsed().as_millis(), "the journal is synced again");
                }
                (self.tally.records, self.tally.bytes) = self.written;
                if let Some(replica) = &self.spec.replica {
                    replica.synced(self.tally.bytes);
                }
                Flushed::Done
            }
            Err(e) if out_of_descriptors(&e) && self.still_waiting(&e) => Flushed::Retry,
            Err(e) => {
                self.fail(e, 0);
                Flushed::Done
            }
        }
    }

    /// No descriptor for a flush: whether to try again (said once, when the wait
    /// starts), within [`DESCRIPTOR_PATIENCE`].
    fn still_waiting(&mut self, e: &std::io::Error) -> bool {
        let since = *self.wanting.get_or_insert_with(|| {
            tracing::warn!(path = %self.spec.path.display(), "the journal's sync waits for a descriptor: {e}");
            Instant::now()
        });
        since.elapsed() < DESCRIPTOR_PATIENCE
    }

    /// A write failed (`unwritten` records with it): report it once; what was not
    /// synced is lost, and so is everything after it.
    fn fail(&mut self, e: std::io::Error, unwritten: u64) {
        self.failed = true;
        self.tally.lost += self.written.0 - self.tally.records + unwritten;
        disk::report(self.faults.as_ref(), fault(&self.spec.path, e, &self.tally));
    }
}

/// `fsync` off the async threads.
async fn sync(file: &Arc<std::fs::File>) -> std::io::Result<()> {
    let handle = file.clone();
    tokio::task::spawn_blocking(move || handle.sync_data())
        .await
        .map_err(std::io::Error::other)?
}
