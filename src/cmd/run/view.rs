//! What a fleet run shows while it runs: on a terminal, one live row per session
//! (state, turns, tokens, cost, restarts) under a fleet total and a budget bar; when
//! stdout is not a terminal, one line per event as `capfleet log` prints it; NDJSON
//! with `--json`.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capfleet_actors::events::{EventBody, Published, SessionEvent, SessionState};
use capfleet_actors::protocol::CapEvent;
use tokio::sync::mpsc;

use crate::cmd::log;
use crate::style::Style;

/// How the run is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Live,
    Lines,
    Json,
}

/// One session's row.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub state: SessionState,
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub restarts: u32,
    /// Reverse-RPC actions allowed only because the agent runs unattended.
    pub unattended_actions: u64,
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
        }
    }
}

/// Everything the view saw, for the closing summary.
#[derive(Debug, Default, Clone)]
pub(super) struct Seen {
    pub rows: BTreeMap<Arc<str>, Row>,
    pub events: u64,
}

const REDRAW: Duration = Duration::from_millis(100);

/// Show events until every publisher is gone.
pub(super) async fn watch(
    mut rx: mpsc::Receiver<Published>,
    mode: Mode,
    budget_usd: Option<f64>,
    style: Style,
) -> Seen {
    let mut seen = Seen::default();
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout());
    let mut drawn = 0usize;
    let mut last_draw = Instant::now() - REDRAW;
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(e) = next {
            seen.events += 1;
            update(&mut seen, &e);
            let written = match mode {
                Mode::Json => serde_json::to_writer(&mut out, &*e)
                    .map_err(std::io::Error::from)
                    .and_then(|()| out.write_all(b"\n")),
                Mode::Lines => line(&mut out, &e, style),
                Mode::Live => Ok(()),
            };
            if written.is_err() {
                return seen;
            }
            next = rx.try_recv().ok();
        }
        if mode == Mode::Live && last_draw.elapsed() >= REDRAW {
            drawn = draw(&mut out, &seen, budget_usd, drawn, style);
            last_draw = Instant::now();
        }
        if out.flush().is_err() {
            return seen;
        }
    }
    if mode == Mode::Live {
        draw(&mut out, &seen, budget_usd, drawn, style);
    }
    out.flush().ok();
    seen
}

fn update(seen: &mut Seen, e: &SessionEvent) {
    // The router's and the workspaces' records are not sessions.
    if e.urn.ends_with("/router") || e.urn.ends_with("/workspace") {
        return;
    }
    let row = seen.rows.entry(e.urn.clone()).or_default();
    match &e.body {
        EventBody::State { to, .. } => row.state = *to,
        EventBody::TurnEnded { .. } => row.turns += 1,
        EventBody::Restart { .. } => row.restarts += 1,
        EventBody::Audit { record } if record.unattended() => row.unattended_actions += 1,
        EventBody::Cap {
            event: CapEvent::Usage(u),
        } => {
            row.input_tokens += u.input_tokens.get().copied().unwrap_or(0);
            row.output_tokens += u.output_tokens.get().copied().unwrap_or(0);
            row.cost_usd += u.cost_usd().unwrap_or(0.0);
        }
        _ => {}
    }
}

fn short(urn: &str) -> &str {
    urn.rsplit('/').next().unwrap_or(urn)
}

/// One line per event, as `capfleet log` prints the journal.
fn line(out: &mut impl Write, e: &SessionEvent, s: Style) -> std::io::Result<()> {
    let value = serde_json::to_value(e).map_err(std::io::Error::from)?;
    match value.as_object() {
        Some(record) => writeln!(out, "{}", log::line(record, s)),
        None => Ok(()),
    }
}

/// Redraw the live block in place; returns its height.
fn draw(
    out: &mut impl Write,
    seen: &Seen,
    budget: Option<f64>,
    previous: usize,
    s: Style,
) -> usize {
    let mut lines = Vec::with_capacity(seen.rows.len() + 2);
    let (mut tin, mut tout, mut cost, mut restarts) = (0u64, 0u64, 0f64, 0u32);
    for (urn, r) in &seen.rows {
        tin += r.input_tokens;
        tout += r.output_tokens;
        cost += r.cost_usd;
        restarts += r.restarts;
        lines.push(format!(
            "{:<20} {:<15} turns {:>3}  tokens {:>8} in {:>7} out  ${:>8.4}  restarts {}",
            short(urn),
            r.state.as_str(),
            r.turns,
            r.input_tokens,
            r.output_tokens,
            r.cost_usd,
            r.restarts
        ));
    }
    lines.push(s.bold(&format!(
        "{:<20} {:<15} {:>9}  tokens {:>8} in {:>7} out  ${:>8.4}  restarts {}",
        "fleet", "", "", tin, tout, cost, restarts
    )));
    if let Some(limit) = budget {
        lines.push(budget_bar(cost, limit));
    }
    let mut buf = String::new();
    if previous > 0 {
        buf.push_str(&format!("\x1b[{previous}F\x1b[J"));
    }
    for l in &lines {
        buf.push_str(l);
        buf.push('\n');
    }
    let _shown = out.write_all(buf.as_bytes());
    lines.len()
}

fn budget_bar(spent: f64, limit: f64) -> String {
    const WIDTH: usize = 40;
    let frac = if limit > 0.0 {
        (spent / limit).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let filled = (frac * WIDTH as f64).round() as usize;
    format!(
        "budget [{}{}] ${spent:.4} of ${limit:.4} ({:.0}%)",
        "#".repeat(filled),
        "-".repeat(WIDTH - filled),
        100.0 * spent / limit.max(f64::MIN_POSITIVE)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_bar_fills_and_clamps() {
        assert!(budget_bar(0.5, 1.0).contains(&format!("{}{}", "#".repeat(20), "-".repeat(20))));
        assert!(budget_bar(2.0, 1.0).contains(&"#".repeat(40)));
        assert!(budget_bar(2.0, 1.0).contains("(200%)"));
    }
}
