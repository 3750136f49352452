//! The chaos report `run` prints at the end of a chaos run (`capfleet chaos report`
//! prints the same from the journal afterwards).

use capfleet_engine::chaos::Report;

use capfleet_app::fleet::run_dir::RunDir;
use capfleet_app::style::{ColorChoice, Style};

/// How long the agents of a run that just ended get to be gone before one still alive
/// is an orphan (the keeper's own budget).
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// The report at the end of a chaos run (`run` with `[chaos]` or `--chaos`): printed to
/// stdout after the run's summary (`json`: as one JSON line), with the orphan check
/// done for this capfleet (what it marked for the run's sessions must be gone within
/// [`SETTLE`]), and recorded as a `chaos_report` span.
pub(super) async fn at_run_end(run: &RunDir, json: bool, color: ColorChoice) {
    let err = Style::for_stderr(color);
    let mut report = match Report::from_journal(&run.journal()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{} chaos report: {e}", err.err("error:"));
            return;
        }
    };
    let me = std::process::id();
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        report.check_orphans(&[me]);
        let gone = report
            .verdict("no_orphan_process")
            .is_some_and(|v| v.holds == Some(true));
        if gone || std::time::Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    report.record_span(&run.id);
    match serde_json::to_string(&report) {
        Ok(line) if json => println!("{line}"),
        Ok(_) => println!("{report}"),
        Err(e) => eprintln!("{} chaos report: {e}", err.err("error:")),
    }
}
