//! What the agent's completed lines mean (spec §6.1 points 4-5, A2).
//!
//! Only complete logical lines are classified (the screen hands them over at each
//! line feed, so redraws and spinners never reach here half-drawn). First match
//! wins: error lines, tool start/end (paired by call id), asks, plan and thought
//! sections; anything else that is not chrome (spinners, rules, status lines), the
//! idle prompt or the echo of our own input is assistant text. Lines inside an open
//! tool call are its output. Identical non-text events are suppressed per turn, and
//! named groups of the patterns fill the events' fields.

use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use regex::{Captures, RegexSet, RegexSetBuilder};
use serde_json::Value;

use super::classify::{CHROME_PATTERNS, error_kind, fields, first, is_chrome, strip_bullet};
use super::plan::{PLAN_ENTRY_PATTERN, plan_entry};
use crate::manifest::Patterns;
use crate::protocol::{CapEvent, PlanEntry};

/// Distinct event lines remembered per turn (for repeat suppression), by hash: a
/// screen-wide line costs 8 bytes here, not its length.
const MAX_SEEN: usize = 4096;
/// Tool output kept for `cap.tool_call.end`, per call.
const MAX_TOOL_OUTPUT: usize = 64 * 1024;

#[derive(Debug, Default, Clone)]
enum Section {
    #[default]
    None,
    Plan(Vec<PlanEntry>),
    Thought,
}

#[derive(Debug, Clone)]
struct OpenTool {
    call_id: String,
    name: String,
    output: String,
}

/// Per-turn line classification. A clone shares the compiled patterns (building one
/// compiles them all at once).
#[derive(Debug, Clone)]
pub struct LineParser {
    patterns: Patterns,
    /// Every pattern at once: a line none matches (most text) skips them all.
    quick: Option<RegexSet>,
    message_id: String,
    turn: u64,
    calls: u64,
    asks_made: u64,
    seen: HashSet<u64>,
    section: Section,
    tools: Vec<OpenTool>,
    /// Lines of our prompt not yet seen echoed.
    echo: Vec<String>,
    /// An answer we typed, until its echo is seen.
    answer_echo: Option<String>,
    text_started: bool,
    pending_blank: bool,
    last_text: Option<String>,
    /// Open asks: id → is it yes/no.
    asks: HashMap<String, bool>,
    error_seen: bool,
}

impl LineParser {
    pub fn new(patterns: Patterns) -> Self {
        let p = &patterns;
        let sources = p.idle.iter().chain(&p.error_lines).chain(
            [
                &p.tool_call_start,
                &p.tool_call_end,
                &p.plan_section,
                &p.thought_section,
                &p.ask_yes_no,
                &p.ask_options,
            ]
            .into_iter()
            .flatten(),
        );
        let sources: Vec<&str> = sources
            .map(|re| re.as_str())
            .chain(CHROME_PATTERNS.iter().copied())
            .chain([PLAN_ENTRY_PATTERN])
            .collect();
        let quick = RegexSetBuilder::new(sources)
            .multi_line(true)
            .crlf(true)
            .build()
            .ok();
        LineParser {
            patterns,
            quick,
            message_id: "pty-msg-0".into(),
            turn: 0,
            calls: 0,
            asks_made: 0,
            seen: HashSet::new(),
            section: Section::None,
            tools: Vec::new(),
            echo: Vec::new(),
            answer_echo: None,
            text_started: false,
            pending_blank: false,
            last_text: None,
            asks: HashMap::new(),
            error_seen: false,
        }
    }

    /// A new turn for `prompt`. Asks left open by the last turn are forgotten (their
    /// question is gone from the screen; an answer typed now would land in the new
    /// prompt), and so is an answer's echo never seen: a session's state is one turn's.
    pub fn begin_turn(&mut self, prompt: &str) {
        self.turn += 1;
        self.message_id = format!("pty-msg-{}", self.turn);
        self.seen.clear();
        self.asks.clear();
        self.answer_echo = None;
        self.section = Section::None;
        self.tools.clear();
        self.echo = prompt
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        self.text_started = false;
        self.pending_blank = false;
        self.last_text = None;
        self.error_seen = false;
    }

    /// The turn is over: flush an open plan section.
    pub fn end_turn(&mut self, out: &mut Vec<CapEvent>) {
        self.close_section(out);
        self.echo.clear();
    }

    pub fn saw_error(&self) -> bool {
        self.error_seen
    }

    /// Forget an ask and say whether it was a yes/no question.
    pub fn take_ask(&mut self, ask_id: &str) -> Option<bool> {
        self.asks.remove(ask_id)
    }

    /// We typed `answer`: its echo is not text.
    pub fn expect_echo(&mut self, answer: &str) {
        let answer = answer.trim();
        self.answer_echo = (!answer.is_empty()).then(|| answer.to_owned());
    }

    /// Whether `line` is the idle prompt.
    pub fn is_idle(&self, line: &str) -> bool {
        self.patterns.idle.iter().any(|re| re.is_match(line))
    }

    /// The unfinished line under the cursor, once output went quiet: an agent waiting
    /// for an answer often leaves its question there without a line feed.
    pub fn on_partial(&mut self, line: &str, out: &mut Vec<CapEvent>) {
        if line.trim().is_empty() || self.is_idle(line) {
            return;
        }
        self.ask(line, out);
    }

    /// One completed logical line.
    pub fn on_line(&mut self, line: &str, out: &mut Vec<CapEvent>) {
        let trimmed = line.trim();
        if self.is_echo(trimmed) {
            return;
        }
        let special = self.quick.as_ref().is_none_or(|q| q.is_match(line));
        if special && self.event_line(line, out) {
            return;
        }
        if !self.tools.is_empty() {
            self.tool_output(trimmed, out);
            return;
        }
        if self.section_line(line, special, out) {
            return;
        }
        if special && is_chrome(line) {
            return;
        }
        self.text(line, out);
    }

    /// The idle prompt, an error, a tool start or end, an ask: handled here?
    fn event_line(&mut self, line: &str, out: &mut Vec<CapEvent>) -> bool {
        if self.is_idle(line) {
            return true;
        }
        if let Some(c) = first(&self.patterns.error_lines, line) {
            self.close_section(out);
            self.error(line, &c, out);
            return true;
        }
        let start = self.patterns.tool_call_start.as_ref().and_then(|re| {
            let c = re.captures(line)?;
            let name = c.name("tool").or_else(|| c.name("name"));
            let name = name.map_or("tool", |m| m.as_str()).to_owned();
            Some((name, fields(re, &c, &["tool", "name"])))
        });
        if let Some((name, input)) = start {
            self.close_section(out);
            self.calls += 1;
            let call_id = format!("pty-call-{}-{}", self.turn, self.calls);
            out.push(CapEvent::tool_start(&call_id, &name, input));
            self.tools.push(OpenTool {
                call_id,
                name,
                output: String::new(),
            });
            return true;
        }
        if let Some(c) = self
            .patterns
            .tool_call_end
            .as_ref()
            .and_then(|re| re.captures(line))
        {
            self.close_section(out);
            self.tool_end(&c, out);
            return true;
        }
        self.ask(line, out)
    }

    fn is_echo(&mut self, trimmed: &str) -> bool {
        if let Some(answer) = &self.answer_echo
            && trimmed.ends_with(answer.as_str())
        {
            self.answer_echo = None;
            return true;
        }
        if trimmed.is_empty() {
            return false;
        }
        // A bare continuation prompt (`...`, `>`) while our input is being echoed.
        if !self.text_started && trimmed.chars().all(|c| ".>:$#%❯›»-".contains(c)) {
            return true;
        }
        // Our input may be echoed after chrome (a tip, a status line): until seen,
        // each prompt line is expected once, wherever it appears.
        if let Some(first) = self.echo.first()
            && trimmed.ends_with(first.as_str())
        {
            self.echo.remove(0);
            return true;
        }
        false
    }

    /// First sight of this event line in the turn?
    fn fresh(&mut self, kind: &str, line: &str) -> bool {
        if self.seen.len() >= MAX_SEEN {
            return true;
        }
        let mut h = DefaultHasher::new();
        (kind, line).hash(&mut h);
        self.seen.insert(h.finish())
    }

    fn error(&mut self, line: &str, c: &Captures<'_>, out: &mut Vec<CapEvent>) {
        if !self.fresh("error", line) {
            return;
        }
        self.error_seen = true;
        let message = c
            .name("message")
            .map_or(line.trim(), |m| m.as_str())
            .to_owned();
        let (kind, retryable) = error_kind(line, c.name("code").map(|m| m.as_str()));
        out.push(CapEvent::error(kind, message, retryable));
    }

    fn tool_end(&mut self, c: &Captures<'_>, out: &mut Vec<CapEvent>) {
        let name = c
            .name("tool")
            .or_else(|| c.name("name"))
            .map(|m| m.as_str());
        let at = match name {
            Some(n) => self.tools.iter().rposition(|t| t.name == n),
            None => self.tools.len().checked_sub(1),
        };
        let Some(at) = at else {
            return; // an end without a start: nothing to pair it with
        };
        let tool = self.tools.remove(at);
        let status = c.name("status").map_or("", |m| m.as_str()).to_lowercase();
        let is_error = ["fail", "error", "denied"]
            .iter()
            .any(|k| status.contains(k));
        let output = (!tool.output.is_empty()).then(|| Value::String(tool.output));
        out.push(CapEvent::tool_end(tool.call_id, output, is_error, None));
    }

    fn tool_output(&mut self, trimmed: &str, out: &mut Vec<CapEvent>) {
        let Some(tool) = self.tools.last_mut() else {
            return;
        };
        let text = trimmed.trim_start_matches('⎿').trim_start();
        if tool.output.len() + text.len() < MAX_TOOL_OUTPUT {
            tool.output.push_str(text);
            tool.output.push('\n');
        }
        out.push(CapEvent::tool_delta(&tool.call_id, format!("{text}\n")));
    }

    /// Plan and thought sections: their header and continuation lines.
    fn section_line(&mut self, line: &str, special: bool, out: &mut Vec<CapEvent>) -> bool {
        match &mut self.section {
            Section::Plan(entries) => {
                if special && let Some(entry) = plan_entry(line, entries.len()) {
                    entries.push(entry);
                    return true;
                }
                self.close_section(out);
            }
            Section::Thought => {
                if line.starts_with(char::is_whitespace) && !line.trim().is_empty() {
                    out.push(CapEvent::thought(self.message_id(), line.trim()));
                    return true;
                }
                self.section = Section::None;
            }
            Section::None => {}
        }
        if !special {
            return false;
        }
        if self
            .patterns
            .plan_section
            .as_ref()
            .is_some_and(|re| re.is_match(line))
        {
            self.section = Section::Plan(Vec::new());
            return true;
        }
        if let Some(m) = self
            .patterns
            .thought_section
            .as_ref()
            .and_then(|re| re.find(line))
        {
            let text = format!("{}{}", &line[..m.start()], &line[m.end()..]);
            out.push(CapEvent::thought(self.message_id(), text.trim()));
            self.section = Section::Thought;
            return true;
        }
        false
    }

    fn close_section(&mut self, out: &mut Vec<CapEvent>) {
        if let Section::Plan(entries) = std::mem::take(&mut self.section)
            && !entries.is_empty()
        {
            out.push(CapEvent::plan(entries));
        }
    }

    fn message_id(&self) -> String {
        self.message_id.clone()
    }

    fn text(&mut self, line: &str, out: &mut Vec<CapEvent>) {
        if line.trim().is_empty() {
            self.pending_blank = self.text_started;
            return;
        }
        let mut text = String::with_capacity(line.len() + 2);
        if std::mem::take(&mut self.pending_blank) {
            text.push('\n');
        }
        text.push_str(strip_bullet(line.trim_end()));
        text.push('\n');
        self.text_started = true;
        self.last_text = Some(line.trim().to_owned());
        out.push(CapEvent::text(self.message_id(), text));
    }
}

#[path = "lines_asks.rs"]
mod asks;

#[cfg(test)]
#[path = "lines_tests.rs"]
mod tests;
