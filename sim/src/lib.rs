//! `capfleet sim`: a real, scripted CLI agent used by every test and by the
//! demo. It needs no API key: a TOML script says what each turn does.
//!
//! # Script
//!
//! ```toml
//! session_id = "sess-1"        # default: --resume, --session-id, else generated
//! model = "sim-model"          # default: --model, else "capfleet-sim-1"
//! boot_delay_ms = 0            # before the init frame / the ready line
//! banner = "extra banner text" # TUI only, printed under the title
//! chunk = 0                    # default `say` chunk size in bytes (0: whole)
//! chunk_delay_ms = 0           # default delay between chunks
//! ignore_sigint = false        # TUI: Ctrl-C is ignored (hard-cancel tests)
//! repeat = false               # start the turns over once used up (else: echo turns)
//! tools = ["Bash", "Read"]     # tools listed in the init frame
//! before_init = ["{...}"]      # stream-json: verbatim lines before the init frame
//! after_init = ["{...}"]       # stream-json: verbatim lines right after it
//!
//! [[turn]]
//! match = "deploy"             # optional: taken by the first prompt containing it
//! steps = [
//!   { say = "Hello", chunk = 2, delay_ms = 5 },
//!   { think = "pondering" },
//!   { tool = "Bash", input = { command = "ls" }, deltas = ["a\n"], output = "a\n",
//!     is_error = false, duration_ms = 10 },
//!   { permission = "Bash", input = { command = "rm x" }, risk = "high" }, # gated tool
//!   { plan = [{ id = "p1", content = "Design", status = "in_progress", priority = "high",
//!               _meta = { "cap.assigned_to" = "sim" } }] },
//!   { ask = "Do you want me to continue?" },                  # yes/no
//!   { ask = "Which DB?", options = ["pg", "sqlite"] },
//!   { usage = { input_tokens = 10, output_tokens = 5, cache_read_tokens = 1,
//!               cache_creation_tokens = 2, cost_usd = 0.01 } },
//!   { sleep_ms = 100 },
//!   { pace_ms = 10 },             # sleep until 10 ms after the last pace point (a rate)
//!   { crash = 3, once = true },   # or crash = "sigkill" | "abort"
//!   { hang = true },
//!   { flood = 209715200, chunk = 16384 },
//!   { raw = "{not json" },        # one line, verbatim
//!   { oversize = 2000000 },       # one frame line of about N bytes (newline = false: open)
//!   { oversize = 2000000, result = true }, # stream-json: the turn's `result` is that line
//!   { echo = true },              # says "echo: <prompt>"
//!   { late = "notice", delay_ms = 500 }, # TUI only: printed 500 ms after the next prompt
//!   { error = "rate_limit_error: slow down", subtype = "error_during_execution" },
//!   { error = "rate limited; retry-after: 2", status = 429 }, # stream-json: an API error
//!   { rpc = "fs/read_text_file", params = { path = "/abs/f.txt" } }, # ACP mode only
//!   { run = "echo", args = ["hi"] },  # ACP mode only: a client terminal
//! ]
//! ```
//!
//! Each step has exactly one kind key. Turns without `match` run in order;
//! once the script is used up every prompt gets an echo turn. A `once`
//! crash writes a marker file in the state dir (`--state-dir` or
//! `CAPFLEET_SIM_STATE`) and is skipped when the marker exists. Errors name
//! the script, the 1-based turn and step, and the key; they exit with 2.
//!
//! # stream-json
//!
//! Claude Code's frames: `system/init`, `assistant` (one block per frame,
//! `text` / `thinking` / `tool_use`), `user` `tool_result`, `result` with
//! the turn's `usage` (the sum of its `usage` steps) and, like Claude,
//! `total_cost_usd` cumulative over the process (an interrupted turn adds
//! what its `usage` steps reported before the interrupt, as Claude bills the
//! requests that completed); `result` is the turn's `say` texts joined by `\n`. Tool
//! deltas are `tool_progress` frames with `output_chunk`; plans are
//! `TodoWrite` tool calls; permission steps and asks are `control_request`
//! `can_use_tool` (asks as tool `AskUserQuestion`, answered with
//! `updatedInput.answers = { "<question>": "<label>" }`).
//!
//! `--emitted FILE` (`CAPFLEET_SIM_EMITTED`) records each `result` in two lines around
//! its write: `frame` (`pid`, `pgid`, `ts_ms`, tokens, `cost_usd`) before it, `written`
//! after it is flushed (see `emitted`): what the agent billed, how many turn results
//! it produced (the chaos report compares them with the journal), and which one was in
//! flight when its process was killed.
//!
//! `--time-scale N` (`CAPFLEET_SIM_TIME_SCALE`) divides every delay of the script by
//! `N`: hours of scripted work in minutes (the chaos soak).
//!
//! `--one-turn` answers the first prompt and exits (one process per turn, resumed with
//! `--resume <id>`); `--listen ADDR` serves the same over TCP, one sim per
//! connection, after printing the bound address (see `listen`).
//!
//! # ACP
//!
//! `--mode acp` is an ACP agent: `say` / `think` / `tool` / `plan` / `usage` are
//! `session/update`s, `permission` steps ask `session/request_permission` first
//! (risk low/medium/high = tool kind read/edit/execute; a reject skips the tool, a
//! cancel ends the turn `cancelled`), `rpc` calls any client method and says
//! `METHOD -> RESULT` or `METHOD error: MESSAGE`, `run` says `exit=N output=...`,
//! `error` fails the prompt, and `ask` fails it too (ACP v1 has no elicitation).
//!
//! # TUI
//!
//! Banner `✻ capfleet sim · <model> · session <id>`, ready line
//! `✓ capfleet sim ready`, prompt `❯ `; a turn shows a spinner
//! (`⠋ Working…`, redrawn with `\r ESC[K`), text lines, `_thinking_ …`,
//! `◉ Tool(args)` / `  ⎿ output` / `◉ Tool completed|failed`, `## Plan` with
//! `  [x] id content (priority)` entries, asks `… (y/n)` or `? Select: a, b`
//! (answered by the next input line), error messages, and after Ctrl-C
//! `⎿ Interrupted by user`; a resize (SIGWINCH) during a wait prints
//! `terminal resized to <rows>x<cols>`. Input is raw (the sim echoes it); bracketed
//! paste keeps newlines inside one prompt. `config/sim/README.md` lists the
//! exact lines and the manifest patterns matching them. `--fullscreen` draws the
//! same lines as a full-screen agent does (see `tui_full`): no line feed, every frame
//! the whole screen by cursor position, the input box kept on screen while it works
//! and the dim hint `  ? for shortcuts` as the last row once it waits for a prompt.

mod a2a;
mod acp;
mod client;
mod emitted;
mod escape;
mod fields;
mod frames;
mod inbound;
mod line_editor;
mod listen;
mod script;
mod stream_json;
mod term;
mod time_scale;
mod tui;
mod tui_full;

use std::path::PathBuf;
use std::process::ExitCode;

use frames::Session;
use script::Script;
use script::state::StateDir;

/// The protocol the sim speaks on stdio.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    /// Claude-compatible NDJSON (`claude -p --input-format stream-json ...`).
    StreamJson,
    /// An interactive terminal agent (run it on a PTY).
    Tui,
    /// An ACP agent (protocol version 1, JSON-RPC on stdio).
    Acp,
    /// A remote A2A agent over HTTP (needs --listen).
    A2a,
}

/// The A2A spelling `--spelling` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SpellingArg {
    #[value(name = "1.0")]
    V1,
    #[value(name = "0.3")]
    V03,
}

/// Arguments of `capfleet sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Protocol spoken on stdio.
    #[arg(long, value_enum, default_value = "stream-json")]
    mode: Mode,
    /// Script file (TOML).
    #[arg(long, env = "CAPFLEET_SIM_SCRIPT")]
    script: Option<PathBuf>,
    /// Script text (TOML), for tests; wins over `--script`.
    #[arg(long)]
    script_inline: Option<String>,
    /// Directory keeping `once` crash markers across restarts.
    #[arg(long, env = "CAPFLEET_SIM_STATE")]
    state_dir: Option<PathBuf>,
    /// Model reported in frames and the banner.
    #[arg(long)]
    model: Option<String>,
    /// Permission mode reported in the init frame; `bypassPermissions`
    /// runs permission-gated tools without asking.
    #[arg(long, default_value = "default")]
    permission_mode: String,
    /// Resume a session: keep and report this session id.
    #[arg(long)]
    resume: Option<String>,
    /// Session id to use (when not resuming).
    #[arg(long)]
    session_id: Option<String>,
    /// Stream text as `stream_event` deltas before each snapshot.
    #[arg(long)]
    include_partial_messages: bool,
    /// TUI: query the cursor position (`ESC[6n`) at boot, wait up to 2 s.
    #[arg(long)]
    ask_cursor: bool,
    /// TUI: draw as a full-screen agent: every frame clears the screen and draws each
    /// row by cursor position (transcript, spinner, input box, `? for shortcuts` hint).
    #[arg(long)]
    fullscreen: bool,
    /// Answer one turn, then exit (stream-json): one process per turn, as
    /// `claude -p --resume <id>` or `codex exec` run.
    #[arg(long)]
    one_turn: bool,
    /// Serve stream-json over TCP instead of stdio: print the bound address (port 0
    /// picks one), then answer each connection with a sim of its own.
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
    /// A2A: the spelling served (1.0: `SendStreamingMessage`, `TASK_STATE_*`; 0.3:
    /// `message/stream`, `kind`, lowercase states).
    #[arg(long, value_enum, default_value = "1.0")]
    spelling: SpellingArg,
    /// A2A: serve a card without the `cap-protocol/v1` extension (a plain A2A agent).
    #[arg(long)]
    no_cap_extension: bool,
    /// A2A: declare a bearer scheme and answer 401 to requests without this token.
    #[arg(long, value_name = "TOKEN")]
    bearer_token: Option<String>,
    /// A2A: append one line per request (method, `A2A-Version`, `traceparent`).
    #[arg(long, value_name = "FILE")]
    request_log: Option<PathBuf>,
    /// stream-json: append one JSON line per turn result once it is on stdout (pid,
    /// time, tokens, cost): what the agent billed and how many results it wrote, for
    /// what compares them with the journal (tests, the chaos report). Its directory
    /// is created if need be.
    #[arg(long, env = "CAPFLEET_SIM_EMITTED", value_name = "FILE")]
    emitted: Option<PathBuf>,
    /// Run the script N times faster than written: every delay (boot, chunks, sleeps,
    /// tool durations) divided by N, so hours of scripted work pass in minutes.
    #[arg(long, env = "CAPFLEET_SIM_TIME_SCALE", value_name = "N", value_parser = time_scale::TimeScale::parse)]
    time_scale: Option<time_scale::TimeScale>,
    /// Input format; only `stream-json` (Claude compatibility).
    #[arg(long)]
    input_format: Option<String>,
    /// Output format; only `stream-json` (Claude compatibility).
    #[arg(long)]
    output_format: Option<String>,
    #[arg(short = 'p', long = "print", id = "print", hide = true)]
    _print: bool,
    #[arg(long = "verbose", id = "verbose", hide = true)]
    _verbose: bool,
    #[arg(
        long = "permission-prompt-tool",
        id = "permission_prompt_tool",
        hide = true
    )]
    _permission_prompt_tool: Option<String>,
    #[arg(long = "max-turns", id = "max_turns", hide = true)]
    _max_turns: Option<u64>,
    #[arg(
        long = "append-system-prompt",
        id = "append_system_prompt",
        hide = true
    )]
    _append_system_prompt: Option<String>,
    #[arg(long = "allowedTools", id = "allowed_tools", hide = true, num_args = 0..)]
    _allowed_tools: Vec<String>,
    #[arg(long = "disallowedTools", id = "disallowed_tools", hide = true, num_args = 0..)]
    _disallowed_tools: Vec<String>,
}

const DEFAULT_TOOLS: &[&str] = &[
    "Bash",
    "Read",
    "Edit",
    "Write",
    "Glob",
    "Grep",
    "TodoWrite",
    "AskUserQuestion",
];

pub fn run(args: SimArgs) -> ExitCode {
    let script = match load(&args) {
        Ok(script) => script,
        Err(message) => {
            eprintln!("capfleet sim: {message}");
            return ExitCode::from(2);
        }
    };
    if let (Some(addr), false) = (args.listen, args.mode == Mode::A2a) {
        return match listen::serve(addr) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("capfleet sim: {} {addr}: {e}", listen::FLAG);
                ExitCode::FAILURE
            }
        };
    }
    let state = StateDir::new(args.state_dir.clone());
    let header = &script.header;
    let session_id = args
        .resume
        .clone()
        .or_else(|| args.session_id.clone())
        .or_else(|| header.session_id.clone())
        .unwrap_or_else(generated_session_id);
    let model = args
        .model
        .clone()
        .or_else(|| header.model.clone())
        .unwrap_or_else(|| "capfleet-sim-1".into());
    let result = match args.mode {
        Mode::StreamJson => {
            let tools = header
                .tools
                .clone()
                .unwrap_or_else(|| DEFAULT_TOOLS.iter().map(|t| t.to_string()).collect());
            let session = Session {
                session_id,
                model,
                tools,
                permission_mode: args.permission_mode.clone(),
                total_cost_usd: 0.0,
            };
            let options = stream_json::Options {
                session,
                partial: args.include_partial_messages,
                one_turn: args.one_turn,
                emitted: args.emitted.clone(),
            };
            stream_json::run(&script, &state, options)
        }
        Mode::Tui => {
            let options = tui::Options {
                session_id,
                model,
                ask_cursor: args.ask_cursor,
                fullscreen: args.fullscreen,
            };
            tui::run(&script, &state, &options)
        }
        Mode::Acp => acp::run(&script, &state, session_id),
        Mode::A2a => {
            let opts = a2a::Options {
                spelling: match args.spelling {
                    SpellingArg::V1 => capfleet_wire::bindings::a2a::Spelling::V1,
                    SpellingArg::V03 => capfleet_wire::bindings::a2a::Spelling::V03,
                },
                plain: args.no_cap_extension,
                bearer: args.bearer_token.clone(),
                request_log: args.request_log.clone(),
            };
            let addr = args
                .listen
                .unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
            a2a::serve(addr, script.clone(), state, opts)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("capfleet sim: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Reads, parses and checks the script and the flags it depends on.
fn load(args: &SimArgs) -> Result<Script, String> {
    for (flag, value) in [
        ("--input-format", &args.input_format),
        ("--output-format", &args.output_format),
    ] {
        if value.as_deref().is_some_and(|v| v != "stream-json") {
            return Err(format!("{flag}: only stream-json is supported"));
        }
    }
    if args.one_turn && args.mode != Mode::StreamJson {
        return Err("--one-turn needs --mode stream-json".to_string());
    }
    if args.listen.is_some() && !matches!(args.mode, Mode::StreamJson | Mode::A2a) {
        return Err("--listen needs --mode stream-json or a2a".to_string());
    }
    let script = match (&args.script_inline, &args.script) {
        (Some(text), _) => script::parse("<inline>", text).map_err(|e| e.to_string())?,
        (None, Some(path)) => {
            let origin = path.display().to_string();
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{origin}: cannot read: {e}"))?;
            script::parse(&origin, &text).map_err(|e| e.to_string())?
        }
        (None, None) => Script::default(),
    };
    let script = match args.time_scale {
        Some(scale) => script.compressed(scale),
        None => script,
    };
    if script.needs_state() && args.state_dir.is_none() {
        return Err("a `once` crash step needs --state-dir or CAPFLEET_SIM_STATE".to_string());
    }
    Ok(script)
}

/// A uuid-shaped id from the pid and the clock.
fn generated_session_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let pid = std::process::id();
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        pid,
        (nanos >> 48) & 0xffff,
        (nanos >> 36) & 0xfff,
        (nanos >> 24) & 0xfff,
        nanos & 0xffff_ffff_ffff
    )
}
