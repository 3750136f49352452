//! The runtime of a verb that drives agents, and a verb run in it with its telemetry.

use std::process::ExitCode;

use crate::style::{ColorChoice, Style};
use crate::telemetry::{Telemetry, TelemetryArgs};

/// Run `verb` in a fresh [`runtime`] with its span pipeline from `telemetry` (bad
/// telemetry flags: exit 2), finishing the pipeline after it. The runtime does not
/// wait for a blocked read of stdin at the end.
pub fn run_verb(
    color: ColorChoice,
    telemetry: &TelemetryArgs,
    verb: impl AsyncFnOnce(&Telemetry) -> ExitCode,
) -> ExitCode {
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let code = runtime.block_on(async {
        let telemetry = match Telemetry::start(color, telemetry) {
            Ok(t) => t,
            Err(e) => {
                crate::logging::init(color);
                eprintln!("{} {e}", Style::for_stderr(color).err("error:"));
                return ExitCode::from(2);
            }
        };
        let code = verb(&telemetry).await;
        telemetry.finish().await;
        code
    });
    runtime.shutdown_background();
    code
}

/// The runtime of a verb that drives agents (two workers); `Err` once said on stderr.
pub fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("capfleet: cannot start the runtime: {e}");
            ExitCode::FAILURE
        })
}
