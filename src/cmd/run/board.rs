//! The live view on a terminal, drawn with indicatif: one row per session in fleet
//! order (a session the fleet does not name, after them), the fleet's total and,
//! with a budget, its bar. Every row fits the terminal's width: its columns shrink
//! to their values, then the least needed are left out (`capfleet_app::human::table`), and
//! indicatif cuts what still would not fit, so none wraps; a resize (SIGWINCH)
//! redraws them at the new width. While the board is
//! up, diagnostics go above it (`capfleet_app::logging::above`), and it is off the screen
//! while the human answers a question ([`hold`]); when the run ends it is cleared,
//! and the summary on stderr is the one copy of the rows left.

use std::collections::HashMap;
use std::sync::Arc;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};

use super::screen::Screen;
use capfleet_app::human::fit::Fit;
use capfleet_app::human::table::{Cell, Col, Overflow, Table, cell, with_unit};
use capfleet_app::style::Style;
use capfleet_app::tally::{Row, Seen};

pub(super) struct Board {
    view: MultiProgress,
    screen: Screen,
    /// The width the rows were last drawn at.
    width: u16,
    /// The sessions' rows, in the order shown; what each shows now.
    rows: Vec<(Arc<str>, ProgressBar, String)>,
    index: HashMap<Arc<str>, usize>,
    total: (ProgressBar, String),
    budget: Option<(f64, ProgressBar, String)>,
    style: Style,
}

impl Board {
    /// The board for `order` (the fleet's session URNs), drawn on stdout.
    pub(super) fn new(order: &[Arc<str>], budget_usd: Option<f64>, style: Style) -> Self {
        let screen = Screen::stdout();
        let view = MultiProgress::with_draw_target(target(&screen));
        let mut board = Board {
            width: screen.width(),
            screen,
            total: (view.add(bar()), String::new()),
            budget: budget_usd.map(|limit| (limit, view.add(bar()), String::new())),
            view,
            rows: Vec::with_capacity(order.len()),
            index: HashMap::with_capacity(order.len()),
            style,
        };
        for urn in order {
            board.row(urn);
        }
        capfleet_app::logging::above(Some(board.view.clone()));
        board
    }

    /// The row of `urn`, added before the totals when new.
    fn row(&mut self, urn: &Arc<str>) -> usize {
        if let Some(&i) = self.index.get(urn) {
            return i;
        }
        let shown = self.view.insert_before(&self.total.0, bar());
        self.rows.push((urn.clone(), shown, String::new()));
        self.index.insert(urn.clone(), self.rows.len() - 1);
        self.rows.len() - 1
    }

    /// Show what `seen` holds: the rows whose text changed, or all of them when
    /// `force` (the terminal was resized).
    pub(super) fn draw(&mut self, seen: &Seen, force: bool) {
        let width = self.screen.width();
        if width < self.width {
            self.screen.reflowed(self.reflowed(width));
        }
        self.width = width;
        let mut total = Row::default();
        for (urn, r) in &seen.rows {
            self.row(urn);
            total.input_tokens += r.input_tokens;
            total.output_tokens += r.output_tokens;
            total.cost_usd += r.cost_usd;
            total.restarts += r.restarts;
        }
        let mut table = Table::new(&COLUMNS);
        for (urn, _, _) in &self.rows {
            let r = seen.rows.get(urn).cloned().unwrap_or_default();
            table.row(session_row(urn, &r));
        }
        table.row(fleet_row(&total));
        let fit = Fit::columns(usize::from(width));
        let mut lines = table.lines(&fit, Overflow::Drop).concat().into_iter();
        for (_, shown, text) in &mut self.rows {
            show(shown, text, lines.next().unwrap_or_default(), force);
        }
        let fleet = self.style.bold(&lines.next().unwrap_or_default());
        let (shown, text) = &mut self.total;
        show(shown, text, fleet, force);
        if let Some((limit, shown, text)) = &mut self.budget {
            let bar = budget_bar(total.cost_usd, *limit, usize::from(width));
            show(shown, text, bar, force);
        }
    }

    /// How many more lines the rows drawn at the old width take at `width` on a
    /// terminal that reflows them.
    fn reflowed(&self, width: u16) -> usize {
        let (old, new) = (usize::from(self.width), usize::from(width.max(1)));
        let budget = self.budget.iter().map(|(_, _, text)| text);
        self.rows
            .iter()
            .map(|(_, _, text)| text)
            .chain([&self.total.1])
            .chain(budget)
            .map(|text| {
                console::measure_text_width(text)
                    .min(old)
                    .div_ceil(new)
                    .max(1)
                    - 1
            })
            .sum()
    }

    /// Take the board off the screen; diagnostics go straight to stderr again.
    pub(super) fn clear(self) {
        capfleet_app::logging::above(None);
        let _shown = self.view.clear();
    }
}

/// `screen`, with no rate limit of indicatif's own: the view redraws at its own
/// pace, and a limited draw would be dropped, leaving a stale row until the next one.
fn target(screen: &Screen) -> ProgressDrawTarget {
    ProgressDrawTarget::term_like(Box::new(screen.clone()))
}

/// The board off the screen while the human answers a question at the terminal (a
/// redraw would write over the question); back when dropped.
pub(super) struct Held(MultiProgress);

/// Hold the board, if one is drawn.
pub(super) fn hold() -> Option<Held> {
    let view = capfleet_app::logging::view()?;
    let _shown = view.clear();
    view.set_draw_target(ProgressDrawTarget::hidden());
    Some(Held(view))
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.set_draw_target(target(&Screen::stdout()));
    }
}

/// A row that draws its message, cut to the terminal's width.
fn bar() -> ProgressBar {
    let style = ProgressStyle::with_template("{wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    ProgressBar::hidden().with_style(style)
}

fn show(shown: &ProgressBar, text: &mut String, now: String, force: bool) {
    if force || *text != now {
        shown.set_message(now.clone());
        *text = now;
    }
}

/// A row's columns: name, state, turns, tokens in and out, cost, restarts, and
/// while paused until when. What does not fit is left out: tokens first, then
/// turns, restarts, cost; the name, the state and the pause stay.
const COLUMNS: [Col; 8] = [
    Col::left("", 20, 0),
    Col::left(" ", 15, 1),
    Col::left(" ", 3, 4).right().label("turns "),
    Col::left("  ", 8, 5).right().label("tokens "),
    Col::left(" ", 7, 5).right(),
    Col::left("  ", 8, 2).right().label("$"),
    Col::left("  ", 0, 3).label("restarts "),
    Col::left("", 0, 1),
];

fn session_row(urn: &str, r: &Row) -> Vec<Cell> {
    vec![
        cell(urn.rsplit('/').next().unwrap_or(urn)),
        cell(r.state.as_str()),
        cell(r.turns.to_string()),
        with_unit(r.input_tokens.to_string(), " in"),
        with_unit(r.output_tokens.to_string(), " out"),
        cell(format!("{:.4}", r.cost_usd)),
        cell(r.restarts.to_string()),
        cell(r.paused_until()),
    ]
}

/// The fleet's total: no state, no turns.
fn fleet_row(total: &Row) -> Vec<Cell> {
    vec![
        cell("fleet"),
        None,
        None,
        with_unit(total.input_tokens.to_string(), " in"),
        with_unit(total.output_tokens.to_string(), " out"),
        cell(format!("{:.4}", total.cost_usd)),
        cell(total.restarts.to_string()),
    ]
}

/// `budget [####----] $spent of $limit (N%)`, the bar at most 40 cells and narrower
/// on a narrow terminal (at least 10).
fn budget_bar(spent: f64, limit: f64, width: usize) -> String {
    let frac = if limit > 0.0 {
        (spent / limit).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let said = format!(
        " ${spent:.4} of ${limit:.4} ({:.0}%)",
        100.0 * spent / limit.max(f64::MIN_POSITIVE)
    );
    let cells = width
        .saturating_sub("budget []".len() + said.len())
        .clamp(10, 40);
    let filled = (frac * cells as f64).round() as usize;
    format!(
        "budget [{}{}]{said}",
        "#".repeat(filled),
        "-".repeat(cells - filled)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_bar_fills_and_clamps() {
        let wide = |spent| budget_bar(spent, 1.0, 160);
        assert!(wide(0.5).contains(&format!("{}{}", "#".repeat(20), "-".repeat(20))));
        assert!(wide(2.0).contains(&"#".repeat(40)));
        assert!(wide(2.0).contains("(200%)"));
        for width in [60, 80] {
            let bar = budget_bar(0.5, 1.0, width);
            assert!(bar.len() <= width, "{bar:?} at {width}");
        }
    }
}
