//! How every driver's agent ends: deliberately (told, given time, then killed), or by
//! itself (reaped, classified, and announced with a `cap.error` when abnormal).

use super::{DriverOutput, ExitCause, OutputSink};
use crate::process::stderr_ring::StderrRing;
use crate::protocol::{CapEvent, ErrorKind};

/// The `cap.error` code for an agent process that died under a pipe binding.
pub const AGENT_EXITED: &str = "agent_exited";
/// The `cap.error` code for an agent killed because it hung.
pub const AGENT_HUNG: &str = "agent_hung";

/// Announce an abnormal end, quoting the agent's last stderr lines.
pub async fn report_death(sink: &OutputSink, stderr: &StderrRing, cause: &ExitCause) {
    if !cause.is_abnormal() {
        return;
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
    sink.send_one(DriverOutput::Event(event)).await;
}

/// How long an agent whose output ended gets to exit before its group is killed.
pub const EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// After an agent's output ended: give the leader [`EXIT_WAIT`] to exit, then kill
/// whatever is left of its group (nothing of it outlives it), and classify the end.
pub async fn reap(group: &mut crate::process::ProcessGroup, urn: &str) -> ExitCause {
    let status = match tokio::time::timeout(EXIT_WAIT, group.wait()).await {
        Ok(Ok(status)) => Some(status),
        Ok(Err(e)) => {
            tracing::warn!(%urn, "wait failed: {e}");
            None
        }
        Err(_) => None,
    };
    let killed = group.kill(crate::process::DEFAULT_GRACE).await.ok();
    match status.or(killed) {
        Some(s) => ExitCause::from_status(s),
        None => ExitCause::DriverError {
            message: "the agent's output ended and it could not be reaped".into(),
        },
    }
}

/// How long a deliberately ended agent gets to exit by itself before its group is killed.
pub const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// A deliberate end (the session closes): the agent has been `told` (its input closed,
/// a hang-up, `session/close`); it gets [`SHUTDOWN_WAIT`] to exit, then whatever is
/// left of its group is killed. `who` names the agent in the log.
pub async fn end_deliberately(
    group: &mut crate::process::ProcessGroup,
    urn: &str,
    who: &str,
    told: &str,
) {
    match tokio::time::timeout(SHUTDOWN_WAIT, group.wait()).await {
        Ok(status) => tracing::info!(%urn, ?status, "{who} exited at {told}"),
        Err(_) => tracing::warn!(%urn, "{who} ignored {told}; killing its group"),
    }
    let _status = group.kill(crate::process::DEFAULT_GRACE).await;
}

/// How a driver ends once its agent's output closed and the end was reaped and
/// reported: an abnormal end fails the driver (its session restarts it per policy),
/// a clean exit stops it.
pub fn ended(
    myself: &ractor::ActorRef<super::DriverMsg>,
    cause: ExitCause,
) -> Result<(), ractor::ActorProcessingErr> {
    if cause.is_abnormal() {
        return Err(Box::new(cause));
    }
    myself.stop(Some("agent exited".into()));
    Ok(())
}
