//! One SSE frame of a turn (a JSON-RPC response whose `result` is a stream response)
//! mapped to CAP (spec Appendix C.4, §11.3), for either spelling:
//!
//! - message text parts (a `message`, or a status update's message) -> `cap.text_chunk`;
//! - data parts marked `_meta."cap.kind"` -> that event verbatim (tool calls, plan,
//!   usage, asks, permission requests, artifacts); unmarked data parts are dropped;
//! - `input-required` -> the marked ask or permission request it carries (or one asked
//!   earlier in the turn; a plain agent without one: a `cap.ask_user` of its text), and
//!   the stream pauses for the answer; a final `input-required` that asks nothing and
//!   says nothing is the agent waiting for its next message: the turn's end, the task
//!   kept for the next prompt (Gemini CLI's A2A server ends every turn so, and sends
//!   its tool calls' progress as non-final `input-required` updates);
//! - `auth-required` -> `cap.error` `auth_error`, the turn ends and the task is kept;
//! - artifact updates -> `cap.artifact` (chunks joined up to the last, or up to the
//!   next artifact or the task's pause or end when no chunk says it is the last;
//!   media types kept);
//! - terminal states end the turn: `completed`, `canceled`, `failed` / `rejected`
//!   (with a `cap.error`); a JSON-RPC error is a `cap.error` and the turn's end.
//!
//! A task read whole (`GetTask`, a turn taken up again after a loss) maps as its
//! stream would have: its history's agent messages, its artifacts, its status; while
//! such a turn lasts, a message already mapped (by id) is not mapped twice.
//! A question (permission request, ask) is raised once on a connection, whichever
//! path says it again ([`super::asked`]); a question in a task's history is past
//! (the task went on from it): only its status can ask.
//!
//! A plain A2A agent (the manifest's opt-in) gets text, states and artifacts only,
//! plus the tool calls of Gemini CLI's dialect ([`super::coder_agent`]).

use serde_json::Value;

use super::asked::{self, Asked, MESSAGE};
use super::coder_agent::CoderAgent;
use super::datapart;
use super::file_part::{file_artifact, media_type, part_id};
use super::spelling::{Part, TaskState};
use crate::protocol::{CapEvent, Decision, ErrorKind, StopReason};

/// What one frame means to the driver.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // `Event` is nearly every output; boxing costs an allocation each.
pub enum Mapped {
    Event(CapEvent),
    /// The task (and its conversation) the stream is about.
    Task {
        task_id: String,
        context_id: Option<String>,
    },
    /// The task waits for the client: the stream ends without ending the turn.
    Paused,
    /// The task waits for the next prompt: the turn ended, the task goes on.
    Awaiting,
    /// A question raised before, said again (its id): not raised again.
    Repeated(String),
    /// The turn ended.
    End {
        stop_reason: StopReason,
        is_error: bool,
    },
}

/// The stream mapper of one peer: what it needs across frames.
#[derive(Debug)]
pub struct FrameMapper {
    plain: bool,
    /// The largest artifact assembled from chunks (bytes of text).
    max_artifact: usize,
    /// An artifact being assembled: id, name, media type, text so far.
    pending: Option<(String, Option<String>, String, String)>,
    texts: u64,
    /// An ask or permission request of this turn is unanswered.
    asking: bool,
    coder: CoderAgent,
    /// A turn taken up again: the message ids mapped so far in it.
    seen: Option<std::collections::HashSet<String>>,
    /// The questions raised on this connection.
    asked: Asked,
    /// The task the frames are about (a question's scope).
    task: String,
}

fn text_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

impl FrameMapper {
    /// `plain`: the peer has no CAP extension; `max_artifact`: the bound on an
    /// artifact assembled from chunks.
    pub fn new(plain: bool, max_artifact: usize) -> Self {
        FrameMapper {
            plain,
            max_artifact,
            pending: None,
            texts: 0,
            asking: false,
            coder: CoderAgent::default(),
            seen: None,
            asked: Asked::default(),
            task: String::new(),
        }
    }

    /// Questions said again and not raised, on this connection so far.
    pub fn repeats(&self) -> u64 {
        self.asked.repeats()
    }

    /// The turn's end: a turn taken up again is over.
    pub fn turn_over(&mut self) {
        self.asking = false;
        self.seen = None;
    }

    /// A task read whole: what it said so far (its history's agent messages, its
    /// artifacts, its status); from here to the turn's end no message is mapped twice.
    pub fn on_task(&mut self, task: &Value, out: &mut Vec<Mapped>) {
        self.seen.get_or_insert_with(Default::default);
        self.learn(task, "id", out);
        let status = task.get("status");
        let asking = status
            .and_then(|s| s.get("message"))
            .and_then(|m| text_of(m, "messageId"));
        for m in task
            .get("history")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|m| {
                matches!(
                    m.get("role").and_then(Value::as_str),
                    Some("agent" | "ROLE_AGENT")
                ) && (asking.is_none() || text_of(m, "messageId") != asking)
            })
        {
            self.past_message(m, out);
        }
        for a in task
            .get("artifacts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = format!("artifact:{}", a["artifactId"].as_str().unwrap_or_default());
            if self.seen.as_mut().is_some_and(|seen| seen.insert(id)) {
                self.artifact(
                    &serde_json::json!({ "artifact": a, "lastChunk": true }),
                    out,
                );
            }
        }
        if let Some(status) = status {
            self.status(status, true, out);
        }
    }

    /// A message of a task's history: what it said, its questions past (raised, if
    /// they were not, without asking them).
    fn past_message(&mut self, m: &Value, out: &mut Vec<Mapped>) {
        let at = out.len();
        let asking = self.asking;
        self.message(m, out);
        self.asking = asking;
        let mut i = at;
        while i < out.len() {
            if matches!(&out[i], Mapped::Event(e) if asked::question(e).is_some()) {
                out.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// The client answered the open question (the next `input-required` is a new one).
    pub fn answered(&mut self) {
        self.asking = false;
    }

    /// The data part answering permission `req_id`, when Gemini CLI's dialect asked it.
    pub fn dialect_answer(&mut self, req_id: &str, decision: Decision) -> Option<Value> {
        self.coder.answer(req_id, decision)
    }

    /// The task a frame is about.
    fn learn(&mut self, v: &Value, id_key: &str, out: &mut Vec<Mapped>) {
        if let Some(task_id) = text_of(v, id_key) {
            self.task.clone_from(&task_id);
            out.push(Mapped::Task {
                task_id,
                context_id: text_of(v, "contextId"),
            });
        }
    }

    /// Maps one JSON-RPC response (an SSE frame's data) into `out`.
    pub fn on_frame(&mut self, frame: &Value, out: &mut Vec<Mapped>) {
        if let Some(err) = frame.get("error") {
            let message = text_of(err, "message").unwrap_or_else(|| err.to_string());
            let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
            let event = CapEvent::error(
                ErrorKind::Other("a2a_error".into()),
                format!("A2A error {code}: {message}"),
                false,
            );
            out.push(Mapped::Event(event));
            out.push(end(StopReason::Error, true));
            return;
        }
        let Some(result) = frame.get("result") else {
            out.push(Mapped::Event(parse_failed(
                "a frame without `result` or `error`",
            )));
            return;
        };
        self.on_result(result, out);
    }

    /// Maps one stream response (1.0: `task` / `message` / `statusUpdate` /
    /// `artifactUpdate`; 0.3: the object itself with its `kind`).
    pub fn on_result(&mut self, r: &Value, out: &mut Vec<Mapped>) {
        let kind = r.get("kind").and_then(Value::as_str);
        if let Some(m) = r
            .get("message")
            .filter(|_| kind.is_none())
            .or((kind == Some("message")).then_some(r))
        {
            self.message(m, out);
        } else if let Some(t) = r
            .get("task")
            .filter(|_| kind.is_none())
            .or((kind == Some("task") || is_bare_task(r)).then_some(r))
        {
            if self.seen.is_some() {
                // A turn taken up again: the task (a resubscription's first event)
                // says what it said meanwhile.
                self.on_task(t, out);
            } else {
                self.learn(t, "id", out);
                if let Some(status) = t.get("status") {
                    self.status(status, true, out);
                }
            }
        } else if let Some(s) = r
            .get("statusUpdate")
            .or((kind == Some("status-update")).then_some(r))
        {
            self.learn(s, "taskId", out);
            // 0.3's `final: false`: more of this stream follows, whatever the state.
            let last = s.get("final").and_then(Value::as_bool) != Some(false);
            if let Some(status) = s.get("status") {
                self.status(status, last, out);
            }
        } else if let Some(a) = r
            .get("artifactUpdate")
            .or((kind == Some("artifact-update")).then_some(r))
        {
            self.artifact(a, out);
        } else {
            out.push(Mapped::Event(parse_failed("an unknown stream response")));
        }
    }

    /// Maps message `m`; true when it only says again questions raised before (then
    /// nothing of it is mapped) or, in a turn taken up again, it is one mapped before
    /// that asked.
    fn message(&mut self, m: &Value, out: &mut Vec<Mapped>) -> bool {
        let id = text_of(m, "messageId");
        if let Some(t) = text_of(m, "taskId") {
            self.task = t;
        }
        if let (Some(seen), Some(id)) = (self.seen.as_mut(), id.as_deref())
            && !seen.insert(id.to_owned())
        {
            return self.asked.has(&self.task, MESSAGE, id);
        }
        self.texts += 1;
        let message_id = id
            .clone()
            .unwrap_or_else(|| format!("a2a-msg-{}", self.texts));
        let at = out.len();
        for part in m
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match Part::read(part) {
                Part::Text(t) if !t.is_empty() => {
                    out.push(Mapped::Event(CapEvent::text(message_id.clone(), t)));
                }
                Part::Data(d) => {
                    if let Some(event) = self.coder.on_data(d) {
                        out.push(Mapped::Event(event));
                    } else if !self.plain {
                        match datapart::decode(d) {
                            Some(Ok(event)) => out.push(Mapped::Event(event)),
                            Some(Err(e)) => out.push(Mapped::Event(parse_failed(&e.to_string()))),
                            None => {}
                        }
                    }
                }
                Part::File { .. } => {
                    if let Some(event) = file_artifact(&part_id(&message_id, part), part) {
                        out.push(Mapped::Event(event));
                    }
                }
                _ => {}
            }
        }
        self.questions(id.as_deref(), at, out)
    }

    /// The questions message `id` put into `out[at..]`: new ones are raised (the
    /// task waits on them), ones raised before are dropped; a message that only says
    /// again questions raised before is dropped whole (true).
    fn questions(&mut self, id: Option<&str>, at: usize, out: &mut Vec<Mapped>) -> bool {
        let (mut new, mut again) = (0, Vec::new());
        let mut i = at;
        while i < out.len() {
            let Mapped::Event(e) = &out[i] else {
                i += 1;
                continue;
            };
            match asked::question(e) {
                Some((kind, q)) if !self.asked.raise(&self.task, kind, q) => {
                    again.push(q.to_owned());
                    out.remove(i);
                }
                Some(_) => {
                    new += 1;
                    i += 1;
                }
                None => i += 1,
            }
        }
        if new > 0 {
            self.asking = true;
            if let Some(id) = id {
                self.asked.raise(&self.task, MESSAGE, id);
            }
        }
        let whole = new == 0 && !again.is_empty();
        if whole {
            out.truncate(at);
        }
        out.extend(again.into_iter().map(Mapped::Repeated));
        whole
    }

    fn status(&mut self, status: &Value, last: bool, out: &mut Vec<Mapped>) {
        let state = TaskState::parse(status.get("state").and_then(Value::as_str).unwrap_or(""));
        if state.is_terminal() || state.is_interrupted() {
            self.flush(out);
        }
        let at = out.len();
        let message = status.get("message");
        // A plain question said again: known by its message.
        let asked_before = message.and_then(|m| text_of(m, "messageId")).filter(|id| {
            state == TaskState::InputRequired && self.asked.has(&self.task, MESSAGE, id)
        });
        let mut again = message.is_some_and(|m| self.message(m, out));
        if let Some(id) = asked_before
            && !again
        {
            out.truncate(at);
            self.asked.repeated();
            out.push(Mapped::Repeated(id));
            again = true;
        }
        let said: String = out[at..]
            .iter()
            .filter_map(|m| match m {
                Mapped::Event(CapEvent::TextChunk(t)) => Some(t.text.as_str()),
                _ => None,
            })
            .collect();
        match state {
            TaskState::InputRequired if self.asking => out.push(Mapped::Paused),
            // A question answered, said again: the peer is at work on the answer.
            TaskState::InputRequired if again => {}
            TaskState::InputRequired if said.is_empty() && last => out.push(Mapped::Awaiting),
            TaskState::InputRequired if said.is_empty() => {}
            TaskState::InputRequired => {
                self.asking = true;
                if let Some(id) = message.and_then(|m| text_of(m, "messageId")) {
                    self.asked.raise(&self.task, MESSAGE, &id);
                }
                out.push(Mapped::Event(CapEvent::ask_user(PLAIN_ASK, said, None)));
                out.push(Mapped::Paused);
            }
            TaskState::AuthRequired => {
                let what = if said.is_empty() {
                    "the agent requires authentication".to_owned()
                } else {
                    said
                };
                let event = CapEvent::error(
                    ErrorKind::AuthError,
                    format!("A2A auth-required: {what}"),
                    false,
                );
                out.push(Mapped::Event(event));
                out.push(end(StopReason::Error, true));
            }
            TaskState::Completed => out.push(end(StopReason::EndTurn, false)),
            TaskState::Canceled => out.push(end(StopReason::Cancelled, false)),
            TaskState::Failed | TaskState::Rejected => {
                let what = if said.is_empty() {
                    "no reason given".to_owned()
                } else {
                    said
                };
                let verb = if state == TaskState::Failed {
                    "failed"
                } else {
                    "rejected the task"
                };
                let event = CapEvent::error(
                    ErrorKind::Other(format!("a2a_{}", state.spelled(super::Spelling::V03))),
                    format!("the A2A agent {verb}: {what}"),
                    false,
                );
                out.push(Mapped::Event(event));
                out.push(end(StopReason::Error, true));
            }
            TaskState::Submitted | TaskState::Working | TaskState::Unknown => {}
        }
    }

    fn artifact(&mut self, a: &Value, out: &mut Vec<Mapped>) {
        let Some(art) = a.get("artifact") else {
            return;
        };
        let id = text_of(art, "artifactId").unwrap_or_else(|| "a2a-artifact".into());
        let name = text_of(art, "name");
        let append = a.get("append").and_then(Value::as_bool).unwrap_or(false);
        // 1.0's JSON (proto3) leaves out a false `lastChunk`, and 0.3 peers leave it out
        // of a whole artifact: absent, the artifact is complete at the next artifact,
        // or when the task pauses or ends.
        let last = a.get("lastChunk").and_then(Value::as_bool) == Some(true);
        for part in art
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match Part::read(part) {
                Part::Text(t) => {
                    let mime = media_type(part).unwrap_or("text/plain").to_owned();
                    let fresh = !append || self.pending.as_ref().is_none_or(|p| p.0 != id);
                    if fresh {
                        self.flush(out);
                        self.pending = Some((id.clone(), name.clone(), mime, String::new()));
                    }
                    if let Some(p) = self.pending.as_mut() {
                        if p.3.len() + t.len() > self.max_artifact {
                            let max = self.max_artifact;
                            self.pending = None;
                            out.push(Mapped::Event(parse_failed(&format!(
                                "artifact {id} exceeds {max} bytes; dropped"
                            ))));
                            return;
                        }
                        p.3.push_str(t);
                    }
                }
                Part::Data(d) => match datapart::decode(d).filter(|_| !self.plain) {
                    Some(Ok(event)) => out.push(Mapped::Event(event)),
                    Some(Err(e)) => out.push(Mapped::Event(parse_failed(&e.to_string()))),
                    None => {
                        let mime = media_type(part).unwrap_or("application/json");
                        out.push(Mapped::Event(CapEvent::artifact(
                            id.clone(),
                            mime,
                            name.clone(),
                            d.clone(),
                        )));
                    }
                },
                Part::File { .. } => {
                    if let Some(event) = file_artifact(&id, part) {
                        out.push(Mapped::Event(event));
                    }
                }
                Part::Other => {}
            }
        }
        if last {
            self.flush(out);
        }
    }

    /// The artifact assembled so far, as one `cap.artifact`.
    fn flush(&mut self, out: &mut Vec<Mapped>) {
        if let Some((id, name, mime, text)) = self.pending.take() {
            out.push(Mapped::Event(CapEvent::artifact(
                id,
                mime,
                name,
                Value::String(text),
            )));
        }
    }
}

/// A task object as 1.0's `CancelTask` / `GetTask` answer it: no wrapper, no `kind`.
fn is_bare_task(r: &Value) -> bool {
    r.get("kind").is_none() && r.get("id").is_some() && r.get("status").is_some()
}

/// The ask id of a plain agent's `input-required` (its answer is a text message).
pub(crate) const PLAIN_ASK: &str = "a2a-input-required";

fn end(stop_reason: StopReason, is_error: bool) -> Mapped {
    Mapped::End {
        stop_reason,
        is_error,
    }
}

/// `cap.error` `parse_failed`.
pub(crate) fn parse_failed(what: &str) -> CapEvent {
    CapEvent::error(ErrorKind::ParseFailed, format!("A2A stream: {what}"), false)
}
