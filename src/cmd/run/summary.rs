//! The summary a run ends with, on stderr: the outcome, one row per session and the
//! fleet's total (columns that do not fit the terminal go on the row's next line,
//! `capfleet_app::human::table`), budget crossings, unattended and unpriced sessions, the
//! workspaces, and where the journal is.

use capfleet_engine::budget::{BudgetScope, BudgetSnapshot, Crossing};
use capfleet_engine::router::RaceWon;
use capfleet_engine::run::RunReport;
use capfleet_wire::events::urn;

use super::totals::{SessionTotals, Totals};
use super::workspaces;
use capfleet_app::fleet::{Fleet, RunDir};
use capfleet_app::human::fit::Fit;
use capfleet_app::human::table::{Col, Overflow, Table, cell, with_unit};
use capfleet_app::style::Style;
use capfleet_app::tally::Seen;
use capfleet_app::unattended;

/// The rows' columns: name, state, turns, tokens in and out, cost, the fleet's
/// budget, restarts, the pause and race marks, the sandbox (backend, network). Name,
/// state and cost stay on the row's line longest; the budget and the marks go to the
/// next line first.
const COLUMNS: [Col; 11] = [
    Col::left("  ", 20, 0),
    Col::left(" ", 12, 1),
    Col::left(" ", 3, 3).right().label("turns "),
    Col::left("  ", 8, 4).right().label("tokens "),
    Col::left(" ", 7, 4).right(),
    Col::left("  ", 8, 2).right().label("$"),
    Col::left("", 0, 5),
    Col::left("  ", 0, 3).label("restarts "),
    Col::left("", 0, 5),
    Col::left("", 0, 5),
    Col::left("  ", 0, 5),
];

/// Per session: turns, tokens, cost, restarts; then the fleet and where the journal is.
pub(super) fn print(fleet: &Fleet, r: &RunReport, t: &Totals, seen: &Seen, run: &RunDir, s: Style) {
    let fit = Fit::stderr();
    let say = |line: &str| eprintln!("{}", fit.wrap(line, 4));
    let outcome = serde_json::to_value(r.outcome)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let cause = r
        .faults
        .first()
        .map_or_else(String::new, |f| format!(": {f}"));
    say(&s.bold(&format!(
        "run {} of fleet {}: {outcome}{cause}",
        run.id, fleet.name
    )));
    for f in &r.faults {
        say(&format!("  {} {f}; kept: {}", s.err("disk fault:"), f.kept));
    }
    let mut table = Table::new(&COLUMNS);
    for row in &t.sessions {
        table.row(vec![
            cell(&row.name),
            cell(row.state),
            cell(row.turns.to_string()),
            with_unit(row.input_tokens.to_string(), " in"),
            with_unit(row.output_tokens.to_string(), " out"),
            cell(format!("{:.4}", row.cost_usd)),
            None,
            cell(row.restarts.to_string()),
            cell(pause_mark(row)),
            cell(race_mark(&r.races, &row.name, s)),
            r.sandboxes
                .get(&row.name)
                .map(|sb| (capfleet_app::sandboxing::mark(sb), String::new())),
        ]);
    }
    let total = &t.total;
    let budget = match total.limit_usd {
        Some(limit) => format!(" of ${limit:.4}"),
        None => String::new(),
    };
    table.row(vec![
        cell("total"),
        None,
        cell(total.turns.to_string()),
        with_unit(total.input_tokens.to_string(), " in"),
        with_unit(total.output_tokens.to_string(), " out"),
        cell(format!("{:.4}", total.cost_usd)),
        cell(budget),
        cell(total.restarts.to_string()),
    ]);
    for line in table.lines(&fit, Overflow::Next).concat() {
        eprintln!("{line}");
    }
    for c in &r.budget.crossings {
        say(&format!("  {}", crossing_line(&r.budget, c)));
    }
    for fs in fleet
        .sessions
        .iter()
        .filter(|fs| unattended::is_unattended(&fs.spec))
    {
        let u = urn(&fleet.name, &fs.spec.name);
        let actions = seen
            .rows
            .get(u.as_str())
            .map_or(0, |r| r.unattended_actions);
        say(&format!(
            "  {} {} ran unattended (tool_permission = \"none\"): {actions} actions without asking, each in the journal",
            s.warn("UNATTENDED:"),
            fs.spec.name,
        ));
    }
    for fs in &fleet.sessions {
        let u = urn(&fleet.name, &fs.spec.name);
        let Some(row) = seen.rows.get(u.as_str()).filter(|r| r.unpriced > 0) else {
            continue;
        };
        let models: Vec<&str> = row.unpriced_models.iter().map(String::as_str).collect();
        say(&format!(
            "  {} {}: {} usage reports with tokens but no price (model {}: not in the pricing \
             table, config/pricing.toml); their cost is not in the totals",
            s.warn("COST UNKNOWN:"),
            fs.spec.name,
            row.unpriced,
            models.join(", "),
        ));
    }
    workspaces::summary(r, run, s, &fit);
    let j = &r.journal;
    let mut cut = String::new();
    if j.cut_bytes > 0 {
        cut = format!(
            ", {} text bytes cut past journal_max_mb (journal_cut records)",
            j.cut_bytes
        );
    }
    if j.lost > 0 {
        cut.push_str(&format!(", {} events NOT written (disk fault)", j.lost));
    }
    say(&format!(
        "  journal {} ({} records, {} bytes{cut})",
        fit.path(&run.journal()),
        j.records,
        j.bytes
    ));
}

/// A crossed limit: whose, the spend against it, the overshoot (spent minus limit) and
/// why (the turn in flight whose usage crossed it; what ran on until stopped).
fn crossing_line(b: &BudgetSnapshot, c: &Crossing) -> String {
    let whose = match &c.scope {
        BudgetScope::Fleet => "fleet budget".to_owned(),
        BudgetScope::Session(urn) => format!("{} budget", short(urn)),
    };
    let turn = c.turn.map_or_else(String::new, |t| format!(" turn {t} of"));
    let stopped = match c.scope {
        BudgetScope::Fleet => "the run was stopped",
        BudgetScope::Session(_) => "the session was stopped",
    };
    format!(
        "{whose} exceeded: ${:.4} spent of ${:.4}, over by ${:.4}: crossed by{turn} {} in flight (${:.4} at the crossing); {stopped}",
        b.spent_against(c),
        c.limit_usd,
        b.overshoot(c),
        short(&c.urn),
        c.spent_usd,
    )
}

fn short(urn: &str) -> &str {
    urn.rsplit('/').next().unwrap_or(urn)
}

/// `  won the race` for a race's winner, `  cancelled: <winner> won` for its cancelled
/// candidates (one mark per race the session was in).
fn race_mark(races: &[RaceWon], session: &str, s: Style) -> String {
    let mut mark = String::new();
    for race in races {
        if race.winner == session {
            mark.push_str(&format!("  {}", s.bold("won the race")));
        } else if race.cancelled.iter().any(|c| c == session) {
            mark.push_str(&format!("  cancelled: {} won the race", race.winner));
        }
    }
    mark
}

/// `  paused 2x` for a session a rate limit paused, `, until HH:MM:SS UTC` when it
/// was paused at the end.
fn pause_mark(row: &SessionTotals) -> String {
    if row.pauses == 0 {
        return String::new();
    }
    let until = row.paused_until_ms.map_or_else(String::new, |ms| {
        format!(", until {} UTC", capfleet_app::human::event_line::clock(ms))
    });
    format!("  paused {}x{until}", row.pauses)
}
