//! The speak loop: upstream frames in, the inner session's turns out. One turn at a
//! time (prompts that arrive during a turn queue behind it); a turn's `result` is
//! written once its `turn_ended` event is (its frames all precede it); permissions
//! the policy leaves open go upstream as `can_use_tool` and their answers come back
//! down; a signal ends the session with an error result.

use std::collections::{HashMap, VecDeque};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use capfleet_engine::answerer::HumanQuestion;
use capfleet_engine::fault::DiskFault;
use capfleet_engine::protocol::Decision;
use capfleet_engine::session::{SessionError, TurnResult};
use capfleet_wire::bindings::stream_json::outbound;
use capfleet_wire::events::{Answer, OpenRequest};
use capfleet_wire::events::{EventBody, Published, RunOutcome, TurnOutcome, UsageTotals};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use super::answerer::{Answerer, Pending, Reply};
use super::args::{InputFormat, SpeakArgs};
use super::frames::{Speaker, TurnEnd, can_use_tool, journal_artifact};
use super::inbound::{Inbound, Message, spawn_reader};
use super::out::Out;
use super::transcript::Transcript;
use super::{EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE};
use capfleet_app::one_fleet::FleetEnd;
use capfleet_app::one_session::refuse;
use capfleet_app::signals::StopSignals;

/// How long a turn's reply waits for its `turn_ended` event to be read.
const CATCH_UP: Duration = Duration::from_secs(2);
/// How long a fleet's run stopped by a signal may take to end its agents.
const RUN_STOP: Duration = Duration::from_secs(10);

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
    pending: Pending,
    transcript: Transcript,
    started: Instant,
    /// Its `turn_ended` event was read.
    ended: bool,
}

pub(super) struct Conversation<'a> {
    args: &'a SpeakArgs,
    answerer: Answerer,
    speaker: Option<Speaker>,
    out: Out,
    queue: VecDeque<Message>,
    turns: u32,
    total_cost_usd: f64,
    /// Permissions and asks waiting for upstream's answer, by our request id.
    pending: HashMap<String, HumanQuestion>,
    requests: u64,
    last: Option<TurnEnd>,
}

impl<'a> Conversation<'a> {
    pub(super) fn new(args: &'a SpeakArgs, answerer: Answerer) -> Self {
        Conversation {
            args,
            answerer,
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
        self.queue
            .extend(self.args.prompt.clone().map(Message::plain));
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
                self.queue.push_back(Message::plain(all));
                None
            }
            InputFormat::Text => None,
        };
        let mut running: Option<Running> = None;
        loop {
            if running.is_none() {
                match self.queue.pop_front() {
                    Some(message) => running = Some(self.start(message).await),
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
                    Some(m) => self.on_inbound(m, running.as_ref()),
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
                    if let Some(r) = running.as_mut() {
                        r.pending.signal(signal);
                        // A fleet's run ends its agents before speak ends (its
                        // events meanwhile read and dropped, so it never waits on us).
                        if r.pending.run_id().is_some() {
                            let waited = async {
                                loop {
                                    tokio::select! {
                                        _ = r.pending.wait() => break,
                                        Some(_) = ends.events.recv() => {}
                                    }
                                }
                            };
                            if tokio::time::timeout(RUN_STOP, waited).await.is_err() {
                                eprintln!("capfleet: the fleet's run did not end in {RUN_STOP:?}");
                            }
                        }
                    }
                    self.interrupted(running.take(), &signal.to_string());
                    // The error result, in whatever output format was asked.
                    self.out.finish(self.last.as_ref()).await;
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
        super::ended_code(self.last.as_ref())
    }

    /// Start a turn; the first one says `system/init` first.
    async fn start(&mut self, message: Message) -> Running {
        let started = Instant::now();
        let pending = self
            .answerer
            .ask(message, self.args.max_turns, self.turns)
            .await;
        if self.speaker.is_none() {
            let session_id = self
                .answerer
                .session_id()
                .await
                .or_else(|| self.args.resume.clone())
                .unwrap_or_else(fresh_session_id);
            let model = self.args.model.clone().unwrap_or_else(|| "default".into());
            let mut speaker = Speaker::new(session_id, model);
            let cwd = std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default();
            let mode = if self.args.permission_mode
                == Some(capfleet_engine::protocol::PermissionMode::None)
            {
                "bypassPermissions"
            } else {
                "default"
            };
            self.out.frame(&speaker.init(&cwd, mode));
            self.speaker = Some(speaker);
        }
        let transcript = Transcript::new(
            self.args.include_partial_messages,
            pending.run_id().map(str::to_owned),
        );
        Running {
            pending,
            transcript,
            started,
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

    /// The turn's reply: read its events up to its end, then its `result`.
    /// `false` when the session is gone.
    async fn finish(
        &mut self,
        mut r: Running,
        reply: Reply,
        events: &mut mpsc::Receiver<Published>,
    ) -> bool {
        let ended = match reply {
            Reply::Session(reply) => {
                if reply.is_ok() {
                    let deadline = tokio::time::Instant::now() + CATCH_UP;
                    while !r.ended {
                        match tokio::time::timeout_at(deadline, events.recv()).await {
                            Ok(Some(event)) => self.translate(&mut r, &event),
                            Ok(None) | Err(_) => break,
                        }
                    }
                }
                session_ended(&mut r, reply)
            }
            Reply::Fleet(end) => {
                // Every event of the run was passed on before its end.
                while let Ok(event) = events.try_recv() {
                    self.translate(&mut r, &event);
                }
                self.answerer.learn(&end);
                if let Some(speaker) = self.speaker.as_mut()
                    && !end.run_id.is_empty()
                {
                    let mut frames = Vec::new();
                    r.transcript.close(speaker, &mut frames);
                    self.out.frames(&frames);
                    self.out.frame(&journal_artifact(&end));
                }
                fleet_ended(*end)
            }
        };
        self.turns += 1;
        self.total_cost_usd += ended.usage.cost_usd;
        let end = TurnEnd {
            subtype: ended.subtype,
            error: ended.error,
            interrupted: ended.interrupted,
            text: ended.text,
            duration_ms: r.started.elapsed().as_millis() as u64,
            num_turns: self.turns,
            usage: ended.usage,
            total_cost_usd: self.total_cost_usd,
            denials: Vec::new(),
        };
        if let Some(speaker) = self.speaker.as_mut() {
            let frame = speaker.result(&end);
            self.out.result(frame);
        }
        self.last = Some(end);
        ended.alive
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

    fn on_inbound(&mut self, message: Inbound, running: Option<&Running>) {
        match message {
            Inbound::Prompt(p) => self.queue.push_back(p),
            Inbound::Control {
                request_id,
                subtype,
                ..
            } => {
                let line = match subtype.as_str() {
                    "interrupt" => {
                        if let Some(r) = running {
                            r.pending.cancel("interrupt from upstream");
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

async fn wait_reply(running: &mut Option<Running>) -> Reply {
    match running {
        Some(r) => r.pending.wait().await,
        None => std::future::pending().await,
    }
}

/// A turn's end, before it is a `result`.
struct Ended {
    subtype: &'static str,
    error: Option<String>,
    interrupted: bool,
    usage: UsageTotals,
    text: String,
    /// The answerer can take another turn.
    alive: bool,
}

/// A session's turn's end.
fn session_ended(r: &mut Running, reply: Result<TurnResult, SessionError>) -> Ended {
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
    Ended {
        subtype,
        error,
        interrupted,
        usage,
        text,
        alive,
    }
}

/// A fleet's run's end: a budget stop is Claude's `error_max_budget_usd`, a stopped
/// run an interrupted one; the fleet takes the next message whatever this run did.
fn fleet_ended(end: FleetEnd) -> Ended {
    let (subtype, interrupted) = match end.outcome {
        Some(RunOutcome::Completed) => ("success", false),
        Some(RunOutcome::BudgetExceeded) => ("error_max_budget_usd", false),
        Some(RunOutcome::Interrupted) => ("error_during_execution", true),
        Some(RunOutcome::SessionFailed | RunOutcome::DiskFailed | RunOutcome::TreeFailed)
        | None => ("error_during_execution", false),
    };
    Ended {
        subtype,
        error: end.error,
        interrupted,
        usage: end.usage,
        text: end.text,
        alive: true,
    }
}
