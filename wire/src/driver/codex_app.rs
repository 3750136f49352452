//! The `codex app-server` wire (a capfleet extension binding,
//! `fast_path.x-codex_app_server`): one long-lived app-server per session, a Codex
//! thread for the session's conversation ([`super::codex_app_conn`]). The thread id
//! is the session's resume id: a restarted app-server (after a crash, or `run
//! --resume`) resumes it with `thread/resume`.
//!
//! Unlike `codex exec`, the app-server asks: its approval requests become
//! `cap.permission.request`s (the answerer decides; the decision is the response).
//! A cancel is `turn/interrupt`; the turn then completes `interrupted` (cancelled).
//! A steer (text the session adds to the running turn, where the manifest says
//! `capabilities.queued_input`) is `turn/steer`; a prompt is always a `turn/start`.
//!
//! | CAP `permission_mode` | `approvalPolicy` | `sandbox` |
//! |---|---|---|
//! | `interactive` | `untrusted` (asks for anything not known safe) | `workspace-write` |
//! | `confirm` | `on-request` (the model asks to leave the sandbox) | `workspace-write` |
//! | `none` | `never` | `workspace-write` |
//! | unset | Codex's own config | Codex's own config |

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::mpsc;

use super::codex_app_conn::{self, Cmd, Control, Shared};
use super::launch::Spawned;
use super::pump::pump;
use super::wire::{Interrupt, OutputEnd, Peer, Start, Started, Wire};
use super::{ExitCause, LaunchError, LaunchSpec};
use crate::bindings::codex_app::AppMapper;
use crate::manifest::ArgvFastPath;
use crate::protocol::{Decision, PermissionMode};
use crate::sync::lock;

/// Commands in flight from the actor to the control loop.
const CMD_QUEUE: usize = 8;

/// The wire of one app-server process.
pub(crate) struct CodexAppWire {
    cmds: Option<mpsc::Sender<Cmd>>,
    shared: Arc<Shared>,
    urn: String,
}

/// The policies of a permission mode (the table above).
fn policies(mode: Option<PermissionMode>) -> (Option<&'static str>, Option<&'static str>) {
    match mode {
        Some(PermissionMode::Interactive) => (Some("untrusted"), Some("workspace-write")),
        Some(PermissionMode::Confirm) => (Some("on-request"), Some("workspace-write")),
        Some(PermissionMode::None) => (Some("never"), Some("workspace-write")),
        None => (None, None),
    }
}

/// The app-server's argv: the fleet's override, else the manifest's fast path.
fn argv_for(launch: &LaunchSpec) -> Result<Vec<String>, LaunchError> {
    match (&launch.argv, &launch.manifest.fast_path.codex_app_server) {
        (Some(a), _) if !a.is_empty() => Ok(a.clone()),
        (_, ArgvFastPath::Argv(a)) => Ok(a.clone()),
        _ => Err(LaunchError::NoCommand {
            urn: launch.urn.clone(),
            binding: "codex_app_server",
        }),
    }
}

impl Wire for CodexAppWire {
    const WHO: &'static str = "codex app-server";

    fn resumes(_launch: &LaunchSpec, resume_id: Option<&str>) -> bool {
        resume_id.is_some()
    }

    async fn start(start: Start<'_, Self>) -> Result<Started<Self>, LaunchError> {
        let Start {
            launch,
            sink,
            resume_id,
            ..
        } = start;
        let argv = argv_for(launch)?;
        let cwd = std::fs::canonicalize(&launch.config.cwd).map_err(|e| LaunchError::Config {
            urn: launch.urn.clone(),
            message: format!("session cwd {:?}: {e}", launch.config.cwd),
        })?;
        let model = launch.config.model.as_deref().map(str::to_owned);
        let mapper = Arc::new(Mutex::new(AppMapper::new(0, model.clone())));
        let Spawned {
            group,
            stdin,
            stdout,
            stderr,
        } = launch.spawn_piped(&argv, &cwd)?;
        let (shared, out_rx) = Shared::new(sink.clone());
        let (cmd_tx, cmd_rx) = mpsc::channel(CMD_QUEUE);
        let (approval_policy, sandbox) = policies(launch.config.permission_mode);
        let control = Control {
            shared: shared.clone(),
            cmds: cmd_rx,
            cwd: cwd.to_string_lossy().into_owned(),
            model,
            approval_policy,
            sandbox,
            resume_id: resume_id.map(str::to_owned),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        };
        let (m, s, max_line) = (mapper.clone(), shared.clone(), launch.max_line);
        let output = Box::pin(async move {
            let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
                return OutputEnd::CLOSED;
            };
            let mut scratch = Vec::new();
            let lines = pump(
                stdout,
                max_line,
                s.sink.clone(),
                move |line, batch, learned| {
                    codex_app_conn::on_line(&s, &mut lock(&m), &mut scratch, line, batch, learned);
                },
            );
            tokio::pin!(lines);
            // Control ends when the session closes its commands (or the server goes):
            // the writer, and with it the server's input, ends then too.
            let talk = async {
                let writing = codex_app_conn::writer(out_rx, stdin);
                tokio::pin!(writing);
                tokio::select! {
                    done = codex_app_conn::control(control) => done,
                    () = &mut writing => Err(codex_app_conn::CallError::Gone),
                }
            };
            tokio::select! {
                end = &mut lines => end,
                done = talk => {
                    if let Err(e) = done {
                        tracing::warn!("codex app-server connection ended: {e}");
                    }
                    // Our side is done (its input closed): read its output to the end.
                    lines.await
                }
            }
        });
        let wire = CodexAppWire {
            cmds: Some(cmd_tx),
            shared,
            urn: launch.urn.clone(),
        };
        Ok(Started::process(wire, group, stderr, output))
    }

    async fn prompt(&mut self, text: String) {
        self.command(Cmd::Prompt(text)).await;
    }

    async fn steer(&mut self, text: String, taken: tokio::sync::oneshot::Sender<bool>) {
        self.command(Cmd::Steer(text, taken)).await;
    }

    async fn permission(&mut self, req_id: String, decision: Decision, _message: Option<String>) {
        if !self.shared.answer(&req_id, Some(decision)).await {
            tracing::debug!(urn = %self.urn, %req_id, "answer to a closed approval");
        }
    }

    async fn answer(&mut self, ask_id: String, _value: Option<Value>) {
        tracing::debug!(urn = %self.urn, %ask_id, "codex app-server asks no questions; answer dropped");
    }

    async fn interrupt(&mut self) -> Interrupt {
        self.command(Cmd::Interrupt).await;
        Interrupt::Sent
    }

    fn close(&mut self, _peer: &Peer) -> &'static str {
        self.cmds = None;
        "end of input"
    }

    async fn release(&mut self) {
        self.shared.withdraw_all().await;
    }

    /// An app-server that ends its output without being asked has died.
    fn end_of_output(cause: ExitCause) -> ExitCause {
        super::death::unasked_end(cause, "codex app-server closed its output")
    }
}

impl CodexAppWire {
    async fn command(&mut self, cmd: Cmd) {
        if let Some(tx) = &self.cmds
            && tx.send(cmd).await.is_err()
        {
            tracing::debug!(urn = %self.urn, "codex app-server connection gone; command dropped");
        }
    }
}
