//! What a fleet run shows while it runs: on a terminal, the live board
//! ([`super::board`]: one row per session in fleet order under a fleet total and a
//! budget bar); when stdout is not a terminal or `TERM=dumb`, one line per event as
//! `capfleet log` prints it, text chunks joined into lines ([`super::lines`]);
//! NDJSON with `--json`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use capfleet_engine::pricing;
use capfleet_engine::protocol::{CapEvent, EventKind};
use capfleet_wire::events::{EventBody, Published, SessionEvent, SessionState};
use serde_json::Value;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc;

use super::board::Board;
use super::lines::Texts;
use crate::cmd::log;
use crate::human::fit::Fit;
use crate::style::{self, Style};

/// How the run is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Live,
    Lines,
    Json,
}

impl Mode {
    /// NDJSON with `--json`; the live board on a terminal that can move its cursor;
    /// lines otherwise.
    pub(super) fn pick(json: bool) -> Self {
        if json {
            Mode::Json
        } else if std::io::stdout().is_terminal() && !style::dumb_terminal() {
            Mode::Live
        } else {
            Mode::Lines
        }
    }
}

/// One session's row.
#[derive(Debug, Clone)]
pub(crate) struct Row {
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
}

impl Row {
    /// ` until HH:MM:SS.mmm UTC` while the session is paused.
    pub(super) fn paused_until(&self) -> String {
        match (self.state, self.paused_until_ms) {
            (SessionState::Paused, Some(ms)) => format!(" until {} UTC", log::clock(ms)),
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
        }
    }
}

/// Everything the view saw, for the closing summary.
#[derive(Debug, Default, Clone)]
pub(crate) struct Seen {
    pub rows: BTreeMap<Arc<str>, Row>,
    pub events: u64,
    /// Every session with work is paused (said once each time it becomes so).
    pub all_paused: bool,
}

const REDRAW: Duration = Duration::from_millis(100);

/// Show events until every publisher is gone. `order` is the fleet's sessions (their
/// URNs), the board's row order.
pub(super) async fn watch(
    mut rx: mpsc::Receiver<Published>,
    mode: Mode,
    order: &[Arc<str>],
    budget_usd: Option<f64>,
    style: Style,
) -> Seen {
    let mut seen = Seen::default();
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout());
    let mut texts = Texts::default();
    let fit = match mode {
        Mode::Lines => Fit::stdout(),
        Mode::Live | Mode::Json => Fit::default(),
    };
    let look = (style, &fit);
    let mut board = (mode == Mode::Live).then(|| Board::new(order, budget_usd, style));
    let mut resizes = board
        .is_some()
        .then(|| signal(SignalKind::window_change()).ok())
        .flatten();
    let mut redraw = tokio::time::interval(REDRAW);
    redraw.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut changed = false;
    loop {
        tokio::select! {
            first = rx.recv() => {
                let Some(first) = first else { break };
                let mut next = Some(first);
                while let Some(e) = next {
                    seen.events += 1;
                    update(&mut seen, &e);
                    let written = match mode {
                        Mode::Json => serde_json::to_writer(&mut out, &*e)
                            .map_err(std::io::Error::from)
                            .and_then(|()| out.write_all(b"\n")),
                        Mode::Lines => lines(&mut out, &mut texts, &e, look),
                        Mode::Live => Ok(()),
                    };
                    if written.is_err() {
                        return seen;
                    }
                    next = rx.try_recv().ok();
                }
                changed = true;
                if out.flush().is_err() {
                    return seen;
                }
            }
            _ = redraw.tick(), if changed => {
                if let Some(b) = &mut board {
                    b.draw(&seen, false);
                }
                changed = false;
            }
            Some(()) = resized(&mut resizes) => {
                if let Some(b) = &mut board {
                    b.draw(&seen, true);
                }
            }
        }
    }
    for (first, text) in texts.release_all() {
        let _shown = text_line(&mut out, &first, &text, look);
    }
    if let Some(b) = board {
        b.clear();
    }
    out.flush().ok();
    seen
}

/// The next resize of the terminal; never without a handler.
async fn resized(resizes: &mut Option<Signal>) -> Option<()> {
    match resizes {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

/// Count `e` into `seen` (also the tally `capfleet serve` keeps of each run).
pub(crate) fn update(seen: &mut Seen, e: &SessionEvent) {
    // The router's and the workspaces' records are not sessions.
    if e.urn.ends_with("/router") || e.urn.ends_with("/workspace") {
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
        let until = first.map_or_else(String::new, |ms| format!(" until {} UTC", log::clock(ms)));
        tracing::warn!("every live session is paused by a rate limit: the run waits{until}");
    }
    seen.all_paused = now;
}

/// One line per event, as `capfleet log` prints the journal; a session's text
/// chunks as whole lines.
fn lines(
    out: &mut impl Write,
    texts: &mut Texts<Published>,
    e: &Published,
    look: log::Look<'_>,
) -> std::io::Result<()> {
    if let EventBody::Cap {
        event: CapEvent::TextChunk(t),
    } = &e.body
    {
        return texts
            .chunk(&e.urn, e, &t.text)
            .iter()
            .try_for_each(|(first, text)| text_line(out, first, text, look));
    }
    if let Some((first, text)) = texts.release(&e.urn) {
        text_line(out, &first, &text, look)?;
    }
    match serde_json::to_value(&**e) {
        Ok(Value::Object(record)) => writeln!(out, "{}", log::line_at(&record, look.0, look.1)),
        _ => Ok(()),
    }
}

/// A line of an agent's text, printed as `capfleet log` prints its chunk: with the
/// time and turn of the chunk it started in.
fn text_line(
    out: &mut impl Write,
    first: &SessionEvent,
    text: &str,
    look: log::Look<'_>,
) -> std::io::Result<()> {
    let row = log::row(
        Some(first.ts_ms),
        first.urn.rsplit('/').next().unwrap_or(&first.urn),
        first.turn.map(u64::from),
        EventKind::TextChunk.wire(),
        text,
        look,
    );
    writeln!(out, "{row}")
}
