//! capfleet: an orchestrator of command-line AI agents over CAP (`cap-protocol/v1`).
//! The command is the library's [`capfleet::main`].

use std::process::ExitCode;

fn main() -> ExitCode {
    capfleet::main()
}
