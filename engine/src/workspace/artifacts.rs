//! Where a run's artifacts live (`.capfleet/runs/<run-id>/artifacts/<session>/`) and
//! how they travel as `cap.artifact` events (coding §6): stored as files always,
//! inline in the event when at most [`INLINE_MAX`] bytes, else by `file://` URI.
//! Artifacts an agent emits itself are stored the same way. A write that fails is
//! reported to the run as a [`DiskFault`] (the run fails with it), besides the error
//! its caller gets. The text the run's transcripts copy is bounded, all sessions
//! together, by the journal's limit ([`ArtifactStore::limit_text_to`], fleet.toml's
//! `journal_max_mb`): past it a transcript cuts its text and says so.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::diff::INLINE_MAX;
use crate::fault::{DiskFault, FaultSink, report};
use crate::protocol::{Artifact, CapEvent, HasMeta, Nullable};

/// The artifacts directory's name inside a run directory.
pub const ARTIFACTS_DIR: &str = "artifacts";
/// `_meta` key naming the session an orchestrator-made artifact belongs to.
pub(crate) const META_SESSION: &str = "capfleet.session";

/// A run's artifact directory.
#[derive(Debug)]
pub struct ArtifactStore {
    dir: PathBuf,
    /// Numbers agent-emitted artifact files (ids may repeat).
    seq: AtomicU64,
    /// Where a failed write is reported (the run's faults).
    faults: OnceLock<FaultSink>,
    /// Transcript text the run may still copy, and what it copied.
    text_limit: AtomicU64,
    text_used: AtomicU64,
}

impl ArtifactStore {
    /// The store of the run at `run_dir`.
    pub fn new(run_dir: &Path) -> ArtifactStore {
        ArtifactStore {
            dir: run_dir.join(ARTIFACTS_DIR),
            seq: AtomicU64::new(0),
            faults: OnceLock::new(),
            text_limit: AtomicU64::new(capfleet_wire::events::JOURNAL_MAX_BYTES),
            text_used: AtomicU64::new(0),
        }
    }

    /// Bound the text the run's transcripts copy to `bytes`, all sessions together.
    pub fn limit_text_to(&self, bytes: u64) {
        self.text_limit.store(bytes, Ordering::Relaxed);
    }

    /// The bound of [`ArtifactStore::limit_text_to`].
    pub fn text_limit(&self) -> u64 {
        self.text_limit.load(Ordering::Relaxed)
    }

    /// Whether `bytes` more text fit under the bound (then they are counted).
    pub fn take_text(&self, bytes: u64) -> bool {
        let limit = self.text_limit();
        self.text_used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                (used + bytes <= limit).then_some(used + bytes)
            })
            .is_ok()
    }

    /// Report failed writes to `faults` from now on (set once, by the run).
    pub fn report_faults_to(&self, faults: FaultSink) {
        let _already = self.faults.set(faults);
    }

    /// Where this store reports a failed write, if anywhere.
    pub fn faults(&self) -> Option<&FaultSink> {
        self.faults.get()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A session's directory (created when missing).
    pub fn session_dir(&self, session: &str) -> std::io::Result<PathBuf> {
        let dir = self.dir.join(sanitize(session));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Write `bytes` as `file` in `session`'s directory; a failure is also reported
    /// to the run.
    pub fn write(&self, session: &str, file: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        let path = self.dir.join(sanitize(session)).join(sanitize(file));
        let written = self
            .session_dir(session)
            .and_then(|_| std::fs::write(&path, bytes));
        if let Err(e) = written {
            let kept = std::io::Error::new(e.kind(), e.to_string());
            report(
                self.faults(),
                DiskFault {
                    what: "artifact",
                    path: path.clone(),
                    error: std::sync::Arc::new(e),
                    kept: "the artifacts written before it".to_owned(),
                },
            );
            return Err(kept);
        }
        Ok(path)
    }

    /// Store an artifact an agent emitted: its inline content goes to a file; content
    /// over [`INLINE_MAX`] leaves the event (the URI stays).
    pub fn keep(&self, session: &str, a: &mut Artifact) -> std::io::Result<()> {
        let Some(content) = a.content.get() else {
            return Ok(());
        };
        let bytes = match content {
            Value::String(s) => s.clone().into_bytes(),
            other => serde_json::to_vec_pretty(other)?,
        };
        let n = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let name = a.name.get().map_or("artifact", String::as_str);
        let file = format!("{n:04}-{}-{name}", a.artifact_id);
        let path = self.write(session, &file, &bytes)?;
        a.uri = Nullable::Value(file_uri(&path));
        a.size = Nullable::Value(bytes.len() as u64);
        if bytes.len() > INLINE_MAX {
            a.content = Nullable::Absent;
        }
        Ok(())
    }
}

/// A `cap.artifact` for a stored file: `inline` is the content when it fits.
pub(crate) fn artifact_event(
    id: &str,
    mime: &str,
    name: &str,
    path: &Path,
    size: u64,
    inline: Option<Value>,
    session_urn: &str,
) -> CapEvent {
    let mut event = CapEvent::Artifact(Artifact {
        artifact_id: id.to_owned(),
        mime_type: mime.to_owned(),
        name: Nullable::Value(name.to_owned()),
        size: Nullable::Value(size),
        uri: Nullable::Value(file_uri(path)),
        content: inline.into(),
        ..Default::default()
    });
    event.set_meta(META_SESSION, Value::String(session_urn.to_owned()));
    event
}

/// A file name without path separators or leading dots.
pub fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(120)
        .collect();
    let s = s.trim_start_matches('.');
    if s.is_empty() {
        "artifact".to_owned()
    } else {
        s.to_owned()
    }
}

/// `file://` + the absolute path, percent-encoding what a URI path cannot hold.
pub(crate) fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_uris() {
        assert_eq!(sanitize("../../etc/passwd"), "_.._etc_passwd");
        assert_eq!(sanitize("src/protocol.rs.patch"), "src_protocol.rs.patch");
        assert_eq!(sanitize("..."), "artifact");
        assert_eq!(
            file_uri(Path::new("/tmp/a b/ü")),
            "file:///tmp/a%20b/%C3%BC"
        );
    }

    #[test]
    fn agent_artifacts_are_stored_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let store = ArtifactStore::new(dir.path());
        let mut small = Artifact {
            artifact_id: "a/1".into(),
            mime_type: "text/plain".into(),
            name: Nullable::Value("notes.txt".into()),
            content: Nullable::Value(Value::String("hello".into())),
            ..Default::default()
        };
        store.keep("s", &mut small).unwrap();
        assert_eq!(small.size.get(), Some(&5));
        assert!(small.content.get().is_some());
        let uri = small.uri.get().unwrap().clone();
        let path = uri.strip_prefix("file://").unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), "hello");
        assert!(path.ends_with("0001-a_1-notes.txt"), "{path}");

        let mut big = Artifact {
            artifact_id: "b".into(),
            mime_type: "text/plain".into(),
            content: Nullable::Value(Value::String("x".repeat(INLINE_MAX + 1))),
            ..Default::default()
        };
        store.keep("s", &mut big).unwrap();
        assert!(big.content.is_absent());
        assert_eq!(big.size.get(), Some(&(INLINE_MAX as u64 + 1)));
    }
}
