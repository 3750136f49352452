//! The session actor: one logical conversation with one agent (spec §9), and the
//! supervisor of that agent's driver.
//!
//! It sends the config first (as the driver's launch spec), waits for the driver's
//! ready before the first prompt, runs turns (`ask` replies with a [`TurnResult`]),
//! keeps the open asks and permission requests and routes them to the answerer,
//! enforces the init and turn timeouts and `max_turns`, and publishes every event to
//! its subscribers through bounded channels. When the driver dies, the session applies
//! its [`RestartPolicy`]: respawn after the backoff, resume natively when the binding
//! can, else re-issue the interrupted turn with the partial output kept (§10.6); past
//! the window the session fails and stops with the reason (its supervisor, the fleet,
//! gets that as a supervision message). A turn whose attempts failed twice in a row
//! the same way is a poison turn: it fails instead of being re-issued a third time
//! ([`capfleet_wire::supervision::poison`]). A rate limit is no crash: the session pauses
//! until the limit resets and re-issues the turn (`pause`).
//!
//! What it publishes and the handles it is reached through are in [`capfleet_wire::events`]:
//! its driver's sink holds a `DerivedActorRef` of outputs, the answerer one of
//! answers; the messages the session sends itself ([`Internal`]) cannot be made
//! outside it. Its state, by concept:
//!
//! - `machine`: the session's state machine (`Core`), what it publishes, closing and failing;
//! - `slot`: the driver slot — the one driver at a time, its generation, readiness,
//!   credits, restart tracker and launch spec — and starting, killing and losing it;
//! - `book`: the turn book — the current turn, its caller, the open requests, usage,
//!   turns done — and asking, ending and cancelling turns;
//! - `outputs`: what the driver's outputs do; `answers`: answers to open requests;
//! - `hooks`: pricing estimates and artifact keeping on the agent's events;
//! - `pause`: rate-limit pauses and the resume that re-issues the turn;
//! - `dropped`: a turn whose end was lost in a line dropped over the line cap;
//! - `spans`: the session's spans; `turn`: one turn's bookkeeping;
//! - `chaos`: a chaos run's faults on this session (journaled, then applied);
//! - `steer`: text joining the running turn (queued input), where the agent can take it
//!   ([`SessionSpec::steers`]).

mod actor;
mod answers;
mod book;
mod chaos;
mod dropped;
mod hooks;
mod machine;
mod outputs;
mod pause;
mod recovery;
mod slot;
mod spans;
mod steer;
pub(crate) mod tools_run;
pub(crate) mod turn;

use std::sync::Arc;
use std::time::Duration;

use ractor::RpcReplyPort;
use tokio::sync::mpsc;

pub(crate) use actor::Session;
pub(crate) use book::tail;
pub(crate) use recovery::SessionRecovery;
pub use turn::TurnResult;

use crate::protocol::CancelScope;
use capfleet_wire::driver::LaunchSpec;
use capfleet_wire::driver::OutputBatch;
use capfleet_wire::events::{Answer, Decider};
use capfleet_wire::events::{Published, SessionState, UsageTotals};
use capfleet_wire::registry::Binding;
use capfleet_wire::supervision::rate_limit::RateLimitPolicy;
use capfleet_wire::supervision::{ExitCause, RestartPolicy};

/// Default turn timeout (tai's `CAP_TURN_TIMEOUT`).
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a cancelled turn may take to end before its agent is killed.
pub(crate) const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(5);

/// Everything a session needs.
#[derive(Debug, Clone)]
pub struct SessionSpec {
    /// The session's name inside its fleet.
    pub name: String,
    pub launch: LaunchSpec,
    pub binding: Binding,
    pub policy: RestartPolicy,
    /// What a rate limit does: pause (the default) or fail the turn.
    pub rate_limit: RateLimitPolicy,
    pub init_timeout: Duration,
    pub turn_timeout: Duration,
    pub cancel_grace: Duration,
    pub max_turns: Option<u32>,
    /// Prices for usage reported without a cost (estimated, marked in `_meta`).
    pub pricing: Option<Arc<crate::pricing::Pricing>>,
    /// Where artifacts the agent emits are stored (their large content leaves the
    /// event for a file URI).
    pub artifacts: Option<Arc<crate::workspace::ArtifactStore>>,
    /// A resumed run's session: where its stream, turns and agent go on from.
    pub recovered: Option<SessionRecovery>,
    /// A chaos run's spec: the session decides its per-turn faults from it.
    pub chaos: Option<Arc<crate::chaos::spec::ChaosSpec>>,
}

impl SessionSpec {
    /// A spec with the defaults: transient restarts (3 within 60 s), the manifest's
    /// init timeout, 600 s turns.
    pub fn new(name: impl Into<String>, launch: LaunchSpec, binding: Binding) -> Self {
        let init = Duration::from_secs(launch.manifest.startup.init_timeout_seconds);
        SessionSpec {
            name: name.into(),
            launch,
            binding,
            policy: RestartPolicy::default(),
            rate_limit: RateLimitPolicy::default(),
            init_timeout: init,
            turn_timeout: DEFAULT_TURN_TIMEOUT,
            cancel_grace: DEFAULT_CANCEL_GRACE,
            max_turns: None,
            pricing: None,
            artifacts: None,
            recovered: None,
            chaos: None,
        }
    }

    pub fn urn(&self) -> &str {
        &self.launch.urn
    }

    /// Whether text for this session while a turn runs joins that turn (a steer, CAP
    /// queued input) rather than waiting for its end: see
    /// [`capfleet_wire::driver::queued_input`].
    pub fn steers(&self) -> bool {
        capfleet_wire::driver::queued_input(&self.launch.manifest, self.binding).is_ok()
    }
}

/// Start arguments of a session.
pub struct SessionArgs {
    pub spec: SessionSpec,
    pub subscribers: Vec<mpsc::Sender<Published>>,
    /// Who decides the agent's permission requests and asks (the answerer's
    /// `get_derived()`); without one, each gets the fail-safe answer.
    pub answerer: Option<Decider>,
    /// The parent of the session's span (the run's).
    pub parent: tracing::Span,
}

/// Why a session could not run a turn.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SessionError {
    #[error("a turn is already running")]
    Busy,
    #[error("max_turns ({max}) reached")]
    MaxTurns { max: u32 },
    #[error("the session is closed")]
    Closed,
    #[error("the session failed: {reason}")]
    Failed { reason: String },
    #[error("no turn is running to steer: ask instead")]
    NoTurn,
    /// `cap_queued_input_unsupported` (-32007).
    #[error("cap_queued_input_unsupported: the agent takes no input mid-turn ({why})")]
    QueuedInputUnsupported { why: String },
}

/// A snapshot of a session, for status views and tests.
#[derive(Debug, Clone)]
pub struct SessionSnapshot {
    pub urn: Arc<str>,
    pub state: SessionState,
    pub turns: u32,
    pub restarts: u64,
    pub usage: UsageTotals,
    pub resume_id: Option<String>,
    pub open_requests: usize,
}

/// Messages of the session actor.
pub enum SessionMsg {
    /// Run one turn; the reply comes when it ends.
    Ask {
        prompt: String,
        /// A W3C `traceparent` the turn's span is a child of (the asker's, from
        /// another process); `None`: the session's span.
        traceparent: Option<String>,
        reply: RpcReplyPort<Result<TurnResult, SessionError>>,
    },
    /// Steer the running turn: `text` joins it (CAP queued input,
    /// `cap.user_input.inject`) where the manifest says `capabilities.queued_input`
    /// and the binding can; the reply says whether it was taken (see `steer`).
    Steer {
        text: String,
        reply: RpcReplyPort<Result<(), SessionError>>,
    },
    /// Answer an open permission request or ask (from the answerer, a human, the
    /// fail-safe; they hold an [`AnswerTo`](capfleet_wire::events::AnswerTo)).
    Answer(Answer),
    /// Cancel the current turn, or the whole session.
    Cancel { scope: CancelScope, reason: String },
    /// End the session (the agent is shut down gracefully).
    Close,
    /// The viewer's terminal changed size: a PTY agent's terminal follows (and a
    /// restarted agent starts at it).
    Resize { rows: u16, cols: u16 },
    /// A snapshot of the session.
    Snapshot(RpcReplyPort<SessionSnapshot>),
    /// Inject a chaos fault now (a chaos run's timed fault, number `seed_pos` of its
    /// seeded sequence): journaled, then applied to this session's own agent.
    Chaos {
        fault: capfleet_wire::chaos::FaultKind,
        seed_pos: u64,
    },
    /// What the session sends itself, and its driver's outputs: made only inside the
    /// session (and by the driver's sink, from an [`OutputBatch`]).
    Internal(Internal),
}

/// A message of the session to itself; opaque outside the session.
pub struct Internal(Own);

/// The session's own messages.
enum Own {
    /// Outputs of the driver of `generation` (holds a flow-control credit).
    Output(OutputBatch),
    /// (Re)spawn the driver.
    StartDriver,
    /// The driver of `generation` ended with `cause`. ractor delivers the supervision
    /// event ahead of the mailbox, so the session re-queues the exit behind the
    /// driver's last outputs (its partial text, its `cap.error`): they are published
    /// first, the restart (or failure) after them.
    DriverExited { generation: u64, cause: ExitCause },
    /// The driver of `generation` did not get ready in time.
    InitTimeout { generation: u64 },
    /// Attempt `attempt` of turn `turn` ran past the turn timeout.
    TurnTimeout { turn: u32, attempt: u32 },
    /// Attempt `attempt` of turn `turn` had a line dropped over the cap: look whether
    /// the agent stayed quiet since (`dropped`).
    DroppedQuiet { turn: u32, attempt: u32 },
    /// The cancelled turn `turn` did not end within the grace.
    CancelDeadline { turn: u32 },
    /// The rate-limit pause `token` is over: re-issue the turn.
    Resume { token: u64 },
}

impl From<Own> for SessionMsg {
    fn from(own: Own) -> Self {
        SessionMsg::Internal(Internal(own))
    }
}

/// What the driver's sink sends (`DerivedActorRef<OutputBatch>`).
impl From<OutputBatch> for SessionMsg {
    fn from(batch: OutputBatch) -> Self {
        Own::Output(batch).into()
    }
}

impl TryFrom<SessionMsg> for OutputBatch {
    type Error = SessionMsg;

    fn try_from(msg: SessionMsg) -> Result<Self, SessionMsg> {
        match msg {
            SessionMsg::Internal(Internal(Own::Output(batch))) => Ok(batch),
            other => Err(other),
        }
    }
}

/// What the answerer (or a human) sends (`DerivedActorRef<Answer>`).
impl From<Answer> for SessionMsg {
    fn from(answer: Answer) -> Self {
        SessionMsg::Answer(answer)
    }
}

impl TryFrom<SessionMsg> for Answer {
    type Error = SessionMsg;

    fn try_from(msg: SessionMsg) -> Result<Self, SessionMsg> {
        match msg {
            SessionMsg::Answer(answer) => Ok(answer),
            other => Err(other),
        }
    }
}
