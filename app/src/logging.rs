//! Diagnostics on stderr through `tracing`: warnings and errors by default, more
//! with `CAPFLEET_LOG` (an `EnvFilter`, e.g. `CAPFLEET_LOG=capfleet_engine=debug`).
//! When spans are exported, the span pipeline's layer sits beside the stderr one,
//! each with its own filter. While `capfleet run` draws its live view, each line is
//! printed above the view ([`above`]): the view is cleared, the line written, the
//! view drawn again below it.

use std::io::Write;
use std::sync::RwLock;

use indicatif::MultiProgress;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::human::fit::Fit;
use crate::style::{ColorChoice, Style};

pub(crate) const ENV: &str = "CAPFLEET_LOG";

/// The live view being drawn, if any (set by `capfleet run`'s view).
static VIEW: RwLock<Option<MultiProgress>> = RwLock::new(None);

pub fn init(color: ColorChoice) {
    init_with(color, None::<tracing_subscriber::layer::Identity>);
}

/// The stderr diagnostics, plus `spans` (the span pipeline's layer) when given.
pub(crate) fn init_with<L>(color: ColorChoice, spans: Option<L>)
where
    L: Layer<Registry> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_env(ENV).unwrap_or_else(|_| EnvFilter::new("warn"));
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(|| Stderr)
        .with_ansi(Style::for_stderr(color).enabled())
        .with_target(false)
        .with_filter(filter);
    // A second init (tests calling main twice) is harmless: keep the first.
    let _already = tracing_subscriber::registry()
        .with(spans)
        .with(stderr)
        .try_init();
}

/// From now on (`Some`) or no longer (`None`), diagnostics go above `view`.
pub fn above(view: Option<MultiProgress>) {
    match VIEW.write() {
        Ok(mut v) => *v = view,
        Err(poisoned) => *poisoned.into_inner() = view,
    }
}

/// The live view being drawn, if any.
pub fn view() -> Option<MultiProgress> {
    VIEW.read().ok().and_then(|v| v.clone())
}

/// `line` on stderr, above the live view while one is drawn.
pub fn note(line: &str) {
    let _shown = Stderr.write_all(format!("{line}\n").as_bytes());
}

/// stderr, or above the live view while one is drawn. The fmt layer writes each
/// event whole in one `write_all`, so a line is never split around a redraw. On a
/// terminal (or with `COLUMNS`) a line longer than its width is broken between
/// words (`crate::human::fit`).
struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf).map(|()| buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let fit = Fit::stderr_columns();
        let fitted;
        let buf = match (fit.width(), std::str::from_utf8(buf)) {
            (Some(_), Ok(text)) => {
                fitted = text
                    .split_inclusive('\n')
                    .map(|l| match l.strip_suffix('\n') {
                        Some(line) => format!("{}\n", fit.wrap(line, 4)),
                        None => fit.wrap(l, 4),
                    })
                    .collect::<String>();
                fitted.as_bytes()
            }
            _ => buf,
        };
        match view() {
            Some(view) => view.suspend(|| std::io::stderr().write_all(buf)),
            None => std::io::stderr().write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
