//! The speak loop: upstream frames in, the inner session's turns out. One turn at a
//! time (prompts that arrive during a turn queue behind it); a turn's `result` is
//! written once its `turn_ended` event is (its frames all precede it); permissions
//! the policy leaves open go upstream as `can_use_tool` and their answers come back
//! down; a signal ends the session with an error result.

use std::collections::{HashMap, VecDeque};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use capfleet_actors::answerer::HumanQuestion;
use capfleet_actors::bindings::stream_json::outbound;
use capfleet_actors::events::requests::{Answer, OpenRequest};
use capfleet_actors::events::{EventBody, Published, TurnOutcome};
use capfleet_actors::fault::DiskFault;
use capfleet_actors::protocol::{CancelScope, Decision};
use capfleet_actors::session::{SessionError, SessionMsg, TurnResult};
use ractor::ActorRef;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter, Stdout};
use tokio::sync::{mpsc, oneshot};

use super::args::{InputFormat, OutputFormat, SpeakArgs};
use super::frames::{Speaker, TurnEnd, can_use_tool};
use super::inbound::{Inbound, spawn_reader};
use super::transcript::Transcript;
use super::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE};
use crate::cmd::one_session::refuse;
use crate::signals::StopSignals;

/// How long a turn's reply waits for its `turn_ended` event to be read.
const CATCH_UP: Duration = Duration::from_secs(2);

/// Who decided an answer that came from upstream.
const RULE_UPSTREAM: &str = "upstream";

/// What the loop listens to besides stdin.
pub(super) struct Ends {
    pub events: mpsc::Receiver<Published>,
    pub questions: mpsc::Receiver<HumanQuestion>,
    pub faults: mpsc::Receiver<DiskFault>,
    pub signals: StopSignals,
}

/// The running turn.
struct Running {
    reply: oneshot::Receiver<Result<TurnResult, SessionError>>,
    transcript: Transcript,
    started: Instant,
    /// Its `turn_ended` event was read.
    ended: bool,
}

pub(super) struct Conversation<'a> {
    args: &'a SpeakArgs,
    session: ActorRef<SessionMsg>,
    speaker: Option<Speaker>,
    out: Out,
    queue: VecDeque<String>,
    turns: u32,
    total_cost_usd: f64,
    /// Permissions and asks waiting for upstream's answer, by our request id.
    pending: HashMap<String, HumanQuestion>,
    requests: u64,
    last: Option<TurnEnd>,
}

impl<'a> Conversation<'a> {
    pub(super) fn new(args: &'a SpeakArgs, session: ActorRef<SessionMsg>) -> Self {
        Conversation {
            args,
            session,
            speaker: None,
            out: Out::new(args.output_format),
            queue: VecDeque::new(),
            turns: 0,
            total_cost_usd: 0.0,
            pending: HashMap::new(),
            requests: 0,
            last: None,
        }
    }

    pub(super) async fn run(mut self, mut ends: Ends) -> ExitCode {
        self.queue.extend(self.args.prompt.clone());
        let mut inbound = match self.args.input_format {
            InputFormat::StreamJson => Some(spawn_reader()),
            InputFormat::Text if self.queue.is_empty() => {
                let mut all = String::new();
                if tokio::io::stdin().read_to_string(&mut all).await.is_err()
                    || all.trim().is_empty()
                {
                    eprintln!("error: no prompt: give it as an argument or on stdin");
                    return ExitCode::from(EXIT_USAGE);
                }
                self.queue.push_back(all);
                None
            }
            InputFormat::Text => None,
        };
        let mut running: Option<Running> = None;
        loop {
            if running.is_none() {
                match self.queue.pop_front() {
                    Some(prompt) => running = Some(self.start(prompt).await),
                    None if inbound.is_none() => break,
                    None => {}
                }
            }
            tokio::select! {
                message = recv(&mut inbound) => match message {
                    None => {
                        inbound = None;
                        self.upstream_gone();
                    }
                    Some(m) => self.on_inbound(m, running.is_some()),
                },
                Some(event) = ends.events.recv() => {
                    if let Some(r) = running.as_mut() {
                        self.translate(r, &event);
                        // What else is there now joins this burst; then the open
                        // block is written, so upstream sees text without waiting
                        // for the turn's end.
                        while let Ok(event) = ends.events.try_recv() {
                            self.translate(r, &event);
                        }
                        if let Some(speaker) = self.speaker.as_mut() {
                            let mut frames = Vec::new();
                            r.transcript.close(speaker, &mut frames);
                            self.out.frames(&frames);
                        }
                    }
                }
                reply = wait_reply(&mut running) => {
                    let r = running.take().expect("a reply comes only for a running turn");
                    if !self.finish(r, reply, &mut ends.events).await {
                        break;
                    }
                }
                Some(q) = ends.questions.recv() => {
                    // The turn's frames so far come first, as the agent wrote them.
                    if let Some(r) = running.as_mut() {
                        while let Ok(event) = ends.events.try_recv() {
                            self.translate(r, &event);
                        }
                    }
                    if inbound.is_some() {
                        self.ask_upstream(q);
                    } else {
                        refuse(q, "stdin ended: nobody upstream can answer");
                    }
                }
                Some(fault) = ends.faults.recv() => {
                    eprintln!("error: {fault}; the session is stopped (kept: {})", fault.kept);
                    return ExitCode::from(EXIT_FAILED);
                }
                signal = ends.signals.recv() => {
                    StopSignals::escalate(signal);
                    self.interrupted(running.take(), &signal.to_string());
                    self.out.flush().await;
                    return ExitCode::from(EXIT_INTERRUPTED);
                }
            }
            self.out.flush().await;
            if self.out.broken {
                eprintln!("error: stdout closed: nobody reads the answers; the session ends");
                return ExitCode::from(EXIT_FAILED);
            }
        }
        self.out.finish(self.last.as_ref()).await;
        match &self.last {
            Some(end) if end.error.is_none() => ExitCode::SUCCESS,
            Some(end) if end.interrupted => ExitCode::from(EXIT_INTERRUPTED),
            Some(_) => ExitCode::from(EXIT_FAILED),
            None => ExitCode::SUCCESS,
        }
    }

    /// Start a turn; the first one says `system/init` first.
    async fn start(&mut self, prompt: String) -> Running {
        if self.speaker.is_none() {
            let snapshot = ractor::call!(self.session, SessionMsg::Snapshot).ok();
            let session_id = snapshot
                .and_then(|s| s.resume_id)
                .or_else(|| self.args.resume.clone())
                .unwrap_or_else(fresh_session_id);
            let model = self.args.model.clone().unwrap_or_else(|| "default".into());
            let mut speaker = Speaker::new(session_id, model);
            let cwd = std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default();
            let mode = if self.args.permission_mode
                == Some(capfleet_actors::protocol::PermissionMode::None)
            {
                "bypassPermissions"
            } else {
                "default"
            };
            self.out.frame(&speaker.init(&cwd, mode));
            self.speaker = Some(speaker);
        }
        let (tx, reply) = oneshot::channel();
        let target = self.session.clone();
        tokio::spawn(async move {
            let asked = target.call(|reply| SessionMsg::Ask { prompt, reply }, None);
            let result = match asked.await {
                Ok(ractor::rpc::CallResult::Success(r)) => r,
                Ok(_) | Err(_) => Err(SessionError::Closed),
            };
            let _gone = tx.send(result);
        });
        Running {
            reply,
            transcript: Transcript::new(self.args.include_partial_messages),
            started: Instant::now(),
            ended: false,
        }
    }

    fn translate(&mut self, running: &mut Running, event: &Published) {
        let Some(speaker) = self.speaker.as_mut() else {
            return;
        };
        running.ended |= matches!(event.body, EventBody::TurnEnded { .. });
        let mut frames = Vec::new();
        running.transcript.on_event(speaker, event, &mut frames);
        self.out.frames(&frames);
    }

    /// The turn's reply: read its events up to `turn_ended`, then its `result`.
    /// `false` when the session is gone.
    async fn finish(
        &mut self,
        mut r: Running,
        reply: Result<TurnResult, SessionError>,
        events: &mut mpsc::Receiver<Published>,
    ) -> bool {
        if reply.is_ok() {
            let deadline = tokio::time::Instant::now() + CATCH_UP;
            while !r.ended {
                match tokio::time::timeout_at(deadline, events.recv()).await {
                    Ok(Some(event)) => self.translate(&mut r, &event),
                    Ok(None) | Err(_) => break,
                }
            }
        }
        self.turns += 1;
        let (subtype, error, interrupted, usage, text, alive) = match reply {
            Ok(result) => match result.outcome {
                TurnOutcome::Completed => ("success", None, false, result.usage, result.text, true),
                TurnOutcome::Cancelled => (
                    "error_during_execution",
                    Some("interrupted by user".to_owned()),
                    true,
                    result.usage,
                    result.text,
                    true,
                ),
                TurnOutcome::Failed => {
                    let why = r
                        .transcript
                        .last_error
                        .take()
                        .unwrap_or_else(|| "the turn failed".into());
                    (
                        "error_during_execution",
                        Some(why),
                        false,
                        result.usage,
                        result.text,
                        true,
                    )
                }
            },
            Err(e @ SessionError::MaxTurns { .. }) => (
                "error_max_turns",
                Some(e.to_string()),
                false,
                r.transcript.usage,
                String::new(),
                true,
            ),
            Err(e) => {
                let alive = matches!(e, SessionError::Busy);
                (
                    "error_during_execution",
                    Some(e.to_string()),
                    false,
                    r.transcript.usage,
                    String::new(),
                    alive,
                )
            }
        };
        self.total_cost_usd += usage.cost_usd;
        let end = TurnEnd {
            subtype,
            error,
            interrupted,
            text,
            duration_ms: r.started.elapsed().as_millis() as u64,
            num_turns: self.turns,
            usage,
            total_cost_usd: self.total_cost_usd,
            denials: Vec::new(),
        };
        if let Some(speaker) = self.speaker.as_mut() {
            let frame = speaker.result(&end);
            self.out.result(frame);
        }
        self.last = Some(end);
        alive
    }

    /// A signal: the running turn ends with an error result.
    fn interrupted(&mut self, running: Option<Running>, signal: &str) {
        let (Some(r), Some(speaker)) = (running, self.speaker.as_mut()) else {
            return;
        };
        self.turns += 1;
        self.total_cost_usd += r.transcript.usage.cost_usd;
        let end = TurnEnd {
            subtype: "error_during_execution",
            error: Some(format!("stopped by {signal}")),
            interrupted: true,
            text: r.transcript.text.clone(),
            duration_ms: r.started.elapsed().as_millis() as u64,
            num_turns: self.turns,
            usage: r.transcript.usage,
            total_cost_usd: self.total_cost_usd,
            denials: Vec::new(),
        };
        let frame = speaker.result(&end);
        self.out.result(frame);
        self.last = Some(end);
    }

    fn on_inbound(&mut self, message: Inbound, turn_running: bool) {
        match message {
            Inbound::Prompt(p) => self.queue.push_back(p),
            Inbound::Control {
                request_id,
                subtype,
                ..
            } => {
                let line = match subtype.as_str() {
                    "interrupt" => {
                        if turn_running {
                            let _gone = self.session.cast(SessionMsg::Cancel {
                                scope: CancelScope::CurrentTurn,
                                reason: "interrupt from upstream".into(),
                            });
                        }
                        outbound::control_success(&request_id, json!({}))
                    }
                    "initialize" => outbound::control_success(
                        &request_id,
                        json!({"commands": [], "output_style": "default",
                               "available_output_styles": ["default"], "models": []}),
                    ),
                    "set_permission_mode" | "set_model" => {
                        tracing::warn!("{subtype}: the inner agent keeps what it started with");
                        outbound::control_success(&request_id, json!({}))
                    }
                    other => outbound::control_error_response(
                        &request_id,
                        &format!("unsupported control request: {other}"),
                    ),
                };
                self.out.line(&line);
            }
            Inbound::Response { request_id, answer } => {
                self.on_upstream_answer(&request_id, answer)
            }
        }
    }

    /// An open permission or ask goes upstream as `can_use_tool`.
    fn ask_upstream(&mut self, question: HumanQuestion) {
        self.requests += 1;
        let request_id = format!("capfleet-{}", self.requests);
        let (tool, input, tool_use_id) = match &question.request {
            OpenRequest::Permission {
                req_id,
                tool,
                intent,
                ..
            } => (
                tool.clone(),
                intent.clone().unwrap_or_else(|| json!({})),
                req_id.clone(),
            ),
            OpenRequest::Ask {
                ask_id,
                prompt,
                form,
            } => (
                "AskUserQuestion".to_owned(),
                ask_input(prompt, form.as_ref()),
                ask_id.clone(),
            ),
        };
        self.out
            .frame(&can_use_tool(&request_id, &tool, &input, &tool_use_id));
        self.pending.insert(request_id, question);
    }

    /// stdin ended: what waits for upstream's answer is denied (fail-safe).
    fn upstream_gone(&mut self) {
        for (_, question) in self.pending.drain() {
            refuse(question, "stdin ended before upstream answered");
        }
    }

    fn on_upstream_answer(&mut self, request_id: &str, answer: Result<Value, String>) {
        let Some(question) = self.pending.remove(request_id) else {
            tracing::warn!(request_id, "an answer to no open request ignored");
            return;
        };
        let allowed = answer
            .as_ref()
            .is_ok_and(|v| v.get("behavior").and_then(Value::as_str) == Some("allow"));
        if let Err(e) = &answer {
            tracing::warn!(request_id, "upstream failed to answer: {e}; denied");
        }
        let reply = match &question.request {
            OpenRequest::Permission { req_id, .. } => Answer::Permission {
                req_id: req_id.clone(),
                decision: if allowed {
                    Decision::AllowOnce
                } else {
                    Decision::Deny
                },
                rule: RULE_UPSTREAM.into(),
            },
            OpenRequest::Ask { ask_id, .. } => Answer::Ask {
                ask_id: ask_id.clone(),
                value: allowed
                    .then(|| answer.ok()?.pointer("/updatedInput/answers").cloned())
                    .flatten(),
                rule: RULE_UPSTREAM.into(),
            },
        };
        let _session_gone = question.session.cast(reply);
    }
}

/// Claude's `AskUserQuestion` input for an ask: one question per form property
/// (options from its `oneOf` consts), or the prompt as one free question.
fn ask_input(prompt: &str, form: Option<&Value>) -> Value {
    let props = form
        .and_then(|f| f.get("properties"))
        .and_then(Value::as_object);
    let questions: Vec<Value> = match props {
        Some(props) => props
            .iter()
            .map(|(question, schema)| {
                let options: Vec<Value> = schema
                    .get("oneOf")
                    .and_then(Value::as_array)
                    .map(|o| {
                        o.iter()
                            .filter_map(|c| c.get("const")?.as_str())
                            .map(|label| json!({"label": label, "description": ""}))
                            .collect()
                    })
                    .unwrap_or_default();
                json!({"question": question, "header": "", "options": options, "multiSelect": false})
            })
            .collect(),
        None => vec![json!({"question": prompt, "header": "", "options": [], "multiSelect": false})],
    };
    json!({ "questions": questions })
}

/// A conversation id when the inner agent has none.
fn fresh_session_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("capfleet-{:x}-{:x}", std::process::id(), nanos)
}

async fn recv(inbound: &mut Option<mpsc::Receiver<Inbound>>) -> Option<Inbound> {
    match inbound {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn wait_reply(running: &mut Option<Running>) -> Result<TurnResult, SessionError> {
    match running {
        Some(r) => (&mut r.reply).await.unwrap_or(Err(SessionError::Closed)),
        None => std::future::pending().await,
    }
}

/// stdout, by the output format: every frame (stream-json), the last result (json),
/// the last answer's text (text).
struct Out {
    format: OutputFormat,
    w: BufWriter<Stdout>,
    buf: Vec<u8>,
    last_result: Option<Value>,
    broken: bool,
}

impl Out {
    fn new(format: OutputFormat) -> Self {
        Out {
            format,
            w: BufWriter::new(tokio::io::stdout()),
            buf: Vec::new(),
            last_result: None,
            broken: false,
        }
    }

    /// A frame of the stream (written only with stream-json output).
    fn frame(&mut self, frame: &Value) {
        if self.format == OutputFormat::StreamJson {
            let mut line = frame.to_string();
            line.push('\n');
            self.line(&line);
        }
    }

    fn frames(&mut self, frames: &[Value]) {
        for f in frames {
            self.frame(f);
        }
    }

    /// A protocol line, newline included.
    fn line(&mut self, line: &str) {
        self.buf.extend_from_slice(line.as_bytes());
    }

    /// A turn's `result` frame.
    fn result(&mut self, frame: Value) {
        self.frame(&frame);
        self.last_result = Some(frame);
    }

    async fn flush(&mut self) {
        if self.buf.is_empty() || self.broken {
            return;
        }
        let ok = self.w.write_all(&self.buf).await.is_ok() && self.w.flush().await.is_ok();
        self.buf.clear();
        self.broken = !ok;
    }

    /// The end: json and text outputs say the last turn here.
    async fn finish(&mut self, last: Option<&TurnEnd>) {
        match (self.format, last, self.last_result.take()) {
            (OutputFormat::Json, _, Some(result)) => self.line(&format!("{result}\n")),
            (OutputFormat::Text, Some(end), _) => self.line(&format!("{}\n", end.text)),
            _ => {}
        }
        self.flush().await;
    }
}
