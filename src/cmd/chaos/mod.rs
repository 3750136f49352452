//! `capfleet chaos …`: chaos runs looked at afterwards (`report`).

pub(crate) mod report;

/// The `chaos` verbs.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ChaosCommand {
    /// A chaos run's report: faults by kind, detected, recovered, MTTR, turns failed,
    /// events lost, retry spend, a verdict per invariant (`--json` for machines).
    Report(report::ReportArgs),
}

pub(crate) fn run(
    command: ChaosCommand,
    color: capfleet_app::style::ColorChoice,
) -> std::process::ExitCode {
    match command {
        ChaosCommand::Report(args) => report::run(&args, color),
    }
}
