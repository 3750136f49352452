//! The A2A wire's output task: it owns the HTTP client of one peer, takes the
//! session's commands (prompt, answer, cancel) from a small bounded channel, makes
//! the requests, reads each turn's SSE stream and sends the mapped events to the sink.
//!
//! A task that ends a turn waiting for input without asking anything keeps its id:
//! the next prompt continues it (the conversation of an agent that keeps one per task).
//!
//! A stream that drops mid-turn (not paused for input, no terminal state) is resumed
//! with `SubscribeToTask` / `tasks/resubscribe`, [`RESUBSCRIBE_TRIES`] times with
//! doubling backoff; when that fails, or the peer cannot be reached at all, the task
//! ends: the connection's death, which the session's restart policy handles.
//!
//! The conversation and the task in flight are the session's resume id
//! ([`ResumePoint`], sent as they change): a connection started with one (a restart,
//! or `run --resume` after capfleet died) talks in that context, and takes the next
//! prompt — the cut turn's — by reading that task (`GetTask` / `tasks/get`): ended, its
//! result is the turn's; still running, it is followed on (resubscribed); gone, the
//! prompt is sent again.

use std::time::Duration;

use reqwest::Url;
use serde_json::Value;
use tokio::sync::mpsc;

use super::http::{self, Http};
use super::sse::{Events, Next};
use crate::bindings::a2a::frames::{PLAIN_ASK, parse_failed};
use crate::bindings::a2a::{FrameMapper, Mapped, Method, ResumePoint, Spelling, datapart};
use crate::driver::wire::OutputEnd;
use crate::driver::{DriverOutput, OutputSink, TurnEnd};
use crate::protocol::{CapEvent, Decision, StopReason};

/// Resubscribe attempts before a dropped stream counts as the connection's death.
pub(super) const RESUBSCRIBE_TRIES: u32 = 4;
/// The first resubscribe backoff (then doubling).
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// What the session asks of the peer, with the turn's `traceparent`.
#[derive(Debug)]
pub(super) enum Cmd {
    Prompt(String, Option<String>),
    Answer(Reply, Option<String>),
    Cancel(Option<String>),
}

/// An answer to the task's open question.
#[derive(Debug)]
pub(super) enum Reply {
    Ask {
        ask_id: String,
        value: Option<Value>,
    },
    Permission {
        req_id: String,
        decision: Decision,
    },
}

/// One peer's connection: the chosen endpoint and spelling, the conversation's ids.
pub(super) struct Conn {
    pub http: Http,
    pub endpoint: Url,
    pub spelling: Spelling,
    pub plain: bool,
    pub sink: OutputSink,
    pub max_event: usize,
    pub mapper: FrameMapper,
    pub task: Option<String>,
    pub context: Option<String>,
    /// The task of a turn cut before this connection: the next prompt takes it up.
    pub rejoin: Option<String>,
    /// A turn is in flight.
    pub open: bool,
    /// The task waits for our answer: its stream's end is no drop.
    pub paused: bool,
    pub ids: u64,
}

/// How handling a step of the connection went on.
enum Step {
    Go,
    /// The connection is dead.
    Dead,
    Gone,
}

impl Conn {
    /// Runs until the wire drops its sender (a deliberate end) or the peer is lost.
    pub(super) async fn run(mut self, mut rx: mpsc::Receiver<Cmd>) -> OutputEnd {
        let mut stream: Option<Events> = None;
        let mut traceparent: Option<String> = None;
        loop {
            let step = tokio::select! {
                cmd = rx.recv() => match cmd {
                    None => return OutputEnd::CLOSED,
                    Some(Cmd::Cancel(tp)) => self.cancel(tp.as_deref(), &mut stream).await,
                    Some(Cmd::Prompt(text, tp)) => {
                        traceparent = tp;
                        self.open = true;
                        match self.rejoin.take() {
                            Some(task) => self.take_up(task, text, traceparent.as_deref(), &mut stream).await,
                            None => {
                                let parts = vec![self.spelling.text_part(&text)];
                                self.send(parts, traceparent.as_deref(), &mut stream).await
                            }
                        }
                    }
                    Some(Cmd::Answer(reply, tp)) => {
                        traceparent = tp.or(traceparent);
                        self.paused = false;
                        self.mapper.answered();
                        let parts = vec![self.reply_part(reply)];
                        self.send(parts, traceparent.as_deref(), &mut stream).await
                    }
                },
                next = next_of(&mut stream) => self.on_next(next, traceparent.as_deref(), &mut stream).await,
            };
            match step {
                Step::Go => {}
                Step::Dead => {
                    return OutputEnd::CLOSED;
                }
                Step::Gone => return OutputEnd::SessionGone,
            }
        }
    }

    fn next_id(&mut self) -> u64 {
        self.ids += 1;
        self.ids
    }

    fn reply_part(&mut self, reply: Reply) -> Value {
        match reply {
            Reply::Ask { ask_id, value } if self.plain || ask_id == PLAIN_ASK => {
                let text = match value {
                    Some(Value::String(s)) => s,
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                self.spelling.text_part(&text)
            }
            Reply::Ask { ask_id, value } => {
                let answer = CapEvent::ask_answer(ask_id, value.unwrap_or(Value::Null));
                self.spelling.data_part(datapart::encode(&answer))
            }
            Reply::Permission { req_id, decision } => {
                match self.mapper.dialect_answer(&req_id, decision) {
                    Some(data) => self.spelling.data_part(data),
                    None => {
                        let answer = CapEvent::permission_response(req_id, decision);
                        self.spelling.data_part(datapart::encode(&answer))
                    }
                }
            }
        }
    }

    /// A streaming send of a message of `parts` to the conversation (and, answering,
    /// to its task).
    async fn send(
        &mut self,
        parts: Vec<Value>,
        tp: Option<&str>,
        stream: &mut Option<Events>,
    ) -> Step {
        let message_id = format!("capfleet-{}-{}", std::process::id(), self.next_id());
        let message = self.spelling.user_message(
            &message_id,
            parts,
            self.context.as_deref(),
            self.task.as_deref(),
        );
        let id = self.next_id();
        let body = self
            .spelling
            .request(id, Method::Stream, Spelling::send_params(message));
        self.request(&body, tp, stream, false).await
    }

    /// Sends `body`; an SSE answer becomes the stream, a JSON one is mapped at once.
    /// `resuming`: a refusal is the connection's death (the task is gone with it).
    async fn request(
        &mut self,
        body: &Value,
        tp: Option<&str>,
        stream: &mut Option<Events>,
        resuming: bool,
    ) -> Step {
        *stream = None;
        let res = match self.http.rpc(&self.endpoint, self.spelling, body, tp).await {
            Ok(res) => res,
            Err(e) if e.is_unreachable() || resuming => {
                tracing::info!(endpoint = %self.endpoint, "A2A peer lost: {e}");
                return Step::Dead;
            }
            Err(e) => {
                let mut outs = vec![DriverOutput::Event(e.event())];
                self.end(StopReason::Error, true, &mut outs);
                return self.emit(outs).await;
            }
        };
        if http::is_stream(&res) {
            *stream = Some(Events::new(res, self.max_event));
            return Step::Go;
        }
        match http::read_json(res, self.endpoint.as_str()).await {
            Ok(frame) if resuming && frame.get("error").is_some() => Step::Dead,
            Ok(frame) => self.on_frame(&frame, stream).await,
            Err(e) => {
                let mut outs = vec![DriverOutput::Event(e.event())];
                self.end(StopReason::Error, true, &mut outs);
                self.emit(outs).await
            }
        }
    }

    async fn on_next(&mut self, next: Next, tp: Option<&str>, stream: &mut Option<Events>) -> Step {
        match next {
            Next::Data(data) => match serde_json::from_str::<Value>(&data) {
                Ok(frame) => self.on_frame(&frame, stream).await,
                Err(e) => {
                    let event = parse_failed(&format!("an SSE event that is not JSON: {e}"));
                    self.emit(vec![DriverOutput::Event(event)]).await
                }
            },
            Next::Oversize => {
                let event = parse_failed(&format!(
                    "an SSE event over {} bytes; dropped",
                    self.max_event
                ));
                if let Step::Gone = self.emit(vec![DriverOutput::Event(event)]).await {
                    return Step::Gone;
                }
                self.resubscribe(tp, stream).await
            }
            Next::Ended(why) => {
                *stream = None;
                if !self.open || self.paused {
                    return Step::Go;
                }
                tracing::info!(endpoint = %self.endpoint, ?why, "A2A stream dropped mid-turn; resubscribing");
                self.resubscribe(tp, stream).await
            }
        }
    }

    /// The cut turn's task read again: its result so far mapped, then followed on if
    /// it still runs; a task the peer no longer has gets the prompt again.
    async fn take_up(
        &mut self,
        task: String,
        text: String,
        tp: Option<&str>,
        stream: &mut Option<Events>,
    ) -> Step {
        let snapshot = match self.task_request(Method::Get, &task, tp).await {
            Ok(frame) if frame.get("error").is_none() => frame,
            other => {
                let why = match other {
                    Ok(frame) => frame["error"].to_string(),
                    Err(e) => e.to_string(),
                };
                tracing::info!(%task, "the cut turn's task is not there ({why}); its prompt goes again");
                let parts = vec![self.spelling.text_part(&text)];
                return self.send(parts, tp, stream).await;
            }
        };
        tracing::info!(%task, "the cut turn's task taken up again");
        self.task = Some(task);
        let mut mapped = Vec::new();
        self.mapper.on_task(&snapshot["result"], &mut mapped);
        match self.on_mapped(mapped, stream).await {
            // Still running: followed on.
            Step::Go if self.open && !self.paused => self.resubscribe(tp, stream).await,
            step => step,
        }
    }

    /// `method` on `task` (read, cancel), its JSON answer.
    async fn task_request(
        &mut self,
        method: Method,
        task: &str,
        tp: Option<&str>,
    ) -> Result<Value, super::A2aError> {
        let id = self.next_id();
        let body = self
            .spelling
            .request(id, method, Spelling::task_params(task));
        let res = self
            .http
            .rpc(&self.endpoint, self.spelling, &body, tp)
            .await?;
        http::read_json(res, self.endpoint.as_str()).await
    }

    /// Re-attaches to the task's stream, with bounded retries and backoff.
    async fn resubscribe(&mut self, tp: Option<&str>, stream: &mut Option<Events>) -> Step {
        let Some(task) = self.task.clone() else {
            return Step::Dead;
        };
        let mut backoff = FIRST_BACKOFF;
        for _ in 0..RESUBSCRIBE_TRIES {
            tokio::time::sleep(backoff).await;
            backoff *= 2;
            let id = self.next_id();
            let body = self
                .spelling
                .request(id, Method::Resubscribe, Spelling::task_params(&task));
            match self.request(&body, tp, stream, true).await {
                Step::Dead => continue,
                step => return step,
            }
        }
        Step::Dead
    }

    /// `CancelTask` / `tasks/cancel`; the canceled state it answers ends the turn.
    async fn cancel(&mut self, tp: Option<&str>, stream: &mut Option<Events>) -> Step {
        if !self.open {
            return Step::Go;
        }
        let Some(task) = self.task.clone() else {
            *stream = None;
            let mut outs = Vec::new();
            self.end(StopReason::Cancelled, false, &mut outs);
            return self.emit(outs).await;
        };
        match self.task_request(Method::Cancel, &task, tp).await {
            Ok(frame) if frame.get("error").is_none() => {
                *stream = None;
                self.on_frame(&frame, stream).await
            }
            Ok(frame) => {
                let event = CapEvent::error(
                    crate::protocol::ErrorKind::Other("a2a_error".into()),
                    format!(
                        "the A2A peer refused to cancel task {task}: {}",
                        frame["error"]
                    ),
                    false,
                );
                self.emit(vec![DriverOutput::Event(event)]).await
            }
            Err(e) => self.emit(vec![DriverOutput::Event(e.event())]).await,
        }
    }

    async fn on_frame(&mut self, frame: &Value, stream: &mut Option<Events>) -> Step {
        let mut mapped = Vec::new();
        self.mapper.on_frame(frame, &mut mapped);
        self.on_mapped(mapped, stream).await
    }

    async fn on_mapped(&mut self, mapped: Vec<Mapped>, stream: &mut Option<Events>) -> Step {
        let mut outs = Vec::with_capacity(mapped.len());
        for m in mapped {
            match m {
                Mapped::Event(e) => outs.push(DriverOutput::Event(e)),
                Mapped::Task {
                    task_id,
                    context_id,
                } => {
                    let changed = self.task.as_deref() != Some(task_id.as_str())
                        || context_id.is_some() && context_id != self.context;
                    self.task = Some(task_id);
                    if context_id.is_some() {
                        self.context = context_id;
                    }
                    if changed && self.open {
                        outs.push(self.resume_point());
                    }
                }
                Mapped::Paused => self.paused = true,
                Mapped::Awaiting if self.open => {
                    // The next prompt continues this task.
                    *stream = None;
                    let task = self.task.take();
                    self.end(StopReason::EndTurn, false, &mut outs);
                    self.task = task;
                }
                Mapped::Awaiting => {}
                Mapped::Repeated(id) => tracing::debug!(
                    endpoint = %self.endpoint,
                    task = self.task.as_deref().unwrap_or_default(),
                    question = %id,
                    repeats = self.mapper.repeats(),
                    "the A2A peer said again a question raised before; not raised again"
                ),
                Mapped::End {
                    stop_reason,
                    is_error,
                } if self.open => {
                    *stream = None;
                    self.end(stop_reason, is_error, &mut outs);
                }
                Mapped::End { .. } => {}
            }
        }
        self.emit(outs).await
    }

    /// The conversation and the task in flight, as the session keeps them.
    fn resume_point(&self) -> DriverOutput {
        let point = ResumePoint {
            context: self.context.clone(),
            task: self.task.clone().filter(|_| self.open),
        };
        DriverOutput::ResumeId(point.id())
    }

    /// The turn's end (into `outs`): the task is done (the conversation, its context,
    /// goes on: the resume id says so before the end).
    fn end(&mut self, stop_reason: StopReason, is_error: bool, outs: &mut Vec<DriverOutput>) {
        self.open = false;
        self.paused = false;
        self.task = None;
        self.mapper.turn_over();
        if self.context.is_some() {
            outs.push(self.resume_point());
        }
        outs.push(DriverOutput::TurnEnd(TurnEnd::new(stop_reason, is_error)));
    }

    async fn emit(&self, outs: Vec<DriverOutput>) -> Step {
        if self.sink.send(outs).await {
            Step::Go
        } else {
            Step::Gone
        }
    }
}

/// The stream's next item, or never when there is none (a `select!` arm).
async fn next_of(stream: &mut Option<Events>) -> Next {
    match stream {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}
