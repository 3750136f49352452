//! The command line: verbs and their dispatch.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::sim;

#[derive(Debug, Parser)]
#[command(name = "capfleet", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the scripted simulator agent.
    Sim(sim::SimArgs),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Sim(args) => sim::run(args),
    }
}
