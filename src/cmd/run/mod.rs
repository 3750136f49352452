//! `capfleet run fleet.toml`: load and validate the fleet (exit 2 on any error,
//! nothing spawned), then either print the plan (`--dry-run`) or execute it.

mod args;
mod board;
mod chaos_report;
mod dry_run;
mod execute;
mod lines;
mod screen;
mod summary;
mod supervise;
mod totals;
mod view;
mod workspaces;

use std::process::ExitCode;

pub(crate) use args::RunArgs;

use capfleet_app::fleet::{self, Loaded};
use capfleet_app::human::fit::Fit;
use capfleet_app::launch::EXIT_INVALID;
use capfleet_app::resume;
use capfleet_app::signals::StopSignals;
use capfleet_app::style::{ColorChoice, Style};
use capfleet_app::telemetry::Telemetry;

pub(crate) fn run(args: RunArgs, color: ColorChoice) -> ExitCode {
    if args.resume_on_crash {
        return supervise::supervise(&args);
    }
    let runtime = match capfleet_app::runtime::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    runtime.block_on(main(args, color))
}

async fn main(args: RunArgs, color: ColorChoice) -> ExitCode {
    let err = Style::for_stderr(color);
    if args.dry_run {
        capfleet_app::logging::init(color);
    }
    // First of all (before any manifest probe or agent): from here on SIGINT, SIGTERM
    // and SIGHUP stop the run instead of ending capfleet at once.
    let signals = (!args.dry_run).then(StopSignals::all);
    let telemetry = match (!args.dry_run)
        .then(|| Telemetry::start(color, &args.telemetry))
        .transpose()
    {
        Ok(t) => t,
        Err(e) => {
            capfleet_app::logging::init(color);
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let code = load_and_run(&args, color, telemetry.as_ref(), signals).await;
    if let Some(t) = telemetry {
        t.finish().await;
    }
    code
}

async fn load_and_run(
    args: &RunArgs,
    color: ColorChoice,
    telemetry: Option<&Telemetry>,
    signals: Option<StopSignals>,
) -> ExitCode {
    let err = Style::for_stderr(color);
    if args.fleets.len() > 1 && !args.dry_run {
        eprintln!(
            "{} one fleet per run (several only with --dry-run)",
            err.err("error:")
        );
        return ExitCode::from(EXIT_INVALID);
    }
    // A resume loads the fleet its run was started with, as given then.
    let opened = match args.resume.as_deref().map(resume::open).transpose() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let (fleets, task) = match &opened {
        Some(o) => (vec![o.fleet.clone()], o.task.clone()),
        None => (args.fleets.clone(), args.task.clone()),
    };
    // Said as they fit the terminal (`capfleet_app::human::fit`).
    let fit = Fit::stderr();
    let say = |line: String| eprintln!("{}", fit.wrap(&line, 4));
    let mut loaded = Vec::new();
    let mut invalid = false;
    for path in &fleets {
        match fleet::load(path, task.as_deref()).await {
            Ok(l) => {
                for w in &l.warnings {
                    say(format!("{} {w}", err.warn("warning:")));
                }
                loaded.push(l);
            }
            Err(errors) => {
                for e in &errors.errors {
                    say(format!("{} {e}", err.err("error:")));
                }
                for w in &errors.warnings {
                    say(format!("{} {w}", err.warn("warning:")));
                }
                invalid = true;
            }
        }
    }
    // An agent that is not there: `run` refuses before anything spawns; the plan
    // only warns (it runs nothing).
    for l in &loaded {
        for spec in l.fleet.specs() {
            let fix = "set the session's `argv` in the fleet";
            if let Some(missing) = capfleet_app::agents::missing_agent(spec, fix) {
                if args.dry_run {
                    say(format!("{} {missing}", err.warn("warning:")));
                } else {
                    say(format!("{} {missing}", err.err("error:")));
                    invalid = true;
                }
            }
        }
    }
    if invalid {
        return ExitCode::from(EXIT_INVALID);
    }
    if args.dry_run {
        let fleets: Vec<_> = loaded.into_iter().map(|l: Loaded| l.fleet).collect();
        return dry_run::print(&fleets, args, Style::for_stdout(color));
    }
    let Some(mut l) = loaded.pop() else {
        return ExitCode::from(EXIT_INVALID);
    };
    // `--chaos` replaces the fleet's `[chaos]`; a resume goes on with the run's own.
    let inline = match &opened {
        Some(o) => o.chaos.as_deref(),
        None => args.chaos.as_deref(),
    };
    if let Some(text) = inline {
        match fleet::inline_chaos(text, &l.fleet) {
            Ok(spec) => l.fleet.chaos = Some(std::sync::Arc::new(spec)),
            Err(errors) => {
                for e in errors {
                    eprintln!("{} --chaos: {e}", err.err("error:"));
                }
                return ExitCode::from(EXIT_INVALID);
            }
        }
    }
    let target = match opened {
        None => execute::Target::New,
        Some(o) => match resume::check(&o, &l.fleet.name, args.force) {
            Ok(resume::Verdict::Go { lock, resume }) => execute::Target::Resume {
                run: o.run,
                lock,
                resume,
                commit: o.commit,
            },
            Ok(resume::Verdict::Ended(outcome)) => {
                eprintln!(
                    "capfleet: run {} had ended ({outcome}): nothing to resume, nothing changed",
                    o.run.id
                );
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("{} {e}", err.err("error:"));
                return ExitCode::from(EXIT_INVALID);
            }
        },
    };
    match (telemetry, signals) {
        (Some(t), Some(signals)) => {
            execute::execute(l.fleet, args, color, t, signals, target).await
        }
        _ => ExitCode::from(EXIT_INVALID),
    }
}
