//! The PTY driver actor (spec §6.1, Appendix A): any terminal agent, driven the way
//! a human would drive it.
//!
//! The agent runs as a session leader on a fresh pseudo-terminal (its own process
//! group, killed as a whole through [`ProcessGroup`]). One engine task owns the
//! master side: it reads output into the [`Screen`], answers terminal queries,
//! classifies completed lines ([`LineParser`]), decides readiness and turn ends
//! ([`Settle`], on a timer: idle waiting costs nothing) and types prompts and
//! answers. Outputs travel in credit-bounded batches: when the session lags, the
//! engine stops reading and the agent blocks on its terminal.

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::death::{end_deliberately, ended, reap};
use super::stream_json::DriverArgs;
use super::{DriverMsg, DriverOutput, ExitCause, LaunchError, LaunchSpec, OutputSink, TurnEnd};
use crate::manifest::CancelMode;
use crate::process::{DEFAULT_GRACE, ProcessGroup, SpawnSpec};
use crate::protocol::{CapCode, CapEvent, ErrorKind, StopReason};

/// Bytes read from the terminal at once.
const READ_CHUNK: usize = 16 * 1024;
/// Bytes of input written at once (a terminal buffers about 4 KiB).
const WRITE_CHUNK: usize = 4 * 1024;
/// Commands from the actor to its engine in flight (fed by the session, not the agent).
const COMMANDS: usize = 64;

/// The PTY driver.
pub struct PtyDriver;

mod engine;

use engine::{Cmd, Engine};

pub struct PtyState {
    group: ProcessGroup,
    cmds: mpsc::Sender<Cmd>,
    engine: JoinHandle<()>,
    sink: OutputSink,
    urn: String,
    cancel: CancelMode,
    stopping: bool,
}

fn argv_for(launch: &LaunchSpec) -> Result<Vec<String>, LaunchError> {
    let m = &launch.manifest;
    let mut argv = launch
        .argv
        .clone()
        .unwrap_or_else(|| m.startup.command.clone());
    if launch.argv.is_none()
        && let (Some(flag), Some(model)) = (&m.startup.model_arg, launch.config.model.get())
    {
        argv.push(flag.clone());
        argv.push(model.clone());
    }
    if argv.is_empty() {
        return Err(LaunchError::NoCommand {
            urn: launch.urn.clone(),
            binding: "pty",
        });
    }
    Ok(argv)
}

fn spawn_error(launch: &LaunchSpec, program: &str, e: impl std::fmt::Display) -> LaunchError {
    LaunchError::Spawn {
        urn: launch.urn.clone(),
        program: program.to_owned(),
        source: std::io::Error::other(e.to_string()),
    }
}

impl Actor for PtyDriver {
    type Msg = DriverMsg;
    type State = PtyState;
    type Arguments = DriverArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<DriverMsg>,
        args: DriverArgs,
    ) -> Result<PtyState, ActorProcessingErr> {
        let DriverArgs { launch, sink, .. } = args;
        let argv = argv_for(&launch)?;
        let program = launch.program_for(&argv[0]);
        let shown = program.display().to_string();
        let mut spec = SpawnSpec::new(&program)
            .args(&argv[1..])
            .cwd(&launch.config.cwd)
            .env("TERM", "xterm-256color")
            .marked(&launch.urn);
        for (k, v) in &launch.env {
            spec = spec.env(k, v);
        }
        let pty_cfg = &launch.manifest.pty;
        let (pty, pts) = pty_process::open().map_err(|e| spawn_error(&launch, &shown, e))?;
        pty.resize(pty_process::Size::new(pty_cfg.rows, pty_cfg.cols))
            .map_err(|e| spawn_error(&launch, &shown, e))?;
        let child = pty_process::Command::from(spec.session_command())
            .spawn(pts)
            .map_err(|e| spawn_error(&launch, &shown, e))?;
        let group = ProcessGroup::from_leader(child, spec.marker.clone()).map_err(|source| {
            LaunchError::Spawn {
                urn: launch.urn.clone(),
                program: shown.clone(),
                source,
            }
        })?;
        tracing::info!(urn = %launch.urn, pgid = group.pgid(), argv = ?argv, "agent spawned on a pty");

        let caps = &launch.manifest.capabilities;
        let cancel = caps.mid_turn_cancel.unwrap_or(pty_cfg.sigint_cancels_turn);
        let (cmds, rx) = mpsc::channel(COMMANDS);
        let engine = Engine::new(&launch, sink.clone());
        let engine = tokio::spawn(engine.run(pty, rx, myself.clone()));
        Ok(PtyState {
            group,
            cmds,
            engine,
            sink,
            urn: launch.urn.clone(),
            cancel,
            stopping: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<DriverMsg>,
        msg: DriverMsg,
        st: &mut PtyState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            DriverMsg::Prompt { text } => st.command(Cmd::Prompt(text)).await,
            DriverMsg::Answer { ask_id, value } => st.command(Cmd::Answer { ask_id, value }).await,
            DriverMsg::Permission { req_id, .. } => {
                tracing::debug!(urn = %st.urn, %req_id, "a PTY agent asks in its terminal; ignored");
            }
            DriverMsg::Resize { rows, cols } => st.command(Cmd::Resize { rows, cols }).await,
            DriverMsg::Interrupt => match st.cancel {
                CancelMode::Graceful => st.command(Cmd::Interrupt).await,
                CancelMode::None => {
                    let event = CapEvent::error(
                        ErrorKind::Other(CapCode::CancelUnsupported.symbol().into()),
                        "this agent cannot cancel a turn (mid_turn_cancel = none)",
                        false,
                    );
                    st.sink.send_one(DriverOutput::Event(event)).await;
                }
                CancelMode::Hard => {
                    st.stopping = true;
                    st.engine.abort();
                    let _status = st.group.kill(DEFAULT_GRACE).await;
                    st.sink
                        .send_one(DriverOutput::TurnEnd(TurnEnd {
                            stop_reason: StopReason::Cancelled,
                            is_error: false,
                            result_text: None,
                        }))
                        .await;
                    myself.stop(Some("turn cancelled hard".into()));
                }
            },
            DriverMsg::Kill { cause } => {
                st.stopping = true;
                st.engine.abort();
                let _status = st.group.kill(DEFAULT_GRACE).await;
                st.report_death(&cause).await;
                return Err(Box::new(cause));
            }
            DriverMsg::Shutdown => {
                st.stopping = true;
                // Hang up: SIGHUP to the terminal's session, as closing a window does.
                let _gone = crate::process::signal_group(st.group.pgid(), libc::SIGHUP);
                end_deliberately(&mut st.group, &st.urn, "agent", "the hang-up").await;
                st.engine.abort();
                myself.stop(None);
            }
            DriverMsg::OutputClosed => {
                if st.stopping {
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
        st: &mut PtyState,
    ) -> Result<(), ActorProcessingErr> {
        st.engine.abort();
        let _status = st.group.kill(DEFAULT_GRACE).await;
        Ok(())
    }
}

impl PtyState {
    async fn command(&mut self, cmd: Cmd) {
        if self.cmds.send(cmd).await.is_err() {
            tracing::debug!(urn = %self.urn, "engine gone; command dropped");
        }
    }

    /// `cap.error pty_died` (spec A6), before the session hears of the exit.
    async fn report_death(&mut self, cause: &ExitCause) {
        if !cause.is_abnormal() && self.stopping {
            return;
        }
        let mut event = CapEvent::error(
            ErrorKind::PtyDied,
            format!("the agent on the pty {cause}"),
            true,
        );
        if let CapEvent::Error(e) = &mut event {
            e.details = Some(serde_json::json!({ "cause": cause })).into();
        }
        self.sink.send_one(DriverOutput::Event(event)).await;
    }
}
