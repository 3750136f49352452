//! The inner session's events as ACP `session/update`s (the `update` objects of
//! ACP v1's `SessionUpdate`): text as `agent_message_chunk`, thoughts as
//! `agent_thought_chunk`, inner tool calls as `tool_call` / `tool_call_update`, a plan
//! as `plan` (sent again whole, as ACP replaces a plan, each time the fleet's router
//! moves one of its entries: a master plan's states stay current). Consecutive chunks of one channel read in one burst are joined into one
//! update until it holds [`CHUNK_MAX`] bytes, so a flood of small chunks is a few
//! notifications; anything else is not shown upstream (usage goes in the prompt
//! response's `_meta`).

use capfleet_engine::protocol::{CapEvent, Channel, PlanEntry, PlanStatus, Priority};
use capfleet_wire::events::{EventBody, SessionEvent};
use serde_json::{Value, json};

/// Text bytes past which a joined chunk update is closed.
pub(super) const CHUNK_MAX: usize = 64 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Message,
    Thought,
}

impl Kind {
    fn update(self) -> &'static str {
        match self {
            Kind::Message => "agent_message_chunk",
            Kind::Thought => "agent_thought_chunk",
        }
    }
}

/// Updates of one burst of events, in order.
#[derive(Debug, Default)]
pub(super) struct Updates {
    out: Vec<Value>,
    open: Option<(Kind, String)>,
    /// The plan shown last, kept to show its entries' later states.
    plan: Vec<PlanEntry>,
    /// A `turn_ended` was in the burst.
    pub turn_ended: bool,
}

impl Updates {
    pub(super) fn on_event(&mut self, event: &SessionEvent) {
        match &event.body {
            EventBody::Cap { event } => self.on_cap(event),
            EventBody::TurnEnded { .. } => self.turn_ended = true,
            EventBody::PlanEntry { id, status, .. } => {
                let moved = self
                    .plan
                    .iter_mut()
                    .find(|e| e.id == *id && e.status != *status);
                if let Some(entry) = moved {
                    entry.status = *status;
                    self.push_plan();
                }
            }
            EventBody::Restart { cause, attempt, .. } => {
                // Upstream sees one agent: a restart inside is a note on stderr.
                tracing::warn!(%cause, attempt, "the inner agent restarted; its turn goes on");
            }
            _ => {}
        }
    }

    fn on_cap(&mut self, event: &CapEvent) {
        match event {
            CapEvent::TextChunk(t) => match t.channel {
                None | Some(Channel::Assistant) => self.chunk(Kind::Message, &t.text),
                Some(Channel::Thought) => self.chunk(Kind::Thought, &t.text),
                Some(_) => {}
            },
            CapEvent::Thought(t) => self.chunk(Kind::Thought, &t.text),
            CapEvent::ToolCallStart(t) => {
                let input = t.input.get().cloned().unwrap_or_else(|| json!({}));
                self.push(json!({
                    "sessionUpdate": "tool_call",
                    "toolCallId": t.call_id,
                    "title": t.name,
                    "kind": "other",
                    "status": "in_progress",
                    "rawInput": input,
                }));
            }
            CapEvent::ToolCallEnd(t) => {
                let failed = t.is_error.get().copied().unwrap_or(false);
                let mut update = json!({
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": t.call_id,
                    "status": if failed { "failed" } else { "completed" },
                });
                if let Some(output) = t.output.get() {
                    update["rawOutput"] = output.clone();
                }
                self.push(update);
            }
            CapEvent::Plan(p) => {
                self.plan = p.entries.clone();
                self.push_plan();
            }
            _ => {}
        }
    }

    /// The plan as it stands, whole.
    fn push_plan(&mut self) {
        let entries: Vec<Value> = self
            .plan
            .iter()
            .map(|e| {
                json!({
                    "content": e.content,
                    "priority": priority(e.priority),
                    "status": status(e.status),
                })
            })
            .collect();
        self.push(json!({"sessionUpdate": "plan", "entries": entries}));
    }

    fn chunk(&mut self, kind: Kind, text: &str) {
        if self.open.as_ref().is_some_and(|(k, _)| *k != kind) {
            self.close();
        }
        let (_, open) = self.open.get_or_insert_with(|| (kind, String::new()));
        open.push_str(text);
        if open.len() >= CHUNK_MAX {
            self.close();
        }
    }

    fn push(&mut self, update: Value) {
        self.close();
        self.out.push(update);
    }

    fn close(&mut self) {
        if let Some((kind, text)) = self.open.take() {
            self.out.push(json!({
                "sessionUpdate": kind.update(),
                "content": {"type": "text", "text": text},
            }));
        }
    }

    /// The burst's updates, in order (the open chunk closed).
    pub(super) fn take(&mut self) -> Vec<Value> {
        self.close();
        std::mem::take(&mut self.out)
    }
}

/// ACP's plan priorities are high, medium and low.
fn priority(p: Option<Priority>) -> &'static str {
    match p {
        Some(Priority::Urgent | Priority::High) => "high",
        Some(Priority::Low) => "low",
        _ => "medium",
    }
}

/// ACP's plan statuses are pending, in_progress and completed: a dropped entry is
/// no longer to do.
fn status(s: PlanStatus) -> &'static str {
    match s {
        PlanStatus::Pending => "pending",
        PlanStatus::InProgress => "in_progress",
        _ => "completed",
    }
}

/// A `session/update` replaying one message of the conversation on `session/load`.
pub(super) fn replayed(role: super::store::Role, text: &str) -> Value {
    let update = match role {
        super::store::Role::User => "user_message_chunk",
        super::store::Role::Agent => "agent_message_chunk",
    };
    json!({"sessionUpdate": update, "content": {"type": "text", "text": text}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_event(text: &str) -> CapEvent {
        CapEvent::text("m1", text)
    }

    #[test]
    fn chunks_of_a_burst_join_and_split_at_the_bound() {
        let mut u = Updates::default();
        for _ in 0..3 {
            u.on_cap(&text_event("ab"));
        }
        let big = "x".repeat(CHUNK_MAX);
        u.on_cap(&text_event(&big));
        u.on_cap(&text_event("tail"));
        let out = u.take();
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0]["sessionUpdate"], "agent_message_chunk");
        assert_eq!(
            out[0]["content"]["text"].as_str().unwrap().len(),
            6 + CHUNK_MAX
        );
        assert_eq!(out[1]["content"]["text"], "tail");
        assert!(u.take().is_empty());
    }

    #[test]
    fn a_plan_is_sent_again_whole_when_the_router_moves_an_entry() {
        let mut u = Updates::default();
        u.on_cap(&CapEvent::plan(vec![
            PlanEntry::new("p1", "write the parser", PlanStatus::Pending),
            PlanEntry::new("p2", "test it", PlanStatus::Pending),
        ]));
        let router = |id: &str, status| SessionEvent {
            seq: 1,
            urn: "cap://fleet/router".into(),
            turn: None,
            ts_ms: 0,
            body: EventBody::PlanEntry {
                id: id.into(),
                assigned_to: "worker".into(),
                status,
            },
        };
        u.on_event(&router("p1", PlanStatus::InProgress));
        u.on_event(&router("p1", PlanStatus::InProgress));
        u.on_event(&router("nope", PlanStatus::Completed));
        u.on_event(&router("p1", PlanStatus::Completed));
        let plans: Vec<Vec<Value>> = u
            .take()
            .iter()
            .map(|p| {
                assert_eq!(p["sessionUpdate"], "plan");
                p["entries"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["status"].clone())
                    .collect()
            })
            .collect();
        assert_eq!(
            plans,
            [
                vec![json!("pending"), json!("pending")],
                vec![json!("in_progress"), json!("pending")],
                vec![json!("completed"), json!("pending")],
            ],
            "one update per move, none for a repeat or an unknown entry"
        );
    }
}
