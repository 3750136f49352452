//! `--mode tui`: an interactive terminal agent for the PTY binding.
//!
//! Output conventions (after ANSI stripping) are listed in the module
//! documentation of [`crate::sim`]; `config/agents/sim-tui.toml` parses them.

use std::collections::VecDeque;
use std::io::{self, BufWriter, StdoutLock, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::line_editor::{Key, LineEditor};
use super::script::Script;
use super::state::{StateDir, TurnPicker};
use super::steps::{
    Ask, FloodGen, Flow, Frontend, PlanEntry, Stop, ToolStep, Usage, chunks, run_turn,
};
use super::term::{Input, RawMode, install_sigint, spawn_reader, take_interrupt};

const SPINNER: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const TICK: Duration = Duration::from_millis(20);
const SPIN_EVERY: Duration = Duration::from_millis(80);
const PROMPT: &str = "\x1b[1;36m❯\x1b[0m ";

/// Options of the TUI mode.
#[derive(Debug, Clone)]
pub struct Options {
    pub session_id: String,
    pub model: String,
    pub ask_cursor: bool,
}

/// Runs the mode until end of input.
pub fn run(script: &Script, state: &StateDir, options: &Options) -> io::Result<()> {
    install_sigint(script.header.ignore_sigint);
    let _raw = RawMode::enable();
    let mut tui = Tui::new(spawn_reader());
    tui.boot(script, options)?;
    let mut picker = TurnPicker::new(&script.turns);
    while let Some(prompt) = tui.read_prompt()? {
        let turn = picker.pick(&script.turns, &prompt);
        run_turn(&mut tui, &script.header, turn, &prompt, state)?;
    }
    tui.out.write_all(b"\x1b[?2004l")?;
    tui.out.flush()
}

struct Tui {
    out: BufWriter<StdoutLock<'static>>,
    rx: Receiver<Input>,
    editor: LineEditor,
    queued: VecDeque<String>,
    eof: bool,
    /// The spinner's frame and last draw time, while it is shown.
    spinner: Option<(usize, Instant)>,
    /// The cursor is not at the start of a line.
    line_open: bool,
}

impl Tui {
    fn new(rx: Receiver<Input>) -> Tui {
        Tui {
            out: BufWriter::with_capacity(64 * 1024, io::stdout().lock()),
            rx,
            editor: LineEditor::default(),
            queued: VecDeque::new(),
            eof: false,
            spinner: None,
            line_open: false,
        }
    }

    fn boot(&mut self, script: &Script, options: &Options) -> io::Result<()> {
        self.out.write_all(b"\x1b[?2004h")?;
        self.line(&format!(
            "\x1b[1;35m✻\x1b[0m \x1b[1mcapfleet sim\x1b[0m \x1b[2m· {} · session {}\x1b[0m",
            options.model, options.session_id
        ))?;
        if let Some(banner) = &script.header.banner {
            for text in banner.lines() {
                self.line(text)?;
            }
        }
        self.wait(Duration::from_millis(script.header.boot_delay_ms), true)?;
        if options.ask_cursor {
            self.out.write_all(b"\x1b[6n")?;
            let report = self.cursor_report(Duration::from_secs(2))?;
            self.line(&match report {
                Some((row, col)) => format!("\x1b[2m· cursor at {row};{col}\x1b[0m"),
                None => "\x1b[2m· cursor: no reply\x1b[0m".to_string(),
            })?;
        }
        take_interrupt();
        self.line("\x1b[32m✓\x1b[0m capfleet sim ready")
    }

    fn cursor_report(&mut self, timeout: Duration) -> io::Result<Option<(u16, u16)>> {
        self.out.flush()?;
        let deadline = Instant::now() + timeout;
        while !self.eof && Instant::now() < deadline {
            for key in self.pump(TICK, false)? {
                match key {
                    Key::CursorReport(row, col) => return Ok(Some((row, col))),
                    other => {
                        self.key_in_turn(other);
                    }
                }
            }
        }
        Ok(None)
    }

    /// Reads input for up to `timeout`; echoes typing when `echo`.
    fn pump(&mut self, timeout: Duration, echo: bool) -> io::Result<Vec<Key>> {
        let mut keys = Vec::new();
        match self.rx.recv_timeout(timeout) {
            Ok(Input::Bytes(bytes)) => {
                let mut echoed = Vec::new();
                self.editor.feed(&bytes, &mut echoed, &mut keys);
                if echo && !echoed.is_empty() {
                    self.out.write_all(&echoed)?;
                    self.out.flush()?;
                }
            }
            Ok(Input::Eof) | Err(RecvTimeoutError::Disconnected) => self.eof = true,
            Err(RecvTimeoutError::Timeout) => {}
        }
        Ok(keys)
    }

    /// A key arriving mid-turn: lines queue as the next prompts.
    fn key_in_turn(&mut self, key: Key) -> bool {
        match key {
            Key::Submit(line) if !line.trim().is_empty() => self.queued.push_back(line),
            Key::Interrupt => return true,
            Key::Eof => self.eof = true,
            _ => {}
        }
        false
    }

    /// Shows the prompt and returns the next prompt; `None` at end of input.
    fn read_prompt(&mut self) -> io::Result<Option<String>> {
        let pending = self.editor.pending();
        self.out.write_all(PROMPT.as_bytes())?;
        self.out
            .write_all(pending.replace('\n', "\r\n").as_bytes())?;
        self.line_open = true;
        self.out.flush()?;
        loop {
            if let Some(prompt) = self.queued.pop_front() {
                self.out
                    .write_all(prompt.replace('\n', "\r\n").as_bytes())?;
                self.end_input_line()?;
                return Ok(Some(prompt));
            }
            if self.eof {
                self.end_input_line()?;
                return Ok(None);
            }
            let mut interrupted = take_interrupt();
            let mut submitted = None;
            for key in self.pump(Duration::from_millis(50), true)? {
                match key {
                    Key::Submit(line) if line.trim().is_empty() => {}
                    Key::Submit(line) if submitted.is_none() => submitted = Some(line),
                    Key::Submit(line) => self.queued.push_back(line),
                    Key::Interrupt => interrupted = true,
                    Key::Eof => self.eof = true,
                    _ => {}
                }
            }
            if submitted.is_some() {
                self.end_input_line()?;
                return Ok(submitted);
            }
            if interrupted {
                self.editor.clear();
                self.out.write_all(b"\r\n")?;
                self.out.write_all(PROMPT.as_bytes())?;
                self.out.flush()?;
            }
        }
    }

    fn end_input_line(&mut self) -> io::Result<()> {
        self.out.write_all(b"\r\n")?;
        self.line_open = false;
        self.out.flush()
    }

    /// Reads one answer line (echoed); stops on Ctrl-C or end of input.
    fn read_answer(&mut self) -> io::Result<Result<String, Stop>> {
        self.out.flush()?;
        loop {
            if take_interrupt() {
                return Ok(Err(Stop::Interrupted));
            }
            if self.eof {
                let message = "end of input while waiting for an answer".to_string();
                return Ok(Err(Stop::Error {
                    message,
                    subtype: "error_during_execution".to_string(),
                }));
            }
            for key in self.pump(TICK, true)? {
                match key {
                    Key::Submit(line) if !line.trim().is_empty() => {
                        self.end_input_line()?;
                        return Ok(Ok(line.trim().to_string()));
                    }
                    Key::Interrupt => return Ok(Err(Stop::Interrupted)),
                    Key::Eof => self.eof = true,
                    _ => {}
                }
            }
        }
    }

    /// Waits `duration` with the spinner (when `spin`); stops on Ctrl-C.
    fn wait(&mut self, duration: Duration, spin: bool) -> io::Result<Flow> {
        let deadline = Instant::now() + duration;
        loop {
            if take_interrupt() {
                return Ok(Flow::Stop(Stop::Interrupted));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Flow::Next);
            }
            if spin && !self.line_open {
                self.spin()?;
            }
            self.out.flush()?;
            for key in self.pump(left.min(TICK), false)? {
                if self.key_in_turn(key) {
                    return Ok(Flow::Stop(Stop::Interrupted));
                }
            }
        }
    }

    fn spin(&mut self) -> io::Result<()> {
        let frame = match self.spinner {
            Some((_, drawn)) if drawn.elapsed() < SPIN_EVERY => return Ok(()),
            Some((frame, _)) => (frame + 1) % SPINNER.len(),
            None => 0,
        };
        write!(
            self.out,
            "\r\x1b[K\x1b[33m{}\x1b[0m \x1b[2mWorking…\x1b[0m",
            SPINNER[frame]
        )?;
        self.spinner = Some((frame, Instant::now()));
        Ok(())
    }

    /// Erases the spinner and ends an open line.
    fn settle(&mut self) -> io::Result<()> {
        if self.spinner.take().is_some() {
            self.out.write_all(b"\r\x1b[K")?;
        }
        if self.line_open {
            self.out.write_all(b"\r\n")?;
            self.line_open = false;
        }
        Ok(())
    }

    /// Prints one complete line.
    fn line(&mut self, text: &str) -> io::Result<()> {
        self.settle()?;
        self.out.write_all(text.as_bytes())?;
        self.out.write_all(b"\r\n")
    }

    /// Prints streamed text (newlines become CRLF).
    fn text(&mut self, text: &str) -> io::Result<()> {
        if self.spinner.take().is_some() {
            self.out.write_all(b"\r\x1b[K")?;
        }
        self.out.write_all(text.replace('\n', "\r\n").as_bytes())?;
        if !text.is_empty() {
            self.line_open = !text.ends_with('\n');
        }
        Ok(())
    }

    /// Prints `text` as indented tool output lines.
    fn output(&mut self, text: &str) -> io::Result<()> {
        for piece in text.lines() {
            self.line(&format!("  \x1b[2m⎿\x1b[0m {piece}"))?;
        }
        Ok(())
    }
}

/// A one-line summary of a tool input: its `command`, its only string
/// value, or its JSON; at most 60 characters.
fn summary(input: &Value) -> String {
    let strings: Vec<&str> = input
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, v)| v.as_str())
        .collect();
    let text = match input.get("command").and_then(Value::as_str) {
        Some(command) => command.to_string(),
        None if strings.len() == 1 && input.as_object().is_some_and(|o| o.len() == 1) => {
            strings[0].to_string()
        }
        None if input.as_object().is_some_and(|o| o.is_empty()) => String::new(),
        None => input.to_string(),
    };
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() > 60 {
        format!("{}…", flat.chars().take(59).collect::<String>())
    } else {
        flat
    }
}

impl Frontend for Tui {
    fn begin_turn(&mut self, _prompt: &str) -> io::Result<()> {
        take_interrupt();
        self.spin()?;
        self.out.flush()
    }

    fn say(&mut self, text: &str, chunk: usize, delay: Duration) -> io::Result<Flow> {
        self.settle()?;
        for (i, piece) in chunks(text, chunk).into_iter().enumerate() {
            if i > 0
                && let Flow::Stop(stop) = self.wait(delay, false)?
            {
                return Ok(Flow::Stop(stop));
            }
            self.text(piece)?;
        }
        self.settle()?;
        self.wait(Duration::ZERO, false)
    }

    fn think(&mut self, text: &str) -> io::Result<Flow> {
        for (i, piece) in text.lines().enumerate() {
            let lead = if i == 0 { "_thinking_ " } else { "  " };
            self.line(&format!("\x1b[2;3m{lead}{piece}\x1b[0m"))?;
        }
        self.wait(Duration::ZERO, false)
    }

    fn tool(&mut self, tool: &ToolStep) -> io::Result<Flow> {
        let name = &tool.name;
        self.line(&format!(
            "\x1b[1;33m◉\x1b[0m \x1b[1m{name}\x1b[0m({})",
            summary(&tool.input)
        ))?;
        if let Some(risk) = &tool.risk {
            self.line(&format!(
                "\x1b[33m⚠\x1b[0m Permission required: {name} (risk: {risk})"
            ))?;
            self.line("Do you want to proceed? (y/n)")?;
            let answer = match self.read_yes_no()? {
                Ok(answer) => answer,
                Err(stop) => return Ok(Flow::Stop(stop)),
            };
            if !answer {
                self.output("Permission denied")?;
                self.line(&format!("\x1b[31m◉\x1b[0m {name} failed"))?;
                return Ok(Flow::Next);
            }
        }
        let slice = Duration::from_millis(tool.duration_ms) / (tool.deltas.len() as u32 + 1);
        for delta in &tool.deltas {
            if let Flow::Stop(stop) = self.wait(slice, true)? {
                return Ok(Flow::Stop(stop));
            }
            self.output(delta)?;
        }
        if let Flow::Stop(stop) = self.wait(slice, true)? {
            return Ok(Flow::Stop(stop));
        }
        if tool.deltas.is_empty() {
            self.output(&tool.final_output())?;
        }
        let (colour, status) = if tool.is_error {
            (31, "failed")
        } else {
            (32, "completed")
        };
        self.line(&format!("\x1b[{colour}m◉\x1b[0m {name} {status}"))?;
        Ok(Flow::Next)
    }

    fn plan(&mut self, entries: &[PlanEntry]) -> io::Result<Flow> {
        self.line("\x1b[1m## Plan\x1b[0m")?;
        for entry in entries {
            let mark = match entry.status.as_str() {
                "completed" => "[x]",
                "in_progress" => "[~]",
                "cancelled" => "[-]",
                "blocked" => "[!]",
                _ => "[ ]",
            };
            let priority = entry
                .priority
                .as_ref()
                .map(|p| format!(" ({p})"))
                .unwrap_or_default();
            self.line(&format!(
                "  {mark} {} {}{priority}",
                entry.id, entry.content
            ))?;
        }
        self.wait(Duration::ZERO, false)
    }

    fn ask(&mut self, ask: &Ask) -> io::Result<Flow> {
        if ask.options.is_empty() {
            self.line(&format!("{} (y/n)", ask.question))?;
            return Ok(match self.read_yes_no()? {
                Ok(_) => Flow::Next,
                Err(stop) => Flow::Stop(stop),
            });
        }
        self.line(&ask.question)?;
        self.line(&format!(
            "\x1b[36m?\x1b[0m Select: {}",
            ask.options.join(", ")
        ))?;
        loop {
            let answer = match self.read_answer()? {
                Ok(answer) => answer,
                Err(stop) => return Ok(Flow::Stop(stop)),
            };
            let by_index = answer
                .parse::<usize>()
                .ok()
                .and_then(|i| ask.options.get(i.wrapping_sub(1)));
            if by_index.is_some() || ask.options.contains(&answer) {
                return Ok(Flow::Next);
            }
            self.line(&format!("Please answer one of: {}", ask.options.join(", ")))?;
        }
    }

    fn usage(&mut self, u: &Usage) -> io::Result<Flow> {
        self.line(&format!(
            "\x1b[2m· tokens in {} · out {} · cache read {} · cache write {} · ${:.4}\x1b[0m",
            u.input_tokens,
            u.output_tokens,
            u.cache_read_tokens,
            u.cache_creation_tokens,
            u.cost_usd
        ))?;
        Ok(Flow::Next)
    }

    fn pause(&mut self, duration: Duration) -> io::Result<Flow> {
        self.wait(duration, true)
    }

    fn flood(&mut self, bytes: u64, chunk: usize) -> io::Result<Flow> {
        self.settle()?;
        let mut generator = FloodGen::new(bytes);
        let mut buf = String::with_capacity(chunk);
        while generator.next_into(&mut buf, chunk) {
            self.text(&buf)?;
            if let Flow::Stop(stop) = self.wait(Duration::ZERO, false)? {
                return Ok(Flow::Stop(stop));
            }
        }
        self.settle()?;
        Ok(Flow::Next)
    }

    fn raw(&mut self, line: &str) -> io::Result<Flow> {
        self.line(line)?;
        Ok(Flow::Next)
    }

    fn oversize(&mut self, bytes: u64) -> io::Result<Flow> {
        self.settle()?;
        let block = [b'x'; 8192];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(block.len() as u64) as usize;
            self.out.write_all(&block[..n])?;
            left -= n as u64;
        }
        self.out.write_all(b"\r\n")?;
        Ok(Flow::Next)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn end_turn(&mut self, stop: Option<Stop>) -> io::Result<()> {
        match stop {
            None => self.settle()?,
            Some(Stop::Interrupted) => self.line("\x1b[31m⎿ Interrupted by user\x1b[0m")?,
            Some(Stop::Error { message, .. }) => self.line(&format!("\x1b[31m{message}\x1b[0m"))?,
        }
        self.out.flush()
    }
}

impl Tui {
    /// Reads y/yes/n/no (any case), asking again on other answers.
    fn read_yes_no(&mut self) -> io::Result<Result<bool, Stop>> {
        loop {
            match self.read_answer()? {
                Ok(answer) => match answer.to_lowercase().as_str() {
                    "y" | "yes" => return Ok(Ok(true)),
                    "n" | "no" => return Ok(Ok(false)),
                    _ => self.line("Please answer y or n")?,
                },
                Err(stop) => return Ok(Err(stop)),
            }
        }
    }
}
