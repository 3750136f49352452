//! The run's one event type: every CAP event of a session's agent plus the
//! orchestration events around them (state changes, turns, restarts), the router's
//! records (routes, refusals, plan entries, the run's end) and the workspace's
//! artifacts, each numbered per stream and tagged with its stream's URN and turn.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::SessionState;
use crate::protocol::{CapEvent, StopReason};
use crate::supervision::ExitCause;

/// Where a re-sent turn's result text starts (spec §10.6). The result is the
/// agent's new answer alone when the agent answers again from the start (it resumed
/// its session natively, or was prompted again without its partial answer); the
/// partial answer and its continuation only when the partial answer went out inside
/// the prompt. So a mention in a cut attempt's text is in the result once, never
/// once from the cut attempt and again from the agent's new answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TextFrom {
    /// The text so far goes on: it went out inside this prompt.
    Kept,
    /// The text so far is dropped: the agent answers again from the start.
    Dropped,
    /// A resumed run's cut turn: its partial text (journaled here, since this turn's
    /// own events do not hold it) went out inside this prompt and starts the text.
    Carried(String),
}

/// One published event.
#[derive(Debug, Clone, Serialize)]
pub struct SessionEvent {
    /// Per-stream (per-URN) sequence number, from 1, without gaps.
    pub seq: u64,
    /// The stream's URN: a session's `cap://<fleet>/<session>`, or the fleet's
    /// `…/router` and `…/workspace` streams.
    pub urn: Arc<str>,
    /// The turn this event belongs to, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Wall-clock time, milliseconds since the Unix epoch.
    pub ts_ms: u64,
    #[serde(flatten)]
    pub body: EventBody,
}

/// The event itself.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)] // `Cap` is nearly every event.
pub enum EventBody {
    /// A CAP core event from (or to) the agent.
    Cap { event: CapEvent },
    /// The session moved between lifecycle states (spec §9).
    State {
        from: SessionState,
        to: SessionState,
    },
    /// A turn started (attempt `attempt`: 2 and up after a restart), with the prompt
    /// sent (the journal keeps a large one by reference, [`Prompt`]).
    TurnStarted {
        prompt_bytes: usize,
        attempt: u32,
        #[serde(flatten)]
        prompt: Prompt,
        /// Where this attempt's result text starts, when it is not a fresh turn's
        /// first attempt (journaled: a resume rebuilds the text the live run built).
        #[serde(skip_serializing_if = "Option::is_none")]
        text_from: Option<TextFrom>,
    },
    /// The agent named the session to resume it by (a resume id learned mid-turn;
    /// `cap.session.ready` carries the one known at start).
    ResumeId { id: String },
    /// A turn ended.
    TurnEnded {
        stop_reason: StopReason,
        outcome: TurnOutcome,
        duration_ms: u64,
    },
    /// The driver ended and is restarted after `delay_ms` (restart number `attempt`
    /// inside the policy window).
    Restart {
        cause: ExitCause,
        attempt: u32,
        delay_ms: u64,
    },
    /// A rate limit paused the turn (pause number `pause` since the last completed
    /// turn; not a restart): it is re-issued at `until_ms` (Unix ms), `delay_ms` from
    /// now, a time the agent gave (`source` `reset`, or `rate_limit_event` from Claude
    /// Code's frame) or a backoff step (`backoff`); `limit_type` is the limit the
    /// agent named (`five_hour`, `seven_day`, …).
    Paused {
        delay_ms: u64,
        until_ms: u64,
        source: crate::supervision::rate_limit::PauseSource,
        #[serde(skip_serializing_if = "Option::is_none")]
        limit_type: Option<String>,
        pause: u32,
        reason: String,
    },
    /// The session asked its agent to stop the running turn (a user, the budget, the
    /// run stopping); the turn's `turn_ended` follows when the agent has stopped.
    CancelRequested { reason: String },
    /// The session failed for good (meltdown, unrecoverable start error).
    Failed { reason: String },
    /// The orchestrator acted (or refused to act) on the agent's behalf through the
    /// reverse RPC: a terminal started or killed, a file written or deleted.
    Audit {
        #[serde(flatten)]
        record: crate::rpc::Audited,
    },
    /// The router handed text to a session (published under the router's URN), and
    /// the journal synced it before the session got it. `key` is the delivery's
    /// idempotency key (`<to>#<n>`: the session's n-th delivery of the run).
    Routed {
        from: Vec<String>,
        to: String,
        via: RouteVia,
        bytes: usize,
        key: String,
    },
    /// The router steered a peer's message into the turn its session was running
    /// (CAP queued input: the agent takes text mid-turn), on disk before the session
    /// got it; keyed as a delivery is. Not taken (the turn ended first), it becomes a
    /// delivery of its own under the same key: its `routed` record follows.
    Steered {
        from: Vec<String>,
        to: String,
        via: RouteVia,
        bytes: usize,
        key: String,
    },
    /// The turn a delivery started ended, as the router took it: the session's turn
    /// number and its outcome, or why no turn ran (`error`).
    Delivered {
        key: String,
        to: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        turn: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<TurnOutcome>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A route's join state changed: the `when` sessions done since it last fired
    /// (`route`: its index in the fleet's `routes`); `fired` when that made it fire
    /// (the arrivals start again from none).
    Join {
        route: usize,
        arrived: Vec<String>,
        fired: bool,
    },
    /// A session of the run, as it was started (recorded before the task goes out),
    /// with the sandbox every process of it is spawned in (`sandbox = "workspace"`:
    /// backend, network, what it may write and read, what it cannot see, what the
    /// backend does not enforce; each spawn adds a private `TMPDIR`). A resumed run
    /// keeps the sandbox journaled here.
    Session {
        name: String,
        agent: String,
        binding: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        sandbox: Option<Box<crate::process::sandbox::Sandbox>>,
    },
    /// A session's workspace, as provisioned (recorded before the task goes out):
    /// a resumed run reuses it as it is.
    Worktree {
        session: String,
        path: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        branch: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        base: Option<String>,
    },
    /// A `--commit` of a session's worktree is about to be made on its branch, whose
    /// head is `parent` (published on the workspace stream and synced first): `key`
    /// (`commit:<session>`) is its idempotency key.
    CommitStarted {
        key: String,
        session: String,
        parent: String,
    },
    /// That commit was made (`sha`); `found` when a resume found it made by a run cut
    /// before it recorded it (the branch's head, on `parent`, with its message).
    Committed {
        key: String,
        session: String,
        sha: String,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        found: bool,
    },
    /// Every workspace was collected after the run's end (diffs, commits, tests): a
    /// run cut before this is resumed to finish it. `sessions`: how many.
    Collected { sessions: usize },
    /// The router refused a delivery (queue full, unknown target, run stopping).
    Refused {
        from: String,
        to: String,
        reason: String,
    },
    /// A route could not fire (e.g. its `cap-subtasks` block is missing): `route` is
    /// its index in the fleet's `routes`; `None` for what is no route (a rejected
    /// master plan).
    RouteFailed {
        #[serde(skip_serializing_if = "Option::is_none")]
        route: Option<usize>,
        reason: String,
    },
    /// A race (`collect`, `mode = "first"`) was decided: `winner` was done first, the
    /// candidates still running were cancelled (`route`: its index in the fleet's `routes`).
    RaceWon {
        route: usize,
        winner: String,
        cancelled: Vec<String>,
    },
    /// A master-plan entry changed status.
    PlanEntry {
        id: String,
        assigned_to: String,
        status: crate::protocol::PlanStatus,
    },
    /// A budget was crossed (published under the router's URN): the fleet's
    /// (`scope` "fleet": the run stops) or a session's own (`scope` its URN: that
    /// session stops). `urn` and `turn` name the usage that crossed it, the turn in
    /// flight; `spent_usd` is the spend against the limit at that moment.
    BudgetExceeded {
        scope: String,
        limit_usd: f64,
        spent_usd: f64,
        overshoot_usd: f64,
        urn: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        turn: Option<u32>,
    },
    /// The run stops (a signal, a fault, a budget, `on_error = "abort"`): what the
    /// router records from here on is the stop's (a resume replays what came before).
    Stopping { outcome: RunOutcome, reason: String },
    /// A chaos fault (`[chaos]`, `--chaos`), journaled before it is applied: on the
    /// target session's stream (its current turn), or for `self_kill` on the router's
    /// with `target` "capfleet" (synced before the kill). `seed_pos` is the fault's
    /// place in the seeded sequence (see `chaos::schedule`); `detail` says what was
    /// done (`SIGKILL to group 4242`); `group`, a signal fault's target process group
    /// (the agent's, which the sim records beside each result it writes: the chaos
    /// report finds the fault that cut a result in flight by it).
    Chaos {
        fault: crate::chaos::FaultKind,
        target: String,
        seed_pos: u64,
        detail: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        group: Option<i32>,
    },
    /// The run was resumed (`capfleet run --resume`) from its journal: the records
    /// read, a torn last line left out (its bytes), the deliveries whose recorded
    /// results were replayed, those re-issued (their turn never ended), the fleet's
    /// change accepted with `--force`, and the sessions whose sandbox was resolved
    /// anew for this host (a NATS takeover: the same confinement, this host's paths),
    /// as they run now (a later resume reads them over their `session` records').
    Resumed {
        records: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        torn_bytes: Option<u64>,
        replayed: usize,
        reissued: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        fleet_changed: Option<String>,
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        sandboxes: std::collections::BTreeMap<String, crate::process::sandbox::Sandbox>,
    },
    /// A client outside the run called a tool on it (an MCP client of `capfleet mcp`
    /// or of `serve`'s `/mcp`), published under the fleet's `…/mcp` stream: who
    /// called (a token's name, or the local user), which tool, the size of its
    /// arguments (never the arguments: they may hold a fleet's text or an answer), and
    /// whether it succeeded (`error`: the refusal's code).
    McpCall {
        by: String,
        tool: String,
        args_bytes: usize,
        ok: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The run ended; `signal` when a signal stopped it (the first one received).
    RunEnded {
        outcome: RunOutcome,
        #[serde(skip_serializing_if = "Option::is_none")]
        signal: Option<Signal>,
    },
}

/// A turn's prompt as a record holds it: the text itself (`"prompt": "…"`), or, in
/// the journal past [`Prompt::INLINE_MAX`] bytes, a reference to a content-addressed
/// file beside the journal (`"prompt_ref": "sha256:<hex>"`, in `blobs/<hex>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Prompt {
    #[serde(rename = "prompt")]
    Text(Arc<str>),
    #[serde(rename = "prompt_ref")]
    Stored(String),
}

impl Prompt {
    /// Prompts up to this many bytes stay inline in the journal.
    pub const INLINE_MAX: usize = 4096;
}

/// How text reached a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteVia {
    /// The fleet's task, to a `start` session.
    Task,
    Route,
    FanOut,
    Subtask,
    Collect,
    Mention,
    Plan,
}

impl RouteVia {
    /// As serialized (`task`, `route`, `fan_out`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            RouteVia::Task => "task",
            RouteVia::Route => "route",
            RouteVia::FanOut => "fan_out",
            RouteVia::Subtask => "subtask",
            RouteVia::Collect => "collect",
            RouteVia::Mention => "mention",
            RouteVia::Plan => "plan",
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    Completed,
    SessionFailed,
    BudgetExceeded,
    Interrupted,
    /// A write of the run's record failed (journal, transcript, artifact).
    DiskFailed,
    /// A part of the supervision tree the run cannot go on without died (the
    /// journal, the budget, the fleet: `crate::death`).
    TreeFailed,
}

/// A signal that stops a run (or a chat) from outside, as journaled (`SIGTERM`).
/// `SIGINT` stops it cooperatively (every turn cancelled, every agent closed);
/// `SIGTERM` and `SIGHUP` kill every agent's group at once; a second signal of any
/// kind cuts the kill grace short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Signal {
    #[serde(rename = "SIGINT")]
    Int,
    #[serde(rename = "SIGTERM")]
    Term,
    #[serde(rename = "SIGHUP")]
    Hup,
}

impl Signal {
    /// The signal's number.
    pub fn number(self) -> i32 {
        match self {
            Signal::Int => libc::SIGINT,
            Signal::Term => libc::SIGTERM,
            Signal::Hup => libc::SIGHUP,
        }
    }

    /// Its name, as journaled.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
            Signal::Hup => "SIGHUP",
        }
    }

    /// The exit status of a process ended by it: 128 + its number (130, 143, 129).
    pub fn exit_code(self) -> u8 {
        u8::try_from(128 + self.number()).unwrap_or(u8::MAX)
    }

    /// `SIGINT`: stop cooperatively rather than kill.
    pub fn is_interrupt(self) -> bool {
        self == Signal::Int
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a turn ended, from the orchestrator's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnOutcome {
    Completed,
    Cancelled,
    Failed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_via_names_are_the_serialized_ones() {
        use RouteVia::*;
        for v in [Task, Route, FanOut, Subtask, Collect, Mention, Plan] {
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
        }
    }

    #[test]
    fn a_route_failure_names_its_route_only_when_there_is_one() {
        let record = |route| {
            let body = EventBody::RouteFailed {
                route,
                reason: "r".into(),
            };
            serde_json::to_value(body).unwrap()
        };
        assert_eq!(
            record(Some(2)),
            serde_json::json!({"type": "route_failed", "route": 2, "reason": "r"})
        );
        assert_eq!(
            record(None),
            serde_json::json!({"type": "route_failed", "reason": "r"})
        );
    }
}
