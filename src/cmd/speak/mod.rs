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

use capfleet_actors::events::SUBSCRIBER_CAPACITY;
use capfleet_actors::root::{Orchestrator, RootArgs};
use capfleet_actors::telemetry::TreeTelemetry;
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
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("capfleet: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async {
        let telemetry = match Telemetry::start(color, &args.telemetry) {
            Ok(t) => t,
            Err(e) => {
                crate::logging::init(color);
                eprintln!("{} {e}", Style::for_stderr(color).err("error:"));
                return ExitCode::from(EXIT_USAGE);
            }
        };
        let code = speak(args, color, &telemetry).await;
        telemetry.finish().await;
        code
    });
    // stdin's reader may still block in read(2) (a driver that keeps stdin open):
    // the runtime does not wait for it.
    runtime.shutdown_background();
    code
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
    let span = tracing::info_span!(
        "speak",
        otel.name = "invoke_workflow speak",
        gen_ai.operation.name = "invoke_workflow",
        gen_ai.workflow.name = "speak",
        cap.agent.type = args.agent.as_deref().unwrap_or_default(),
    );
    if let Some(tp) = telemetry.traceparent() {
        capfleet_actors::events::trace::adopt_parent(&span, &tp);
    }
    let (faults_tx, faults) = mpsc::channel(capfleet_actors::fault::FAULTS_CAPACITY);
    let orchestrator = match Orchestrator::start(RootArgs {
        fleet_name: "speak".into(),
        journal: args.journal.clone().map(Into::into),
        faults: Some(faults_tx),
        policy: args.policy(),
        budget: Default::default(),
        human: args.prompts_upstream().then_some(human_tx),
        fleet_events: None,
        telemetry: TreeTelemetry {
            span,
            metrics: None,
        },
    })
    .await
    {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            return ExitCode::FAILURE;
        }
    };
    let (events_tx, events) = mpsc::channel(SUBSCRIBER_CAPACITY);
    let session = match orchestrator.spawn_session(spec, vec![events_tx]).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{} {e}", err.err("error:"));
            orchestrator.shutdown().await;
            return ExitCode::FAILURE;
        }
    };
    let ends = conversation::Ends {
        events,
        questions: human_rx,
        faults,
        signals,
    };
    let code = conversation::Conversation::new(&args, session)
        .run(ends)
        .await;
    let kept = orchestrator.finish().await;
    if kept.lost > 0 {
        eprintln!(
            "{} the journal lost {} records",
            err.err("error:"),
            kept.lost
        );
        return ExitCode::from(EXIT_FAILED);
    }
    code
}
