//! The `codex exec --json` wire (a capfleet extension binding, `fast_path.x-codex_exec`):
//! one Codex process per turn ([`Shape::PerTurn`] only). The prompt goes to the
//! process's stdin, which is then closed (Codex reads its prompt to end of input and
//! would otherwise wait); its JSONL output is mapped by the [`CodexExecMapper`]; the
//! thread id of `thread.started` is what the next turn's process resumes
//! (`resume <id>`), and the thread's running token counts pass from each turn's wire
//! to the next so usage is reported per turn.
//!
//! Codex asks nothing in `exec` mode (its sandbox and approval policy decide, set from
//! the session's permission mode: [`crate::bindings::codex_exec::argv`]). A cancel is
//! SIGINT to the turn's process group: Codex exits without a turn end, which the
//! output loop then reports as the turn cancelled (the session kills the group if it
//! does not exit in time).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::launch::Spawned;
use super::pump::{Learned, pump};
use super::wire::{Interrupt, OutputEnd, OutputTask, Peer, Start, Started, Wire};
use super::{DriverOutput, LaunchError, Shape, TurnEnd};
use crate::bindings::codex_exec::{CodexExecMapper, Output, build_argv};
use crate::protocol::Decision;
use crate::sync::lock;

/// The wire of one turn's Codex process.
pub(crate) struct CodexExecWire {
    input: Option<super::launch::AgentStdin>,
    mapper: Arc<Mutex<CodexExecMapper>>,
    pgid: i32,
    /// A cancel was sent: an output ending without a turn end is the cancel's.
    interrupted: Arc<AtomicBool>,
    urn: String,
}

impl Wire for CodexExecWire {
    const WHO: &'static str = "codex exec";
    const READY_AT_START: bool = true;

    fn admits(shape: &Shape) -> bool {
        matches!(shape, Shape::PerTurn)
    }

    fn resumes(_launch: &super::LaunchSpec, resume_id: Option<&str>) -> bool {
        resume_id.is_some()
    }

    async fn start(start: Start<'_, Self>) -> Result<Started<Self>, LaunchError> {
        let Start {
            launch,
            sink,
            resume_id,
            previous,
            ..
        } = start;
        let argv = build_argv(
            &launch.manifest,
            launch.argv.as_deref(),
            &launch.config,
            resume_id,
        )
        .map_err(|e| LaunchError::Config {
            urn: launch.urn.clone(),
            message: e.to_string(),
        })?;
        let (turn, base) = previous
            .map(|w| {
                let m = lock(&w.mapper);
                (m.turn() + 1, m.totals())
            })
            .unwrap_or((1, Default::default()));
        let mapper = Arc::new(Mutex::new(CodexExecMapper::new(
            turn,
            launch.config.model.as_deref().map(str::to_owned),
            base,
        )));
        let Spawned {
            group,
            stdin,
            stdout,
            stderr,
        } = launch.spawn_piped(&argv, &launch.config.cwd)?;
        let interrupted = Arc::new(AtomicBool::new(false));
        let output: OutputTask = match stdout {
            Some(out) => {
                let (mapper, flag, max_line) =
                    (mapper.clone(), interrupted.clone(), launch.max_line);
                let sink = sink.clone();
                let mut wire = Vec::new();
                Box::pin(async move {
                    let end = pump(out, max_line, sink.clone(), move |line, batch, learned| {
                        lock(&mapper).on_line(line, &mut wire);
                        convert(&mut wire, batch, learned);
                    })
                    .await;
                    cancelled_end(end, &flag, &sink).await
                })
            }
            None => Box::pin(async { OutputEnd::CLOSED }),
        };
        let wire = CodexExecWire {
            input: stdin,
            mapper,
            pgid: group.pgid(),
            interrupted,
            urn: launch.urn.clone(),
        };
        Ok(Started::process(wire, group, stderr, output))
    }

    async fn prompt(&mut self, text: String) {
        // The whole prompt, then end of input: Codex starts the turn on EOF.
        let Some(mut input) = self.input.take() else {
            return;
        };
        let res = match input.write_all(text.as_bytes()).await {
            Ok(()) => input.shutdown().await,
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            tracing::debug!(urn = %self.urn, "prompt to codex exec failed: {e}");
        }
    }

    async fn permission(&mut self, req_id: String, _decision: Decision, _message: Option<String>) {
        tracing::debug!(urn = %self.urn, %req_id, "codex exec asks no permission; answer dropped");
    }

    async fn answer(&mut self, ask_id: String, _value: Option<Value>) {
        tracing::debug!(urn = %self.urn, %ask_id, "codex exec asks nothing; answer dropped");
    }

    async fn interrupt(&mut self) -> Interrupt {
        self.interrupted.store(true, Ordering::SeqCst);
        // A group already gone needs no signal: its output ends, and with it the turn.
        if let Err(e) = crate::process::signal_group(self.pgid, libc::SIGINT) {
            tracing::debug!(urn = %self.urn, "SIGINT to codex exec: {e}");
        }
        Interrupt::Sent
    }

    fn close(&mut self, _peer: &Peer) -> &'static str {
        self.input = None;
        "end of input"
    }
}

/// A turn process whose output ended after a cancel without ending its turn ended
/// the turn cancelled.
async fn cancelled_end(
    end: OutputEnd,
    interrupted: &AtomicBool,
    sink: &super::OutputSink,
) -> OutputEnd {
    match end {
        OutputEnd::Closed {
            turn_ended: false,
            resume_id,
        } if interrupted.load(Ordering::SeqCst) => {
            sink.send_one(DriverOutput::TurnEnd(TurnEnd::cancelled()))
                .await;
            OutputEnd::Closed {
                turn_ended: true,
                resume_id,
            }
        }
        other => other,
    }
}

/// Binding outputs → driver outputs.
fn convert(wire: &mut Vec<Output>, batch: &mut Vec<DriverOutput>, learned: &mut Learned) {
    for out in wire.drain(..) {
        match out {
            Output::Event(event) => batch.push(DriverOutput::Event(event)),
            Output::ThreadId(id) => learned.resume_id(id, batch),
            Output::TurnEnd(end) => learned.turn_end(end, batch),
        }
    }
}
