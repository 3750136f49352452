//! capfleet: an orchestrator of command-line AI agents over CAP (`cap-protocol/v1`).
//!
//! The binary as a library: the binary (`src/main.rs`) calls [`main`], the fuzz crate
//! drives the app's decoders of untrusted input through [`fuzzing`], the span tests and
//! the otel bench build the binary's span pipeline ([`TracePipeline`]). Every other
//! module is private: this is no API. The verbs (`cmd/<verb>/`) parse their arguments
//! and print; what they share is the app crate (`capfleet-app`), the server its own
//! crate (`capfleet-server`).

mod cli;
// The verbs are what prints to stdout (with the app's `human`); nothing else does.
#[allow(clippy::print_stdout)]
mod cmd;
#[doc(hidden)]
pub mod fuzzing;

use std::process::ExitCode;

use capfleet_wire::process::{keeper, sandbox};

#[doc(hidden)]
pub use capfleet_app::telemetry::pipeline::TracePipeline;

/// The `capfleet` command: its arguments from the process's.
pub fn main() -> ExitCode {
    // `capfleet __keeper <pid>`: the process that outlives capfleet only to kill what
    // it left (`process::keeper`), before any parsing, thread or runtime.
    let mut argv = std::env::args_os().skip(1);
    if argv.next().is_some_and(|a| a == keeper::KEEPER_ARG) {
        return match argv.next().and_then(|p| p.to_str()?.parse().ok()) {
            Some(owner) => {
                keeper::serve(owner);
                ExitCode::SUCCESS
            }
            None => ExitCode::from(2),
        };
    }
    // Every spawn confined by Landlock goes through the helper installed beside this
    // binary (`src/bin/capfleet-landlock.rs`, `process::sandbox`).
    if let Ok(exe) = std::env::current_exe() {
        sandbox::set_helper(&exe.with_file_name(sandbox::HELPER_BIN));
    }
    cli::main()
}
