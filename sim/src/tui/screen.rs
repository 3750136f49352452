//! The TUI's screen and keyboard primitives: boot screen, prompt and answer
//! input, interrupt-aware waiting with the spinner, and line output.

use std::io::{self, Write};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::line_editor::Key;
use crate::script::Script;
use crate::script::steps::{Flow, Stop};
use crate::term::{Input, take_interrupt, take_resize};
use crate::tui::{Options, Tui};

const SPINNER: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const TICK: Duration = Duration::from_millis(20);
const SPIN_EVERY: Duration = Duration::from_millis(80);
const PROMPT: &str = "\x1b[1;36m❯\x1b[0m ";

impl Tui {
    pub(crate) fn boot(&mut self, script: &Script, options: &Options) -> io::Result<()> {
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

    pub(crate) fn cursor_report(&mut self, timeout: Duration) -> io::Result<Option<(u16, u16)>> {
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
    pub(crate) fn pump(&mut self, timeout: Duration, echo: bool) -> io::Result<Vec<Key>> {
        let mut keys = Vec::new();
        match self.rx.recv_timeout(timeout) {
            Ok(Input::Bytes(bytes)) => {
                let mut echoed = Vec::new();
                self.editor.feed(&bytes, &mut echoed, &mut keys);
                if self.full.is_some() {
                    // The input box shows what is typed, whether or not it is echoed.
                    self.redraw()?;
                    self.out.flush()?;
                } else if echo && !echoed.is_empty() {
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
    pub(crate) fn key_in_turn(&mut self, key: Key) -> bool {
        match key {
            Key::Submit(line) if !line.trim().is_empty() => self.queued.push_back(line),
            Key::Interrupt => return true,
            Key::Eof => self.eof = true,
            _ => {}
        }
        false
    }

    /// Shows the prompt and returns the next prompt; `None` at end of input.
    pub(crate) fn read_prompt(&mut self) -> io::Result<Option<String>> {
        if let Some(full) = &mut self.full {
            full.set_busy(false);
            self.spinner = None;
            self.redraw()?;
        } else {
            let pending = self.editor.pending();
            self.out.write_all(PROMPT.as_bytes())?;
            self.out
                .write_all(pending.replace('\n', "\r\n").as_bytes())?;
            self.line_open = true;
        }
        self.out.flush()?;
        let mut late = self.late.take().map(|(text, d)| (text, Instant::now() + d));
        loop {
            if late.as_ref().is_some_and(|(_, at)| Instant::now() >= *at)
                && let Some((text, _)) = late.take()
            {
                self.late_line(&text)?;
            }
            if let Some(prompt) = self.queued.pop_front() {
                self.entered(&prompt, false)?;
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
            if let Some(line) = &submitted {
                self.entered(line, true)?;
                return Ok(submitted);
            }
            if interrupted {
                self.editor.clear();
                if self.full.is_some() {
                    self.redraw()?;
                } else {
                    self.out.write_all(b"\r\n")?;
                    self.out.write_all(PROMPT.as_bytes())?;
                }
                self.out.flush()?;
            }
        }
    }

    /// A `late` step's text, printed while the prompt is shown.
    fn late_line(&mut self, text: &str) -> io::Result<()> {
        if let Some(full) = &mut self.full {
            full.line(text);
            self.redraw()?;
        } else {
            // Over the prompt line, then the prompt again below it.
            self.out
                .write_all(format!("\r\x1b[K{text}\r\n{PROMPT}").as_bytes())?;
            self.out
                .write_all(self.editor.pending().replace('\n', "\r\n").as_bytes())?;
        }
        self.out.flush()
    }

    /// `input` was entered. Inline it is on screen already (`echoed`) or written now,
    /// and its line ends; full screen it moves from the input box to the transcript.
    fn entered(&mut self, input: &str, echoed: bool) -> io::Result<()> {
        if let Some(full) = &mut self.full {
            full.entered(input);
            self.redraw()?;
            return self.out.flush();
        }
        if !echoed {
            self.out.write_all(input.replace('\n', "\r\n").as_bytes())?;
        }
        self.end_input_line()
    }

    /// Ends the input line (inline; the full screen has no line to end).
    fn end_input_line(&mut self) -> io::Result<()> {
        if self.full.is_none() {
            self.out.write_all(b"\r\n")?;
        }
        self.line_open = false;
        self.out.flush()
    }

    /// Draws the full screen anew (inline: nothing to do).
    fn redraw(&mut self) -> io::Result<()> {
        match &self.full {
            Some(full) => {
                let frame = full.frame(&self.editor.pending());
                self.out.write_all(frame.as_bytes())
            }
            None => Ok(()),
        }
    }

    /// Reads one answer line (echoed); stops on Ctrl-C or end of input.
    pub(crate) fn read_answer(&mut self) -> io::Result<Result<String, Stop>> {
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
                    status: None,
                }));
            }
            for key in self.pump(TICK, true)? {
                match key {
                    Key::Submit(line) if !line.trim().is_empty() => {
                        self.entered(&line, true)?;
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
    pub(crate) fn wait(&mut self, duration: Duration, spin: bool) -> io::Result<Flow> {
        let deadline = Instant::now() + duration;
        loop {
            if take_interrupt() {
                return Ok(Flow::Stop(Stop::Interrupted));
            }
            if let Some((rows, cols)) = take_resize() {
                if let Some(full) = &mut self.full {
                    full.resize(rows, cols);
                }
                self.text(&format!("terminal resized to {rows}x{cols}\n"))?;
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

    pub(crate) fn spin(&mut self) -> io::Result<()> {
        let frame = match self.spinner {
            Some((_, drawn)) if drawn.elapsed() < SPIN_EVERY => return Ok(()),
            Some((frame, _)) => (frame + 1) % SPINNER.len(),
            None => 0,
        };
        self.spinner = Some((frame, Instant::now()));
        if let Some(full) = &mut self.full {
            full.spin(SPINNER[frame]);
            return self.redraw();
        }
        write!(
            self.out,
            "\r\x1b[K\x1b[33m{}\x1b[0m \x1b[2mWorking…\x1b[0m",
            SPINNER[frame]
        )
    }

    /// Erases the spinner and ends an open line (full screen: the spinner stays
    /// until the turn ends).
    pub(crate) fn settle(&mut self) -> io::Result<()> {
        if let Some(full) = &mut self.full {
            full.close_line();
            return Ok(());
        }
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
    pub(crate) fn line(&mut self, text: &str) -> io::Result<()> {
        self.settle()?;
        if let Some(full) = &mut self.full {
            full.line(text);
            return self.redraw();
        }
        self.out.write_all(text.as_bytes())?;
        self.out.write_all(b"\r\n")
    }

    /// Prints streamed text (newlines become CRLF).
    pub(crate) fn text(&mut self, text: &str) -> io::Result<()> {
        if let Some(full) = &mut self.full {
            full.text(text);
            return self.redraw();
        }
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
    pub(crate) fn output(&mut self, text: &str) -> io::Result<()> {
        for piece in text.lines() {
            self.line(&format!("  \x1b[2m⎿\x1b[0m {piece}"))?;
        }
        Ok(())
    }

    /// Reads y/yes/n/no (any case), asking again on other answers.
    pub(crate) fn read_yes_no(&mut self) -> io::Result<Result<bool, Stop>> {
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

/// A one-line summary of a tool input: its `command`, its only string
/// value, or its JSON; at most 60 characters.
pub(crate) fn summary(input: &Value) -> String {
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
