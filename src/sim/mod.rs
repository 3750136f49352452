//! `capfleet sim`: a real, scripted CLI agent used by every test and by the demo.

use std::process::ExitCode;

/// Arguments of `capfleet sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {}

pub fn run(_args: SimArgs) -> ExitCode {
    ExitCode::FAILURE
}
