//! A session's events as A2A task updates (spec §11.3): text chunks as text parts of
//! agent messages (chunks of one message share its id), tool calls, plans, thoughts,
//! file changes and errors as data parts marked `_meta."cap.kind"`, artifacts as
//! artifact updates; usage summed and attached to the terminal state as a marked
//! `cap.usage` part. Questions are not mapped from events: the ones the policy left
//! open reach the task as `input-required` ([`super::input`]); requests and answers
//! the policy decided stay on the server.

use capfleet_engine::protocol::HasMeta as _;
use capfleet_engine::protocol::{CapEvent, Channel};
use capfleet_wire::bindings::a2a::{TaskState, datapart};
use capfleet_wire::events::{EventBody, SessionEvent, TurnOutcome, UsageTotals};
use serde_json::{Value, json};

use super::task::{Artifact, Msg, Part, Task, Update};

/// The `_meta` key naming the session a fleet's event came from.
pub(super) const META_SESSION: &str = "capfleet.session";

/// What a feed keeps across a task's events.
#[derive(Debug, Default)]
pub(super) struct Feed {
    pub usage: UsageTotals,
    pub last_error: Option<String>,
    parts: u64,
}

impl Feed {
    /// The update a CAP event makes, if any; `session` marks a fleet's events with
    /// their session. Usage is summed, not sent.
    pub(super) fn cap(
        &mut self,
        task: &Task,
        event: &CapEvent,
        session: Option<&str>,
    ) -> Option<Update> {
        match event {
            CapEvent::TextChunk(t) => {
                if t.channel.is_some_and(|c| c != Channel::Assistant) {
                    return self.marked(task, event, session);
                }
                let id = t.message_id.get().map_or_else(
                    || format!("{}-text", task.id),
                    |m| format!("{}-{m}", task.id),
                );
                Some(Update::Message(Msg {
                    id,
                    parts: vec![Part::Text(t.text.clone())],
                }))
            }
            CapEvent::Usage(u) => {
                self.usage.add(u);
                None
            }
            CapEvent::Error(e) => {
                self.last_error = Some(e.message.clone());
                self.marked(task, event, session)
            }
            CapEvent::Artifact(a) => {
                let content = a
                    .content
                    .get()
                    .cloned()
                    .or_else(|| a.uri.get().map(|u| json!({ "uri": u })))
                    .unwrap_or(Value::Null);
                Some(Update::Artifact(Artifact {
                    id: a.artifact_id.clone(),
                    name: a
                        .name
                        .get()
                        .cloned()
                        .unwrap_or_else(|| a.artifact_id.clone()),
                    mime: a.mime_type.clone(),
                    content,
                }))
            }
            CapEvent::ToolCallStart(_)
            | CapEvent::ToolCallDelta(_)
            | CapEvent::ToolCallEnd(_)
            | CapEvent::Plan(_)
            | CapEvent::Thought(_)
            | CapEvent::FsChange(_) => self.marked(task, event, session),
            // Decided here, or asked through input-required; the rest is the
            // session's own business.
            CapEvent::SessionReady(_)
            | CapEvent::AskUser(_)
            | CapEvent::PermissionRequest(_)
            | CapEvent::PtyRawBytes(_)
            | CapEvent::UserInputInject(_)
            | CapEvent::SessionConfig(_)
            | CapEvent::AskUserAnswer(_)
            | CapEvent::PermissionResponse(_)
            | CapEvent::Cancel(_) => None,
        }
    }

    fn marked(&mut self, task: &Task, event: &CapEvent, session: Option<&str>) -> Option<Update> {
        self.parts += 1;
        let mut event = event.clone();
        if let Some(s) = session {
            event.set_meta(META_SESSION, Value::String(s.to_owned()));
        }
        Some(Update::Message(Msg {
            id: format!("{}-e{}", task.id, self.parts),
            parts: vec![Part::Cap(datapart::encode(&event))],
        }))
    }

    /// The terminal update: `state`, with `text` (an answer, or why it failed) and
    /// the usage summed so far.
    pub(super) fn end(&self, task: &Task, state: TaskState, text: Option<String>) -> Update {
        let u = &self.usage;
        let usage = json!({"_meta": {"cap.kind": "cap.usage"}, "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens, "cache_read_tokens": u.cache_read_tokens,
            "cache_creation_tokens": u.cache_creation_tokens, "cost_usd_estimate": u.cost_usd});
        let mut parts: Vec<Part> = text.into_iter().map(Part::Text).collect();
        parts.push(Part::Cap(usage));
        Update::Status {
            state,
            message: Some(Msg {
                id: format!("{}-end", task.id),
                parts,
            }),
        }
    }

    /// One event of an exposed agent's session: its update, and whether the turn ended.
    pub(super) fn agent_event(&mut self, task: &Task, e: &SessionEvent) -> Option<Update> {
        match &e.body {
            EventBody::Cap { event } => self.cap(task, event, None),
            EventBody::TurnEnded { outcome, .. } => Some(match outcome {
                TurnOutcome::Completed => self.end(task, TaskState::Completed, None),
                TurnOutcome::Cancelled => self.end(task, TaskState::Canceled, None),
                TurnOutcome::Failed => {
                    let why = self
                        .last_error
                        .clone()
                        .unwrap_or_else(|| "the turn failed".into());
                    self.end(task, TaskState::Failed, Some(why))
                }
            }),
            EventBody::Failed { reason } => Some(self.end(
                task,
                TaskState::Failed,
                Some(format!("the session failed: {reason}")),
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use capfleet_engine::protocol::{StopReason, Usage};

    fn event(body: EventBody) -> SessionEvent {
        SessionEvent {
            seq: 1,
            urn: Arc::from("cap://a2a/x"),
            turn: Some(1),
            ts_ms: 0,
            body,
        }
    }

    #[test]
    fn a_turn_maps_to_text_marked_parts_and_a_terminal_state_with_its_usage() {
        let task = Task::new("t".into(), "c".into(), None);
        let mut feed = Feed::default();
        let cap = |e: CapEvent| event(EventBody::Cap { event: e });
        let text = feed
            .agent_event(&task, &cap(CapEvent::text("m1", "hi")))
            .unwrap();
        assert!(matches!(&text, Update::Message(m) if m.id == "t-m1"));
        let tool = feed
            .agent_event(&task, &cap(CapEvent::tool_start("c1", "Bash", json!({}))))
            .unwrap();
        assert!(
            matches!(&tool, Update::Message(m) if matches!(&m.parts[0], Part::Cap(d)
            if d["_meta"]["cap.kind"] == "cap.tool_call.start"))
        );
        let usage: Usage =
            serde_json::from_value(json!({"input_tokens": 5, "output_tokens": 2})).unwrap();
        assert!(
            feed.agent_event(&task, &cap(CapEvent::Usage(usage)))
                .is_none()
        );
        let end = feed
            .agent_event(
                &task,
                &event(EventBody::TurnEnded {
                    stop_reason: StopReason::EndTurn,
                    outcome: TurnOutcome::Completed,
                    duration_ms: 3,
                }),
            )
            .unwrap();
        let Update::Status {
            state,
            message: Some(m),
        } = end
        else {
            panic!("not a status")
        };
        assert_eq!(state, TaskState::Completed);
        assert!(matches!(&m.parts[0], Part::Cap(d) if d["input_tokens"] == 5));
    }
}
