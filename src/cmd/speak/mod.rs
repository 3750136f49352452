//! `capfleet speak`: capfleet as a Claude-compatible stream-json agent (spec §6.2,
//! Appendix C.1). One session of any agent capfleet drives, over any binding, runs
//! under the full supervision tree (a crash inside is a restart, invisible upstream
//! but for a note on stderr); upstream sees Claude Code: `system/init`, `assistant`
//! and `user` tool-result frames, `stream_event` deltas when asked, one `result` per
//! turn with the turn's usage and the process's cumulative cost.
//!
//! - [`args`]: the flags (capfleet's, Claude's that mean something, Claude's that do not);
//! - [`inbound`]: stdin frames;
//! - [`transcript`]: the session's events as frames;
//! - [`conversation`]: the loop tying turns, control requests, upstream permissions
//!   and signals together;
//! - [`frames`]: the frame shapes.
//!
//! stdout carries protocol frames only; diagnostics go to stderr.

mod args;
mod conversation;
mod frames;
mod inbound;
mod transcript;

use std::process::ExitCode;

use tokio::sync::mpsc;

pub(crate) use args::SpeakArgs;

use crate::signals::StopSignals;
use crate::style::{ColorChoice, Style};
use crate::telemetry::Telemetry;

/// Exit codes.
const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_INTERRUPTED: u8 = 130;

pub(crate) fn run(args: SpeakArgs, color: ColorChoice) -> ExitCode {
    if args.version {
        // As Claude prints its own (`2.1.3 (Claude Code)`): drivers read the leading version.
        println!("{} (capfleet speak)", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let telemetry = args.telemetry.clone();
    crate::cmd::one_session::run_verb(color, &telemetry, async |t| speak(args, color, t).await)
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
    let spec = match args.session_spec().await {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Some(missing) = crate::agents::missing_agent(&spec, "point --agent at a manifest") {
        eprintln!("{} {missing}", err.err("error:"));
        return ExitCode::from(EXIT_USAGE);
    }
    // Before any agent exists: from here on the signals end the session first.
    let signals = StopSignals::all();
    let (human_tx, human_rx) = mpsc::channel(16);
    let one = crate::cmd::one_session::Setup {
        verb: "speak",
        agent_type: args.agent.as_deref().unwrap_or_default(),
        journal: args.journal.clone(),
        policy: args.policy(),
        human: args.prompts_upstream().then_some(human_tx),
        telemetry,
    };
    let one = match crate::cmd::one_session::start(one, spec, err).await {
        Ok(one) => one,
        Err(code) => return code,
    };
    let ends = conversation::Ends {
        events: one.events,
        questions: human_rx,
        faults: one.faults,
        signals,
    };
    let code = conversation::Conversation::new(&args, one.session)
        .run(ends)
        .await;
    crate::cmd::one_session::finish(one.orchestrator, code, err).await
}
