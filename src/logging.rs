//! Diagnostics on stderr through `tracing`: warnings and errors by default, more
//! with `CAPFLEET_LOG` (an `EnvFilter`, e.g. `CAPFLEET_LOG=capfleet_actors=debug`).
//! When spans are exported, the span pipeline's layer sits beside the stderr one,
//! each with its own filter.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::style::ColorChoice;

pub(crate) const ENV: &str = "CAPFLEET_LOG";

pub(crate) fn init(color: ColorChoice) {
    init_with(color, None::<tracing_subscriber::layer::Identity>);
}

/// The stderr diagnostics, plus `spans` (the span pipeline's layer) when given.
pub(crate) fn init_with<L>(color: ColorChoice, spans: Option<L>)
where
    L: Layer<Registry> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_env(ENV).unwrap_or_else(|_| EnvFilter::new("warn"));
    let ansi = match color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    };
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .with_filter(filter);
    // A second init (tests calling main twice) is harmless: keep the first.
    let _already = tracing_subscriber::registry()
        .with(spans)
        .with(stderr)
        .try_init();
}
