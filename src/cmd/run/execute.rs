//! Running a validated fleet: the run directory and journal, the supervision tree
//! with every session and the router (`capfleet_engine::run::run_fleet`), the live
//! view, the stop signals (`capfleet_app::signals`), the summary and the exit code.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use capfleet_engine::answerer::HumanQuestion;
use capfleet_engine::run::{Resume, RunTelemetry, run_fleet};
use capfleet_engine::telemetry::metrics::FleetMetrics;
use capfleet_wire::events::{SUBSCRIBER_CAPACITY, urn};
use tokio::sync::mpsc;

use super::RunArgs;
use super::board;
use super::summary;
use super::totals::Totals;
use super::view::{self, Mode};
use super::workspaces;
use capfleet_app::fleet::run_dir::RunLock;
use capfleet_app::fleet::{Fleet, RunDir};
use capfleet_app::human::Input;
use capfleet_app::human::fit::Fit;
use capfleet_app::launch::EXIT_SESSION_FAILED;
use capfleet_app::launch::{self, Launch};
use capfleet_app::notify::{Notifier, NotifyStats, notices};
use capfleet_app::unattended;

/// How long the webhooks may go on delivering after the run's end (the run's exit
/// waits at most this long for them).
const NOTIFY_GRACE: std::time::Duration = std::time::Duration::from_secs(3);
use capfleet_app::signals::StopSignals;
use capfleet_app::style::{ColorChoice, Style};
use capfleet_app::telemetry::Telemetry;
use capfleet_server::metrics_http::MetricsServer;

/// A new run, or one resumed in place.
pub(super) enum Target {
    New,
    Resume {
        run: RunDir,
        lock: RunLock,
        resume: Box<Resume>,
        commit: bool,
    },
}

pub(super) async fn execute(
    mut fleet: Fleet,
    args: &RunArgs,
    color: ColorChoice,
    telemetry: &Telemetry,
    signals: StopSignals,
    target: Target,
) -> ExitCode {
    let err = Style::for_stderr(color);
    let hook = match args.notify.spec() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(capfleet_app::launch::EXIT_INVALID);
        }
    };
    let run_telemetry = RunTelemetry {
        metrics: args.metrics_addr.map(|_| {
            Arc::new(FleetMetrics::new(
                telemetry.span_stats().unwrap_or_default(),
            ))
        }),
        traceparent: telemetry.traceparent(),
    };
    let metrics_server = match (args.metrics_addr, &run_telemetry.metrics) {
        (Some(addr), Some(m)) => match MetricsServer::start(addr, m.clone()).await {
            Ok(s) => {
                eprintln!("capfleet: metrics on http://{}/metrics", s.local_addr());
                Some(s)
            }
            Err(e) => {
                eprintln!("{} {e}", err.err("error:"));
                return ExitCode::from(capfleet_app::launch::EXIT_INVALID);
            }
        },
        _ => None,
    };
    let (run, _lock, resume, commit) = match target {
        Target::New => match new_run(args, err) {
            Ok((run, lock)) => (run, lock, None, args.commit),
            Err(code) => return code,
        },
        Target::Resume {
            run,
            lock,
            resume,
            commit,
        } => {
            // What the dead orchestrator left running goes first.
            if let Ok(dir) = std::env::current_dir() {
                sweep(&dir, err);
            }
            (run, lock, Some(resume), commit)
        }
    };
    fleet.bind_run_dir(&run);
    // The supervisor of `--resume-on-crash` resumes this run by its id.
    if let Some(file) = &args.run_id_file
        && let Err(e) = std::fs::write(file, &run.id)
    {
        eprintln!("{} {}: {e}", err.err("error:"), file.display());
        return ExitCode::FAILURE;
    }
    let fit = Fit::stderr();
    let journal = fit.path(&run.journal());
    let header = match &resume {
        Some(r) => format!(
            "capfleet: resuming run {} (journal {journal}: {} records, {} completed deliveries replayed, {} re-issued)",
            run.id,
            r.recovered.tail.records,
            r.recovered.replay.len(),
            r.recovered.interrupted.len()
        ),
        None => format!("capfleet: run {} (journal {journal})", run.id),
    };
    eprintln!("{}", fit.wrap(&header, 4));
    // Before any agent starts: a workspace that cannot be made fails the run; a
    // resumed run's are reused as they are.
    let prepared = match &resume {
        Some(_) => capfleet_app::workspaces::reuse(&mut fleet, &run, commit),
        None => capfleet_app::workspaces::prepare(&mut fleet, &run, commit).await,
    };
    let workspace = match prepared {
        Ok(phase) => phase,
        Err(e) => {
            let line = format!("{} cannot provision the workspaces: {e}", err.err("error:"));
            eprintln!("{}", fit.wrap(&line, 4));
            if let Err(e) = run.record_end(EXIT_SESSION_FAILED) {
                eprintln!("{} {e}", err.err("error:"));
            }
            return ExitCode::from(EXIT_SESSION_FAILED);
        }
    };
    workspaces::announce(&workspace, &fit);
    for fs in fleet
        .sessions
        .iter()
        .filter(|fs| unattended::is_unattended(&fs.spec))
    {
        unattended::warn(&fs.spec, err);
    }

    let mode = Mode::pick(args.json);
    let stats = NotifyStats::default();
    let (notifier, workers) = Notifier::start(
        hook.into_iter().chain(fleet.notify.clone()).collect(),
        &stats,
    );
    // A human at the terminal answers what the policy leaves open, unless the fleet
    // says `auto_answer` (then, as with no terminal at all, the answer is fail-safe).
    let human = (std::io::stdin().is_terminal() && !fleet.auto_answer).then(|| {
        let (tx, rx) = mpsc::channel(16);
        let told = (notifier.clone(), run.id.clone(), fleet.name.clone());
        tokio::spawn(answer_questions(rx, err, told));
        tx
    });
    let mut taps = Vec::new();
    if !notifier.is_empty() {
        let (tx, rx) = mpsc::channel(SUBSCRIBER_CAPACITY);
        tokio::spawn(notify_budget(
            rx,
            notifier.clone(),
            run.id.clone(),
            fleet.name.clone(),
        ));
        taps.push(tx);
    }
    let (tx, rx) = mpsc::channel(SUBSCRIBER_CAPACITY);
    let order: Vec<Arc<str>> = fleet
        .sessions
        .iter()
        .map(|fs| urn(&fleet.name, &fs.spec.name).into())
        .collect();
    let (budget_usd, style) = (fleet.budgets.total_usd, Style::for_stdout(color));
    let viewer =
        tokio::spawn(async move { view::watch(rx, mode, &order, budget_usd, style).await });
    let spec = launch::run_spec(
        &fleet,
        &run,
        Launch {
            human,
            telemetry: run_telemetry,
            workspace,
            resume: resume.map(|r| *r),
        },
    );
    let (signals_tx, signals_rx) = mpsc::channel(4);
    signals.forward(signals_tx);
    taps.push(tx);
    let report = run_fleet(spec, taps, signals_rx).await;
    if let Some(s) = metrics_server {
        s.stop().await;
    }
    let seen = viewer.await.unwrap_or_default();
    let code = match &report {
        Ok(r) => launch::exit_code(r),
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            // The router never ran: end the journal here.
            if let Err(e) = run.record_end(EXIT_SESSION_FAILED) {
                eprintln!("{} {e}", err.err("error:"));
            }
            EXIT_SESSION_FAILED
        }
    };
    if let Ok(r) = &report {
        let totals = Totals::new(&fleet, r, &seen, &run, code);
        summary::print(&fleet, r, &totals, &seen, &run, err);
        if mode == Mode::Json {
            totals.print_json();
        }
    }
    if fleet.chaos.is_some() {
        super::chaos_report::at_run_end(&run, mode == Mode::Json, color).await;
    }
    let outcome = report
        .as_ref()
        .ok()
        .and_then(|r| serde_json::to_value(r.outcome).ok())
        .and_then(|v| v.as_str().map(str::to_owned));
    notifier.send(&notices::run_ended(
        &run.id,
        &fleet.name,
        outcome.as_deref(),
        code,
    ));
    workers.finish(NOTIFY_GRACE).await;
    let (failed, dropped) = (stats.failed.get(), stats.dropped.get());
    if failed + dropped > 0 {
        let line = format!(
            "{} webhook: {failed} notice(s) not delivered, {dropped} dropped (queue full)",
            err.warn("warning:")
        );
        eprintln!("{}", Fit::stderr().wrap(&line, 4));
    }
    ExitCode::from(code)
}

/// Notify each budget crossed on the bus.
async fn notify_budget(
    mut events: mpsc::Receiver<capfleet_wire::events::Published>,
    notifier: Notifier,
    run: String,
    fleet: String,
) {
    while let Some(e) = events.recv().await {
        if let Some(n) = notices::of_event(&e, &run, &fleet) {
            notifier.send(&n);
        }
    }
}

/// Sweep what dead runs left, make the run directory, take its lock, keep what a
/// resume needs; on failure, the exit code (said).
fn new_run(args: &RunArgs, err: Style) -> Result<(RunDir, RunLock), ExitCode> {
    let run = match std::env::current_dir()
        .map_err(|e| e.to_string())
        .and_then(|dir| {
            sweep(&dir, err);
            RunDir::create(&dir).map_err(|e| e.to_string())
        }) {
        Ok(run) => run,
        Err(e) => {
            eprintln!("{} cannot make the run directory: {e}", err.err("error:"));
            return Err(ExitCode::FAILURE);
        }
    };
    // Held until capfleet exits: `capfleet log -f` sees the orchestrator gone by it.
    let lock = match args.fleets.first().map(|f| run.lock(f)) {
        Some(Ok(lock)) => lock,
        Some(Err(e)) => {
            eprintln!("{} cannot lock the run directory: {e}", err.err("error:"));
            return Err(ExitCode::FAILURE);
        }
        None => return Err(ExitCode::from(capfleet_app::launch::EXIT_INVALID)),
    };
    if let Err(e) = remember(&run, args) {
        eprintln!("{} {e}", err.err("error:"));
        return Err(ExitCode::FAILURE);
    }
    Ok((run, lock))
}

/// Kill and report what dead runs in `dir` left running.
fn sweep(dir: &std::path::Path, err: Style) {
    for k in capfleet_app::orphans::sweep(dir) {
        let line = format!(
            "{} killed {} process(es) left running by run {} (its capfleet, pid {}, is dead)",
            err.warn("warning:"),
            k.processes,
            k.run,
            k.pid
        );
        eprintln!("{}", Fit::stderr().wrap(&line, 4));
    }
}

/// Put each open question to the human at the terminal, one at a time (each one
/// notified first).
async fn answer_questions(
    mut questions: mpsc::Receiver<HumanQuestion>,
    style: Style,
    (notifier, run, fleet): (Notifier, String, String),
) {
    let (_none_tx, none_rx) = mpsc::channel(1);
    let mut input = Input::spawn(true, none_rx, style);
    while let Some(q) = questions.recv().await {
        notifier.send(&notices::waiting(&q, &run, &fleet, None));
        let _held = board::hold();
        eprintln!("\n{} asks:", q.urn);
        input.ask_human(q).await;
    }
}

/// Keep, beside the new run's journal, what its resume needs.
fn remember(run: &RunDir, args: &RunArgs) -> Result<(), capfleet_app::resume::ResumeError> {
    let Some(fleet) = args.fleets.first() else {
        return Ok(());
    };
    capfleet_app::resume::remember(
        run,
        fleet,
        args.task.clone(),
        args.commit,
        args.chaos.clone(),
    )
}
