//! What the reverse RPC needs from the session it serves: publishing events into
//! the session (`cap.fs.change`, `cap.user_io.show`, `cap.notify`) and asking the
//! human (`cap.ask_user`: free text for `cap.user_io.input`, a form for an ACP
//! elicitation). The binding implements it.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::protocol::CapEvent;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

pub trait Host: Send + Sync {
    /// Publish one event into the session; false when the session is gone.
    fn publish(&self, event: CapEvent) -> BoxFuture<bool>;
    /// Ask the human (`form`: a JSON Schema the answer must match; `None`: free
    /// text). `None` back: declined, withdrawn, or nobody to ask.
    fn ask(&self, prompt: String, form: Option<Value>) -> BoxFuture<Option<Value>>;
}
