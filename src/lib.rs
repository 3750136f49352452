//! capfleet: an orchestrator of command-line AI agents over CAP (`cap-protocol/v1`).
//!
//! The application as a library: the binary (`src/main.rs`) calls [`main`], the fuzz
//! crate drives the app's decoders of untrusted input through [`fuzzing`], the span
//! tests and the otel bench build the binary's span pipeline ([`TracePipeline`]).
//! Every other module is private: this is no API.

mod agents;
mod cli;
mod client;
// The verbs and the human at the terminal are what prints to stdout; nothing else does.
#[allow(clippy::print_stdout)]
mod cmd;
mod enqueue;
mod fleet;
#[doc(hidden)]
pub mod fuzzing;
#[allow(clippy::print_stdout)]
mod human;
mod launch;
mod logging;
mod nats;
mod notify;
mod one_fleet;
mod one_session;
mod orphans;
mod resume;
mod runs;
mod runtime;
mod sandboxing;
mod secrets;
mod shipped;
mod signals;
mod style;
mod submission;
mod tally;
mod telemetry;
mod unattended;
mod workspaces;

use std::process::ExitCode;

use capfleet_wire::process::keeper;

#[doc(hidden)]
pub use telemetry::pipeline::TracePipeline;

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
    cli::main()
}
