//! The ACP-stdio wire (spec §6.4, Appendix C.3): capfleet is the ACP client.
//!
//! It spawns the ACP server in its own process group (the fleet's/chat's `argv`, or
//! the manifest's `fast_path.acp_stdio`); its output task is the connection of
//! [`super::acp_conn`] over the server's stdio. The wire relays the session's
//! messages: prompts and cancels over a small bounded channel, permission answers
//! straight to the waiting request. An ACP agent that ends its output without being
//! asked has died, whatever its exit status.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

use super::acp_conn::{self, Cmd, Conn};
use super::acp_host::SessionHost;
use super::acp_perms::{Perms, TerminalApprover};
use super::launch::Spawned;
use super::wire::{Interrupt, OutputEnd, Peer, Start, Started, Wire};
use super::{ExitCause, LaunchError, LaunchSpec};
use crate::manifest::AcpFastPath;
use crate::protocol::Decision;
use crate::rpc::{Rpc, TermConfig, WatchConfig};

/// Commands in flight from the actor to the connection task.
const CMD_QUEUE: usize = 8;

/// The ACP wire of one agent process.
pub(crate) struct AcpWire {
    cmds: Option<mpsc::Sender<Cmd>>,
    perms: Arc<Perms>,
    host: Arc<SessionHost>,
    rpc: Option<Arc<Rpc>>,
    urn: String,
}

/// The ACP server's argv: the fleet's override, else the manifest's fast path.
fn argv_for(launch: &LaunchSpec) -> Result<Vec<String>, LaunchError> {
    let argv = match (&launch.argv, &launch.manifest.fast_path.acp_stdio) {
        (Some(a), _) => a.clone(),
        (None, AcpFastPath::Argv(a)) => a.clone(),
        (None, AcpFastPath::StartupCommand) => launch.manifest.startup.command.clone(),
        (None, AcpFastPath::Unsupported) => Vec::new(),
    };
    if argv.is_empty() {
        return Err(LaunchError::NoCommand {
            urn: launch.urn.clone(),
            binding: "acp_stdio",
        });
    }
    Ok(argv)
}

impl Wire for AcpWire {
    const WHO: &'static str = "ACP agent";

    async fn start(start: Start<'_, Self>) -> Result<Started<Self>, LaunchError> {
        let Start {
            launch,
            sink,
            resume_id,
            ..
        } = start;
        let urn = launch.urn.clone();
        let argv = argv_for(launch)?;
        let cwd = std::fs::canonicalize(&launch.config.cwd).map_err(|e| LaunchError::Config {
            urn: urn.clone(),
            message: format!("session cwd {:?}: {e}", launch.config.cwd),
        })?;
        let perms = Perms::new(sink.clone());
        let host = SessionHost::new(sink.clone());
        let rpc = match &launch.manifest.capabilities.coding {
            Some(caps) => {
                let approver = Arc::new(TerminalApprover(perms.clone()));
                let term = TermConfig {
                    sandbox: launch.resolved_sandbox()?.map(Arc::new),
                    ..TermConfig::default()
                };
                let rpc = Rpc::new(caps.clone(), &cwd, term, approver)
                    .map_err(|e| LaunchError::Config {
                        urn: urn.clone(),
                        message: e.to_string(),
                    })?
                    .with_host(Arc::new(host.clone()), WatchConfig::default());
                Some(Arc::new(rpc))
            }
            None => None,
        };
        let Spawned {
            group,
            stdin,
            stdout,
            stderr,
        } = launch.spawn_piped(&argv, &cwd)?;
        let (cmd_tx, cmd_rx) = mpsc::channel(CMD_QUEUE);
        let conn = Conn {
            perms: perms.clone(),
            host: host.clone(),
            rpc: rpc.clone(),
            cwd,
            resume_id: resume_id.map(str::to_owned),
            max_line: launch.max_line,
        };
        let output = Box::pin(async move {
            if let (Some(i), Some(o)) = (stdin, stdout)
                && let Err(e) = acp_conn::run(conn, i, o, cmd_rx).await
            {
                tracing::warn!("ACP connection ended: {e}");
            }
            OutputEnd::CLOSED
        });
        let wire = AcpWire {
            cmds: Some(cmd_tx),
            perms,
            host,
            rpc,
            urn,
        };
        Ok(Started::process(wire, group, stderr, output))
    }

    async fn prompt(&mut self, text: String) {
        self.command(Cmd::Prompt(text)).await;
    }

    async fn permission(&mut self, req_id: String, decision: Decision, _message: Option<String>) {
        if !self.perms.answer(&req_id, decision) {
            tracing::debug!(urn = %self.urn, %req_id, "answer to a closed permission request");
        }
    }

    async fn answer(&mut self, ask_id: String, value: Option<Value>) {
        if !self.host.answer(&ask_id, value) {
            tracing::debug!(urn = %self.urn, %ask_id, "answer to a closed ask");
        }
    }

    async fn interrupt(&mut self) -> Interrupt {
        self.command(Cmd::Cancel).await;
        Interrupt::Sent
    }

    /// The connection closes the session (`session/close`, when the agent offers
    /// it), then ends: the agent's stdin closes.
    fn close(&mut self, _peer: &Peer) -> &'static str {
        self.cmds = None;
        "end of input"
    }

    /// The orchestrator kills the session's terminals (they report `cap_terminal_killed`).
    fn halt(&mut self) {
        if let Some(rpc) = &self.rpc {
            rpc.terminals().kill_all();
        }
    }

    async fn release(&mut self) {
        self.perms.cancel_all().await;
        self.host.cancel_all().await;
    }

    /// An ACP agent that ends its output without being asked is abnormal.
    fn end_of_output(cause: ExitCause) -> ExitCause {
        super::death::unasked_end(cause, "ACP agent closed the connection")
    }
}

impl AcpWire {
    async fn command(&mut self, cmd: Cmd) {
        if let Some(tx) = &self.cmds
            && tx.send(cmd).await.is_err()
        {
            tracing::debug!(urn = %self.urn, "ACP connection gone; command dropped");
        }
    }
}
