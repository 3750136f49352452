//! The stream-json client link: output frames plus the inbound message
//! queue, with interrupt-aware waiting and permission round trips.

use std::collections::VecDeque;
use std::io;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::frames::Out;
use super::inbound::Inbound;
use super::script::steps::{Flow, Stop};

/// What a client message means to a waiting turn.
enum Event {
    Nothing,
    Interrupt,
    Answer(Value),
}

/// Both directions of the stdio conversation.
pub(super) struct Client {
    pub out: Out,
    rx: Receiver<Inbound>,
    /// Prompts that arrived mid-turn, run after it.
    queued: VecDeque<String>,
    eof: bool,
    /// Exit at once at the end of input, even mid-turn (the script's `exit_at_eof`).
    exit_at_eof: bool,
}

impl Client {
    pub(super) fn new(rx: Receiver<Inbound>, exit_at_eof: bool) -> Client {
        Client {
            out: Out::new(),
            rx,
            queued: VecDeque::new(),
            eof: false,
            exit_at_eof,
        }
    }

    /// The next prompt (queued first); `None` at end of input.
    pub(super) fn next_prompt(&mut self) -> io::Result<Option<String>> {
        loop {
            if let Some(prompt) = self.queued.pop_front() {
                return Ok(Some(prompt));
            }
            if self.eof {
                return Ok(None);
            }
            match self.rx.recv() {
                Ok(message) => {
                    self.handle(message, None)?;
                }
                Err(_) => self.eof = true,
            }
        }
    }

    fn handle(&mut self, message: Inbound, awaiting: Option<&str>) -> io::Result<Event> {
        Ok(match message {
            Inbound::Prompt(prompt) => {
                self.queued.push_back(prompt);
                Event::Nothing
            }
            Inbound::Interrupt { request_id } => {
                self.out.ack(&request_id)?;
                Event::Interrupt
            }
            Inbound::Control { request_id } => {
                self.out.ack(&request_id)?;
                Event::Nothing
            }
            Inbound::Response {
                request_id,
                response,
            } if awaiting == Some(request_id.as_str()) => Event::Answer(response),
            Inbound::Response { .. } => Event::Nothing,
            Inbound::Eof => {
                self.eof = true;
                Event::Nothing
            }
        })
    }

    /// Waits `duration`, handling client messages; stops on interrupt.
    pub(super) fn wait(&mut self, duration: Duration) -> io::Result<Flow> {
        self.out.flush()?;
        let deadline = Instant::now() + duration;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Flow::Next);
            }
            if self.eof {
                std::thread::sleep(left);
                return Ok(Flow::Next);
            }
            match self.rx.recv_timeout(left) {
                Ok(message) => {
                    if let Event::Interrupt = self.handle(message, None)? {
                        return Ok(Flow::Stop(Stop::Interrupted));
                    }
                }
                Err(RecvTimeoutError::Timeout) => return Ok(Flow::Next),
                Err(RecvTimeoutError::Disconnected) => self.eof = true,
            }
            self.exit_at_end_of_input();
        }
    }

    /// Mid-turn, at the end of input, with `exit_at_eof`: the sim exits at once,
    /// status 0 — the turn in flight is abandoned (what was written before is
    /// flushed), no result frame follows. Without it the turn goes on (Claude Code
    /// finishes the turn in flight); between turns the end of input ends
    /// [`Client::next_prompt`].
    fn exit_at_end_of_input(&mut self) {
        if self.eof && self.exit_at_eof {
            let _gone = self.out.flush();
            std::process::exit(0);
        }
    }

    /// Handles pending client messages without blocking.
    pub(super) fn poll(&mut self) -> io::Result<Flow> {
        loop {
            match self.rx.try_recv() {
                Ok(message) => {
                    if let Event::Interrupt = self.handle(message, None)? {
                        return Ok(Flow::Stop(Stop::Interrupted));
                    }
                }
                Err(TryRecvError::Empty) => return Ok(Flow::Next),
                Err(TryRecvError::Disconnected) => {
                    self.eof = true;
                    self.exit_at_end_of_input();
                    return Ok(Flow::Next);
                }
            }
            self.exit_at_end_of_input();
        }
    }

    /// Sends a `can_use_tool` request and waits for its `control_response`.
    pub(super) fn request_permission(
        &mut self,
        tool: &str,
        input: &Value,
        tool_use_id: &str,
        risk: &str,
    ) -> io::Result<Result<Value, Stop>> {
        let request_id = format!("sim_req_{}", self.out.next_seq());
        self.out.emit(&json!({
            "type": "control_request",
            "request_id": request_id,
            "request": {
                "subtype": "can_use_tool",
                "tool_name": tool,
                "input": input,
                "tool_use_id": tool_use_id,
                "risk_level": risk,
                "permission_suggestions": [],
            },
        }))?;
        self.out.flush()?;
        loop {
            self.exit_at_end_of_input();
            if self.eof {
                let message = "stdin closed while waiting for a control_response".to_string();
                return Ok(Err(Stop::Error {
                    message,
                    subtype: "error_during_execution".to_string(),
                    status: None,
                }));
            }
            let Ok(message) = self.rx.recv() else {
                self.eof = true;
                continue;
            };
            match self.handle(message, Some(&request_id))? {
                Event::Answer(response) => return Ok(Ok(response)),
                Event::Interrupt => return Ok(Err(Stop::Interrupted)),
                Event::Nothing => {}
            }
        }
    }
}
