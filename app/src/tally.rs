//! A run's tally: what each session did, counted from its events (state, turns,
//! tokens, cost, restarts, pauses). `capfleet run`'s view and summary show it;
//! `capfleet serve` keeps one per run.

use std::collections::BTreeMap;
use std::sync::Arc;

use capfleet_engine::pricing;
use capfleet_engine::protocol::CapEvent;
use capfleet_wire::events::{EventBody, SessionEvent, SessionState};

use crate::human::event_line::clock;

/// One session's row.
#[derive(Debug, Clone)]
pub struct Row {
    pub state: SessionState,
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub restarts: u32,
    /// Reverse-RPC actions allowed only because the agent runs unattended.
    pub unattended_actions: u64,
    /// Usage reports with tokens but no price (their model is not in the pricing
    /// table), and the models they named.
    pub unpriced: u64,
    pub unpriced_models: std::collections::BTreeSet<String>,
    /// Rate-limit pauses, and while paused when the turn is re-issued (Unix ms).
    pub pauses: u32,
    pub paused_until_ms: Option<u64>,
    /// The last lines its agent wrote.
    pub tail: Tail,
}

/// Lines a [`Tail`] keeps, and the characters of each.
const TAIL_LINES: usize = 5;
const TAIL_LINE_CHARS: usize = 240;

/// The last lines a session's agent wrote (at most five, each cut at 240
/// characters): what a status shows of a running session.
#[derive(Debug, Clone, Default)]
pub struct Tail {
    /// The lines, the last one still open (the next text goes on with it).
    lines: std::collections::VecDeque<String>,
}

impl Tail {
    /// Take in `text` written after what came before.
    pub fn push(&mut self, text: &str) {
        let mut pieces = text.split('\n');
        if let Some(first) = pieces.next() {
            match self.lines.back_mut() {
                Some(open) => cut_onto(open, first),
                None => self.start(first),
            }
        }
        for piece in pieces {
            self.start(piece);
        }
    }

    fn start(&mut self, piece: &str) {
        // An empty line is no line: the next one takes its place.
        if let Some(open) = self.lines.back_mut().filter(|l| l.is_empty()) {
            cut_onto(open, piece);
            return;
        }
        let mut line = String::new();
        cut_onto(&mut line, piece);
        self.lines.push_back(line);
        // One more than kept: the open line may still be empty.
        while self.lines.len() > TAIL_LINES + 1 {
            self.lines.pop_front();
        }
    }

    /// The last lines with text, oldest first.
    pub fn lines(&self) -> Vec<String> {
        let full: Vec<&String> = self.lines.iter().filter(|l| !l.trim().is_empty()).collect();
        let skip = full.len().saturating_sub(TAIL_LINES);
        full.into_iter().skip(skip).cloned().collect()
    }
}

/// `piece` onto `line`, up to the line's length.
fn cut_onto(line: &mut String, piece: &str) {
    let room = TAIL_LINE_CHARS.saturating_sub(line.chars().count());
    line.extend(piece.chars().take(room));
}

impl Row {
    /// ` until HH:MM:SS.mmm UTC` while the session is paused.
    pub fn paused_until(&self) -> String {
        match (self.state, self.paused_until_ms) {
            (SessionState::Paused, Some(ms)) => format!(" until {} UTC", clock(ms)),
            _ => String::new(),
        }
    }
}

impl Default for Row {
    fn default() -> Self {
        Row {
            state: SessionState::Starting,
            turns: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
            restarts: 0,
            unattended_actions: 0,
            unpriced: 0,
            unpriced_models: Default::default(),
            pauses: 0,
            paused_until_ms: None,
            tail: Tail::default(),
        }
    }
}

/// Everything the view saw, for the closing summary.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub rows: BTreeMap<Arc<str>, Row>,
    pub events: u64,
    /// Every session with work is paused (said once each time it becomes so).
    pub all_paused: bool,
}

/// Count `e` into `seen` (also the tally `capfleet serve` keeps of each run).
pub fn update(seen: &mut Seen, e: &SessionEvent) {
    // The router's, the workspaces' and the outside calls' records are not sessions.
    if e.urn.ends_with("/router") || e.urn.ends_with("/workspace") || e.urn.ends_with("/mcp") {
        return;
    }
    let row = seen.rows.entry(e.urn.clone()).or_default();
    match &e.body {
        EventBody::State { to, .. } => {
            row.state = *to;
            all_paused(seen);
        }
        EventBody::Paused { until_ms, .. } => {
            row.pauses += 1;
            row.paused_until_ms = Some(*until_ms);
        }
        EventBody::TurnEnded { .. } => row.turns += 1,
        EventBody::Restart { .. } => row.restarts += 1,
        EventBody::Audit { record } if record.unattended() => row.unattended_actions += 1,
        EventBody::Cap {
            event: CapEvent::TextChunk(t),
        } => row.tail.push(&t.text),
        EventBody::Cap {
            event: CapEvent::Usage(u),
        } => {
            row.input_tokens += u.input_tokens.get().copied().unwrap_or(0);
            row.output_tokens += u.output_tokens.get().copied().unwrap_or(0);
            row.cost_usd += u.cost_usd().unwrap_or(0.0);
            let unknown = u.meta.as_ref().and_then(|m| m.get(pricing::META_ESTIMATED));
            if unknown.and_then(|v| v.as_str()) == Some(pricing::UNKNOWN_MODEL) {
                row.unpriced += 1;
                let model = u.model_id.get().map_or("(none named)", String::as_str);
                row.unpriced_models.insert(model.to_owned());
            }
        }
        _ => {}
    }
}

/// Say so when every session with work is paused (the others idle or ended): the
/// run waits for the first resume.
fn all_paused(seen: &mut Seen) {
    let mut busy = seen
        .rows
        .values()
        .filter(|r| !r.state.is_terminal() && !r.state.is_idle())
        .peekable();
    let now = busy.peek().is_some() && busy.all(|r| r.state == SessionState::Paused);
    if now && !seen.all_paused {
        let first = seen
            .rows
            .values()
            .filter_map(|r| {
                r.paused_until_ms
                    .filter(|_| r.state == SessionState::Paused)
            })
            .min();
        let until = first.map_or_else(String::new, |ms| format!(" until {} UTC", clock(ms)));
        tracing::warn!("every live session is paused by a rate limit: the run waits{until}");
    }
    seen.all_paused = now;
}

#[cfg(test)]
mod tests {
    use super::Tail;

    #[test]
    fn a_tail_keeps_the_last_lines_across_chunks_each_cut() {
        let mut t = Tail::default();
        t.push("one\ntw");
        t.push("o\n");
        assert_eq!(t.lines(), ["one", "two"]);
        t.push("three");
        assert_eq!(t.lines(), ["one", "two", "three"]);
        for i in 0..10 {
            t.push(&format!("\nline {i}"));
        }
        assert_eq!(
            t.lines(),
            ["line 5", "line 6", "line 7", "line 8", "line 9"]
        );
        t.push(&"x".repeat(1000));
        assert_eq!(t.lines().last().map(|l| l.chars().count()), Some(240));
        t.push("\n\n\n");
        assert_eq!(
            t.lines().len(),
            5,
            "empty lines are no lines: {:?}",
            t.lines()
        );
        assert!(t.lines()[4].starts_with("line 9xx"));
    }
}
