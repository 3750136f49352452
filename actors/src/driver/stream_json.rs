//! The stream-json driver actor (spec §6.2, Appendix C.1; Claude Code's protocol).
//!
//! It spawns the agent in its own process group, writes `user` frames and control
//! responses to its stdin, and runs one reader task that maps stdout lines (bounded,
//! [`LineReader`]) through the [`StreamJsonMapper`] into credit-bounded batches for
//! the session. The mapper is shared with the actor (answers need its pending
//! requests) behind a `std` mutex that is never held across an await.
//!
//! Readiness: Claude prints nothing before the first prompt, so the agent is ready
//! once spawned; its `system/init` later only teaches us the id to `--resume` with.

use std::sync::{Arc, Mutex};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::task::JoinHandle;

use super::death::{end_deliberately, ended, reap};
use super::launch::Spawned;
use super::{DriverMsg, DriverOutput, ExitCause, LaunchError, LaunchSpec, OutputSink, TurnEnd};
use crate::bindings::stream_json::{Output, StreamJsonMapper, TurnEnd as WireTurnEnd};
use crate::bindings::stream_json::{build_argv, outbound};
use crate::manifest::ArgvFastPath;
use crate::process::lines::{LineConfig, LineItem, LineReader};
use crate::process::stderr_ring::StderrRing;
use crate::process::{DEFAULT_GRACE, ProcessGroup};
use crate::protocol::{CapEvent, ErrorKind};
use crate::sync::lock;

use super::sink::MAX_BATCH;

pub use super::death::{AGENT_EXITED, AGENT_HUNG};

/// The stream-json driver.
pub struct StreamJsonDriver;

/// Start arguments of one driver generation.
pub struct DriverArgs {
    pub launch: Arc<LaunchSpec>,
    pub sink: OutputSink,
    /// The conversation to resume natively (`--resume <id>`), if any.
    pub resume_id: Option<String>,
}

pub struct DriverState {
    group: ProcessGroup,
    stdin: Option<ChildStdin>,
    mapper: Arc<Mutex<StreamJsonMapper>>,
    stderr: StderrRing,
    reader: JoinHandle<()>,
    sink: OutputSink,
    urn: String,
    interrupts: u64,
    shutting_down: bool,
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

impl Actor for StreamJsonDriver {
    type Msg = DriverMsg;
    type State = DriverState;
    type Arguments = DriverArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<DriverMsg>,
        args: DriverArgs,
    ) -> Result<DriverState, ActorProcessingErr> {
        let DriverArgs {
            launch,
            sink,
            resume_id,
        } = args;
        let argv = argv_for(&launch, resume_id.as_deref())?;
        let resumed = resume_id.is_some() && launch.manifest.startup.resume_arg.is_some();
        let Spawned {
            group,
            stdin,
            stdout,
            stderr,
        } = launch.spawn_piped(&argv, &launch.config.cwd)?;

        // Ready goes first: nothing the reader sends may overtake it.
        sink.send_one(DriverOutput::Ready {
            resume_id: resume_id.clone(),
            resumed,
        })
        .await;

        let mapper = Arc::new(Mutex::new(
            StreamJsonMapper::new().with_max_line_bytes(launch.max_line),
        ));
        let reader = match stdout {
            Some(out) => tokio::spawn(read_loop(
                LineReader::with_config(
                    out,
                    LineConfig {
                        max_line: launch.max_line,
                        ..LineConfig::default()
                    },
                ),
                mapper.clone(),
                sink.clone(),
                myself.clone(),
            )),
            None => tokio::spawn(async {}),
        };
        Ok(DriverState {
            group,
            stdin,
            mapper,
            stderr,
            reader,
            sink,
            urn: launch.urn.clone(),
            interrupts: 0,
            shutting_down: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<DriverMsg>,
        msg: DriverMsg,
        st: &mut DriverState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            DriverMsg::Prompt { text } => st.write(&outbound::user_frame(&text)).await,
            DriverMsg::Permission {
                req_id,
                decision,
                message,
            } => {
                let line =
                    lock(&st.mapper).respond_permission(&req_id, decision, message.as_deref());
                st.write_or_report(line).await;
            }
            DriverMsg::Answer { ask_id, value } => {
                let line = match value {
                    Some(value) => lock(&st.mapper).respond_ask(&ask_id, &value),
                    None => lock(&st.mapper).decline(&ask_id, "declined: nobody could answer"),
                };
                st.write_or_report(line).await;
            }
            DriverMsg::Resize { .. } => {} // no terminal to resize
            DriverMsg::Interrupt => {
                st.interrupts += 1;
                let id = format!("capfleet-interrupt-{}", st.interrupts);
                st.write(&outbound::interrupt_request(&id)).await;
            }
            DriverMsg::Kill { cause } => {
                let _status = st.group.kill(DEFAULT_GRACE).await;
                st.report_death(&cause).await;
                return Err(Box::new(cause));
            }
            DriverMsg::Shutdown => {
                st.shutting_down = true;
                st.stdin = None; // EOF: a stream-json agent exits when its input ends.
                end_deliberately(&mut st.group, &st.urn, "agent", "end of input").await;
                myself.stop(None);
            }
            DriverMsg::OutputClosed => {
                if st.shutting_down {
                    return Ok(());
                }
                let cause = reap(&mut st.group, &st.urn).await;
                st.report_death(&cause).await;
                return ended(&myself, cause);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<DriverMsg>,
        st: &mut DriverState,
    ) -> Result<(), ActorProcessingErr> {
        st.reader.abort();
        // Stopped from outside (session closed, fleet stopping): never leave the agent.
        let _status = st.group.kill(DEFAULT_GRACE).await;
        Ok(())
    }
}

impl DriverState {
    /// Write one frame. A broken pipe means the agent is gone: its reader reports that.
    async fn write(&mut self, line: &str) {
        let Some(stdin) = self.stdin.as_mut() else {
            return;
        };
        let res = match stdin.write_all(line.as_bytes()).await {
            Ok(()) => stdin.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            tracing::debug!(urn = %self.urn, "write to agent failed: {e}");
            self.stdin = None;
        }
    }

    async fn write_or_report<E: std::fmt::Display>(&mut self, line: Result<String, E>) {
        match line {
            Ok(line) => self.write(&line).await,
            Err(e) => {
                let event = CapEvent::error(
                    ErrorKind::Other("invalid_answer".into()),
                    e.to_string(),
                    false,
                );
                self.sink.send_one(DriverOutput::Event(event)).await;
            }
        }
    }

    async fn report_death(&mut self, cause: &ExitCause) {
        super::death::report_death(&self.sink, &self.stderr, cause).await;
    }
}

/// Reads stdout to EOF, mapping lines into batches; then tells the actor.
async fn read_loop<R: tokio::io::AsyncRead + Unpin>(
    mut reader: LineReader<R>,
    mapper: Arc<Mutex<StreamJsonMapper>>,
    sink: OutputSink,
    driver: ActorRef<DriverMsg>,
) {
    // Both grow to the largest burst seen (usually a few items), not to a guess.
    let mut wire = Vec::new();
    let mut batch = Vec::new();
    loop {
        let item = match reader.next().await {
            Ok(Some(item)) => item,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("agent stdout read failed: {e}");
                break;
            }
        };
        {
            let mut m = lock(&mapper);
            match item {
                LineItem::Line(line) | LineItem::Unterminated(line) => m.on_line(&line, &mut wire),
                LineItem::Oversize { len, .. } => {
                    let event = CapEvent::error(
                        ErrorKind::ParseFailed,
                        format!("agent line of {len} bytes exceeds the line cap; dropped"),
                        false,
                    );
                    wire.push(Output::Event(event));
                }
            }
        }
        convert(&mut wire, &mut batch);
        let flush = batch.len() >= MAX_BATCH || !reader.has_buffered();
        if flush && !sink.send(std::mem::take(&mut batch)).await {
            return; // the session is gone; the actor's post_stop kills the agent
        }
    }
    if !batch.is_empty() {
        sink.send(batch).await;
    }
    let _gone = driver.cast(DriverMsg::OutputClosed);
}

/// Binding outputs → driver outputs.
fn convert(wire: &mut Vec<Output>, batch: &mut Vec<DriverOutput>) {
    for out in wire.drain(..) {
        match out {
            Output::Event(CapEvent::SessionReady(ready)) => {
                if let Some(id) = ready.session_id.into_option() {
                    batch.push(DriverOutput::ResumeId(id));
                }
            }
            Output::Event(event) => batch.push(DriverOutput::Event(event)),
            Output::TurnEnd(WireTurnEnd {
                stop_reason,
                is_error,
                result_text,
                ..
            }) => batch.push(DriverOutput::TurnEnd(TurnEnd {
                stop_reason,
                is_error,
                result_text,
            })),
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
