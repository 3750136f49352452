//! What a run came to, per session and for the fleet: the rows of the closing summary
//! on stderr and, with `--json`, the last line on stdout — one `run_totals` record a
//! script reads instead of parsing the summary (`capfleet run f.toml --json | tail -1`).

use std::io::Write as _;
use std::path::PathBuf;

use capfleet_engine::run::RunReport;
use capfleet_wire::events::{RunOutcome, urn};
use serde::Serialize;

use capfleet_app::fleet::{Fleet, RunDir};
use capfleet_app::tally::Seen;

/// One session's share, in the fleet's order.
#[derive(Debug, Serialize)]
pub(super) struct SessionTotals {
    pub name: String,
    /// The last state the view saw (`idle`, `failed`, `closed`, …).
    pub state: &'static str,
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub restarts: u32,
    /// Rate-limit pauses (no restarts), and when a session paused at the end would
    /// have re-issued its turn (Unix ms).
    pub pauses: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_until_ms: Option<u64>,
    /// Usage reports with tokens but no price (a model the pricing table lacks):
    /// `cost_usd` leaves them out.
    pub unpriced_usage: u64,
}

/// The fleet's sums, and the limit they ran against.
#[derive(Debug, Serialize)]
pub(super) struct FleetTotals {
    pub turns: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub limit_usd: Option<f64>,
    pub restarts: u64,
}

/// The `run_totals` record.
#[derive(Debug, Serialize)]
pub(super) struct Totals {
    #[serde(rename = "type")]
    kind: &'static str,
    pub run: String,
    pub fleet: String,
    pub outcome: RunOutcome,
    pub exit_code: u8,
    pub sessions: Vec<SessionTotals>,
    pub total: FleetTotals,
    pub journal: PathBuf,
}

impl Totals {
    pub(super) fn new(fleet: &Fleet, r: &RunReport, seen: &Seen, run: &RunDir, code: u8) -> Self {
        let sessions = fleet
            .sessions
            .iter()
            .map(|fs| {
                let u = urn(&fleet.name, &fs.spec.name);
                let row = seen.rows.get(u.as_str()).cloned().unwrap_or_default();
                let usage = r
                    .budget
                    .by_session
                    .get(u.as_str())
                    .copied()
                    .unwrap_or_default();
                SessionTotals {
                    name: fs.spec.name.clone(),
                    state: row.state.as_str(),
                    turns: row.turns,
                    input_tokens: usage.input_tokens,
                    output_tokens: usage.output_tokens,
                    cost_usd: usage.cost_usd,
                    restarts: row.restarts,
                    pauses: row.pauses,
                    paused_until_ms: row
                        .paused_until_ms
                        .filter(|_| !row.paused_until().is_empty()),
                    unpriced_usage: row.unpriced,
                }
            })
            .collect();
        Totals {
            kind: "run_totals",
            run: run.id.clone(),
            fleet: fleet.name.clone(),
            outcome: r.outcome,
            exit_code: code,
            sessions,
            total: FleetTotals {
                turns: r.counters.turns,
                input_tokens: r.budget.total.input_tokens,
                output_tokens: r.budget.total.output_tokens,
                cost_usd: r.budget.total.cost_usd,
                limit_usd: r.budget.limit_usd,
                restarts: r.counters.restarts,
            },
            journal: run.journal(),
        }
    }

    /// `--json`'s last line. A closed stdout is the reader's choice, not an error.
    pub(super) fn print_json(&self) {
        let mut out = std::io::stdout().lock();
        // Serializing plain numbers and strings cannot fail; a write error is ignored
        // like every other write of the view to a closed pipe.
        let _ = serde_json::to_writer(&mut out, self)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(out))
            .and_then(|()| out.flush());
    }
}
