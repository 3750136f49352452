//! Tool calls made on a run from outside it (an MCP client of `capfleet mcp` or of
//! `serve`'s `/mcp`), journaled as `mcp_call` records on the fleet's `…/mcp` stream,
//! in the run's journal and to its watchers like every other record.
//!
//! The caller gets a [`CallLog`] (through [`RunSpec::calls`](super::RunSpec::calls)),
//! not the stream's publisher: a publisher holds the journal's sender, and the journal
//! finishes only once every sender is gone, so a client's handle must not outlive the
//! run's. The log feeds a task of the run, ended with it; a record never waits on the
//! caller's path (the journal batches and syncs it with the rest, every 100 ms), and a
//! full log drops the record and says so rather than slowing the client.

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub use capfleet_wire::events::MCP_URN_SEGMENT;
use capfleet_wire::events::{EventBody, Published, Publisher, urn};

/// Records waiting for the journal's stream, at most.
const CAPACITY: usize = 64;

/// One call on the run, as journaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutsideCall {
    /// Who called: a token's name, or the local user.
    pub by: String,
    pub tool: String,
    /// The size of its arguments (never the arguments themselves).
    pub args_bytes: usize,
    /// Why it failed (its refusal's code), if it did.
    pub error: Option<String>,
}

/// Where a live run's outside calls are journaled. Clones log into the same stream.
#[derive(Debug, Clone)]
pub struct CallLog(mpsc::Sender<OutsideCall>);

impl CallLog {
    /// Journal `call` (never waits); false when the run has ended or the log is full.
    pub fn record(&self, call: OutsideCall) -> bool {
        self.0.try_send(call).is_ok()
    }
}

/// The run's side of the log: ends (and drops the stream's publisher) when dropped.
pub(crate) struct CallStream(JoinHandle<()>);

impl Drop for CallStream {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The `…/mcp` stream of `fleet` into `sinks` (after `after` records, for a resumed
/// run), and the log that feeds it.
pub(crate) fn start(
    fleet: &str,
    sinks: Vec<mpsc::Sender<Published>>,
    after: u64,
) -> (CallLog, CallStream) {
    let (tx, mut rx) = mpsc::channel::<OutsideCall>(CAPACITY);
    let mut publisher = Publisher::continuing(urn(fleet, MCP_URN_SEGMENT), sinks, after);
    let task = tokio::spawn(async move {
        while let Some(c) = rx.recv().await {
            let body = EventBody::McpCall {
                by: c.by,
                tool: c.tool,
                args_bytes: c.args_bytes,
                ok: c.error.is_none(),
                error: c.error,
            };
            publisher.publish(None, body).await;
        }
    });
    (CallLog(tx), CallStream(task))
}
