//! The PTY driver's engine: the one task owning the terminal's master side, and
//! with it the screen, the settle clock, the line parser and the input queue.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use pty_process::{OwnedReadPty, OwnedWritePty};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

use super::{READ_CHUNK, WRITE_CHUNK};
use crate::bindings::pty::input::CTRL_C;
use crate::bindings::pty::{
    Fed, LineParser, Paste, RowScan, Screen, Settle, Verdict, answer_bytes, prompt_bytes,
};
use crate::chaos::interpose::{Reader, Writer};
use crate::driver::sink::MAX_BATCH;
use crate::driver::{DriverOutput, LaunchSpec, OutputSink, TurnEnd, oversize_line, registry_error};
use crate::protocol::{CapCode, CapEvent, HasMeta, META_LATE_OUTPUT, StopReason};

/// What the actor asks of its engine.
#[derive(Debug)]
pub(super) enum Cmd {
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

/// How the engine's run ended.
pub(super) enum End {
    /// The terminal closed (EOF or EIO: its last slave closed) or the actor went away.
    Closed,
    /// The session stopped taking output.
    SessionGone,
}

/// The engine: owns the terminal's master side and everything derived from it.
pub(super) struct Engine {
    screen: Screen,
    settle: Settle,
    parser: LineParser,
    rows: RowScan,
    sink: OutputSink,
    paste: Paste,
    queued_input: bool,
    raw_bytes: bool,
    ready: bool,
    interrupted: bool,
    /// A turn ended and no prompt went out since: lines are its late output.
    ended: bool,
    /// The session closed the agent: nothing it prints is late output any more.
    closing: Arc<AtomicBool>,
    max_line: usize,
    waiting: VecDeque<String>,
    /// Input not yet written, from `written` on.
    writes: Vec<u8>,
    written: usize,
    out: Vec<DriverOutput>,
    events: Vec<CapEvent>,
    lines: Vec<Fed>,
}

impl Engine {
    pub(super) fn new(launch: &LaunchSpec, sink: OutputSink, closing: Arc<AtomicBool>) -> Self {
        let m = &launch.manifest;
        Engine {
            screen: Screen::new(m.pty.rows, m.pty.cols, launch.max_line),
            settle: Settle::new(
                m.patterns.idle.clone(),
                m.patterns.ready_when.clone(),
                m.startup.ready_when.silence_ms,
                Instant::now().into_std(),
            ),
            parser: LineParser::new(m.patterns.clone()),
            rows: RowScan::default(),
            sink,
            paste: Paste::from_manifest(&m.pty),
            queued_input: m.capabilities.queued_input || m.pty.queued_input_supported,
            raw_bytes: launch.raw_bytes,
            ready: false,
            interrupted: false,
            ended: false,
            closing,
            max_line: launch.max_line,
            waiting: VecDeque::new(),
            writes: Vec::new(),
            written: 0,
            out: Vec::new(),
            events: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// Drives the terminal (its master side's halves, through the chaos interposer
    /// when the run has byte faults) until it closes or the actor goes away.
    pub(super) async fn run(
        mut self,
        mut reader: Reader<OwnedReadPty>,
        mut writer: Writer<OwnedWritePty>,
        mut rx: mpsc::Receiver<Cmd>,
    ) -> End {
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            let deadline = self.settle.deadline().map(Instant::from_std);
            let chunk =
                &self.writes[self.written..self.writes.len().min(self.written + WRITE_CHUNK)];
            tokio::select! {
                // Input goes in chunks while output keeps being drained: an agent
                // echoing a large paste blocks on its output otherwise, and so do we.
                wrote = writer.write(chunk), if !chunk.is_empty() => match wrote {
                    Ok(n) if n > 0 => self.wrote(n),
                    _ => break,
                },
                read = reader.read(&mut buf) => match read {
                    Ok(n) if n > 0 => self.on_bytes(&buf[..n]),
                    // EOF or EIO: the terminal's last slave closed.
                    _ => return self.at_end().await,
                },
                cmd = rx.recv() => match cmd {
                    Some(Cmd::Resize { rows, cols }) => {
                        self.screen.resize(rows, cols);
                        if let Err(e) = writer.get_ref().resize(pty_process::Size::new(rows, cols)) {
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
            if !self.flush().await {
                return End::SessionGone; // the actor's post_stop kills the agent
            }
        }
        End::Closed
    }

    /// Hands the outputs and events so far to the session; false: it is gone.
    async fn flush(&mut self) -> bool {
        self.out
            .extend(self.events.drain(..).map(DriverOutput::Event));
        while !self.out.is_empty() {
            let rest = self.out.split_off(self.out.len().min(MAX_BATCH));
            let batch = std::mem::replace(&mut self.out, rest);
            if !self.sink.send(batch).await {
                return false;
            }
        }
        true
    }

    /// The terminal closed: a line over the cap it ended inside is reported.
    async fn at_end(&mut self) -> End {
        if let Some(len) = self.screen.oversize() {
            self.events.push(oversize_line(len, self.max_line, false));
        }
        if self.flush().await {
            End::Closed
        } else {
            End::SessionGone
        }
    }

    /// `n` more bytes of input reached the terminal: typing counts as activity (no
    /// verdict while a paste is still going in).
    fn wrote(&mut self, n: usize) {
        self.written += n;
        if self.written >= self.writes.len() {
            self.writes.clear();
            self.written = 0;
        }
        self.settle.on_output(Instant::now().into_std());
    }

    fn on_bytes(&mut self, bytes: &[u8]) {
        if self.raw_bytes {
            self.events.push(CapEvent::pty_raw(bytes));
        }
        self.settle.on_output(Instant::now().into_std());
        self.screen.feed(bytes, &mut self.lines);
        self.writes.extend(self.screen.take_replies());
        let mut lines = std::mem::take(&mut self.lines);
        for fed in lines.drain(..) {
            match fed {
                Fed::Oversize(len, shown) => {
                    self.settle.on_line();
                    self.rows.note_cut(shown);
                    self.events.push(oversize_line(len, self.max_line, true));
                }
                Fed::Line(line) if self.settle.is_busy() => {
                    self.rows.note(&line);
                    self.busy_line(&line);
                }
                Fed::Line(line) if self.ended && !self.rows.seen(&line) => {
                    if self.closing.load(Ordering::Acquire) {
                        self.ended = false; // from here on the agent is leaving
                    } else {
                        self.late(&line);
                    }
                }
                Fed::Line(_) => {}
            }
        }
        self.lines = lines;
    }

    /// A line of the running turn. Only a line that says something (text, a tool
    /// call, an error: not chrome, not the echo of our own prompt) passes the prompt
    /// gate: an agent that echoes the prompt and then sits at its prompt for a while
    /// before it answers (a loaded machine, a slow model) has not ended its turn.
    fn busy_line(&mut self, line: &str) {
        let before = self.events.len();
        self.parser.on_line(line, &mut self.events);
        if self.events.len() > before {
            self.settle.on_line();
        }
    }

    /// A line completed after the turn ended and before the next prompt went out: the
    /// ended turn's, marked as late output (the session files it under that turn).
    /// Lines it showed already (a TUI redrawing its screen) are not taken again.
    fn late(&mut self, line: &str) {
        self.rows.note(line);
        let from = self.events.len();
        self.parser.on_line(line, &mut self.events);
        for event in &mut self.events[from..] {
            event.set_meta(META_LATE_OUTPUT, serde_json::Value::Bool(true));
        }
    }

    fn on_cmd(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Prompt(text) => {
                if !self.ready || self.settle.is_busy() {
                    if self.ready && !self.queued_input {
                        self.events.push(registry_error(
                            CapCode::QueuedInputUnsupported,
                            "this agent takes no input while a turn runs",
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
        self.ended = false;
        self.parser.begin_turn(&text);
        let on_screen = self.screen.logical_lines();
        self.rows.seed(on_screen.iter().map(|(l, _)| l.as_str()));
        self.settle.submitted(&text, Instant::now().into_std());
        self.writes.extend(prompt_bytes(&text, self.paste));
    }

    fn on_quiet(&mut self) {
        if self.settle.is_busy()
            && self
                .settle
                .deadline()
                .is_some_and(|d| d <= Instant::now().into_std())
        {
            // Quiet: rows drawn in place (no line feed) are complete by now.
            for line in self.rows.fresh(&self.screen.logical_lines()) {
                self.busy_line(&line);
            }
        }
        match self
            .settle
            .evaluate(Instant::now().into_std(), &self.screen)
        {
            Verdict::Ready => {
                self.ready = true;
                self.out.push(DriverOutput::Ready {
                    resume_id: None,
                    resumed: false,
                    meta: None,
                });
                if let Some(next) = self.waiting.pop_front() {
                    self.submit(next);
                }
            }
            Verdict::TurnEnd => {
                self.ended = true;
                self.parser.end_turn(&mut self.events);
                let error = self.parser.saw_error();
                let stop_reason = match (self.interrupted, error) {
                    (true, _) => StopReason::Cancelled,
                    (false, true) => StopReason::Error,
                    (false, false) => StopReason::EndTurn,
                };
                self.out
                    .extend(self.events.drain(..).map(DriverOutput::Event));
                self.out.push(DriverOutput::TurnEnd(TurnEnd::new(
                    stop_reason,
                    error && !self.interrupted,
                )));
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
