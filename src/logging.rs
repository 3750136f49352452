//! Diagnostics on stderr through `tracing`: warnings and errors by default, more
//! with `CAPFLEET_LOG` (an `EnvFilter`, e.g. `CAPFLEET_LOG=capfleet_actors=debug`).

use tracing_subscriber::EnvFilter;

use crate::style::ColorChoice;

pub const ENV: &str = "CAPFLEET_LOG";

pub fn init(color: ColorChoice) {
    let filter = EnvFilter::try_from_env(ENV).unwrap_or_else(|_| EnvFilter::new("warn"));
    let ansi = match color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    };
    // A second init (tests calling main twice) is harmless: keep the first.
    let _already = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_target(false)
        .try_init();
}
