//! `capfleet speak`: capfleet as a Claude-compatible stream-json agent (spec §6.2,
//! Appendix C.1). One session of any agent capfleet drives, over any binding, runs
//! under the full supervision tree (a crash inside is a restart, invisible upstream
//! but for a note on stderr); upstream sees Claude Code: `system/init`, `assistant`
//! and `user` tool-result frames, `stream_event` deltas when asked, one `result` per
//! turn with the turn's usage and the process's cumulative cost.
//!
//! With `--fleet` a whole fleet answers: each user message is one run of it
//! ([`capfleet_app::one_fleet`], shared with `acp --fleet`).
//!
//! - [`args`]: the flags (capfleet's, Claude's that mean something, Claude's that do not);
//! - [`answerer`]: who answers, a session or a fleet;
//! - [`inbound`]: stdin frames;
//! - [`transcript`]: the session's events as frames;
//! - [`conversation`]: the loop tying turns, control requests, upstream permissions
//!   and signals together;
//! - [`frames`]: the frame shapes; [`out`]: stdout.
//!
//! stdout carries protocol frames only; diagnostics go to stderr.
//!
//! capfleet is an agent too (`src/cmd/speak/`): `capfleet speak` runs one session under
//! the same tree as `chat` and translates its events into Claude Code's stream-json
//! (`transcript.rs`: chunks gathered per burst into one `assistant` block, tool calls as
//! `tool_use`/`tool_result` pairs, a `result` per turn written after the turn's
//! `turn_ended` event); the answerer's `human` channel goes upstream as `can_use_tool`
//! (`conversation.rs`), denied fail-safe once stdin has ended. It exits as Claude Code
//! does (2.1.197 and 2.1.337, measured): once stdin has ended, 0 when the last `result` is a success
//! and 1 when it is an error (an upstream `interrupt`'s included); 130 only for a
//! signal. Frame builders of the
//! orchestrator side (`bindings/stream_json/outbound.rs`: control responses, the text
//! of a user frame) serve the sim and `speak` too.

mod answerer;
mod args;
mod conversation;
mod frames;
mod inbound;
mod out;
mod transcript;

use std::process::ExitCode;

use capfleet_wire::events::SUBSCRIBER_CAPACITY;
use tokio::sync::mpsc;

pub(crate) use args::SpeakArgs;

use capfleet_app::one_fleet::{FleetAgent, FleetSetup};
use capfleet_app::signals::StopSignals;
use capfleet_app::style::{ColorChoice, Style};
use capfleet_app::telemetry::Telemetry;

/// Exit codes.
const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_INTERRUPTED: u8 = 130;

/// The exit code once stdin ended and the queued turns are done: the last `result`'s,
/// as Claude Code's (2.1.197 and 2.1.337, measured against the fake LLM: 0 when it is a success,
/// 1 when it is an error, an `interrupt`ed turn's included). 130 is a signal's only.
fn ended_code(last: Option<&frames::TurnEnd>) -> ExitCode {
    match last {
        Some(end) if end.error.is_some() => ExitCode::from(EXIT_FAILED),
        Some(_) | None => ExitCode::SUCCESS,
    }
}

pub(crate) fn run(mut args: SpeakArgs, color: ColorChoice) -> ExitCode {
    if args.version {
        // As Claude prints its own (`2.1.3 (Claude Code)`): drivers read the leading version.
        println!("{} (capfleet speak)", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    // Before anything reads the working directory or the flags.
    if let Err(e) = args.apply_session_config() {
        eprintln!("{} {e}", Style::for_stderr(color).err("error:"));
        return ExitCode::from(EXIT_USAGE);
    }
    let telemetry = args.telemetry.clone();
    capfleet_app::runtime::run_verb(color, &telemetry, async |t| speak(args, color, t).await)
}

async fn speak(args: SpeakArgs, color: ColorChoice, telemetry: &Telemetry) -> ExitCode {
    let err = Style::for_stderr(color);
    let ignored = args.ignored.given();
    if !ignored.is_empty() {
        tracing::info!(
            "Claude Code flags without effect here: {}",
            ignored.join(" ")
        );
    }
    if let Some(fleet) = args.fleet.clone() {
        return speak_fleet(&args, fleet, err, telemetry).await;
    }
    let spec = match args.session_spec().await {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Some(missing) = capfleet_app::agents::missing_agent(&spec, "point --agent at a manifest")
    {
        eprintln!("{} {missing}", err.err("error:"));
        return ExitCode::from(EXIT_USAGE);
    }
    // Before any agent exists: from here on the signals end the session first.
    let signals = StopSignals::all();
    let (human_tx, human_rx) = mpsc::channel(16);
    let one = capfleet_app::one_session::Setup {
        verb: "speak",
        agent_type: args.agent.as_deref().unwrap_or_default(),
        journal: args.journal.clone(),
        policy: args.policy(),
        human: args.prompts_upstream().then_some(human_tx),
        traceparent: telemetry.traceparent(),
    };
    let one = match capfleet_app::one_session::start(one, spec, err).await {
        Ok(one) => one,
        Err(code) => return code,
    };
    let ends = conversation::Ends {
        events: one.events,
        questions: human_rx,
        faults: one.faults,
        signals,
    };
    let answerer = answerer::Answerer::Session(one.session);
    let code = conversation::Conversation::new(&args, answerer)
        .run(ends)
        .await;
    capfleet_app::one_session::finish(one.orchestrator, code, err).await
}

/// A fleet answers: one run per user message, each its own supervision tree.
async fn speak_fleet(
    args: &SpeakArgs,
    path: std::path::PathBuf,
    err: Style,
    telemetry: &Telemetry,
) -> ExitCode {
    let usage = |e: String| {
        eprintln!("{} {e}", err.err("error:"));
        ExitCode::from(EXIT_USAGE)
    };
    if let Err(e) = FleetAgent::check(&path).await {
        return usage(e.to_string());
    }
    // The fleet file decides these for its sessions.
    let unused = [
        (args.model.is_some(), "--model"),
        (!args.allowed_tools.is_empty(), "--allowedTools"),
        (!args.disallowed_tools.is_empty(), "--disallowedTools"),
        (args.permission_mode.is_some(), "--permission-mode"),
    ];
    for (_, flag) in unused.iter().filter(|(given, _)| *given) {
        tracing::warn!("{flag} has no effect with --fleet: the fleet file sets its sessions'");
    }
    let base = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => return usage(format!("current directory: {e}")),
    };
    // Before any agent exists: from here on the signals stop the run first.
    let signals = StopSignals::all();
    let (human_tx, human_rx) = mpsc::channel(16);
    let mut agent = FleetAgent::new(FleetSetup {
        path,
        base,
        human: args.prompts_upstream().then_some(human_tx),
        traceparent: telemetry.traceparent(),
        preface: args.system_prompt(),
    });
    if let Some(id) = &args.resume
        && let Err(e) = agent.resume(id)
    {
        return usage(format!("--resume {id}: {e}"));
    }
    let (events_tx, events) = mpsc::channel(SUBSCRIBER_CAPACITY);
    // Each run reports its own journal faults in its end; none come here.
    let (_no_faults, faults) = mpsc::channel(1);
    let ends = conversation::Ends {
        events,
        questions: human_rx,
        faults,
        signals,
    };
    let answerer = answerer::Answerer::Fleet {
        agent: Box::new(agent),
        events: events_tx,
    };
    conversation::Conversation::new(args, answerer)
        .run(ends)
        .await
}
