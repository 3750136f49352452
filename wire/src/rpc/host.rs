//! What the reverse RPC needs from the session it serves: publishing events into
//! the session (`cap.fs.change`, `cap.user_io.show`, `cap.notify`), recording what
//! it did on the agent's behalf (the audit) and asking the human (`cap.ask_user`: free text for `cap.user_io.input`, a form for an ACP
//! elicitation). The binding implements it.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use super::Audited;
use crate::protocol::CapEvent;

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// How an ask ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Answered with this value.
    Answered(Value),
    /// Declined: by the human, or fail-safe when nobody can answer.
    Declined,
    /// Withdrawn before anyone answered: the turn was cancelled, the agent died or
    /// the session stopped.
    Withdrawn,
}

pub trait Host: Send + Sync {
    /// Publish one event into the session; false when the session is gone.
    fn publish(&self, event: CapEvent) -> BoxFuture<bool>;
    /// Record an action of the reverse RPC in the session's stream (and so its
    /// journal); false when the session is gone.
    fn audit(&self, record: Audited) -> BoxFuture<bool>;
    /// Ask the human (`form`: a JSON Schema the answer must match; `None`: free
    /// text).
    fn ask(&self, prompt: String, form: Option<Value>) -> BoxFuture<Reply>;
}
