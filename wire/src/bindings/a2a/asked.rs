//! The questions an A2A peer raised on one connection, so that none is raised twice:
//! a permission request by its `req_id`, an ask by its `ask_id`, and the message
//! that asked (a plain agent's `input-required` has no id but its message's), each
//! within its task.
//!
//! A peer may say a question again as it stands: an answer's stream may open with
//! the Task itself (A2A lets a stream's first event be the Task; an a2a-sdk executor
//! that enqueues the current Task when a message continues it sends it still
//! `input-required`, the same question in its status message), a resubscription
//! opens with the Task, a task read whole (`GetTask`) carries its history. Raised
//! again, the question would be answered again, the peer would refuse (-32004 "Task
//! is not waiting for input") and the turn would fail. Every one of these paths maps
//! its messages through the frame mapper, which asks here; a question said again is
//! dropped and counted ([`Asked::repeats`]).
//!
//! The ledger lives as long as the connection: a new one (a restart) cannot know
//! whether its answer reached the peer, so a question the task still waits on is
//! raised again then.

use std::collections::{HashSet, VecDeque};

use crate::protocol::CapEvent;

/// How many questions are remembered, the oldest forgotten first: far more than a
/// task asks before it moves on.
const KEEP: usize = 512;

/// The questions raised so far.
#[derive(Debug, Default)]
pub(super) struct Asked {
    order: VecDeque<String>,
    keys: HashSet<String>,
    repeats: u64,
}

/// The key of a question: what it is (`req`, `ask`, `msg`) and its id, in its task.
fn key(task: &str, kind: &str, id: &str) -> String {
    format!("{task}\u{1f}{kind}\u{1f}{id}")
}

/// The question an event raises (its kind and id), if it raises one.
pub(super) fn question(event: &CapEvent) -> Option<(&'static str, &str)> {
    match event {
        CapEvent::PermissionRequest(p) => Some(("req", p.req_id.as_str())),
        CapEvent::AskUser(a) => Some(("ask", a.ask_id.as_str())),
        _ => None,
    }
}

/// The kind of key of the message that asked.
pub(super) const MESSAGE: &str = "msg";

impl Asked {
    /// Records question `kind`/`id` raised in `task`; false (and counted) when it was
    /// raised before.
    pub(super) fn raise(&mut self, task: &str, kind: &str, id: &str) -> bool {
        let k = key(task, kind, id);
        if self.keys.contains(&k) {
            self.repeats += 1;
            return false;
        }
        if self.order.len() == KEEP
            && let Some(old) = self.order.pop_front()
        {
            self.keys.remove(&old);
        }
        self.keys.insert(k.clone());
        self.order.push_back(k);
        true
    }

    /// Whether question `kind`/`id` was raised in `task`.
    pub(super) fn has(&self, task: &str, kind: &str, id: &str) -> bool {
        self.keys.contains(&key(task, kind, id))
    }

    /// A question said again and dropped, found without [`Asked::raise`].
    pub(super) fn repeated(&mut self) {
        self.repeats += 1;
    }

    /// Questions said again and not raised, on this connection so far.
    pub(super) fn repeats(&self) -> u64 {
        self.repeats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_is_raised_once_per_task_and_the_oldest_is_forgotten() {
        let mut a = Asked::default();
        assert!(a.raise("t1", "req", "p1"));
        assert!(!a.raise("t1", "req", "p1"), "said again");
        assert!(a.raise("t2", "req", "p1"), "another task's question");
        assert!(a.raise("t1", "ask", "p1"), "an ask is not a permission");
        assert_eq!(a.repeats(), 1);
        assert!(a.has("t1", "req", "p1") && !a.has("t3", "req", "p1"));
        for i in 0..KEEP {
            a.raise("t", "req", &i.to_string());
        }
        assert!(!a.has("t1", "req", "p1"), "bounded");
        assert!(a.has("t", "req", &(KEEP - 1).to_string()));
        assert_eq!(a.order.len(), KEEP);
    }
}
