//! `--mode tui`: an interactive terminal agent for the PTY binding.
//!
//! Output conventions (after ANSI stripping) are listed in the module
//! documentation of [the crate root](crate); `config/agents/sim-tui.toml` parses them.

pub(crate) mod screen;

use std::collections::VecDeque;
use std::io::{self, BufWriter, StdoutLock, Write};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::frames::write_padding;
use crate::line_editor::LineEditor;
use crate::script::Script;
use crate::script::state::{StateDir, TurnPicker};
use crate::script::steps::{
    Ask, FloodGen, Flow, Frontend, PlanEntry, Stop, ToolStep, Usage, chunks, run_turn,
};
use crate::term::{
    Input, RawMode, install_sigint, install_sigwinch, size, spawn_reader, take_interrupt,
};
use crate::tui::screen::summary;
use crate::tui_full::FullScreen;

/// Options of the TUI mode.
#[derive(Debug, Clone)]
pub(super) struct Options {
    pub session_id: String,
    pub model: String,
    pub ask_cursor: bool,
    /// Draw as a full-screen agent (see `tui_full`).
    pub fullscreen: bool,
}

/// Runs the mode until end of input.
pub(super) fn run(script: &Script, state: &StateDir, options: &Options) -> io::Result<()> {
    install_sigint(script.header.ignore_sigint);
    install_sigwinch();
    let _raw = RawMode::enable();
    let full = options.fullscreen.then(|| FullScreen::new(size()));
    let mut tui = Tui::new(spawn_reader(), full);
    tui.boot(script, options)?;
    let mut picker = TurnPicker::new(&script.turns).repeating(script.header.repeat);
    while let Some(prompt) = tui.read_prompt()? {
        let turn = picker.pick(&script.turns, &prompt);
        run_turn(&mut tui, &script.header, turn, &prompt, state)?;
    }
    tui.out.write_all(b"\x1b[?2004l")?;
    tui.out.flush()
}

pub(super) struct Tui {
    pub(super) out: BufWriter<StdoutLock<'static>>,
    pub(super) rx: Receiver<Input>,
    pub(super) editor: LineEditor,
    pub(super) queued: VecDeque<String>,
    pub(super) eof: bool,
    /// The spinner's frame and last draw time, while it is shown.
    pub(super) spinner: Option<(usize, Instant)>,
    /// The cursor is not at the start of a line.
    pub(super) line_open: bool,
    /// A `late` step's text and delay, printed that long after the next prompt.
    pub(super) late: Option<(String, Duration)>,
    /// `--fullscreen`: every output redraws this screen whole.
    pub(super) full: Option<FullScreen>,
}

impl Tui {
    pub(super) fn new(rx: Receiver<Input>, full: Option<FullScreen>) -> Tui {
        Tui {
            out: BufWriter::with_capacity(64 * 1024, io::stdout().lock()),
            rx,
            editor: LineEditor::default(),
            queued: VecDeque::new(),
            eof: false,
            spinner: None,
            line_open: false,
            late: None,
            full,
        }
    }
}

impl Frontend for Tui {
    fn begin_turn(&mut self, _prompt: &str) -> io::Result<()> {
        take_interrupt();
        if let Some(full) = &mut self.full {
            full.set_busy(true);
        }
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

    fn oversize(&mut self, bytes: u64, newline: bool) -> io::Result<Flow> {
        self.settle()?;
        write_padding(&mut self.out, bytes)?;
        if newline {
            self.out.write_all(b"\r\n")?;
        } else {
            self.line_open = true;
        }
        self.out.flush()?;
        Ok(Flow::Next)
    }

    fn late(&mut self, text: &str, delay: Duration) -> io::Result<Flow> {
        self.late = Some((text.to_owned(), delay));
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
