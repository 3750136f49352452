//! The counters tap (a [`crate::tap`]): counts what the fleet does — events by kind,
//! sessions by state, turns, restarts — for the run's report and status views.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::tap::{Tap, TapHandler, TapMsg};
use capfleet_wire::events::{EventBody, SessionEvent, SessionState};

/// The telemetry actor.
pub(crate) type Telemetry = Tap<Counters>;
/// Its messages.
pub type TelemetryMsg = TapMsg<Counters>;

/// Fleet counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    /// Events by kind (`cap.text_chunk`, …, and the session kinds `state`, `restart`, …).
    pub events: BTreeMap<String, u64>,
    /// The last state of every session.
    pub states: HashMap<Arc<str>, SessionState>,
    pub turns: u64,
    pub restarts: u64,
}

impl Counters {
    /// Sessions currently in `state`.
    pub fn sessions_in(&self, state: SessionState) -> usize {
        self.states.values().filter(|s| **s == state).count()
    }
}

impl TapHandler for Counters {
    type Snapshot = Counters;

    fn on_event(&mut self, event: &SessionEvent) {
        match &event.body {
            EventBody::State { to, .. } => {
                self.states.insert(event.urn.clone(), *to);
            }
            EventBody::TurnEnded { .. } => self.turns += 1,
            EventBody::Restart { .. } => self.restarts += 1,
            _ => {}
        }
        let kind = event_kind(&event.body);
        match self.events.get_mut(kind) {
            Some(n) => *n += 1,
            None => {
                self.events.insert(kind.to_owned(), 1);
            }
        }
    }

    fn snapshot(&self) -> Counters {
        self.clone()
    }
}

/// An event's kind: the CAP wire name (`cap.text_chunk`, …) or the session kind
/// (`state`, `restart`, …).
pub(crate) fn event_kind(body: &EventBody) -> &'static str {
    match body {
        EventBody::Cap { event } => event.kind(),
        EventBody::State { .. } => "state",
        EventBody::TurnStarted { .. } => "turn_started",
        EventBody::TurnEnded { .. } => "turn_ended",
        EventBody::Restart { .. } => "restart",
        EventBody::Paused { .. } => "paused",
        EventBody::CancelRequested { .. } => "cancel_requested",
        EventBody::Failed { .. } => "failed",
        EventBody::Audit { .. } => "audit",
        EventBody::ResumeId { .. } => "resume_id",
        EventBody::Routed { .. } => "routed",
        EventBody::Steered { .. } => "steered",
        EventBody::Delivered { .. } => "delivered",
        EventBody::Join { .. } => "join",
        EventBody::Session { .. } => "session",
        EventBody::Worktree { .. } => "worktree",
        EventBody::CommitStarted { .. } => "commit_started",
        EventBody::Committed { .. } => "committed",
        EventBody::Collected { .. } => "collected",
        EventBody::Refused { .. } => "refused",
        EventBody::RouteFailed { .. } => "route_failed",
        EventBody::RaceWon { .. } => "race_won",
        EventBody::PlanEntry { .. } => "plan_entry",
        EventBody::BudgetExceeded { .. } => "budget_exceeded",
        EventBody::Stopping { .. } => "stopping",
        EventBody::Chaos { .. } => "chaos",
        EventBody::Resumed { .. } => "resumed",
        EventBody::McpCall { .. } => "mcp_call",
        EventBody::RunEnded { .. } => "run_ended",
    }
}
