//! What a fleet run shows while it runs: on a terminal, the live board
//! ([`super::board`]: one row per session in fleet order under a fleet total and a
//! budget bar); when stdout is not a terminal or `TERM=dumb`, one line per event as
//! `capfleet log` prints it, text chunks joined into lines ([`super::lines`]);
//! NDJSON with `--json`.
//!
//! # The board and the lines
//!
//! The tally is `app/src/tally.rs`'s. On a terminal that is not `TERM=dumb`, the live board (`board.rs`): indicatif's `MultiProgress` on stdout, one row per
//! session in fleet order, fit to the terminal's width at every draw (below), redrawn
//! every 100 ms while events come and at once on `SIGWINCH`. `screen.rs` ends each
//! row with a line feed instead of indicatif's padding into a wrap, so a terminal
//! that reflows its lines on a resize keeps the rows apart; when it narrows, the
//! redraw also clears the lines the reflow added. While the board is up, tracing's
//! stderr writer (`app/src/logging.rs`; also the stop signals' notes) prints each line
//! above it (indicatif's `suspend`), and while the human answers a question it is
//! off the screen; at the end it is cleared, and the summary on stderr is the one
//! copy of the rows. Otherwise one line per event as `capfleet log` prints it, a
//! session's text chunks held (`lines.rs`) until a line ends, a word boundary past
//! 120 bytes, the session's next event or the run's end; a held line keeps the event
//! it started in and is formatted from it (`log::row`), not through a JSON value of
//! every chunk (that was 35–40% of `run`'s CPU on a long answer). With `--json`, the
//! events as NDJSON and a last `run_totals` record (`totals.rs`: the summary's rows,
//! in fleet order). Everything printed for a person goes through one width helper,
//! `app/src/human/fit.rs` (`Fit`: the stream's width — its terminal's, else `COLUMNS`,
//! else none, which keeps the lines whole with absolute paths —, paths shown relative
//! to the working directory or with `~`, lines broken between words) and
//! `app/src/human/table.rs` (columns with a rank: declared widths when they fit, else each
//! column as wide as its values, else the highest ranks moved to the row's indented
//! next line, or left out on the board): the header, the board, tracing's lines
//! (`app/src/logging.rs`), the summary (`run/summary.rs`), `runs` and `log`'s rows (`log/line.rs`; a
//! summary goes on under itself). Colour follows `--color`,
//! `NO_COLOR` and `TERM=dumb` (`app/src/style.rs`). `chat` prints a turn's end (its
//! line ended) before the REPL prompts again.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use capfleet_engine::protocol::{CapEvent, EventKind};
use capfleet_wire::events::{EventBody, Published, SessionEvent};
use serde_json::Value;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc;

use super::board::Board;
use super::lines::Texts;
use capfleet_app::human::event_line as log;
use capfleet_app::human::fit::Fit;
use capfleet_app::style::{self, Style};
use capfleet_app::tally::{Seen, update};

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
