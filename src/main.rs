//! capfleet: an orchestrator of command-line AI agents over CAP (`cap-protocol/v1`).

mod agents;
mod cli;
// The verbs and the human at the terminal are what prints to stdout; nothing else does.
#[allow(clippy::print_stdout)]
mod cmd;
mod fleet;
#[allow(clippy::print_stdout)]
mod human;
mod logging;
mod shipped;
mod signals;
mod sim;
mod style;
mod telemetry;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
