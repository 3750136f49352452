//! A session's transcript (coding §6.6): its full CAP event log, written as the
//! events come (a subscriber of the session, bounded like every other) and finished
//! when the session ends — its channel closes — then announced as a `cap.artifact`.
//!
//! The file is one JSON document, `{"events":[…],"session_id":…,"agent":…,
//! "model":…,"started_at":…,"ended_at":…}`: events stream in first, so memory stays
//! flat however long the session runs.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::artifacts::{ArtifactStore, artifact_event};
use super::diff::INLINE_MAX;
use crate::clock::{now_ms, rfc3339_ms};
use crate::events::{EventBody, Published, Publisher, SUBSCRIBER_CAPACITY};
use crate::protocol::CapEvent;
use crate::protocol::coding::CodingArtifact;

/// The transcript's file name in the session's artifact directory.
pub const TRANSCRIPT_FILE: &str = "transcript.json";

/// Who the transcript is of.
#[derive(Debug, Clone)]
pub struct Subject {
    pub session: String,
    pub urn: String,
    /// The manifest's agent name.
    pub agent: String,
    pub model: Option<String>,
}

/// Start writing `subject`'s transcript; returns the sender to subscribe to the
/// session. `None` when its file cannot be created (logged; the run goes on).
pub fn spawn(
    subject: Subject,
    store: &Arc<ArtifactStore>,
    mut publisher: Publisher,
) -> Option<mpsc::Sender<Published>> {
    let path = match store.session_dir(&subject.session) {
        Ok(dir) => dir.join(TRANSCRIPT_FILE),
        Err(e) => {
            tracing::error!(session = %subject.session, "cannot create the artifact directory: {e}");
            return None;
        }
    };
    let file = match std::fs::File::create(&path) {
        Ok(f) => f,
        Err(e) => {
            tracing::error!(path = %path.display(), "cannot create the transcript: {e}");
            return None;
        }
    };
    let (tx, rx) = mpsc::channel(SUBSCRIBER_CAPACITY);
    tokio::spawn(async move {
        match write(file, rx, &subject).await {
            Ok(size) => announce(&subject, path, size, &mut publisher).await,
            Err(e) => tracing::error!(session = %subject.session, "transcript: {e}"),
        }
    });
    Some(tx)
}

async fn write(
    file: std::fs::File,
    mut rx: mpsc::Receiver<Published>,
    subject: &Subject,
) -> std::io::Result<u64> {
    let mut out = std::io::BufWriter::with_capacity(64 << 10, file);
    out.write_all(b"{\"events\":[")?;
    let mut first = true;
    let mut started = None;
    let mut session_id = None;
    while let Some(e) = rx.recv().await {
        started.get_or_insert(e.ts_ms);
        let EventBody::Cap { event } = &e.body else {
            continue;
        };
        if let CapEvent::SessionReady(r) = event {
            if let Some(id) = r.session_id.get() {
                session_id = Some(id.clone());
            }
        }
        if !first {
            out.write_all(b",")?;
        }
        first = false;
        serde_json::to_writer(&mut out, event)?;
    }
    let tail = json!({
        "session_id": session_id.unwrap_or_else(|| subject.urn.clone()),
        "agent": subject.agent,
        "model": subject.model,
        "started_at": rfc3339_ms(started.unwrap_or_else(now_ms)),
        "ended_at": rfc3339_ms(now_ms()),
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
