//! How every driver's agent ends: deliberately (told, given time, then killed), or by
//! itself (reaped, classified, and announced with a `cap.error` when abnormal).
//!
//! Neither `agent_exited` nor `agent_hung` is in the spec's registry (§14.2 knows only
//! `pty_died` for a dead agent, and only under PTY), so both stay binding codes
//! ([`ErrorKind::Other`]).

use std::time::Duration;

use tokio::task::JoinHandle;

use super::wire::{OutputEnd, Peer};
use super::{DriverMsg, ExitCause};
use crate::process::halt::{self, Urgency};
use crate::process::stderr_ring::StderrRing;
use crate::process::{DEFAULT_GRACE, ProcessGroup};
use crate::protocol::{CapEvent, ErrorKind};

/// The `cap.error` code for an agent process that died under a pipe binding.
pub(crate) const AGENT_EXITED: &str = "agent_exited";
/// The `cap.error` code for an agent killed because it hung.
pub(crate) const AGENT_HUNG: &str = "agent_hung";

/// The `cap.error` announcing an abnormal end (`None` for a clean one), quoting the
/// agent's last stderr lines.
pub(crate) fn exit_event(cause: &ExitCause, stderr: &StderrRing) -> Option<CapEvent> {
    if !cause.is_abnormal() {
        return None;
    }
    let code = match cause {
        ExitCause::Hung { .. } => AGENT_HUNG,
        _ => AGENT_EXITED,
    };
    let tail = stderr.quote();
    let message = if tail.is_empty() {
        format!("agent {cause}")
    } else {
        format!("agent {cause}\n{tail}")
    };
    let mut event = CapEvent::error(ErrorKind::Other(code.into()), message, true);
    if let CapEvent::Error(e) = &mut event {
        e.details = Some(serde_json::json!({
            "cause": cause,
            "stderr_tail": stderr.snapshot(),
        }))
        .into();
    }
    Some(event)
}

/// How long an agent whose output ended gets to exit before its group is killed.
pub(crate) const EXIT_WAIT: Duration = Duration::from_secs(2);

/// After an agent's output ended: give the leader [`EXIT_WAIT`] to exit (less once a
/// stop signal halts every agent, see [`halt`]), then kill whatever is left of its
/// group (nothing of it outlives it), and classify the end. A connection has no exit
/// status: its loss is the death.
pub(crate) async fn reap(peer: &mut Peer, urn: &str) -> ExitCause {
    let group = match peer {
        Peer::Process(group) => group,
        Peer::Connection(addr) => {
            return ExitCause::DriverError {
                message: format!("the connection to {addr} closed"),
            };
        }
    };
    let status = match unless_halted(EXIT_WAIT, group.wait()).await {
        Waited::Done(Ok(status)) => Some(status),
        Waited::Done(Err(e)) => {
            tracing::warn!(%urn, "wait failed: {e}");
            None
        }
        Waited::TimedOut | Waited::Halted => None,
    };
    let killed = group.kill(DEFAULT_GRACE).await.ok();
    match status.or(killed) {
        Some(s) => ExitCause::from_status(s),
        None => ExitCause::DriverError {
            message: "the agent's output ended and it could not be reaped".into(),
        },
    }
}

/// Kill the agent's process group now, with the usual escalation (`SIGTERM`, grace,
/// `SIGKILL`). A connection has nothing to kill: dropping the wire closes it.
pub(crate) async fn kill(peer: &mut Peer) {
    if let Peer::Process(group) = peer {
        let _status = group.kill(DEFAULT_GRACE).await;
    }
}

/// How long a deliberately ended agent gets to exit by itself before its group is killed.
pub(crate) const SHUTDOWN_WAIT: Duration = Duration::from_secs(3);

/// A deliberate end (the session closes): the agent has been `told` (its input closed,
/// a hang-up, `session/close`); it gets [`SHUTDOWN_WAIT`] to exit (a connection: to
/// close its side), then whatever is left of its group is killed. Once a stop signal
/// halts every agent ([`halt::Urgency::Halt`]) the wait ends at once, also one under
/// way. `who` names the agent in the log.
pub(crate) async fn end_deliberately(
    peer: &mut Peer,
    output: &mut JoinHandle<OutputEnd>,
    urn: &str,
    who: &str,
    told: &str,
) {
    match peer {
        Peer::Process(group) => end_group(group, urn, who, told).await,
        Peer::Connection(addr) => match unless_halted(SHUTDOWN_WAIT, output).await {
            Waited::Done(_) => tracing::info!(%urn, %addr, "{who} closed the connection at {told}"),
            Waited::TimedOut => {
                tracing::warn!(%urn, %addr, "{who} ignored {told}; dropping the connection")
            }
            Waited::Halted => tracing::info!(%urn, %addr, "halting: dropping the connection"),
        },
    }
}

async fn end_group(group: &mut ProcessGroup, urn: &str, who: &str, told: &str) {
    match unless_halted(SHUTDOWN_WAIT, group.wait()).await {
        Waited::Done(status) => tracing::info!(%urn, ?status, "{who} exited at {told}"),
        Waited::TimedOut => tracing::warn!(%urn, "{who} ignored {told}; killing its group"),
        Waited::Halted => tracing::info!(%urn, "halting: killing the {who}'s group"),
    }
    let _status = group.kill(DEFAULT_GRACE).await;
}

/// How a wait for an agent ended.
enum Waited<T> {
    Done(T),
    TimedOut,
    /// Every agent is being halted ([`Urgency::Halt`]): nobody waits any more.
    Halted,
}

/// `work`'s result, unless `wait` passes first or every agent is being halted.
async fn unless_halted<F: std::future::Future>(wait: Duration, work: F) -> Waited<F::Output> {
    tokio::select! {
        out = tokio::time::timeout(wait, work) => out.map_or(Waited::TimedOut, Waited::Done),
        () = halt::reached(Urgency::Halt) => Waited::Halted,
    }
}

/// How a driver ends once its agent's output closed and the end was reaped and
/// reported: an abnormal end fails the driver (its session restarts it per policy),
/// a clean exit stops it.
pub(crate) fn ended(
    myself: &ractor::ActorRef<DriverMsg>,
    cause: ExitCause,
) -> Result<(), ractor::ActorProcessingErr> {
    if cause.is_abnormal() {
        return Err(Box::new(cause));
    }
    myself.stop(Some("agent exited".into()));
    Ok(())
}

/// A long-lived agent's output ended unasked: an abnormal exit stays what it is, a
/// clean one is still a death, a driver error saying `what` (the wires whose clean
/// end of output is never the agent's own end: ACP, the Codex app-server).
pub(crate) fn unasked_end(cause: ExitCause, what: &str) -> ExitCause {
    if cause.is_abnormal() {
        cause
    } else {
        ExitCause::DriverError {
            message: what.into(),
        }
    }
}
