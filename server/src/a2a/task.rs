//! One A2A task of an exposed agent or fleet: where it stands, what it said (kept
//! bounded, for `GetTask` and a resubscribing client), the question it waits on, and
//! the live feed its streams read. Updates are spelling-free ([`Update`]); each stream
//! renders them in the spelling of the request that opened it ([`Update::render`]).
//!
//! Every change happens under the task's lock, which is never held across an await;
//! the live feed is a bounded broadcast: a stream that falls behind is ended (its
//! client resubscribes and gets the task as it stands), never slowing the session.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use capfleet_engine::answerer::HumanQuestion;
use capfleet_wire::bindings::a2a::TaskState;
use capfleet_wire::bindings::a2a::outbound::TaskFrames;
use capfleet_wire::clock::{now_ms, rfc3339_ms};
use capfleet_wire::sync::lock;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::metrics::A2aTaskLabels;
use capfleet_app::one_session::refuse;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// Updates a stream may fall behind by before it is ended.
const LIVE: usize = 512;
/// Messages kept in a task's history, and their text, at most.
const HISTORY_MESSAGES: usize = 256;
const HISTORY_BYTES: usize = 64 * 1024;
/// Artifacts kept per task, at most.
const ARTIFACTS: usize = 64;
/// Questions waiting behind the one asked, at most (a fleet's sessions may ask at once).
const QUESTIONS: usize = 16;

/// One part of an agent message.
#[derive(Debug, Clone)]
pub(super) enum Part {
    Text(String),
    /// A CAP event as a marked data part: sent only to clients that activated the
    /// `cap-protocol/v1` extension.
    Cap(Value),
}

/// An agent message.
#[derive(Debug, Clone)]
pub(super) struct Msg {
    pub id: String,
    pub parts: Vec<Part>,
}

impl Msg {
    fn render(&self, frames: &TaskFrames, cap: bool) -> Option<Value> {
        let parts: Vec<Value> = self
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(frames.spelling.text_part(t)),
                Part::Cap(d) => cap.then(|| frames.spelling.data_part(d.clone())),
            })
            .collect();
        (!parts.is_empty()).then(|| frames.message_obj(&self.id, parts))
    }

    fn bytes(&self) -> usize {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.len(),
                Part::Cap(d) => d.to_string().len(),
            })
            .sum()
    }
}

/// An artifact: its text (or JSON) whole.
#[derive(Debug, Clone)]
pub(super) struct Artifact {
    pub id: String,
    pub name: String,
    pub mime: String,
    pub content: Value,
}

impl Artifact {
    fn part(&self, frames: &TaskFrames) -> Value {
        let part = match &self.content {
            Value::String(s) => frames.spelling.text_part(s),
            other => frames.spelling.data_part(other.clone()),
        };
        frames.typed(part, &self.mime)
    }
}

/// What happened to a task.
#[derive(Debug, Clone)]
pub(super) enum Update {
    Status {
        state: TaskState,
        message: Option<Msg>,
    },
    Message(Msg),
    Artifact(Artifact),
}

impl Update {
    /// The stream response, for a client that activated the CAP extension (`cap`) or
    /// not; `None` when nothing of it is for this client.
    pub(super) fn render(&self, frames: &TaskFrames, cap: bool) -> Option<Value> {
        match self {
            Update::Status { state, message } => {
                let m = message.as_ref().and_then(|m| m.render(frames, cap));
                Some(frames.status(*state, m))
            }
            // Within a task the agent speaks in status updates (a stream response that
            // is a bare message ends the stream for the SDKs' clients).
            Update::Message(m) => {
                let obj = m.render(frames, cap)?;
                Some(frames.status(TaskState::Working, Some(obj)))
            }
            Update::Artifact(a) => {
                Some(frames.artifact(&a.id, &a.name, a.part(frames), false, true))
            }
        }
    }

    /// A terminal state.
    pub(super) fn is_terminal(&self) -> bool {
        matches!(self, Update::Status { state, .. } if state.is_terminal())
    }

    /// A state the stream of a send ends at: terminal, or waiting for the client.
    pub(super) fn ends_stream(&self) -> bool {
        matches!(self, Update::Status { state, .. } if state.is_terminal() || state.is_interrupted())
    }
}

struct Inner {
    state: TaskState,
    status_message: Option<Msg>,
    history: VecDeque<Msg>,
    history_bytes: usize,
    artifacts: Vec<Artifact>,
    /// The question asked (first) and those waiting behind it.
    questions: VecDeque<HumanQuestion>,
    /// When its status last changed (Unix ms): its `status.timestamp`.
    updated_ms: u64,
}

/// Where a task's end is counted: the family, and the exposed agent's or fleet's name.
pub(super) type Ends = Option<(Family<A2aTaskLabels, Counter>, String)>;

/// One task.
pub(super) struct Task {
    pub id: String,
    pub context: String,
    inner: Mutex<Inner>,
    live: broadcast::Sender<Arc<Update>>,
    ends: Ends,
}

/// The task as it stands, and the feed of what happens next (subscribed atomically
/// with the snapshot: nothing is missed or seen twice).
pub(super) struct Subscription {
    pub snapshot: Snapshot,
    pub live: broadcast::Receiver<Arc<Update>>,
}

/// A task's state as `GetTask` answers it.
#[derive(Clone)]
pub(super) struct Snapshot {
    pub state: TaskState,
    /// When its status last changed (Unix ms).
    pub updated_ms: u64,
    status_message: Option<Msg>,
    history: Vec<Msg>,
    artifacts: Vec<Artifact>,
}

impl Snapshot {
    /// The task object; at most `history` messages of its history (`None`: all kept),
    /// counted among those this client sees (a plain client's window is not spent on
    /// CAP-only messages it is not sent).
    pub(super) fn render(&self, frames: &TaskFrames, cap: bool, history: Option<usize>) -> Value {
        let mut seen: Vec<Value> = self
            .history
            .iter()
            .filter_map(|m| m.render(frames, cap))
            .collect();
        let skip = history.map_or(0, |n| seen.len().saturating_sub(n));
        let history = seen.split_off(skip);
        let artifacts = self
            .artifacts
            .iter()
            .map(|a| TaskFrames::artifact_obj(&a.id, Some(&a.name), vec![a.part(frames)]))
            .collect();
        let message = self
            .status_message
            .as_ref()
            .and_then(|m| m.render(frames, cap));
        let mut task = frames.task_obj(self.state, message, artifacts, history);
        task["status"]["timestamp"] = Value::String(rfc3339_ms(self.updated_ms));
        task
    }
}

impl Task {
    pub(super) fn new(id: String, context: String, ends: Ends) -> Arc<Task> {
        Arc::new(Task {
            id,
            context,
            inner: Mutex::new(Inner {
                state: TaskState::Submitted,
                status_message: None,
                history: VecDeque::new(),
                history_bytes: 0,
                artifacts: Vec::new(),
                questions: VecDeque::new(),
                updated_ms: now_ms(),
            }),
            live: broadcast::channel(LIVE).0,
            ends,
        })
    }

    pub(super) fn frames(&self, spelling: capfleet_wire::bindings::a2a::Spelling) -> TaskFrames {
        TaskFrames {
            spelling,
            id: self.id.clone(),
            context: self.context.clone(),
        }
    }

    pub(super) fn state(&self) -> TaskState {
        lock(&self.inner).state
    }

    /// When its status last changed (Unix ms).
    pub(super) fn updated_ms(&self) -> u64 {
        lock(&self.inner).updated_ms
    }

    pub(super) fn is_done(&self) -> bool {
        self.state().is_terminal()
    }

    /// Apply `u` and send it to the live streams. A terminal task takes nothing more.
    pub(super) fn publish(&self, u: Update) {
        let mut inner = lock(&self.inner);
        if inner.state.is_terminal() {
            return;
        }
        match &u {
            Update::Status { state, message } => {
                inner.state = *state;
                inner.updated_ms = now_ms();
                if let (true, Some((family, name))) = (state.is_terminal(), &self.ends) {
                    let state = state.spelled(capfleet_wire::bindings::a2a::Spelling::V03);
                    family
                        .get_or_create(&A2aTaskLabels {
                            name: name.clone(),
                            state: state.to_owned(),
                        })
                        .inc();
                }
                inner.status_message = message.clone();
                if let Some(m) = message {
                    remember(&mut inner, m.clone());
                }
            }
            Update::Message(m) => remember(&mut inner, m.clone()),
            Update::Artifact(a) => {
                if inner.artifacts.len() < ARTIFACTS {
                    inner.artifacts.push(a.clone());
                }
            }
        }
        let _no_stream = self.live.send(Arc::new(u));
    }

    pub(super) fn subscribe(&self) -> Subscription {
        let inner = lock(&self.inner);
        Subscription {
            snapshot: snapshot(&inner),
            live: self.live.subscribe(),
        }
    }

    pub(super) fn snapshot(&self) -> Snapshot {
        snapshot(&lock(&self.inner))
    }

    /// A question for the client: asked now (`input-required` with `message`), or
    /// after those before it are answered; answered fail-safe when the task has ended
    /// or too many wait.
    pub(super) fn ask(&self, q: HumanQuestion, message: Msg) {
        let first = {
            let mut inner = lock(&self.inner);
            if inner.state.is_terminal() || inner.questions.len() >= QUESTIONS {
                drop(inner);
                return refuse(
                    q,
                    "the A2A task has ended, or too many questions wait on it",
                );
            }
            inner.questions.push_back(q);
            inner.questions.len() == 1
        };
        if first {
            self.publish(Update::Status {
                state: TaskState::InputRequired,
                message: Some(message),
            });
        }
    }

    /// The question asked, taken to be answered: the task works again (the state
    /// changes before any stream of the answer subscribes).
    pub(super) fn take_question(&self) -> Option<HumanQuestion> {
        let q = lock(&self.inner).questions.pop_front()?;
        self.publish(Update::Status {
            state: TaskState::Working,
            message: None,
        });
        Some(q)
    }

    /// Whether a question waits for the client's answer.
    pub(super) fn waits_for_input(&self) -> bool {
        !lock(&self.inner).questions.is_empty()
    }

    /// The next waiting question, if any, is asked now (its message from `render`).
    pub(super) fn ask_next(&self, render: impl Fn(&HumanQuestion) -> Msg) {
        let next = lock(&self.inner).questions.front().map(render);
        if let Some(message) = next {
            self.publish(Update::Status {
                state: TaskState::InputRequired,
                message: Some(message),
            });
        }
    }

    /// Every question still open (the task ends without their answers).
    pub(super) fn drain_questions(&self) -> Vec<HumanQuestion> {
        lock(&self.inner).questions.drain(..).collect()
    }
}

fn snapshot(inner: &Inner) -> Snapshot {
    Snapshot {
        state: inner.state,
        updated_ms: inner.updated_ms,
        status_message: inner.status_message.clone(),
        history: inner.history.iter().cloned().collect(),
        artifacts: inner.artifacts.clone(),
    }
}

/// Add `m` to the history: text of the same message joined to it, the oldest
/// messages dropped past the bounds.
fn remember(inner: &mut Inner, m: Msg) {
    inner.history_bytes += m.bytes();
    match inner.history.back_mut() {
        Some(last) if last.id == m.id => last.parts.extend(m.parts),
        _ => inner.history.push_back(m),
    }
    while inner.history.len() > HISTORY_MESSAGES
        || (inner.history_bytes > HISTORY_BYTES && inner.history.len() > 1)
    {
        if let Some(old) = inner.history.pop_front() {
            inner.history_bytes = inner.history_bytes.saturating_sub(old.bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capfleet_wire::bindings::a2a::Spelling;

    fn text(id: &str, t: &str) -> Update {
        Update::Message(Msg {
            id: id.into(),
            parts: vec![Part::Text(t.into())],
        })
    }

    #[test]
    fn a_subscription_sees_what_follows_its_snapshot_and_history_joins_text() {
        let task = Task::new("t1".into(), "c1".into(), None);
        task.publish(text("m1", "hel"));
        let mut sub = task.subscribe();
        task.publish(text("m1", "lo"));
        task.publish(Update::Status {
            state: TaskState::Completed,
            message: None,
        });
        task.publish(text("m2", "ignored: the task is over"));
        assert_eq!(sub.snapshot.history.len(), 1);
        let first = sub.live.try_recv().unwrap();
        assert!(matches!(&*first, Update::Message(_)));
        assert!(sub.live.try_recv().unwrap().ends_stream());
        assert!(sub.live.try_recv().is_err());
        let obj = task
            .snapshot()
            .render(&task.frames(Spelling::V03), false, None);
        assert_eq!(obj["status"]["state"], "completed");
        assert_eq!(obj["history"].as_array().unwrap().len(), 1);
        assert_eq!(obj["history"][0]["parts"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn cap_parts_go_only_to_clients_of_the_extension() {
        let task = Task::new("t".into(), "c".into(), None);
        let only_cap = Update::Message(Msg {
            id: "m".into(),
            parts: vec![Part::Cap(
                serde_json::json!({"_meta": {"cap.kind": "cap.plan"}, "entries": []}),
            )],
        });
        let frames = task.frames(Spelling::V1);
        assert!(only_cap.render(&frames, false).is_none());
        let v = only_cap.render(&frames, true).unwrap();
        let parts = &v["statusUpdate"]["status"]["message"]["parts"];
        assert_eq!(parts[0]["data"]["_meta"]["cap.kind"], "cap.plan");
    }

    #[test]
    fn a_history_window_counts_only_what_the_client_sees() {
        let task = Task::new("t".into(), "c".into(), None);
        task.publish(text("m1", "the answer"));
        task.publish(Update::Message(Msg {
            id: "m2".into(),
            parts: vec![Part::Cap(
                serde_json::json!({"_meta": {"cap.kind": "cap.usage"}}),
            )],
        }));
        let frames = task.frames(Spelling::V1);
        let plain = task.snapshot().render(&frames, false, Some(1));
        assert_eq!(
            plain["history"][0]["parts"][0]["text"], "the answer",
            "{plain}"
        );
        let cap = task.snapshot().render(&frames, true, Some(1));
        assert_eq!(cap["history"].as_array().unwrap().len(), 1);
        assert!(cap["history"][0]["parts"][0]["data"].is_object(), "{cap}");
        assert!(
            task.snapshot()
                .render(&frames, true, Some(0))
                .get("history")
                .is_none()
        );
        assert!(
            plain["status"]["timestamp"]
                .as_str()
                .is_some_and(|t| t.ends_with('Z'))
        );
    }

    #[test]
    fn history_is_bounded() {
        let task = Task::new("t".into(), "c".into(), None);
        for i in 0..(HISTORY_MESSAGES + 10) {
            task.publish(text(&format!("m{i}"), "x"));
        }
        assert_eq!(task.snapshot().history.len(), HISTORY_MESSAGES);
        let big = "y".repeat(HISTORY_BYTES);
        task.publish(text("big1", &big));
        task.publish(text("big2", &big));
        assert!(task.snapshot().history.len() <= 2);
    }
}
