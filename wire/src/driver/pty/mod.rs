//! The PTY wire (spec §6.1, Appendix A): any terminal agent, driven the way a human
//! would drive it.
//!
//! The agent runs as a session leader on a fresh pseudo-terminal (its own process
//! group, killed as a whole through [`ProcessGroup`]). The output task is the one
//! engine owning the master side: it reads output into the [`Screen`], answers
//! terminal queries, classifies completed lines ([`LineParser`]), decides readiness
//! and turn ends ([`Settle`], on a timer: idle waiting costs nothing) and types
//! prompts and answers. Outputs travel in credit-bounded batches: when the session
//! lags, the engine stops reading and the agent blocks on its terminal.
//!
//! [`Screen`]: crate::bindings::pty::Screen
//! [`LineParser`]: crate::bindings::pty::LineParser
//! [`Settle`]: crate::bindings::pty::Settle

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use tokio::sync::mpsc;

use super::wire::{Interrupt, OutputEnd, Peer, Start, Started, Wire};
use super::{ExitCause, LaunchError, LaunchSpec};
use crate::chaos::interpose::{self, FrameMode};
use crate::manifest::CancelMode;
use crate::process::stderr_ring::StderrRing;
use crate::process::{ProcessGroup, SpawnSpec};
use crate::protocol::{CapEvent, Decision, ErrorKind};

/// Bytes read from the terminal at once.
const READ_CHUNK: usize = 16 * 1024;
/// Bytes of input written at once (a terminal buffers about 4 KiB).
const WRITE_CHUNK: usize = 4 * 1024;
/// Commands from the actor to its engine in flight (fed by the session, not the agent).
const COMMANDS: usize = 64;

mod engine;

use engine::{Cmd, Engine};

/// The PTY wire of one agent process.
pub(crate) struct PtyWire {
    cmds: mpsc::Sender<Cmd>,
    /// Set when the session closes us: what the agent prints from then on (a farewell
    /// on hang-up) is no turn's late output.
    closing: Arc<AtomicBool>,
    urn: String,
    cancel: CancelMode,
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

impl Wire for PtyWire {
    const WHO: &'static str = "agent";
    const READ_WHILE_KILLED: bool = false;

    async fn start(start: Start<'_, Self>) -> Result<Started<Self>, LaunchError> {
        let Start { launch, sink, .. } = start;
        let argv = argv_for(launch)?;
        let program = launch.program_for(&argv[0]);
        let shown = program.display().to_string();
        let mut spec = SpawnSpec::new(&program)
            .args(&argv[1..])
            .cwd(&launch.config.cwd)
            .env("TERM", "xterm-256color")
            .marked(&launch.urn)
            .confined(launch.confine(&program)?);
        for (k, v) in &launch.env {
            spec = spec.env(k, v);
        }
        let pty_cfg = &launch.manifest.pty;
        let (pty, pts) = pty_process::open().map_err(|e| spawn_error(launch, &shown, e))?;
        pty.resize(pty_process::Size::new(pty_cfg.rows, pty_cfg.cols))
            .map_err(|e| spawn_error(launch, &shown, e))?;
        let child = pty_process::Command::from(spec.session_command())
            .spawn(pts)
            .map_err(|e| spawn_error(launch, &shown, e))?;
        let group = ProcessGroup::from_leader(child, spec.marker.clone())
            .map_err(|source| LaunchError::Spawn {
                urn: launch.urn.clone(),
                program: shown.clone(),
                source,
            })?
            .holding(spec.confined.clone());
        tracing::info!(urn = %launch.urn, pgid = group.pgid(), argv = ?argv, "agent spawned on a pty");

        let caps = &launch.manifest.capabilities;
        let cancel = caps.mid_turn_cancel.unwrap_or(pty_cfg.sigint_cancels_turn);
        let (cmds, rx) = mpsc::channel(COMMANDS);
        let closing = Arc::new(AtomicBool::new(false));
        let engine = Engine::new(launch, sink.clone(), closing.clone());
        let (read, write) = pty.into_split();
        let faults = launch.byte_faults.as_ref();
        let read = interpose::reader(faults, read, FrameMode::Reads);
        let write = interpose::writer(faults, write);
        let output = Box::pin(async move {
            match engine.run(read, write, rx).await {
                engine::End::Closed => OutputEnd::CLOSED,
                engine::End::SessionGone => OutputEnd::SessionGone,
            }
        });
        let wire = PtyWire {
            cmds,
            closing,
            urn: launch.urn.clone(),
            cancel,
        };
        // The agent's stderr is its terminal: the screen has it.
        Ok(Started::process(wire, group, StderrRing::default(), output))
    }

    async fn prompt(&mut self, text: String) {
        self.command(Cmd::Prompt(text)).await;
    }

    async fn permission(&mut self, req_id: String, _decision: Decision, _message: Option<String>) {
        tracing::debug!(urn = %self.urn, %req_id, "a PTY agent asks in its terminal; ignored");
    }

    async fn answer(&mut self, ask_id: String, value: Option<Value>) {
        self.command(Cmd::Answer { ask_id, value }).await;
    }

    async fn interrupt(&mut self) -> Interrupt {
        match self.cancel {
            CancelMode::Graceful => {
                self.command(Cmd::Interrupt).await;
                Interrupt::Sent
            }
            CancelMode::None => Interrupt::Unsupported,
            CancelMode::Hard => Interrupt::Hard,
        }
    }

    async fn resize(&mut self, rows: u16, cols: u16) {
        self.command(Cmd::Resize { rows, cols }).await;
    }

    /// Hang up: SIGHUP to the terminal's session, as closing a window does.
    fn close(&mut self, peer: &Peer) -> &'static str {
        // Before the signal: the agent's answer to it comes after, and is read after.
        self.closing.store(true, Ordering::Release);
        if let Peer::Process(group) = peer {
            let _gone = crate::process::signal_group(group.pgid(), libc::SIGHUP);
        }
        "the hang-up"
    }

    /// `cap.error pty_died` (spec A6), before the session hears of the exit: for every
    /// end of its own, clean or not, and for an abnormal kill.
    fn death_event(cause: &ExitCause, by_itself: bool, _stderr: &StderrRing) -> Option<CapEvent> {
        if !cause.is_abnormal() && !by_itself {
            return None;
        }
        let mut event = CapEvent::error(
            ErrorKind::PtyDied,
            format!("the agent on the pty {cause}"),
            true,
        );
        if let CapEvent::Error(e) = &mut event {
            e.details = Some(serde_json::json!({ "cause": cause })).into();
        }
        Some(event)
    }
}

impl PtyWire {
    async fn command(&mut self, cmd: Cmd) {
        if self.cmds.send(cmd).await.is_err() {
            tracing::debug!(urn = %self.urn, "engine gone; command dropped");
        }
    }
}
