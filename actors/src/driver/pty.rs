//! The PTY driver actor (spec §6.1, Appendix A): any terminal agent, driven the way
//! a human would drive it.
//!
//! The agent runs as a session leader on a fresh pseudo-terminal (its own process
//! group, killed as a whole through [`ProcessGroup`]). One engine task owns the
//! master side: it reads output into the [`Screen`], answers terminal queries,
//! classifies completed lines ([`LineParser`]), decides readiness and turn ends
//! ([`Settle`], on a timer: idle waiting costs nothing) and types prompts and
//! answers. Outputs travel in credit-bounded batches: when the session lags, the
//! engine stops reading and the agent blocks on its terminal.

use std::collections::VecDeque;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};

use super::sink::MAX_BATCH;
use super::stream_json::DriverArgs;
use super::{DriverMsg, DriverOutput, ExitCause, LaunchError, LaunchSpec, OutputSink, TurnEnd};
use crate::bindings::pty::input::CTRL_C;
use crate::bindings::pty::{LineParser, Screen, Settle, Verdict, answer_bytes, prompt_bytes};
use crate::manifest::CancelMode;
use crate::process::sweep::{MARKER_KEY, kill_marked};
use crate::process::{DEFAULT_GRACE, ProcessGroup, SpawnSpec};
use crate::protocol::{CapCode, CapEvent, ErrorKind, StopReason};

/// How long an agent whose terminal closed gets to exit before its group is killed.
const EXIT_WAIT: Duration = Duration::from_secs(2);
/// How long a shut-down agent gets after its terminal is hung up.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(3);
/// How long a dying driver waits for the session to take its last events.
const FLUSH_WAIT: Duration = Duration::from_secs(1);
/// Bytes read from the terminal at once.
const READ_CHUNK: usize = 16 * 1024;
/// Commands from the actor to its engine in flight (fed by the session, not the agent).
const COMMANDS: usize = 64;

/// The PTY driver.
pub struct PtyDriver;

/// What the actor asks of its engine.
#[derive(Debug)]
enum Cmd {
    Prompt(String),
    Answer {
        ask_id: String,
        value: Option<Value>,
    },
    Interrupt,
    Resize {
        rows: u16,
        cols: u16,
    },
}

pub struct PtyState {
    group: ProcessGroup,
    cmds: mpsc::Sender<Cmd>,
    engine: JoinHandle<()>,
    sink: OutputSink,
    urn: String,
    marker: String,
    cancel: CancelMode,
    stopping: bool,
}

fn argv_for(launch: &LaunchSpec) -> Result<Vec<String>, LaunchError> {
    let m = &launch.manifest;
    let mut argv = launch
        .argv
        .clone()
        .unwrap_or_else(|| m.startup.command.clone());
    if launch.argv.is_none()
        && let (Some(flag), Some(model)) = (&m.startup.model_arg, launch.config.model.get())
    {
        argv.push(flag.clone());
        argv.push(model.clone());
    }
    if argv.is_empty() {
        return Err(LaunchError::NoCommand {
            urn: launch.urn.clone(),
            binding: "pty",
        });
    }
    Ok(argv)
}

fn spawn_error(launch: &LaunchSpec, program: &str, e: impl std::fmt::Display) -> LaunchError {
    LaunchError::Spawn {
        urn: launch.urn.clone(),
        program: program.to_owned(),
        source: std::io::Error::other(e.to_string()),
    }
}

impl Actor for PtyDriver {
    type Msg = DriverMsg;
    type State = PtyState;
    type Arguments = DriverArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<DriverMsg>,
        args: DriverArgs,
    ) -> Result<PtyState, ActorProcessingErr> {
        let DriverArgs { launch, sink, .. } = args;
        let argv = argv_for(&launch)?;
        let program = launch.program_for(&argv[0]);
        let shown = program.display().to_string();
        // Unique per orchestrator process too: two fleets may run the same URN.
        let marker = format!(
            "{}#{}@{}",
            launch.urn,
            sink.generation(),
            std::process::id()
        );
        let mut spec = SpawnSpec::new(&program)
            .args(&argv[1..])
            .cwd(&launch.config.cwd)
            .env("TERM", "xterm-256color")
            .env(MARKER_KEY, &marker);
        for (k, v) in &launch.env {
            spec = spec.env(k, v);
        }
        let pty_cfg = &launch.manifest.pty;
        let (pty, pts) = pty_process::open().map_err(|e| spawn_error(&launch, &shown, e))?;
        pty.resize(pty_process::Size::new(pty_cfg.rows, pty_cfg.cols))
            .map_err(|e| spawn_error(&launch, &shown, e))?;
        let child = pty_process::Command::from(spec.session_command())
            .spawn(pts)
            .map_err(|e| spawn_error(&launch, &shown, e))?;
        let group = ProcessGroup::from_leader(child).map_err(|source| LaunchError::Spawn {
            urn: launch.urn.clone(),
            program: shown.clone(),
            source,
        })?;
        tracing::info!(urn = %launch.urn, pgid = group.pgid(), argv = ?argv, "agent spawned on a pty");

        let caps = &launch.manifest.capabilities;
        let cancel = caps.mid_turn_cancel.unwrap_or(pty_cfg.sigint_cancels_turn);
        let (cmds, rx) = mpsc::channel(COMMANDS);
        let engine = Engine::new(&launch, sink.clone());
        let engine = tokio::spawn(engine.run(pty, rx, myself.clone()));
        Ok(PtyState {
            group,
            cmds,
            engine,
            sink,
            urn: launch.urn.clone(),
            marker,
            cancel,
            stopping: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<DriverMsg>,
        msg: DriverMsg,
        st: &mut PtyState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            DriverMsg::Prompt { text } => st.command(Cmd::Prompt(text)).await,
            DriverMsg::Answer { ask_id, value } => st.command(Cmd::Answer { ask_id, value }).await,
            DriverMsg::Permission { req_id, .. } => {
                tracing::debug!(urn = %st.urn, %req_id, "a PTY agent asks in its terminal; ignored");
            }
            DriverMsg::Resize { rows, cols } => st.command(Cmd::Resize { rows, cols }).await,
            DriverMsg::Interrupt => match st.cancel {
                CancelMode::Graceful => st.command(Cmd::Interrupt).await,
                CancelMode::None => {
                    let event = CapEvent::error(
                        ErrorKind::Other(CapCode::CancelUnsupported.symbol().into()),
                        "this agent cannot cancel a turn (mid_turn_cancel = none)",
                        false,
                    );
                    st.sink.send_one(DriverOutput::Event(event)).await;
                }
                CancelMode::Hard => {
                    st.stopping = true;
                    st.engine.abort();
                    let _status = st.group.kill(DEFAULT_GRACE).await;
                    st.sweep();
                    st.sink
                        .send_one(DriverOutput::TurnEnd(TurnEnd {
                            stop_reason: StopReason::Cancelled,
                            is_error: false,
                            result_text: None,
                        }))
                        .await;
                    myself.stop(Some("turn cancelled hard".into()));
                }
            },
            DriverMsg::Kill { cause } => {
                st.stopping = true;
                st.engine.abort();
                let _status = st.group.kill(DEFAULT_GRACE).await;
                st.sweep();
                st.report_death(&cause).await;
                return Err(Box::new(cause));
            }
            DriverMsg::Shutdown => {
                st.stopping = true;
                // Hang up: SIGHUP to the terminal's session, as closing a window does.
                let _gone = crate::process::signal_group(st.group.pgid(), libc::SIGHUP);
                if tokio::time::timeout(SHUTDOWN_WAIT, st.group.wait())
                    .await
                    .is_err()
                {
                    tracing::warn!(urn = %st.urn, "agent ignored the hang-up; killing its group");
                }
                st.engine.abort();
                let _status = st.group.kill(DEFAULT_GRACE).await;
                st.sweep();
                myself.stop(None);
            }
            DriverMsg::OutputClosed => {
                if st.stopping {
                    return Ok(());
                }
                let status = tokio::time::timeout(EXIT_WAIT, st.group.wait()).await;
                let killed = st.group.kill(DEFAULT_GRACE).await.ok();
                st.sweep();
                let cause = match status {
                    Ok(Ok(s)) => ExitCause::from_status(s),
                    _ => killed.map_or(
                        ExitCause::DriverError {
                            message: "the agent's terminal closed and it could not be reaped"
                                .into(),
                        },
                        ExitCause::from_status,
                    ),
                };
                st.report_death(&cause).await;
                if cause.is_abnormal() {
                    return Err(Box::new(cause));
                }
                myself.stop(Some("agent exited".into()));
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<DriverMsg>,
        st: &mut PtyState,
    ) -> Result<(), ActorProcessingErr> {
        st.engine.abort();
        let _status = st.group.kill(DEFAULT_GRACE).await;
        st.sweep();
        Ok(())
    }
}

impl PtyState {
    async fn command(&mut self, cmd: Cmd) {
        if self.cmds.send(cmd).await.is_err() {
            tracing::debug!(urn = %self.urn, "engine gone; command dropped");
        }
    }

    /// Kill what escaped the group (daemons re-parented to init) by its marker.
    fn sweep(&self) {
        let n = kill_marked(MARKER_KEY, &self.marker);
        if n > 0 {
            tracing::warn!(urn = %self.urn, n, "killed processes that left the agent's group");
        }
    }

    /// `cap.error pty_died` (spec A6), before the session hears of the exit.
    async fn report_death(&mut self, cause: &ExitCause) {
        if !cause.is_abnormal() && self.stopping {
            return;
        }
        let mut event = CapEvent::error(
            ErrorKind::PtyDied,
            format!("the agent on the pty {cause}"),
            true,
        );
        if let CapEvent::Error(e) = &mut event {
            e.details = Some(serde_json::json!({ "cause": cause })).into();
        }
        self.sink.send_one(DriverOutput::Event(event)).await;
        self.sink.flushed(FLUSH_WAIT).await;
    }
}

/// The engine: owns the terminal's master side and everything derived from it.
struct Engine {
    screen: Screen,
    settle: Settle,
    parser: LineParser,
    sink: OutputSink,
    bracketed_paste: bool,
    queued_input: bool,
    raw_bytes: bool,
    ready: bool,
    interrupted: bool,
    waiting: VecDeque<String>,
    writes: Vec<u8>,
    out: Vec<DriverOutput>,
    events: Vec<CapEvent>,
    lines: Vec<String>,
}

impl Engine {
    fn new(launch: &LaunchSpec, sink: OutputSink) -> Self {
        let m = &launch.manifest;
        Engine {
            screen: Screen::new(m.pty.rows, m.pty.cols),
            settle: Settle::new(
                m.patterns.idle.clone(),
                m.patterns.ready_when.clone(),
                m.startup.ready_when.silence_ms,
                Instant::now().into_std(),
            ),
            parser: LineParser::new(m.patterns.clone()),
            sink,
            bracketed_paste: m.pty.bracketed_paste,
            queued_input: m.capabilities.queued_input || m.pty.queued_input_supported,
            raw_bytes: launch.raw_bytes,
            ready: false,
            interrupted: false,
            waiting: VecDeque::new(),
            writes: Vec::new(),
            out: Vec::new(),
            events: Vec::new(),
            lines: Vec::new(),
        }
    }

    async fn run(
        mut self,
        mut pty: pty_process::Pty,
        mut rx: mpsc::Receiver<Cmd>,
        driver: ActorRef<DriverMsg>,
    ) {
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            let deadline = self.settle.deadline().map(Instant::from_std);
            let (mut reader, mut writer) = pty.split();
            tokio::select! {
                read = reader.read(&mut buf) => match read {
                    Ok(n) if n > 0 => self.on_bytes(&buf[..n]),
                    _ => break, // EOF or EIO: the terminal's last slave closed
                },
                cmd = rx.recv() => match cmd {
                    Some(Cmd::Resize { rows, cols }) => {
                        self.screen.resize(rows, cols);
                        if let Err(e) = writer.resize(pty_process::Size::new(rows, cols)) {
                            tracing::debug!("resize failed: {e}");
                        }
                    }
                    Some(cmd) => self.on_cmd(cmd),
                    None => break,
                },
                () = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                    self.on_quiet();
                }
            }
            if !self.writes.is_empty() {
                let bytes = std::mem::take(&mut self.writes);
                if writer.write_all(&bytes).await.is_err() || writer.flush().await.is_err() {
                    break;
                }
            }
            self.out
                .extend(self.events.drain(..).map(DriverOutput::Event));
            while !self.out.is_empty() {
                let rest = self.out.split_off(self.out.len().min(MAX_BATCH));
                let batch = std::mem::replace(&mut self.out, rest);
                if !self.sink.send(batch).await {
                    return; // the session is gone; the actor's post_stop kills the agent
                }
            }
        }
        let _gone = driver.cast(DriverMsg::OutputClosed);
    }

    fn on_bytes(&mut self, bytes: &[u8]) {
        if self.raw_bytes {
            self.events.push(CapEvent::pty_raw(bytes));
        }
        self.settle.on_output(Instant::now().into_std());
        self.screen.feed(bytes, &mut self.lines);
        self.writes.extend(self.screen.take_replies());
        for line in self.lines.drain(..) {
            self.settle.on_line();
            if self.settle.is_busy() {
                self.parser.on_line(&line, &mut self.events);
            }
        }
    }

    fn on_cmd(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Prompt(text) => {
                if !self.ready || self.settle.is_busy() {
                    if self.ready && !self.queued_input {
                        self.events.push(CapEvent::error(
                            ErrorKind::Other(CapCode::QueuedInputUnsupported.symbol().into()),
                            "this agent takes no input while a turn runs",
                            false,
                        ));
                        return;
                    }
                    self.waiting.push_back(text);
                    return;
                }
                self.submit(text);
            }
            Cmd::Answer { ask_id, value } => match self.parser.take_ask(&ask_id) {
                Some(yes_no) => {
                    let keys = answer_bytes(value.as_ref(), yes_no);
                    self.parser.expect_echo(&String::from_utf8_lossy(&keys));
                    self.writes.extend(keys);
                }
                None => tracing::debug!(%ask_id, "answer to an unknown ask ignored"),
            },
            Cmd::Interrupt => {
                if self.settle.is_busy() {
                    self.interrupted = true;
                    self.writes.push(CTRL_C);
                }
            }
            Cmd::Resize { .. } => {}
        }
    }

    fn submit(&mut self, text: String) {
        self.interrupted = false;
        self.parser.begin_turn(&text);
        self.settle.submitted(&text, Instant::now().into_std());
        self.writes
            .extend(prompt_bytes(&text, self.bracketed_paste));
    }

    fn on_quiet(&mut self) {
        match self
            .settle
            .evaluate(Instant::now().into_std(), &self.screen)
        {
            Verdict::Ready => {
                self.ready = true;
                self.out.push(DriverOutput::Ready {
                    resume_id: None,
                    resumed: false,
                });
                if let Some(next) = self.waiting.pop_front() {
                    self.submit(next);
                }
            }
            Verdict::TurnEnd => {
                self.parser.end_turn(&mut self.events);
                let error = self.parser.saw_error();
                let stop_reason = match (self.interrupted, error) {
                    (true, _) => StopReason::Cancelled,
                    (false, true) => StopReason::Error,
                    (false, false) => StopReason::EndTurn,
                };
                self.out
                    .extend(self.events.drain(..).map(DriverOutput::Event));
                self.out.push(DriverOutput::TurnEnd(TurnEnd {
                    stop_reason,
                    is_error: error && !self.interrupted,
                    result_text: None,
                }));
                if let Some(next) = self.waiting.pop_front() {
                    self.submit(next);
                }
            }
            Verdict::Resubmit => self.writes.push(b'\r'),
            Verdict::Wait => {
                if self.settle.is_busy() {
                    let line = self.screen.cursor_line();
                    self.parser.on_partial(&line, &mut self.events);
                }
            }
        }
    }
}
