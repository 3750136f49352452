//! What the reverse RPC needs from the session it serves: publishing events into
//! the session (`cap.fs.change`, `cap.user_io.show`, `cap.notify`) and asking the
//! human for free text (`cap.user_io.input`). The binding implements it.

use std::future::Future;
use std::pin::Pin;

use crate::protocol::CapEvent;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

pub trait Host: Send + Sync {
    /// Publish one event into the session; false when the session is gone.
    fn publish(&self, event: CapEvent) -> BoxFuture<bool>;
    /// Ask the human for a line of text; `None`: declined or nobody to ask.
    fn input(&self, prompt: String) -> BoxFuture<Option<String>>;
}
