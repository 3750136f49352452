//! The ACP-stdio driver actor (spec §6.4, Appendix C.3): capfleet is the ACP client.
//!
//! It spawns the ACP server in its own process group (the fleet's/chat's `argv`, or
//! the manifest's `fast_path.acp_stdio`), runs the connection task of
//! [`super::acp_conn`] over its stdio, and relays the session's messages: prompts
//! and cancels over a small bounded channel, permission answers straight to the
//! waiting request. When the agent's output closes, the connection task tells the
//! actor, which reports the death and fails like every pipe driver.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::acp_conn::{self, Cmd, Conn};
use super::acp_host::SessionHost;
use super::acp_perms::{Perms, TerminalApprover};
use super::death::{end_deliberately, ended, reap, report_death};
use super::launch::Spawned;
use super::stream_json::DriverArgs;
use super::{DriverMsg, ExitCause, LaunchError, LaunchSpec, OutputSink};
use crate::manifest::AcpFastPath;
use crate::process::stderr_ring::StderrRing;
use crate::process::{DEFAULT_GRACE, ProcessGroup};
use crate::rpc::{Rpc, TermConfig, WatchConfig};

/// Commands in flight from the actor to the connection task.
const CMD_QUEUE: usize = 8;

/// The ACP-stdio driver.
pub struct AcpDriver;

pub struct AcpState {
    group: ProcessGroup,
    cmds: Option<mpsc::Sender<Cmd>>,
    perms: Arc<Perms>,
    host: Arc<SessionHost>,
    rpc: Option<Arc<Rpc>>,
    stderr: StderrRing,
    conn: JoinHandle<()>,
    sink: OutputSink,
    urn: String,
    shutting_down: bool,
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

impl Actor for AcpDriver {
    type Msg = DriverMsg;
    type State = AcpState;
    type Arguments = DriverArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<DriverMsg>,
        args: DriverArgs,
    ) -> Result<AcpState, ActorProcessingErr> {
        let DriverArgs {
            launch,
            sink,
            resume_id,
        } = args;
        let urn = launch.urn.clone();
        let argv = argv_for(&launch)?;
        let cwd = std::fs::canonicalize(&launch.config.cwd).map_err(|e| LaunchError::Config {
            urn: urn.clone(),
            message: format!("session cwd {:?}: {e}", launch.config.cwd),
        })?;
        let perms = Perms::new(sink.clone());
        let host = SessionHost::new(sink.clone());
        let rpc = match &launch.manifest.capabilities.coding {
            Some(caps) => {
                let approver = Arc::new(TerminalApprover(perms.clone()));
                let rpc = Rpc::new(caps.clone(), &cwd, TermConfig::default(), approver)
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
            resume_id,
        };
        let me = myself.clone();
        let conn = match (stdin, stdout) {
            (Some(i), Some(o)) => tokio::spawn(async move {
                if let Err(e) = acp_conn::run(conn, i, o, cmd_rx).await {
                    tracing::warn!("ACP connection ended: {e}");
                }
                let _gone = me.cast(DriverMsg::OutputClosed);
            }),
            _ => tokio::spawn(async move {
                let _gone = me.cast(DriverMsg::OutputClosed);
            }),
        };
        Ok(AcpState {
            group,
            cmds: Some(cmd_tx),
            perms,
            host,
            rpc,
            stderr,
            conn,
            sink,
            urn,
            shutting_down: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<DriverMsg>,
        msg: DriverMsg,
        st: &mut AcpState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            DriverMsg::Prompt { text } => st.command(Cmd::Prompt(text)).await,
            DriverMsg::Interrupt => st.command(Cmd::Cancel).await,
            DriverMsg::Resize { .. } => {} // no terminal to resize
            DriverMsg::Permission {
                req_id, decision, ..
            } => {
                if !st.perms.answer(&req_id, decision) {
                    tracing::debug!(urn = %st.urn, %req_id, "answer to a closed permission request");
                }
            }
            DriverMsg::Answer { ask_id, value } => {
                if !st.host.answer(&ask_id, value) {
                    tracing::debug!(urn = %st.urn, %ask_id, "answer to a closed ask");
                }
            }
            DriverMsg::Kill { cause } => {
                st.stop_terminals();
                let _status = st.group.kill(DEFAULT_GRACE).await;
                st.perms.cancel_all().await;
                st.host.cancel_all().await;
                report_death(&st.sink, &st.stderr, &cause).await;
                return Err(Box::new(cause));
            }
            DriverMsg::Shutdown => {
                st.shutting_down = true;
                // The connection closes the session (`session/close`, when the agent
                // offers it), then ends: the agent's stdin closes.
                st.cmds = None;
                st.stop_terminals();
                end_deliberately(&mut st.group, &st.urn, "ACP agent", "end of input").await;
                myself.stop(None);
            }
            DriverMsg::OutputClosed => {
                if st.shutting_down {
                    return Ok(());
                }
                st.stop_terminals();
                st.perms.cancel_all().await;
                st.host.cancel_all().await;
                let cause = reap(&mut st.group, &st.urn).await;
                // An ACP agent that ends its output without being asked is abnormal.
                let cause = if cause.is_abnormal() {
                    cause
                } else {
                    ExitCause::DriverError {
                        message: "ACP agent closed the connection".into(),
                    }
                };
                report_death(&st.sink, &st.stderr, &cause).await;
                return ended(&myself, cause);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<DriverMsg>,
        st: &mut AcpState,
    ) -> Result<(), ActorProcessingErr> {
        st.conn.abort();
        st.stop_terminals();
        let _status = st.group.kill(DEFAULT_GRACE).await;
        Ok(())
    }
}

impl AcpState {
    async fn command(&mut self, cmd: Cmd) {
        if let Some(tx) = &self.cmds {
            if tx.send(cmd).await.is_err() {
                tracing::debug!(urn = %self.urn, "ACP connection gone; command dropped");
            }
        }
    }

    /// The orchestrator kills the session's terminals (they report `cap_terminal_killed`).
    fn stop_terminals(&self) {
        if let Some(rpc) = &self.rpc {
            rpc.terminals().kill_all();
        }
    }
}
