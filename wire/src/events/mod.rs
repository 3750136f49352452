//! The run's bus, below every actor: the one event type every producer publishes (a
//! session, the router, the workspace collection), the one [`Publisher`] that numbers
//! each stream, the streams' URNs, the requests a session hands whoever answers them
//! ([`requests`]) and the trace context that goes with the work ([`trace`]).
//!
//! Producers and consumers meet here and never name each other: sessions, the router
//! and the workspace publish; the journal, the budget, the taps, telemetry and the
//! CLI's views read [`Published`] events from bounded channels.

mod durable;
mod event;
mod publisher;
pub(crate) mod requests;
mod state;
pub mod trace;
mod usage;

pub use requests::{
    Answer, AnswerTo, Decide, Decider, MAX_CONTEXT, META_RESEARCH, OpenRequest, RULE_NO_HUMAN,
    fail_safe, fail_safe_by,
};

use std::sync::Arc;

pub use durable::{Durable, JOURNAL_MAX_BYTES};
pub use event::{
    EventBody, Prompt, RouteVia, RunOutcome, SessionEvent, Signal, TextFrom, TurnOutcome,
};
pub use publisher::{MCP_URN_SEGMENT, Publisher, ROUTER_URN_SEGMENT, urn};
pub use state::SessionState;
pub use usage::UsageTotals;

/// Capacity of each subscriber channel.
pub const SUBSCRIBER_CAPACITY: usize = 1024;

/// A published event, shared by every subscriber.
pub type Published = Arc<SessionEvent>;
