//! One A2A task of the sim: its script turn played through [`Frontend`] on a thread
//! of its own, each step a stream response into the task's outbox (text as agent
//! messages, tool calls, plans, thoughts and usage as marked data parts, asks and
//! gated tools as `input-required` answered by the client's next message to the task,
//! artifacts as artifact updates, `drop_stream` ending the SSE response mid-turn).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use capfleet_wire::bindings::a2a::{Spelling, TaskState, datapart};
use capfleet_wire::protocol::{CapEvent, Decision, PlanEntry as CapPlanEntry, RiskLevel};
use serde_json::{Value, json};
use tokio::sync::mpsc::Sender;

use super::outbox::Drops;
use super::snapshot::Snapshot;
use crate::frames::PAD_MARK;
use crate::script::steps::{
    Ask, FloodGen, Flow, Frontend, PlanEntry, Stop, ToolStep, Usage, chunks,
};
use capfleet_wire::bindings::a2a::outbound::TaskFrames;

/// What the task's SSE responses read.
#[derive(Debug)]
pub(super) enum Out {
    Frame(Value),
    /// Verbatim SSE data (a `raw` step).
    Raw(String),
    /// End the current SSE response; the task goes on (resubscribe to read on).
    /// Its number is counted before what it closes is queued ([`Drops::next`]).
    Drop(u64),
    /// The task is over: end the response.
    End,
}

pub(super) struct A2aTurn {
    pub task: TaskFrames,
    /// What the task said so far, for `GetTask`.
    pub snapshot: Arc<std::sync::Mutex<Snapshot>>,
    pub out: Sender<Out>,
    pub drops: Drops,
    pub answers: Receiver<Value>,
    pub cancelled: Arc<AtomicBool>,
    pub usage: Usage,
    pub said: u64,
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "client gone")
}

impl A2aTurn {
    fn send(&self, out: Out) -> io::Result<()> {
        self.out.blocking_send(out).map_err(|_| gone())
    }

    fn frame(&self, v: Value) -> io::Result<()> {
        capfleet_wire::sync::lock(&self.snapshot).record(&v);
        self.send(Out::Frame(v))
    }

    fn sp(&self) -> Spelling {
        self.task.spelling
    }

    fn event_part(&self, event: &CapEvent) -> Value {
        self.sp().data_part(datapart::encode(event))
    }

    fn events(&mut self, events: &[CapEvent]) -> io::Result<()> {
        self.said += 1;
        let parts = events.iter().map(|e| self.event_part(e)).collect();
        let id = format!("{}-m{}", self.task.id, self.said);
        self.frame(self.task.message(&id, parts))
    }

    /// Sleep `d`, watching for a cancel.
    fn wait(&self, d: Duration) -> Flow {
        let deadline = Instant::now() + d;
        loop {
            if self.cancelled.load(Ordering::Relaxed) {
                return Flow::Stop(Stop::Interrupted);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Flow::Next;
            }
            std::thread::sleep(left.min(Duration::from_millis(20)));
        }
    }

    /// `input-required` carrying `question`, then the client's answering message.
    fn ask_client(&mut self, text: &str, question: &CapEvent) -> io::Result<Result<Value, Stop>> {
        // Counted before the question is out: the answer's response, attached after
        // the client read it, skips this marker (it closes the asking response).
        let drop = self.drops.next();
        self.said += 1;
        let id = format!("{}-m{}", self.task.id, self.said);
        let parts = vec![self.sp().text_part(text), self.event_part(question)];
        let message = self.task.message_obj(&id, parts);
        self.frame(self.task.status(TaskState::InputRequired, Some(message)))?;
        self.send(Out::Drop(drop))?;
        loop {
            if self.cancelled.load(Ordering::Relaxed) {
                return Ok(Err(Stop::Interrupted));
            }
            match self.answers.recv_timeout(Duration::from_millis(50)) {
                Ok(message) => {
                    self.frame(self.task.status(TaskState::Working, None))?;
                    return Ok(Ok(message));
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(gone()),
            }
        }
    }
}

/// The CAP answer a client's message carries (its marked data part), else its text.
pub(super) fn answer_in(message: &Value) -> Option<CapEvent> {
    let parts = message.get("parts")?.as_array()?;
    parts
        .iter()
        .find_map(|p| datapart::decode(p.get("data")?)?.ok())
}

fn risk(r: Option<&str>) -> RiskLevel {
    match r {
        Some("low") => RiskLevel::Low,
        Some("high") => RiskLevel::High,
        _ => RiskLevel::Medium,
    }
}

impl Frontend for A2aTurn {
    fn begin_turn(&mut self, _prompt: &str) -> io::Result<()> {
        self.frame(self.task.task(TaskState::Submitted))?;
        self.frame(self.task.status(TaskState::Working, None))
    }

    fn say(&mut self, text: &str, chunk: usize, delay: Duration) -> io::Result<Flow> {
        self.said += 1;
        let id = format!("{}-m{}", self.task.id, self.said);
        for piece in chunks(text, chunk) {
            self.frame(self.task.message(&id, vec![self.sp().text_part(piece)]))?;
            if let Flow::Stop(s) = self.wait(delay) {
                return Ok(Flow::Stop(s));
            }
        }
        Ok(Flow::Next)
    }

    fn think(&mut self, text: &str) -> io::Result<Flow> {
        let id = format!("{}-t{}", self.task.id, self.said);
        self.events(&[CapEvent::thought(id, text)])?;
        Ok(Flow::Next)
    }

    fn tool(&mut self, tool: &ToolStep) -> io::Result<Flow> {
        self.said += 1;
        let call = format!("{}-call{}", self.task.id, self.said);
        if tool.risk.is_some() {
            let req = CapEvent::permission_request(
                call.clone(),
                tool.name.clone(),
                Some(tool.input.clone()),
                risk(tool.risk.as_deref()),
            );
            let answer = match self.ask_client(&format!("Allow {}?", tool.name), &req)? {
                Ok(a) => a,
                Err(stop) => return Ok(Flow::Stop(stop)),
            };
            let allowed = matches!(answer_in(&answer), Some(CapEvent::PermissionResponse(p)) if p.decision != Decision::Deny);
            if !allowed {
                return self.say(
                    &format!("permission denied: {}", tool.name),
                    0,
                    Duration::ZERO,
                );
            }
        }
        self.events(&[CapEvent::tool_start(
            call.clone(),
            tool.name.clone(),
            tool.input.clone(),
        )])?;
        if let Flow::Stop(s) = self.wait(Duration::from_millis(tool.duration_ms)) {
            return Ok(Flow::Stop(s));
        }
        let end = CapEvent::tool_end(
            call,
            Some(Value::String(tool.final_output())),
            tool.is_error,
            Some(tool.duration_ms),
        );
        self.events(&[end])?;
        Ok(Flow::Next)
    }

    fn plan(&mut self, entries: &[PlanEntry]) -> io::Result<Flow> {
        let entries = entries
            .iter()
            .filter_map(|e| {
                let v = json!({"id": e.id, "content": e.content, "status": e.status, "priority": e.priority, "_meta": e.meta});
                let mut v = v;
                if let Some(o) = v.as_object_mut() {
                    o.retain(|_, x| !x.is_null());
                }
                serde_json::from_value::<CapPlanEntry>(v).ok()
            })
            .collect();
        self.events(&[CapEvent::plan(entries)])?;
        Ok(Flow::Next)
    }

    fn ask(&mut self, ask: &Ask) -> io::Result<Flow> {
        self.said += 1;
        let ask_id = format!("{}-ask{}", self.task.id, self.said);
        let form = json!({"type": "string", "enum": ask.labels()});
        let question = CapEvent::ask_user(ask_id, ask.question.clone(), Some(form));
        let answer = match self.ask_client(&ask.question, &question)? {
            Ok(a) => a,
            Err(stop) => return Ok(Flow::Stop(stop)),
        };
        let value = match answer_in(&answer) {
            Some(CapEvent::AskUserAnswer(a)) => a
                .value
                .as_str()
                .map_or_else(|| a.value.to_string(), str::to_owned),
            _ => "none".to_owned(),
        };
        self.say(&format!("answer: {value}"), 0, Duration::ZERO)
    }

    fn usage(&mut self, usage: &Usage) -> io::Result<Flow> {
        self.usage.add(usage);
        Ok(Flow::Next)
    }

    fn pause(&mut self, duration: Duration) -> io::Result<Flow> {
        Ok(self.wait(duration))
    }

    fn flood(&mut self, bytes: u64, chunk: usize) -> io::Result<Flow> {
        let mut generator = FloodGen::new(bytes);
        let mut buf = String::new();
        self.said += 1;
        let id = format!("{}-m{}", self.task.id, self.said);
        while generator.next_into(&mut buf, chunk.max(1)) {
            self.frame(self.task.message(&id, vec![self.sp().text_part(&buf)]))?;
        }
        Ok(Flow::Next)
    }

    fn raw(&mut self, line: &str) -> io::Result<Flow> {
        self.send(Out::Raw(line.to_owned()))?;
        Ok(Flow::Next)
    }

    fn oversize(&mut self, bytes: u64, _newline: bool) -> io::Result<Flow> {
        let text = PAD_MARK.repeat(usize::try_from(bytes).unwrap_or(0) / PAD_MARK.len().max(1) + 1);
        self.said += 1;
        let id = format!("{}-m{}", self.task.id, self.said);
        self.frame(self.task.message(&id, vec![self.sp().text_part(&text)]))?;
        Ok(Flow::Next)
    }

    fn drop_stream(&mut self) -> io::Result<Flow> {
        self.send(Out::Drop(self.drops.next()))?;
        Ok(Flow::Next)
    }

    fn artifact(&mut self, name: &str, mime: &str, content: &Value) -> io::Result<Flow> {
        let text = content
            .as_str()
            .map_or_else(|| content.to_string(), str::to_owned);
        let id = format!("{}-{name}", self.task.id);
        let half = text.len() / 2;
        let cut = (half..=text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        let (a, b) = text.split_at(cut);
        let first = self.task.typed(self.sp().text_part(a), mime);
        self.frame(self.task.artifact(&id, name, first, false, false))?;
        let second = self.task.typed(self.sp().text_part(b), mime);
        self.frame(self.task.artifact(&id, name, second, true, true))?;
        Ok(Flow::Next)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn end_turn(&mut self, stop: Option<Stop>) -> io::Result<()> {
        let (state, text) = match stop {
            None => (TaskState::Completed, None),
            Some(Stop::Interrupted) => (TaskState::Canceled, None),
            Some(Stop::Error { message, .. }) => (TaskState::Failed, Some(message)),
        };
        let u = &self.usage;
        let usage = json!({"_meta": {"cap.kind": "cap.usage"}, "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens, "cache_read_tokens": u.cache_read_tokens,
            "cache_creation_tokens": u.cache_creation_tokens, "cost_usd_estimate": u.cost_usd});
        let mut parts = Vec::new();
        if let Some(t) = text {
            parts.push(self.sp().text_part(&t));
        }
        // Like stream-json's `result`, every turn's end reports its usage (zeros too).
        parts.push(self.sp().data_part(usage));
        let id = format!("{}-end", self.task.id);
        let message = (!parts.is_empty()).then(|| self.task.message_obj(&id, parts));
        self.frame(self.task.status(state, message))?;
        self.send(Out::End)
    }
}
