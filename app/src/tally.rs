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
        let until = first.map_or_else(String::new, |ms| format!(" until {} UTC", clock(ms)));
        tracing::warn!("every live session is paused by a rate limit: the run waits{until}");
    }
    seen.all_paused = now;
}
