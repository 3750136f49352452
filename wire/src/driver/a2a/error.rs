//! What can go wrong between the A2A wire and its peer. No variant holds a secret:
//! the auth error names the scheme and the variable, never the value.

use crate::bindings::a2a::CardError;
use crate::protocol::{CapEvent, ErrorKind};

/// An A2A request's failure.
#[derive(Debug, thiserror::Error)]
pub enum A2aError {
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    #[error("{url}: {reason}")]
    Url { url: String, reason: String },
    #[error("no agent card at {url} (nor at the other well-known path)")]
    NoCard { url: String },
    #[error(transparent)]
    Card(#[from] CardError),
    #[error("{url}: HTTP {status}: authentication failed (scheme: {scheme})")]
    Auth {
        url: String,
        status: u16,
        scheme: String,
    },
    #[error("{url}: HTTP {status}: a redirect to another host is not followed")]
    Redirect { url: String, status: u16 },
    #[error("{url}: HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url}: the body exceeds {max} bytes")]
    TooLarge { url: String, max: usize },
    #[error("{url}: not JSON: {reason}")]
    Json { url: String, reason: String },
    #[error("no response within {after_ms} ms (first-byte timeout, [x-a2a] first_byte_timeout_ms)")]
    FirstByte { after_ms: u64 },
    #[error("the connection failed: {0}")]
    Transport(String),
}

impl A2aError {
    /// A transport error, said without its URL (whose query could hold a key).
    pub(crate) fn transport(e: reqwest::Error) -> A2aError {
        A2aError::Transport(e.without_url().to_string())
    }

    /// Whether the peer is unreachable (a connection failure, no answer): the death of
    /// the connection, not a refusal.
    pub(crate) fn is_unreachable(&self) -> bool {
        matches!(self, A2aError::Transport(_) | A2aError::FirstByte { .. })
    }

    /// The `cap.error` reporting this failure to the session.
    pub(crate) fn event(&self) -> CapEvent {
        let kind = match self {
            A2aError::Auth { .. } => ErrorKind::AuthError,
            A2aError::TooLarge { .. } | A2aError::Json { .. } => ErrorKind::ParseFailed,
            _ => ErrorKind::Other("a2a_error".into()),
        };
        CapEvent::error(kind, self.to_string(), self.is_unreachable())
    }
}
