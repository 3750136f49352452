//! The gate between a session's events and its questions (spec §11.3's
//! `input-required`): a session publishes its request's event, then asks; the
//! question travels another road (the answerer's human channel) and may overtake
//! the events before it, and a stream ends at `input-required`. So a question is
//! asked once its request's event has reached the task (or after [`GATE_WAIT`]).

use capfleet_engine::answerer::HumanQuestion;
use capfleet_engine::protocol::CapEvent;

/// How long a question waits for its request's event before it is asked anyway.
const GATE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// Request ids remembered, at most.
const GATE_SEEN: usize = 256;

/// Keeps a question until the events published before it have reached the task: a
/// session publishes its request's event, then asks; the question travels another
/// road (the answerer's human channel) and may overtake the events before it, and
/// a stream ends at `input-required`. So a question is asked once its request's
/// event has been forwarded (or after [`GATE_WAIT`]).
#[derive(Default)]
pub(super) struct Gate {
    seen: std::collections::VecDeque<String>,
    held: Vec<(HumanQuestion, std::time::Instant)>,
}

impl Gate {
    /// An event forwarded: the questions it lets through.
    pub(super) fn on_event(&mut self, event: &CapEvent) -> Vec<HumanQuestion> {
        let id = match event {
            CapEvent::PermissionRequest(p) => &p.req_id,
            CapEvent::AskUser(a) => &a.ask_id,
            _ => return Vec::new(),
        };
        if let Some(i) = self.held.iter().position(|(q, _)| q.request.id() == id) {
            return vec![self.held.remove(i).0];
        }
        if self.seen.len() >= GATE_SEEN {
            self.seen.pop_front();
        }
        self.seen.push_back(id.clone());
        Vec::new()
    }

    /// A question: asked now if its event was forwarded, else held.
    pub(super) fn on_question(&mut self, q: HumanQuestion) -> Option<HumanQuestion> {
        if let Some(i) = self.seen.iter().position(|id| id == q.request.id()) {
            self.seen.remove(i);
            return Some(q);
        }
        self.held.push((q, std::time::Instant::now()));
        None
    }

    /// When the oldest held question is due, if any.
    pub(super) fn due(&self) -> Option<tokio::time::Instant> {
        self.held
            .iter()
            .map(|(_, at)| tokio::time::Instant::from_std(*at + GATE_WAIT))
            .min()
    }

    /// The held questions that waited long enough.
    pub(super) fn overdue(&mut self) -> Vec<HumanQuestion> {
        let (due, held): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(_, at)| at.elapsed() >= GATE_WAIT);
        self.held = held;
        due.into_iter().map(|(q, _)| q).collect()
    }

    /// Every held question (the task ends).
    pub(super) fn drain(&mut self) -> Vec<HumanQuestion> {
        self.held.drain(..).map(|(q, _)| q).collect()
    }
}
