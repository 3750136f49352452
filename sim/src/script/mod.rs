//! The sim script: its data model, and its loading and validation from TOML.
//!
//! See the module documentation of [the crate root](crate) and `config/sim/README.md`
//! for the format. Every error names the script's origin (file path or
//! `<inline>`), the 1-based turn and step, and the offending key.

pub(crate) mod edit;
pub(crate) mod state;
pub(crate) mod steps;

use serde_json::Value;
use toml::Table;

use crate::fields::{Fields, Loc, ScriptError};
use crate::script::steps::{
    Ask, Crash, CrashKind, PlanEntry, Step, ToolStep, parse_plan_entry, parse_usage,
};

/// A whole script: header settings and turns.
#[derive(Debug, Clone, Default)]
pub(super) struct Script {
    pub header: Header,
    pub turns: Vec<Turn>,
}

/// Script-wide settings (all optional).
#[derive(Debug, Clone, Default)]
pub(super) struct Header {
    pub session_id: Option<String>,
    pub model: Option<String>,
    pub boot_delay_ms: u64,
    pub banner: Option<String>,
    /// Default chunk size of `say` steps in bytes (0: one chunk).
    pub chunk: usize,
    /// Default delay between chunks of `say` steps.
    pub chunk_delay_ms: u64,
    pub ignore_sigint: bool,
    /// Start the turns over once every one was used (instead of echo turns).
    pub repeat: bool,
    pub tools: Option<Vec<String>>,
    /// stream-json: lines written verbatim before the init frame.
    pub before_init: Vec<String>,
    /// stream-json: lines written verbatim right after the init frame.
    pub after_init: Vec<String>,
    /// stream-json: at the end of input exit at once (status 0), even mid-turn;
    /// otherwise the turn in flight is finished first, as Claude Code does.
    pub exit_at_eof: bool,
}

/// One turn: what the sim does for one prompt.
#[derive(Debug, Clone, Default)]
pub(super) struct Turn {
    /// Run this turn for the first prompt containing this text.
    pub matches: Option<String>,
    pub steps: Vec<Step>,
}

impl Script {
    /// True when some crash step has `once = true` (needs a state dir).
    pub(super) fn needs_state(&self) -> bool {
        self.turns
            .iter()
            .flat_map(|t| &t.steps)
            .any(|s| matches!(s, Step::Crash(c) if c.once))
    }
}

const HEADER_KEYS: &[&str] = &[
    "session_id",
    "model",
    "boot_delay_ms",
    "banner",
    "chunk",
    "chunk_delay_ms",
    "ignore_sigint",
    "repeat",
    "tools",
    "before_init",
    "after_init",
    "exit_at_eof",
    "turn",
];

/// The keys that select a step's kind; exactly one per step.
const STEP_KINDS: &[&str] = &[
    "say",
    "think",
    "tool",
    "permission",
    "plan",
    "ask",
    "usage",
    "sleep_ms",
    "pace_ms",
    "crash",
    "hang",
    "drop_stream",
    "flood",
    "raw",
    "oversize",
    "late",
    "echo",
    "escape",
    "error",
    "rpc",
    "run",
    "write",
    "edit",
    "delete",
    "artifact",
];

/// Parses and validates a script. `origin` names it in errors.
pub(super) fn parse(origin: &str, text: &str) -> Result<Script, ScriptError> {
    let root = Loc::root(origin);
    let table: Table = text
        .parse()
        .map_err(|e: toml::de::Error| root.err("", format!("invalid TOML: {e}")))?;
    let f = Fields {
        table: &table,
        loc: root.clone(),
    };
    f.only(HEADER_KEYS)?;
    let header = Header {
        session_id: f.str("session_id")?,
        model: f.str("model")?,
        boot_delay_ms: f.u64("boot_delay_ms")?.unwrap_or(0),
        banner: f.str("banner")?,
        chunk: to_usize(&f, "chunk")?.unwrap_or(0),
        chunk_delay_ms: f.u64("chunk_delay_ms")?.unwrap_or(0),
        ignore_sigint: f.bool("ignore_sigint")?.unwrap_or(false),
        repeat: f.bool("repeat")?.unwrap_or(false),
        tools: f.strings("tools")?,
        before_init: raw_lines(&f, "before_init")?,
        after_init: raw_lines(&f, "after_init")?,
        exit_at_eof: f.bool("exit_at_eof")?.unwrap_or(false),
    };
    let turns = match table.get("turn") {
        None => Vec::new(),
        Some(toml::Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| parse_turn(&root.at(format!("turn {}", i + 1)), v))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(root.err("turn", "expected an array of tables ([[turn]])")),
    };
    Ok(Script { header, turns })
}

/// A list of verbatim lines (each a single line).
fn raw_lines(f: &Fields<'_, '_>, key: &str) -> Result<Vec<String>, ScriptError> {
    let lines = f.strings(key)?.unwrap_or_default();
    if lines.iter().any(|l| l.contains('\n')) {
        return Err(f.loc.err(key, "each entry must be a single line"));
    }
    Ok(lines)
}

fn parse_turn(loc: &Loc<'_>, value: &toml::Value) -> Result<Turn, ScriptError> {
    let f = Fields::of(loc, value)?;
    let table = f.table;
    f.only(&["match", "steps"])?;
    let steps = match table.get("steps") {
        None => Vec::new(),
        Some(toml::Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| parse_step(&loc.at(format!("{} step {}", loc.location(), i + 1)), v))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(loc.err("steps", "expected an array of tables")),
    };
    Ok(Turn {
        matches: f.str("match")?,
        steps,
    })
}

fn parse_step(loc: &Loc<'_>, value: &toml::Value) -> Result<Step, ScriptError> {
    let f = Fields::of(loc, value)?;
    let table = f.table;
    let kinds: Vec<&str> = STEP_KINDS
        .iter()
        .copied()
        .filter(|k| table.contains_key(*k))
        .collect();
    let kind = match kinds.as_slice() {
        [one] => *one,
        [] => {
            return Err(loc.err(
                "",
                format!("a step needs one of: {}", STEP_KINDS.join(", ")),
            ));
        }
        [_, second, ..] => return Err(loc.err(second, "a step has exactly one kind key")),
    };
    let step = match kind {
        "say" => {
            f.only(&["say", "chunk", "delay_ms"])?;
            Step::Say {
                text: f.req_str("say")?,
                chunk: to_usize(&f, "chunk")?,
                delay_ms: f.u64("delay_ms")?,
            }
        }
        "think" => {
            f.only(&["think"])?;
            Step::Think(f.req_str("think")?)
        }
        "tool" | "permission" => Step::Tool(parse_tool(&f, kind)?),
        "plan" => {
            f.only(&["plan"])?;
            let Some(toml::Value::Array(items)) = table.get("plan") else {
                return Err(loc.err("plan", "expected an array of entry tables"));
            };
            let entries = items
                .iter()
                .enumerate()
                .map(|(i, v)| match v.as_table() {
                    Some(t) => parse_plan_entry(&Fields {
                        table: t,
                        loc: loc.at(format!("{} entry {}", loc.location(), i + 1)),
                    }),
                    None => Err(loc.err("plan", "expected an array of entry tables")),
                })
                .collect::<Result<Vec<PlanEntry>, _>>()?;
            Step::Plan(entries)
        }
        "ask" => {
            f.only(&["ask", "options"])?;
            let options = f.strings("options")?.unwrap_or_default();
            if table.contains_key("options") && options.is_empty() {
                return Err(loc.err("options", "must not be empty (omit it for a yes/no ask)"));
            }
            Step::Ask(Ask {
                question: f.req_str("ask")?,
                options,
            })
        }
        "usage" => {
            f.only(&["usage"])?;
            let t = f
                .table("usage")?
                .ok_or_else(|| loc.err("usage", "expected a table"))?;
            Step::Usage(parse_usage(&Fields {
                table: t,
                loc: loc.clone(),
            })?)
        }
        "sleep_ms" => {
            f.only(&["sleep_ms"])?;
            Step::Sleep(f.u64("sleep_ms")?.unwrap_or(0))
        }
        "pace_ms" => {
            f.only(&["pace_ms"])?;
            Step::Pace(f.u64("pace_ms")?.unwrap_or(0))
        }
        "crash" => {
            f.only(&["crash", "once"])?;
            let kind = match table.get("crash") {
                Some(toml::Value::Integer(code)) => CrashKind::Exit(
                    i32::try_from(*code).map_err(|_| loc.err("crash", "exit code out of range"))?,
                ),
                Some(toml::Value::String(s)) if s == "sigkill" => CrashKind::SigKill,
                Some(toml::Value::String(s)) if s == "abort" => CrashKind::Abort,
                _ => {
                    return Err(loc.err("crash", "expected an exit code, \"sigkill\" or \"abort\""));
                }
            };
            Step::Crash(Crash {
                kind,
                once: f.bool("once")?.unwrap_or(false),
            })
        }
        "hang" => {
            f.only(&["hang"])?;
            f.flag_true("hang")?;
            Step::Hang
        }
        "drop_stream" => {
            f.only(&["drop_stream"])?;
            f.flag_true("drop_stream")?;
            Step::DropStream
        }
        "flood" => {
            f.only(&["flood", "chunk"])?;
            let chunk = to_usize(&f, "chunk")?.unwrap_or(16 * 1024);
            if chunk == 0 {
                return Err(loc.err("chunk", "must be at least 1"));
            }
            Step::Flood {
                bytes: f.u64("flood")?.unwrap_or(0),
                chunk,
            }
        }
        "raw" => {
            f.only(&["raw"])?;
            let line = f.req_str("raw")?;
            if line.contains('\n') {
                return Err(loc.err("raw", "must be a single line"));
            }
            Step::Raw(line)
        }
        "oversize" => {
            f.only(&["oversize", "newline", "result"])?;
            let result = f.bool("result")?.unwrap_or(false);
            let newline = f.bool("newline")?.unwrap_or(true);
            if result && !newline {
                return Err(loc.err("newline", "must be true with `result = true`"));
            }
            Step::Oversize {
                bytes: f.u64("oversize")?.unwrap_or(0),
                newline,
                result,
            }
        }
        "late" => {
            f.only(&["late", "delay_ms"])?;
            Step::Late {
                text: f.req_str("late")?,
                delay_ms: f.u64("delay_ms")?.unwrap_or(0),
            }
        }
        "echo" => {
            f.only(&["echo"])?;
            f.flag_true("echo")?;
            Step::Echo
        }
        "escape" => {
            f.only(&["escape"])?;
            f.flag_true("escape")?;
            Step::Escape
        }
        "rpc" => {
            f.only(&["rpc", "params"])?;
            let params = f
                .json("params")?
                .unwrap_or_else(|| Value::Object(Default::default()));
            if !params.is_object() {
                return Err(loc.err("params", "expected a table"));
            }
            Step::Rpc {
                method: f.req_str("rpc")?,
                params,
            }
        }
        "run" => {
            f.only(&["run", "args"])?;
            Step::Run {
                command: f.req_str("run")?,
                args: f.strings("args")?.unwrap_or_default(),
            }
        }
        "write" | "edit" | "delete" => crate::script::edit::parse(&f, kind)?,
        "artifact" => {
            f.only(&["artifact", "mime_type", "content"])?;
            let content = match table.get("content") {
                Some(toml::Value::String(s)) => Value::String(s.clone()),
                Some(toml::Value::Table(_)) => f.json("content")?.unwrap_or_default(),
                _ => return Err(loc.err("content", "expected a string or a table")),
            };
            Step::Artifact {
                name: f.req_str("artifact")?,
                mime_type: f.req_str("mime_type")?,
                content,
            }
        }
        _ => {
            f.only(&["error", "subtype", "status"])?;
            Step::Error {
                message: f.req_str("error")?,
                subtype: f
                    .str("subtype")?
                    .unwrap_or_else(|| "error_during_execution".to_string()),
                status: f
                    .u64("status")?
                    .map(|s| {
                        u16::try_from(s).map_err(|_| f.loc.err("status", "not an HTTP status"))
                    })
                    .transpose()?,
            }
        }
    };
    Ok(step)
}

fn parse_tool(f: &Fields<'_, '_>, kind: &str) -> Result<ToolStep, ScriptError> {
    let gated = kind == "permission";
    let mut allowed = vec![kind, "input", "deltas", "output", "is_error", "duration_ms"];
    if gated {
        allowed.push("risk");
    }
    f.only(&allowed)?;
    let input = f
        .json("input")?
        .unwrap_or_else(|| Value::Object(Default::default()));
    if !input.is_object() {
        return Err(f.loc.err("input", "expected a table"));
    }
    let risk = if gated {
        let risk = f.str("risk")?.unwrap_or_else(|| "medium".to_string());
        if !["low", "medium", "high"].contains(&risk.as_str()) {
            return Err(f.loc.err("risk", "expected low, medium or high"));
        }
        Some(risk)
    } else {
        None
    };
    Ok(ToolStep {
        name: f.req_str(kind)?,
        input,
        deltas: f.strings("deltas")?.unwrap_or_default(),
        output: f.str("output")?,
        is_error: f.bool("is_error")?.unwrap_or(false),
        duration_ms: f.u64("duration_ms")?.unwrap_or(0),
        risk,
    })
}

fn to_usize(f: &Fields<'_, '_>, key: &str) -> Result<Option<usize>, ScriptError> {
    f.u64(key)?
        .map(|n| usize::try_from(n).map_err(|_| f.loc.err(key, "too large")))
        .transpose()
}
