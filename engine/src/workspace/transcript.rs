//! A session's transcript (coding §6.6): its full CAP event log, written as the
//! events come (a subscriber of the session, bounded like every other) and finished
//! when the session ends — its channel closes — then announced as a `cap.artifact`.
//!
//! The file is one JSON document, `{"events":[…],"session_id":…,"agent":…,
//! "model":…,"started_at":…,"ended_at":…}`: events stream in first, so memory stays
//! flat however long the session runs. Consecutive text chunks of one message are one
//! event (their text joined, at most [`TEXT_RUN_MAX`] bytes each), so the file grows
//! with the text, not with how finely the agent streamed it. The text copied is
//! bounded by the store ([`ArtifactStore::take_text`], the run's `journal_max_mb`):
//! past it the text is cut, a [`CUT_KIND`] event marks where, and the document's
//! `text_cut_bytes` says how much. A write that fails is reported to the run as a
//! [`DiskFault`] (the run fails with it).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::artifacts::{ArtifactStore, artifact_event, sanitize};
use super::diff::INLINE_MAX;
use crate::fault::{DiskFault, FaultSink, report};
use crate::protocol::coding::CodingArtifact;
use crate::protocol::{CapEvent, TextChunk};
use capfleet_wire::clock::{now_ms, rfc3339_ms};
use capfleet_wire::events::{EventBody, Published, Publisher, SUBSCRIBER_CAPACITY};

/// The transcript's file name in the session's artifact directory.
pub(crate) const TRANSCRIPT_FILE: &str = "transcript.json";
/// A joined text event of the transcript holds at most this many bytes.
pub(crate) const TEXT_RUN_MAX: usize = 1 << 20;
/// The `kind` of the event marking where a transcript's text was first cut.
pub(crate) const CUT_KIND: &str = "capfleet.transcript_cut";

/// Who the transcript is of.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub session: String,
    pub urn: String,
    /// The manifest's agent name.
    pub agent: String,
    pub model: Option<String>,
}

/// Start writing `subject`'s transcript; returns the sender to subscribe to the
/// session. `None` when its file cannot be created (reported to `faults`).
pub(crate) fn spawn(
    subject: Subject,
    store: &Arc<ArtifactStore>,
    mut publisher: Publisher,
    faults: FaultSink,
) -> Option<mpsc::Sender<Published>> {
    let path = store
        .dir()
        .join(sanitize(&subject.session))
        .join(TRANSCRIPT_FILE);
    let created = store
        .session_dir(&subject.session)
        .and_then(|_| std::fs::File::create(&path));
    let file = match created {
        Ok(f) => f,
        Err(e) => {
            fail(
                &faults,
                &path,
                e,
                "nothing (the journal has the session's events)",
            );
            return None;
        }
    };
    let (tx, mut rx) = mpsc::channel(SUBSCRIBER_CAPACITY);
    let store = store.clone();
    tokio::spawn(async move {
        match write(file, &mut rx, &subject, &store).await {
            Ok(size) => announce(&subject, path, size, &mut publisher).await,
            Err(e) => {
                let kept = "a partial transcript (the journal has the session's events)";
                fail(&faults, &path, e, kept);
                // The session publishes on: keep reading so it never waits on us.
                while rx.recv().await.is_some() {}
            }
        }
    });
    Some(tx)
}

/// Report a failed write of the transcript at `path`.
fn fail(faults: &FaultSink, path: &std::path::Path, e: std::io::Error, kept: &str) {
    let fault = DiskFault {
        what: "transcript",
        path: path.to_owned(),
        error: Arc::new(e),
        kept: kept.to_owned(),
    };
    report(Some(faults), fault);
}

/// Whether chunk `next` continues the text run `run` (one message, within the cap).
fn joins(run: &TextChunk, next: &TextChunk) -> bool {
    run.message_id == next.message_id
        && run.channel == next.channel
        && run.meta == next.meta
        && run.extra == next.extra
        && run.text.len() + next.text.len() <= TEXT_RUN_MAX
}

/// Append `event` to the document's event list.
fn append(
    out: &mut impl Write,
    first: &mut bool,
    event: &impl serde::Serialize,
) -> std::io::Result<()> {
    if !std::mem::take(first) {
        out.write_all(b",")?;
    }
    serde_json::to_writer(out, event).map_err(std::io::Error::from)
}

async fn write(
    file: std::fs::File,
    rx: &mut mpsc::Receiver<Published>,
    subject: &Subject,
    store: &ArtifactStore,
) -> std::io::Result<u64> {
    let mut out = std::io::BufWriter::with_capacity(64 << 10, file);
    out.write_all(b"{\"events\":[")?;
    let mut first = true;
    let mut started = None;
    let mut session_id = None;
    let mut text: Option<TextChunk> = None;
    let mut cut = 0u64;
    while let Some(e) = rx.recv().await {
        started.get_or_insert(e.ts_ms);
        let EventBody::Cap { event } = &e.body else {
            continue;
        };
        if let CapEvent::TextChunk(t) = event {
            if cut > 0 || !store.take_text(t.text.len() as u64) {
                if cut == 0 {
                    if let Some(run) = text.take() {
                        append(&mut out, &mut first, &CapEvent::TextChunk(run))?;
                    }
                    let limit_mb = store.text_limit() >> 20;
                    let marker = json!({ "kind": CUT_KIND, "message": format!(
                        "the run's transcripts reached their limit (journal_max_mb = {limit_mb}): \
                         text from here on is not copied (text_cut_bytes says how much)") });
                    append(&mut out, &mut first, &marker)?;
                    tracing::warn!(session = %subject.session, limit_mb, "transcript text cut");
                }
                cut += t.text.len() as u64;
                continue;
            }
            match &mut text {
                Some(run) if joins(run, t) => run.text.push_str(&t.text),
                _ => {
                    if let Some(run) = text.replace(t.clone()) {
                        append(&mut out, &mut first, &CapEvent::TextChunk(run))?;
                    }
                }
            }
            continue;
        }
        if let Some(run) = text.take() {
            append(&mut out, &mut first, &CapEvent::TextChunk(run))?;
        }
        if let CapEvent::SessionReady(r) = event
            && let Some(id) = r.session_id.get()
        {
            session_id = Some(id.clone());
        }
        append(&mut out, &mut first, event)?;
    }
    if let Some(run) = text.take() {
        append(&mut out, &mut first, &CapEvent::TextChunk(run))?;
    }
    let tail = json!({
        "session_id": session_id.unwrap_or_else(|| subject.urn.clone()),
        "agent": subject.agent,
        "model": subject.model,
        "started_at": rfc3339_ms(started.unwrap_or_else(now_ms)),
        "ended_at": rfc3339_ms(now_ms()),
        "text_cut_bytes": cut,
    });
    let tail = tail.to_string();
    // `{…}` without its opening brace continues the document.
    out.write_all(b"],")?;
    out.write_all(&tail.as_bytes()[1..])?;
    out.flush()?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_data()?;
    Ok(file.metadata()?.len())
}

async fn announce(subject: &Subject, path: PathBuf, size: u64, publisher: &mut Publisher) {
    let inline = if size <= INLINE_MAX as u64 {
        std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    } else {
        None
    };
    let event = artifact_event(
        &format!("transcript-{}", subject.session),
        CodingArtifact::Transcript.mime(),
        &format!("{}.transcript.json", subject.session),
        &path,
        size,
        inline,
        &subject.urn,
    );
    publisher.publish(None, EventBody::Cap { event }).await;
}
