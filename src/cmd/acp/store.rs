//! What `session/load` needs of a session once the process that ran it is gone: one
//! JSON file per session under the state dir (`<dir>/<session id>.json`), written
//! whole after every turn (to a temporary file, synced, then renamed: a crash leaves
//! the old record or the new one, never half of one). It holds the agent, the working
//! directory, the inner agent's own conversation id (its native resume) and the
//! conversation's text, bounded to the last [`HISTORY_MAX`] bytes, which a load
//! replays as `session/update`s.

use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Text bytes of the conversation a record keeps (older messages are dropped first).
pub(super) const HISTORY_MAX: usize = 256 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Role {
    User,
    Agent,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Message {
    pub role: Role,
    pub text: String,
}

/// One session, as a later `session/load` needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Record {
    pub session_id: String,
    /// The agent, as `--agent` named it.
    pub agent: String,
    pub cwd: PathBuf,
    /// The inner agent's conversation id, once it reported one.
    pub resume_id: Option<String>,
    pub history: Vec<Message>,
}

impl Record {
    /// A fresh session's record: no conversation yet.
    pub(super) fn new(session_id: String, agent: String, cwd: PathBuf) -> Self {
        Record {
            session_id,
            agent,
            cwd,
            resume_id: None,
            history: Vec::new(),
        }
    }

    /// Add a message, dropping the oldest past [`HISTORY_MAX`] bytes.
    pub(super) fn push(&mut self, role: Role, text: String) {
        if text.is_empty() {
            return;
        }
        self.history.push(Message { role, text });
        let mut total: usize = self.history.iter().map(|m| m.text.len()).sum();
        while total > HISTORY_MAX && self.history.len() > 1 {
            total -= self.history.remove(0).text.len();
        }
    }
}

/// Why a record cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub(super) enum StoreError {
    #[error("session id {0:?} is not one this agent gives (letters, digits, '-' and '_' only)")]
    BadId(String),
    #[error("no session {id:?} under {dir} (it was never created here, or its record was removed)")]
    Unknown { id: String, dir: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not a session record: {source}")]
    Corrupt {
        path: String,
        source: serde_json::Error,
    },
}

/// The state dir.
#[derive(Debug, Clone)]
pub(super) struct Store {
    dir: PathBuf,
}

impl Store {
    pub(super) fn new(dir: PathBuf) -> Self {
        Store { dir }
    }

    fn path(&self, id: &str) -> Result<PathBuf, StoreError> {
        let ok = !id.is_empty()
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            return Err(StoreError::BadId(id.to_owned()));
        }
        Ok(self.dir.join(format!("{id}.json")))
    }

    pub(super) fn load(&self, id: &str) -> Result<Record, StoreError> {
        let path = self.path(id)?;
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::Unknown {
                    id: id.to_owned(),
                    dir: self.dir.display().to_string(),
                });
            }
            Err(source) => {
                return Err(StoreError::Io {
                    path: path.display().to_string(),
                    source,
                });
            }
        };
        serde_json::from_slice(&bytes).map_err(|source| StoreError::Corrupt {
            path: path.display().to_string(),
            source,
        })
    }

    /// Write `record` whole (tmp, fsync, rename).
    pub(super) fn save(&self, record: &Record) -> Result<(), StoreError> {
        let path = self.path(&record.session_id)?;
        let io = |source| StoreError::Io {
            path: path.display().to_string(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec(record).expect("a record serializes");
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(&bytes).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> Record {
        Record {
            session_id: id.into(),
            agent: "sim".into(),
            cwd: "/tmp".into(),
            resume_id: None,
            history: Vec::new(),
        }
    }

    #[test]
    fn a_record_round_trips_and_ids_cannot_leave_the_dir() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::new(dir.path().join("acp"));
        let mut r = record("capfleet-acp-1");
        r.push(Role::User, "hi".into());
        r.push(Role::Agent, "hello".into());
        store.save(&r).expect("saved");
        assert_eq!(store.load("capfleet-acp-1").expect("loaded"), r);
        assert!(matches!(
            store.load("../etc/passwd"),
            Err(StoreError::BadId(_))
        ));
        assert!(matches!(
            store.load("nope"),
            Err(StoreError::Unknown { .. })
        ));
        std::fs::write(dir.path().join("acp/bad.json"), "{").expect("write");
        assert!(matches!(store.load("bad"), Err(StoreError::Corrupt { .. })));
    }

    #[test]
    fn history_keeps_the_newest_bytes() {
        let mut r = record("a");
        for i in 0..10 {
            r.push(Role::Agent, format!("{i}{}", "x".repeat(HISTORY_MAX / 4)));
        }
        let total: usize = r.history.iter().map(|m| m.text.len()).sum();
        assert!(total <= HISTORY_MAX, "{total}");
        assert!(r.history.last().expect("kept").text.starts_with('9'));
    }
}
