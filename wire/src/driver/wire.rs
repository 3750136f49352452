//! What a binding supplies to the one driver skeleton ([`super::actor::Driver`]): its
//! wire. Everything else — the agent's process group or connection, the output
//! sink, the stderr ring, deliberate end versus death, kill escalation, `post_stop`,
//! and the shape the agent is reached in — is the skeleton's.
//!
//! A wire value lives as long as one agent process (or one connection): with
//! [`Shape::PerTurn`] the skeleton starts a fresh wire for every turn.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use super::launch::Shape;
use super::{ExitCause, LaunchError, LaunchSpec, OutputSink};
use crate::process::ProcessGroup;
use crate::process::stderr_ring::StderrRing;
use crate::protocol::{CapEvent, Decision};

/// What a wire `W` is started with.
pub(crate) struct Start<'a, W> {
    pub launch: &'a LaunchSpec,
    pub sink: &'a OutputSink,
    /// The conversation to resume natively, if any.
    pub resume_id: Option<&'a str>,
    /// The cut turn may be taken up where the agent has it (not after a hang).
    pub retake: bool,
    /// Per turn: the wire of the turn before, retired after its clean end (what a
    /// conversation carries from one process to the next, e.g. running counts).
    pub previous: Option<W>,
}

/// The agent's output, read to its end: the task the skeleton runs for one wire.
pub(crate) type OutputTask = Pin<Box<dyn Future<Output = OutputEnd> + Send>>;

/// A started wire: the binding's state, the peer it talks to, and its output task.
pub(crate) struct Started<W> {
    pub wire: W,
    pub peer: Peer,
    /// The agent's stderr (empty for a terminal or a connection).
    pub stderr: StderrRing,
    /// Reads the agent's output into the sink until it ends. The skeleton spawns
    /// it after announcing readiness, so nothing it sends overtakes `Ready`.
    pub output: OutputTask,
}

impl<W> Started<W> {
    /// A wire whose peer is the agent process (group) it started.
    pub(crate) fn process(
        wire: W,
        group: ProcessGroup,
        stderr: StderrRing,
        output: OutputTask,
    ) -> Self {
        Started {
            wire,
            peer: Peer::Process(group),
            stderr,
            output,
        }
    }
}

/// Who is on the other end of a wire.
pub(crate) enum Peer {
    /// An agent process in its own process group.
    Process(ProcessGroup),
    /// A connection to a peer that was already running (no process of ours).
    Connection(std::net::SocketAddr),
}

/// How an agent's output ended, as its reader saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OutputEnd {
    /// End of file or a read error: the agent (or the connection) closed its output.
    Closed {
        /// The agent ended a turn on its wire before its output closed.
        turn_ended: bool,
        /// The id to resume this conversation with, learned from the wire.
        resume_id: Option<String>,
    },
    /// The session stopped taking output: there is nobody to tell (the skeleton's
    /// `post_stop` ends the agent).
    SessionGone,
}

impl OutputEnd {
    /// A closed output that taught nothing.
    pub(crate) const CLOSED: OutputEnd = OutputEnd::Closed {
        turn_ended: false,
        resume_id: None,
    };
}

/// What a wire did with an interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interrupt {
    /// Sent the binding's native way; the agent ends the turn itself.
    Sent,
    /// This agent cannot cancel a turn: the skeleton says so (`cap_cancel_unsupported`).
    Unsupported,
    /// The only cancel is ending the agent: the skeleton kills it, ends the turn
    /// `cancelled`, and stops (the next turn gets a fresh agent).
    Hard,
}

/// One binding's wire. Methods taking `&mut self` run inside the driver actor, one
/// at a time; the hot path (the agent's output) runs in [`Started::output`], which
/// the wire builds with static types (no dynamic dispatch per line).
pub(crate) trait Wire: Send + Sized + 'static {
    /// The agent as the log names it (`agent`, `ACP agent`).
    const WHO: &'static str;
    /// The agent is ready as soon as it is started (it prints nothing before its
    /// first prompt): the skeleton announces `Ready`. Otherwise the wire announces
    /// readiness on its output when the agent shows it.
    const READY_AT_START: bool = false;
    /// Whether the agent's output is still read while a kill takes it down: a pipe's
    /// last frames are kept; what a dying terminal draws is not.
    const READ_WHILE_KILLED: bool = true;

    /// The shapes this wire can be reached in: [`Shape::LongLived`] by default.
    /// [`Shape::PerTurn`] is only taken from a wire that is [`Wire::READY_AT_START`].
    fn admits(shape: &Shape) -> bool {
        matches!(shape, Shape::LongLived)
    }

    /// Annotations for the session's `cap.session.ready` (`_meta`) once the wire is
    /// started: what the binding negotiated (A2A: the peer and its spelling).
    fn ready_meta(_launch: &LaunchSpec) -> Option<crate::protocol::Meta> {
        None
    }

    /// Whether starting with `resume_id` resumes the conversation natively.
    fn resumes(_launch: &LaunchSpec, _resume_id: Option<&str>) -> bool {
        false
    }

    /// Start the agent (or connect to it) and its output task.
    fn start(
        start: Start<'_, Self>,
    ) -> impl Future<Output = Result<Started<Self>, LaunchError>> + Send;

    /// Start a turn with this prompt.
    fn prompt(&mut self, text: String) -> impl Future<Output = ()> + Send;

    /// Add this text to the running turn; `taken` hears whether the agent took it
    /// (dropped: it did not). Only a wire whose binding [`super::steers_mid_turn`] is
    /// asked; the others never are.
    fn steer(
        &mut self,
        _text: String,
        _taken: tokio::sync::oneshot::Sender<bool>,
    ) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Answer an open permission request.
    fn permission(
        &mut self,
        req_id: String,
        decision: Decision,
        message: Option<String>,
    ) -> impl Future<Output = ()> + Send;

    /// Answer an open ask (`None` declines it).
    fn answer(&mut self, ask_id: String, value: Option<Value>) -> impl Future<Output = ()> + Send;

    /// Cancel the current turn.
    fn interrupt(&mut self) -> impl Future<Output = Interrupt> + Send;

    /// The user's terminal was resized.
    fn resize(&mut self, _rows: u16, _cols: u16) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// Tell the agent to end (close its input, hang up); returns how it was told,
    /// for the log. The skeleton then gives it time before killing what is left.
    fn close(&mut self, peer: &Peer) -> &'static str;

    /// Stop serving the agent (the terminals it runs through us): it is ending.
    fn halt(&mut self) {}

    /// Withdraw whatever still waits on the agent (open permission requests, asks).
    fn release(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }

    /// What the agent's end of output means, given how its end was classified: by
    /// default what the exit status says.
    fn end_of_output(cause: ExitCause) -> ExitCause {
        cause
    }

    /// The `cap.error` announcing the agent's end, if this end is announced;
    /// `by_itself`: its output ended unasked (otherwise it was killed).
    fn death_event(cause: &ExitCause, _by_itself: bool, stderr: &StderrRing) -> Option<CapEvent> {
        super::death::exit_event(cause, stderr)
    }
}
