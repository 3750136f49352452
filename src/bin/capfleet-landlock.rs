//! capfleet-landlock: the helper every spawn capfleet confines with Landlock goes
//! through (`capfleet-landlock <sandbox as JSON> <program> <args>...`): it restricts
//! itself by the sandbox's ruleset and executes the program in its place. A binary of
//! its own, small, so that it starts fast (see `capfleet_wire::process::sandbox`).

use std::process::ExitCode;

fn main() -> ExitCode {
    capfleet_wire::process::sandbox::serve_landlock(std::env::args_os().skip(1))
}
