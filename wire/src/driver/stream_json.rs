//! The stream-json wire (spec §6.2, Appendix C.1; Claude Code's protocol).
//!
//! It writes `user` frames and control responses to the agent's input, and its
//! output task maps the agent's output lines (bounded, [`LineReader`]) through the
//! [`StreamJsonMapper`] into credit-bounded batches for the session. The mapper is
//! shared with the wire (answers need its pending requests) behind a `std` mutex that
//! is never held across an await.
//!
//! Readiness: Claude prints nothing before the first prompt, so the agent is ready
//! once started; its `system/init` later only teaches us the id to `--resume` with.
//! The wire admits every [`Shape`]: a long-lived process, one `-p` process per turn
//! resuming the previous one's conversation, or stream-json over a TCP connection.
//! An agent whose manifest sets `fast_path.x-stream_json_traceparent` (capfleet's
//! own `speak`) gets the turn's W3C `traceparent` on each user frame, as the A2A
//! wire sends it per request; others (Claude Code) get no field they do not know.
//! Each prompt opens a turn in the mapper: a turn's frame (text, tool calls, its
//! `result`) before the process's `init` or before its first prompt, and a `result`
//! while no turn is open, are stray (`cap.error` `stray_frame`), never part of a turn.

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::launch::Spawned;
use super::wire::{Interrupt, OutputEnd, OutputTask, Peer, Start, Started, Wire};
use super::{DriverOutput, LaunchError, LaunchSpec, OutputSink, Shape, TurnEnd};
use crate::bindings::stream_json::{
    Output, ResponseError, StreamJsonMapper, TurnEnd as WireTurnEnd,
};
use crate::bindings::stream_json::{build_argv, outbound};
use crate::events::trace::traceparent;
use crate::manifest::ArgvFastPath;
use crate::process::stderr_ring::StderrRing;
use crate::protocol::{CapEvent, Decision};
use crate::sync::lock;

use super::pump::{Learned, pump};

/// The agent's input: a pipe or the write half of a connection (written per frame,
/// never per output line).
type Input = Box<dyn AsyncWrite + Send + Unpin>;

/// The stream-json wire of one agent process (or connection).
pub(crate) struct StreamJsonWire {
    input: Option<Input>,
    mapper: Arc<Mutex<StreamJsonMapper>>,
    sink: OutputSink,
    urn: String,
    interrupts: u64,
    /// The agent reads the turn's `traceparent` on its user frames (its manifest's
    /// `fast_path.x-stream_json_traceparent`).
    traced: bool,
}

/// The argv for this generation: the fleet's override or the manifest's fast path,
/// plus the flags the session config asks for.
fn argv_for(launch: &LaunchSpec, resume_id: Option<&str>) -> Result<Vec<String>, LaunchError> {
    let mut config = launch.config.clone();
    let can_resume = launch.manifest.startup.resume_arg.is_some();
    config.session_resume_id = match resume_id {
        Some(id) if can_resume => Some(id.to_owned()).into(),
        _ => None.into(),
    };
    let built = match &launch.argv {
        Some(argv) => {
            let mut manifest = (*launch.manifest).clone();
            manifest.fast_path.stream_json = ArgvFastPath::Argv(argv.clone());
            build_argv(&manifest, &config)
        }
        None => build_argv(&launch.manifest, &config),
    };
    let built = built.map_err(|e| LaunchError::Config {
        urn: launch.urn.clone(),
        message: e.to_string(),
    })?;
    for w in &built.warnings {
        tracing::warn!(urn = %launch.urn, "{w}");
    }
    if built.argv.is_empty() {
        return Err(LaunchError::NoCommand {
            urn: launch.urn.clone(),
            binding: "stream_json",
        });
    }
    Ok(built.argv)
}

impl Wire for StreamJsonWire {
    const WHO: &'static str = "agent";
    const READY_AT_START: bool = true;

    fn admits(_shape: &Shape) -> bool {
        true
    }

    fn resumes(launch: &LaunchSpec, resume_id: Option<&str>) -> bool {
        resume_id.is_some()
            && launch.manifest.startup.resume_arg.is_some()
            && !matches!(launch.shape, Shape::Connect(_))
    }

    async fn start(start: Start<'_, Self>) -> Result<Started<Self>, LaunchError> {
        let Start {
            launch,
            sink,
            resume_id,
            ..
        } = start;
        let mapper = Arc::new(Mutex::new(
            StreamJsonMapper::new()
                .with_max_line_bytes(launch.max_line)
                .with_turns(),
        ));
        let (input, peer, stderr, output): (Option<Input>, _, _, OutputTask) = match launch.shape {
            Shape::LongLived | Shape::PerTurn => {
                let argv = argv_for(launch, resume_id)?;
                let Spawned {
                    group,
                    stdin,
                    stdout,
                    stderr,
                } = launch.spawn_piped(&argv, &launch.config.cwd)?;
                let output = match stdout {
                    Some(out) => output_task(out, launch, &mapper, sink),
                    None => Box::pin(async { OutputEnd::CLOSED }),
                };
                let input = stdin.map(|i| Box::new(i) as Input);
                (input, Peer::Process(group), stderr, output)
            }
            Shape::Connect(addr) => {
                let (read, write) = launch.connect(addr).await?;
                let input: Input = Box::new(write);
                let output = output_task(read, launch, &mapper, sink);
                (
                    Some(input),
                    Peer::Connection(addr),
                    StderrRing::default(),
                    output,
                )
            }
        };
        let wire = StreamJsonWire {
            input,
            mapper,
            sink: sink.clone(),
            urn: launch.urn.clone(),
            interrupts: 0,
            traced: launch.manifest.fast_path.stream_json_traceparent,
        };
        Ok(Started {
            wire,
            peer,
            stderr,
            output,
        })
    }

    async fn prompt(&mut self, text: String) {
        // Open before the write: the answer may be read before the write returns.
        lock(&self.mapper).begin_turn();
        // The prompt is handled inside the turn's span (the session sends it there).
        let tp = self
            .traced
            .then(|| traceparent(&tracing::Span::current()))
            .flatten();
        let frame = match tp {
            Some(tp) => outbound::user_frame_traced(&text, &tp),
            None => outbound::user_frame(&text),
        };
        self.write(&frame).await;
    }

    async fn permission(&mut self, req_id: String, decision: Decision, message: Option<String>) {
        let line = lock(&self.mapper).respond_permission(&req_id, decision, message.as_deref());
        self.write_or_report(line).await;
    }

    async fn answer(&mut self, ask_id: String, value: Option<Value>) {
        let line = match value {
            Some(value) => lock(&self.mapper).respond_ask(&ask_id, &value),
            None => lock(&self.mapper).decline(&ask_id, "declined: nobody could answer"),
        };
        self.write_or_report(line).await;
    }

    async fn interrupt(&mut self) -> Interrupt {
        self.interrupts += 1;
        let id = format!("capfleet-interrupt-{}", self.interrupts);
        self.write(&outbound::interrupt_request(&id)).await;
        Interrupt::Sent
    }

    fn close(&mut self, _peer: &Peer) -> &'static str {
        self.input = None; // EOF: a stream-json agent exits when its input ends.
        "end of input"
    }
}

impl StreamJsonWire {
    /// Write one frame. A broken pipe means the agent is gone: its reader reports that.
    async fn write(&mut self, line: &str) {
        let Some(input) = self.input.as_mut() else {
            return;
        };
        let res = match input.write_all(line.as_bytes()).await {
            Ok(()) => input.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            tracing::debug!(urn = %self.urn, "write to agent failed: {e}");
            self.input = None;
        }
    }

    /// Write an answer, or report why it could not be made (with the registry's code).
    async fn write_or_report(&mut self, line: Result<String, ResponseError>) {
        match line {
            Ok(line) => self.write(&line).await,
            Err(e) => {
                let event = super::registry_error(e.code(), e.to_string());
                self.sink.send_one(DriverOutput::Event(event)).await;
            }
        }
    }
}

/// The output task over `out` (a pipe or a connection's read half).
fn output_task<R: tokio::io::AsyncRead + Unpin + Send + 'static>(
    out: R,
    launch: &LaunchSpec,
    mapper: &Arc<Mutex<StreamJsonMapper>>,
    sink: &OutputSink,
) -> OutputTask {
    let mapper = mapper.clone();
    let mut wire = Vec::new();
    Box::pin(pump(
        out,
        launch.max_line,
        sink.clone(),
        move |line, batch, learned| {
            lock(&mapper).on_line(line, &mut wire);
            convert(&mut wire, batch, learned);
        },
    ))
}

impl From<WireTurnEnd> for TurnEnd {
    fn from(end: WireTurnEnd) -> Self {
        Self {
            stop_reason: end.stop_reason,
            is_error: end.is_error,
            result_text: end.result_text,
        }
    }
}

/// Binding outputs → driver outputs.
fn convert(wire: &mut Vec<Output>, batch: &mut Vec<DriverOutput>, learned: &mut Learned) {
    for out in wire.drain(..) {
        match out {
            Output::Event(CapEvent::SessionReady(ready)) => {
                if let Some(id) = ready.session_id.into_option() {
                    learned.resume_id(id, batch);
                }
            }
            Output::Event(event) => batch.push(DriverOutput::Event(event)),
            Output::TurnEnd(end) => learned.turn_end(end.into(), batch),
            Output::PermissionWithdrawn { req_id, .. } => {
                batch.push(DriverOutput::Withdrawn { req_id })
            }
            Output::ControlAck(ack) => {
                tracing::debug!(request = %ack.request_id, "agent acknowledged a control request")
            }
            Output::UnsupportedControlRequest {
                request_id,
                subtype,
            } => {
                tracing::warn!(%request_id, %subtype, "unsupported control request from the agent");
            }
        }
    }
}
