//! `GET /v1/runs/{id}/events`: the run's journal as Server-Sent Events, one event per
//! record, its `id:` the record's sequence (its 1-based position in `journal.jsonl`)
//! and its data the record's JSON line, byte for byte.
//!
//! The stream reads the journal file itself: a `Last-Event-ID` (or `?after=`) skips
//! the records up to it and the rest are replayed from disk, then new ones follow as
//! the journal writer syncs them (within its flush interval), so a client that
//! reconnects with the last id it saw loses nothing and sees nothing twice. Each
//! subscriber reads at its own pace with one bounded buffer ([`CHUNK`] bytes): a slow
//! one never slows the run, holds no queue of the run's events and needs no dropping
//! (it falls behind on disk, not in memory). When the run has ended and every record
//! is sent, an `end` event (no id) says how it ended and the stream closes.
//! `?session=NAME` (or its URN) keeps that session's records only; ids stay the
//! journal's positions.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
use tokio::sync::watch;

use super::error::ApiError;
use super::routes::{query, valid_id};
use super::state::{RunEntry, RunState, Server};
use crate::fleet::run_dir::JOURNAL_FILE;

/// Bytes read from the journal at a time, per subscriber.
const CHUNK: usize = 256 << 10;
/// How often a live stream looks for new records (the journal syncs every 100 ms).
const POLL: Duration = Duration::from_millis(50);

pub(crate) async fn stream(
    State(server): State<Arc<Server>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let q = query(raw);
    let from_header = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let after = match from_header.or_else(|| q.get("after").cloned()) {
        Some(a) => a.trim().parse::<u64>().map_err(|_| {
            ApiError::BadRequest(format!("event id `{a}`: a record's sequence number"))
        })?,
        None => 0,
    };
    let entry = server.get(&id);
    let path = match &entry {
        Some(e) => e.journal(),
        None => {
            let dir = server.runs_dir.join(&id);
            if !valid_id(&id) || !dir.is_dir() {
                return Err(ApiError::NoRun(id));
            }
            dir.join(JOURNAL_FILE)
        }
    };
    let tail = Tail {
        path,
        offset: 0,
        seq: 0,
        pending: Vec::new(),
        after,
        session: q.get("session").cloned(),
        watch: entry.as_ref().map(|e| e.watch()),
        entry,
        out: VecDeque::new(),
        done: false,
    };
    let events = futures::stream::unfold(tail, |mut t| async move {
        loop {
            if let Some(e) = t.out.pop_front() {
                return Some((Ok(e), t));
            }
            if t.done {
                return None;
            }
            t.next().await;
        }
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

/// One subscriber's place in the journal.
struct Tail {
    path: PathBuf,
    /// Bytes of the journal consumed (complete records, and `pending`).
    offset: u64,
    /// Complete records read.
    seq: u64,
    /// A record not ended yet.
    pending: Vec<u8>,
    after: u64,
    session: Option<String>,
    /// The run's state (none: a run of the data dir this server did not start, sent
    /// as it is on disk).
    watch: Option<watch::Receiver<RunState>>,
    entry: Option<Arc<RunEntry>>,
    out: VecDeque<Event>,
    done: bool,
}

impl Tail {
    /// Queue what the journal has next; at its end, the `end` event once the run has
    /// ended, else wait for more.
    async fn next(&mut self) {
        // Looked at before reading: a run seen ended has its whole journal on disk.
        let ended = self.watch.as_ref().is_none_or(|w| w.borrow().ended());
        let read = match self.read().await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(journal = %self.path.display(), "reading for an event stream: {e}");
                0
            }
        };
        if read > 0 {
            return;
        }
        if ended {
            self.out.push_back(self.end());
            self.done = true;
            return;
        }
        match &mut self.watch {
            Some(w) => {
                let _changed_or_timeout = tokio::time::timeout(POLL, w.changed()).await;
            }
            None => tokio::time::sleep(POLL).await,
        }
    }

    /// Read up to [`CHUNK`] bytes of the journal, queueing its complete records past
    /// `after` that pass the filter; the bytes read.
    async fn read(&mut self) -> std::io::Result<usize> {
        let mut file = match tokio::fs::File::open(&self.path).await {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        file.seek(std::io::SeekFrom::Start(self.offset)).await?;
        let mut buf = Vec::with_capacity(CHUNK);
        let n = (&mut file).take(CHUNK as u64).read_to_end(&mut buf).await?;
        self.offset += n as u64;
        let mut rest = &buf[..];
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            self.pending.extend_from_slice(&rest[..i]);
            rest = &rest[i + 1..];
            let line = std::mem::take(&mut self.pending);
            self.seq += 1;
            if self.seq > self.after && self.wanted(&line) {
                let data = String::from_utf8_lossy(&line);
                self.out
                    .push_back(Event::default().id(self.seq.to_string()).data(data));
            }
        }
        self.pending.extend_from_slice(rest);
        Ok(n)
    }

    fn wanted(&self, line: &[u8]) -> bool {
        let Some(want) = &self.session else {
            return true;
        };
        let Ok(rec) = serde_json::from_slice::<Value>(line) else {
            return false;
        };
        rec["urn"]
            .as_str()
            .is_some_and(|urn| urn == want || urn.rsplit('/').next() == Some(want.as_str()))
    }

    fn end(&self) -> Event {
        let (state, exit_code) = match &self.entry {
            Some(e) => {
                let p = e.progress();
                (Some(p.state.as_str()), p.exit_code)
            }
            None => (None, None),
        };
        let data = json!({ "records": self.seq, "state": state, "exit_code": exit_code });
        Event::default().event("end").data(data.to_string())
    }
}
