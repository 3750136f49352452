//! Steps: their data, and the mode-independent turn runner that plays them
//! through a [`Frontend`] (stream-json or TUI).

use std::io;
use std::time::Duration;

use serde_json::Value;

use crate::fields::{Fields, ScriptError};
use crate::script::edit::FileEdit;
use crate::script::state::StateDir;
use crate::script::{Header, Turn};

/// One scripted action.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Say {
        text: String,
        chunk: Option<usize>,
        delay_ms: Option<u64>,
    },
    Think(String),
    /// A tool call; with `risk` set it is gated by a permission request.
    Tool(ToolStep),
    Plan(Vec<PlanEntry>),
    Ask(Ask),
    Usage(Usage),
    Sleep(u64),
    /// Sleep until this many ms after the previous `pace_ms` point (the turn's start,
    /// or the end of a `sleep_ms`, when none since): a steady rate however long the
    /// steps between take.
    Pace(u64),
    Crash(Crash),
    Hang,
    /// A2A mode: end the turn's SSE response mid-turn (the client resubscribes).
    DropStream,
    Flood {
        bytes: u64,
        chunk: usize,
    },
    Raw(String),
    /// A line of `bytes` bytes, left open (no newline) unless `newline`; with
    /// `result`, the turn's own end (stream-json's `result` frame) is that line.
    Oversize {
        bytes: u64,
        newline: bool,
        result: bool,
    },
    /// TUI mode: `text` printed `delay_ms` after the next prompt is drawn (late output).
    Late {
        text: String,
        delay_ms: u64,
    },
    Echo,
    /// The escape kit's attempts, reported as the turn's text ([`crate::escape`]).
    Escape,
    /// With `status`, an API error as Claude Code reports one (`api_error_status`).
    Error {
        message: String,
        subtype: String,
        status: Option<u16>,
    },
    /// ACP mode: call a client method (`fs/*`, `terminal/*`, `_cap/*`), say the result
    /// (a `path` starting with `./` is taken in the sim's cwd).
    Rpc {
        method: String,
        params: Value,
    },
    /// ACP mode: run a command in a client terminal (create, wait, output, release).
    Run {
        command: String,
        args: Vec<String>,
    },
    /// Write or delete a file in the working directory.
    Edit(FileEdit),
    /// stream-json mode: an `artifact` frame.
    Artifact {
        name: String,
        mime_type: String,
        content: Value,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct ToolStep {
    pub name: String,
    pub input: Value,
    pub deltas: Vec<String>,
    pub output: Option<String>,
    pub is_error: bool,
    pub duration_ms: u64,
    /// `Some(risk)` for a permission-gated call.
    pub risk: Option<String>,
}

impl ToolStep {
    /// The tool's final output: `output`, else the joined deltas.
    pub(crate) fn final_output(&self) -> String {
        self.output.clone().unwrap_or_else(|| self.deltas.concat())
    }
}

#[derive(Debug, Clone)]
pub(crate) struct PlanEntry {
    pub id: String,
    pub content: String,
    pub status: String,
    pub priority: Option<String>,
    pub meta: Option<Value>,
}

/// An ask: yes/no when `options` is empty.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    pub question: String,
    pub options: Vec<String>,
}

impl Ask {
    /// The labels offered: the options, or `yes`/`no`.
    pub(crate) fn labels(&self) -> Vec<String> {
        if self.options.is_empty() {
            vec!["yes".to_string(), "no".to_string()]
        } else {
            self.options.clone()
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_creation_tokens: u64,
    pub cost_usd: f64,
}

impl Usage {
    pub(crate) fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_creation_tokens += other.cache_creation_tokens;
        self.cost_usd += other.cost_usd;
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Crash {
    pub kind: CrashKind,
    pub once: bool,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum CrashKind {
    Exit(i32),
    SigKill,
    Abort,
}

const STATUSES: &[&str] = &[
    "pending",
    "in_progress",
    "completed",
    "cancelled",
    "blocked",
];
const PRIORITIES: &[&str] = &["urgent", "high", "medium", "low"];

pub(crate) fn parse_plan_entry(f: &Fields<'_, '_>) -> Result<PlanEntry, ScriptError> {
    f.only(&["id", "content", "status", "priority", "_meta"])?;
    let status = f.str("status")?.unwrap_or_else(|| "pending".to_string());
    if !STATUSES.contains(&status.as_str()) {
        return Err(f
            .loc
            .err("status", format!("expected one of {}", STATUSES.join(", "))));
    }
    let priority = f.str("priority")?;
    if priority
        .as_deref()
        .is_some_and(|p| !PRIORITIES.contains(&p))
    {
        return Err(f.loc.err(
            "priority",
            format!("expected one of {}", PRIORITIES.join(", ")),
        ));
    }
    if f.table.get("_meta").is_some_and(|m| !m.is_table()) {
        return Err(f.loc.err("_meta", "expected a table"));
    }
    Ok(PlanEntry {
        id: f.req_str("id")?,
        content: f.req_str("content")?,
        status,
        priority,
        meta: f.json("_meta")?,
    })
}

pub(crate) fn parse_usage(f: &Fields<'_, '_>) -> Result<Usage, ScriptError> {
    f.only(&[
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_creation_tokens",
        "cost_usd",
    ])?;
    Ok(Usage {
        input_tokens: f.u64("input_tokens")?.unwrap_or(0),
        output_tokens: f.u64("output_tokens")?.unwrap_or(0),
        cache_read_tokens: f.u64("cache_read_tokens")?.unwrap_or(0),
        cache_creation_tokens: f.u64("cache_creation_tokens")?.unwrap_or(0),
        cost_usd: f.f64("cost_usd")?.unwrap_or(0.0),
    })
}

/// Whether a turn goes on after a step.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Flow {
    Next,
    Stop(Stop),
}

/// Why a turn ended early.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stop {
    Interrupted,
    Error {
        message: String,
        subtype: String,
        status: Option<u16>,
    },
}

/// How a mode renders steps. Waiting methods watch for interrupts.
pub(crate) trait Frontend {
    fn begin_turn(&mut self, prompt: &str) -> io::Result<()>;
    fn say(&mut self, text: &str, chunk: usize, delay: Duration) -> io::Result<Flow>;
    fn think(&mut self, text: &str) -> io::Result<Flow>;
    fn tool(&mut self, tool: &ToolStep) -> io::Result<Flow>;
    fn plan(&mut self, entries: &[PlanEntry]) -> io::Result<Flow>;
    fn ask(&mut self, ask: &Ask) -> io::Result<Flow>;
    fn usage(&mut self, usage: &Usage) -> io::Result<Flow>;
    fn pause(&mut self, duration: Duration) -> io::Result<Flow>;
    fn flood(&mut self, bytes: u64, chunk: usize) -> io::Result<Flow>;
    fn raw(&mut self, line: &str) -> io::Result<Flow>;
    /// One line of about `bytes` bytes, streamed, its newline only if `newline`.
    fn oversize(&mut self, bytes: u64, newline: bool) -> io::Result<Flow>;
    /// The turn's end is written as one line of about `bytes` bytes; only
    /// stream-json ends a turn by a frame the sim can pad (its `result`).
    fn oversize_result(&mut self, bytes: u64) -> io::Result<Flow> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("step `oversize = {bytes}, result = true` needs --mode stream-json"),
        ))
    }
    fn flush(&mut self) -> io::Result<()>;
    /// A `late` step; only the TUI mode has a prompt to print after.
    fn late(&mut self, text: &str, _delay: Duration) -> io::Result<Flow> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("step `late = {text:?}` needs --mode tui"),
        ))
    }
    /// An `rpc` step; only the ACP mode has a client to call.
    fn rpc(&mut self, method: &str, _params: &Value) -> io::Result<Flow> {
        Err(acp_only("rpc", method))
    }
    /// A `run` step; only the ACP mode has client terminals.
    fn run(&mut self, command: &str, _args: &[String]) -> io::Result<Flow> {
        Err(acp_only("run", command))
    }
    /// A file step: done, then shown as a tool call.
    fn edit(&mut self, edit: &FileEdit) -> io::Result<Flow> {
        let applied = edit.apply();
        self.tool(&edit.as_tool(&applied))
    }
    /// A `drop_stream` step; only the A2A mode has a stream to drop.
    fn drop_stream(&mut self) -> io::Result<Flow> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "step `drop_stream` needs --mode a2a",
        ))
    }
    /// An `artifact` step; only stream-json and A2A have artifact frames.
    fn artifact(&mut self, name: &str, _mime: &str, _content: &Value) -> io::Result<Flow> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("step `artifact = {name:?}` needs --mode stream-json"),
        ))
    }
    fn end_turn(&mut self, stop: Option<Stop>) -> io::Result<()>;
}

fn acp_only(step: &str, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("step `{step} = {what:?}` needs --mode acp"),
    )
}

/// Plays one turn (`None`: the echo turn) through a frontend.
pub(crate) fn run_turn<F: Frontend>(
    fe: &mut F,
    header: &Header,
    turn: Option<(usize, &Turn)>,
    prompt: &str,
    state: &StateDir,
) -> io::Result<()> {
    fe.begin_turn(prompt)?;
    let echo = [Step::Echo];
    let (turn_index, steps) = match turn {
        Some((i, t)) => (i, t.steps.as_slice()),
        None => (usize::MAX, &echo[..]),
    };
    let default_delay = Duration::from_millis(header.chunk_delay_ms);
    let mut paced = std::time::Instant::now();
    for (step_index, step) in steps.iter().enumerate() {
        let flow = match step {
            Step::Say {
                text,
                chunk,
                delay_ms,
            } => {
                let delay = delay_ms.map(Duration::from_millis).unwrap_or(default_delay);
                fe.say(text, chunk.unwrap_or(header.chunk), delay)?
            }
            Step::Echo => fe.say(&format!("echo: {prompt}"), header.chunk, default_delay)?,
            Step::Escape => fe.say(&crate::escape::report(), header.chunk, default_delay)?,
            Step::Think(text) => fe.think(text)?,
            Step::Tool(tool) => fe.tool(tool)?,
            Step::Plan(entries) => fe.plan(entries)?,
            Step::Ask(ask) => fe.ask(ask)?,
            Step::Usage(usage) => fe.usage(usage)?,
            Step::Sleep(ms) => {
                let flow = fe.pause(Duration::from_millis(*ms))?;
                paced = std::time::Instant::now();
                flow
            }
            Step::Pace(ms) => {
                paced += Duration::from_millis(*ms);
                fe.pause(paced.saturating_duration_since(std::time::Instant::now()))?
            }
            Step::Flood { bytes, chunk } => fe.flood(*bytes, *chunk)?,
            Step::Raw(line) => fe.raw(line)?,
            Step::DropStream => fe.drop_stream()?,
            Step::Oversize {
                bytes,
                result: true,
                ..
            } => fe.oversize_result(*bytes)?,
            Step::Oversize { bytes, newline, .. } => fe.oversize(*bytes, *newline)?,
            Step::Late { text, delay_ms } => fe.late(text, Duration::from_millis(*delay_ms))?,
            Step::Rpc { method, params } => fe.rpc(method, params)?,
            Step::Run { command, args } => fe.run(command, args)?,
            Step::Edit(edit) => fe.edit(edit)?,
            Step::Artifact {
                name,
                mime_type,
                content,
            } => fe.artifact(name, mime_type, content)?,
            Step::Error {
                message,
                subtype,
                status,
            } => Flow::Stop(Stop::Error {
                message: message.clone(),
                subtype: subtype.clone(),
                status: *status,
            }),
            Step::Crash(crash) => {
                if crash.once && !state.first_time(turn_index, step_index)? {
                    Flow::Next
                } else {
                    fe.flush()?;
                    crash_now(crash.kind)
                }
            }
            Step::Hang => {
                fe.flush()?;
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
        };
        if let Flow::Stop(stop) = flow {
            return fe.end_turn(Some(stop));
        }
    }
    fe.end_turn(None)
}

fn crash_now(kind: CrashKind) -> ! {
    match kind {
        CrashKind::Exit(code) => std::process::exit(code),
        CrashKind::Abort => std::process::abort(),
        CrashKind::SigKill => {
            // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            std::process::abort()
        }
    }
}

/// Splits `text` into pieces of about `size` bytes on char boundaries
/// (`size == 0`: one piece).
pub(crate) fn chunks(text: &str, size: usize) -> Vec<&str> {
    if size == 0 || text.len() <= size {
        return vec![text];
    }
    let mut out = Vec::with_capacity(text.len() / size + 1);
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

/// The deterministic content of a flood: lines of 63 characters and `\n`,
/// produced piece by piece so a 200 MB flood never sits in memory.
pub(crate) struct FloodGen {
    remaining: u64,
    position: u64,
}

/// One 64-byte flood line.
const FLOOD_LINE: &str = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_\n";

impl FloodGen {
    pub(crate) fn new(bytes: u64) -> FloodGen {
        FloodGen {
            remaining: bytes,
            position: 0,
        }
    }

    /// Fills `buf` (cleared first) with up to `max` bytes; false when done.
    pub(crate) fn next_into(&mut self, buf: &mut String, max: usize) -> bool {
        buf.clear();
        let take = self.remaining.min(max as u64) as usize;
        while buf.len() < take {
            let column = (self.position % FLOOD_LINE.len() as u64) as usize;
            let n = (FLOOD_LINE.len() - column).min(take - buf.len());
            buf.push_str(&FLOOD_LINE[column..column + n]);
            self.position += n as u64;
        }
        self.remaining -= take as u64;
        take > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_respect_char_boundaries() {
        assert_eq!(chunks("héllo", 2), vec!["hé", "ll", "o"]);
        assert_eq!(chunks("abc", 0), vec!["abc"]);
    }

    #[test]
    fn flood_is_exact() {
        let mut generator = FloodGen::new(130);
        let mut buf = String::new();
        let mut total = String::new();
        while generator.next_into(&mut buf, 50) {
            total.push_str(&buf);
        }
        assert_eq!(total.len(), 130);
        assert_eq!(total.matches('\n').count(), 2);
    }
}
