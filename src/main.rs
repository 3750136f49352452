//! capfleet: an orchestrator of command-line AI agents over CAP (`cap-protocol/v1`).

mod agents;
mod cli;
mod cmd;
mod fleet;
mod human;
mod logging;
mod shipped;
mod sim;
mod style;
mod telemetry;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
