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
//!
//! A plain A2A agent (the manifest's opt-in) gets text, states and artifacts only,
//! plus the tool calls of Gemini CLI's dialect ([`super::coder_agent`]).

use serde_json::Value;

use super::coder_agent::CoderAgent;
use super::datapart;
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
        }
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
        learn(task, "id", out);
        for m in task
            .get("history")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|m| {
                matches!(
                    m.get("role").and_then(Value::as_str),
                    Some("agent" | "ROLE_AGENT")
                )
            })
        {
            self.message(m, out);
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
        if let Some(status) = task.get("status") {
            self.status(status, true, out);
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
                learn(t, "id", out);
                if let Some(status) = t.get("status") {
                    self.status(status, true, out);
                }
            }
        } else if let Some(s) = r
            .get("statusUpdate")
            .or((kind == Some("status-update")).then_some(r))
        {
            learn(s, "taskId", out);
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

    fn message(&mut self, m: &Value, out: &mut Vec<Mapped>) {
        if let (Some(seen), Some(id)) = (self.seen.as_mut(), text_of(m, "messageId"))
            && !seen.insert(id)
        {
            return;
        }
        self.texts += 1;
        let message_id =
            text_of(m, "messageId").unwrap_or_else(|| format!("a2a-msg-{}", self.texts));
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
                        self.asking |= matches!(event, CapEvent::PermissionRequest(_));
                        out.push(Mapped::Event(event));
                    } else if !self.plain {
                        match datapart::decode(d) {
                            Some(Ok(event)) => {
                                self.asking |= matches!(
                                    event,
                                    CapEvent::AskUser(_) | CapEvent::PermissionRequest(_)
                                );
                                out.push(Mapped::Event(event));
                            }
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
    }

    fn status(&mut self, status: &Value, last: bool, out: &mut Vec<Mapped>) {
        let state = TaskState::parse(status.get("state").and_then(Value::as_str).unwrap_or(""));
        if state.is_terminal() || state.is_interrupted() {
            self.flush(out);
        }
        let at = out.len();
        if let Some(m) = status.get("message") {
            self.message(m, out);
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
            TaskState::InputRequired if said.is_empty() && last => out.push(Mapped::Awaiting),
            TaskState::InputRequired if said.is_empty() => {}
            TaskState::InputRequired => {
                self.asking = true;
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
pub const PLAIN_ASK: &str = "a2a-input-required";

fn end(stop_reason: StopReason, is_error: bool) -> Mapped {
    Mapped::End {
        stop_reason,
        is_error,
    }
}

fn learn(v: &Value, id_key: &str, out: &mut Vec<Mapped>) {
    if let Some(task_id) = text_of(v, id_key) {
        out.push(Mapped::Task {
            task_id,
            context_id: text_of(v, "contextId"),
        });
    }
}

/// `cap.error` `parse_failed`.
pub fn parse_failed(what: &str) -> CapEvent {
    CapEvent::error(ErrorKind::ParseFailed, format!("A2A stream: {what}"), false)
}

/// A part's media type: 1.0's `mediaType`, 0.3's `file.mimeType` or `metadata.mimeType`.
fn media_type(part: &Value) -> Option<&str> {
    part.get("mediaType")
        .or_else(|| part.get("file").and_then(|f| f.get("mimeType")))
        .or_else(|| part.get("metadata").and_then(|m| m.get("mimeType")))
        .and_then(Value::as_str)
}

fn part_id(message_id: &str, part: &Value) -> String {
    match Part::read(part) {
        Part::File { name: Some(n), .. } => format!("{message_id}/{n}"),
        _ => message_id.to_owned(),
    }
}

/// A file part as a `cap.artifact`: inline bytes as content (base64), a URL as `uri`.
fn file_artifact(id: &str, part: &Value) -> Option<CapEvent> {
    let Part::File {
        media_type: mime,
        name,
        inline,
        url,
    } = Part::read(part)
    else {
        return None;
    };
    let mime = mime.unwrap_or("application/octet-stream");
    let mut event = CapEvent::artifact(
        id,
        mime,
        name.map(str::to_owned),
        inline.map_or(Value::Null, Value::from),
    );
    if let (CapEvent::Artifact(a), Some(url)) = (&mut event, url) {
        a.uri = Some(url.to_owned()).into();
        a.content = None.into();
    }
    Some(event)
}
