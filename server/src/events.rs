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
//! journal's positions. A PTY session's raw terminal output (`cap.pty.raw_bytes`,
//! journaled only for a session with `raw_bytes = true`) is left out unless
//! `?include_raw=1` asks for it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, KeepAliveStream, Sse};
use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
use tokio::sync::watch;
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::{ApiPath, ApiQuery};
use super::routes::valid_id;
use super::state::{RunEntry, RunState, Server};
use capfleet_app::fleet::run_dir::JOURNAL_FILE;

/// Bytes read from the journal at a time, per subscriber.
const CHUNK: usize = 256 << 10;
/// How often a live stream looks for new records (the journal syncs every 100 ms).
const POLL: Duration = Duration::from_millis(50);

/// The kind of a raw PTY output record, as it appears in a journal line.
const RAW_KIND: &[u8] = b"\"cap.pty.raw_bytes\"";

/// A yes/no query flag.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
pub(crate) enum Flag {
    #[serde(rename = "0", alias = "false")]
    No,
    #[serde(rename = "1", alias = "true")]
    Yes,
}

/// An event's name on the stream.
#[derive(Debug, Clone, Copy, ToSchema)]
#[schema(rename_all = "snake_case")]
pub(crate) enum EventName {
    /// A journal record.
    Message,
    /// The run has ended and every record was sent: `data` is `{records, state,
    /// exit_code}`; the stream closes.
    End,
}

/// One Server-Sent Event of a run's stream (OpenAPI 3.1: the schema of each event).
#[derive(Debug, ToSchema)]
pub(crate) struct StreamEvent {
    pub event: EventName,
    /// The record's sequence: its line in `journal.jsonl` (none on `end`).
    pub id: Option<String>,
    /// The record's JSON line, byte for byte.
    #[schema(content_media_type = "application/json")]
    pub data: String,
}

impl From<StreamEvent> for Event {
    fn from(e: StreamEvent) -> Event {
        let mut event = Event::default().data(e.data);
        if let Some(id) = e.id {
            event = event.id(id);
        }
        match e.event {
            EventName::Message => event,
            EventName::End => event.event("end"),
        }
    }
}

/// `GET /v1/runs/{id}/events`'s query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct EventsQuery {
    /// Replay from the record after this one (`Last-Event-ID` wins over it).
    #[param(minimum = 0)]
    after: Option<u64>,
    /// Only this session's records (its name or URN).
    session: Option<String>,
    /// `1`: also the PTY sessions' raw output (`cap.pty.raw_bytes`).
    #[param(inline)]
    include_raw: Option<Flag>,
}

/// The run's journal as Server-Sent Events: one event per record, `id:` its
/// sequence, `data:` its JSON line; then an `end` event once the run has ended.
#[utoipa::path(get, path = "/v1/runs/{id}/events", operation_id = "stream_events", tag = "runs",
    params(
        ("id" = String, Path, description = "The run's id"),
        EventsQuery,
        ("last-event-id" = Option<String>, Header, description = "Resume after this record (a reconnecting client's last id)"),
    ),
    responses(
        (status = 200, description = "The event stream: each event one journal record, then `end`",
            content_type = "text/event-stream", body = StreamEvent),
        (status = 400, description = "A bad parameter", body = ErrorBody),
        (status = 404, description = "No such run", body = ErrorBody),
    ))]
pub(crate) async fn stream(
    State(server): State<Arc<Server>>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> Result<Sse<KeepAliveStream<BoxStream<'static, Result<Event, Infallible>>>>, ApiError> {
    let from_header = match headers.get("last-event-id") {
        Some(v) => {
            let text = v.to_str().unwrap_or("(not text)").trim();
            Some(text.parse::<u64>().map_err(|_| {
                ApiError::BadRequest(format!(
                    "Last-Event-ID `{text}`: a record's sequence number"
                ))
            })?)
        }
        None => None,
    };
    let after = from_header.or(q.after).unwrap_or(0);
    let filter = Filter {
        session: q.session,
        raw: matches!(q.include_raw, Some(Flag::Yes)),
    };
    let entry = server.get(&id);
    let path = match &entry {
        Some(e) => e.journal(),
        None => {
            let dir = server.runs_dir.join(&id);
            if valid_id(&id) && dir.is_dir() {
                dir.join(JOURNAL_FILE)
            } else if let Some((nats, replicas)) = &server.queue {
                // A run queued to NATS: its journal as JetStream has it.
                let events = super::remote::events(nats, *replicas, &id, after, filter).await?;
                return Ok(Sse::new(events).keep_alive(KeepAlive::default()));
            } else {
                return Err(ApiError::NoRun(id));
            }
        }
    };
    let tail = Tail {
        path,
        offset: 0,
        seq: 0,
        pending: Vec::new(),
        after,
        filter,
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
    Ok(Sse::new(events.boxed()).keep_alive(KeepAlive::default()))
}

/// Which records a subscriber wants.
pub(crate) struct Filter {
    /// Only this session's (its name or URN).
    session: Option<String>,
    /// Also the raw PTY output records.
    raw: bool,
}

impl Filter {
    pub(crate) fn wanted(&self, line: &[u8]) -> bool {
        if !self.raw && line.windows(RAW_KIND.len()).any(|w| w == RAW_KIND) {
            return false;
        }
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
}

/// The event of record `seq`, `line`.
pub(crate) fn message(seq: u64, line: &[u8]) -> Event {
    StreamEvent {
        event: EventName::Message,
        id: Some(seq.to_string()),
        data: String::from_utf8_lossy(line).into_owned(),
    }
    .into()
}

/// The `end` event: `records` sent, the run's `state` and `exit_code`.
pub(crate) fn end(records: u64, state: Option<&str>, exit_code: Option<u8>) -> Event {
    let data = json!({ "records": records, "state": state, "exit_code": exit_code });
    StreamEvent {
        event: EventName::End,
        id: None,
        data: data.to_string(),
    }
    .into()
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
    filter: Filter,
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
            if self.seq > self.after && self.filter.wanted(&line) {
                self.out.push_back(message(self.seq, &line));
            }
        }
        self.pending.extend_from_slice(rest);
        Ok(n)
    }

    fn end(&self) -> Event {
        let (state, exit_code) = match &self.entry {
            Some(e) => {
                let p = e.progress();
                (Some(p.state.as_str()), p.exit_code)
            }
            None => (None, None),
        };
        end(self.seq, state, exit_code)
    }
}
