//! The router: static routes, `@cap://` mentions and master plans. Every message
//! between sessions passes here and is recorded (journal and watchers); sessions never
//! talk directly. It also starts the run (the task to the `start` sessions), admits
//! turns under `max_concurrent`, stops the run on a budget breach (a session on its
//! own budget's), on Ctrl-C or on a failure under `on_error = "abort"`, and reports
//! how the run ended.
//!
//! # Records
//!
//! Every delivery is a `routed` record (`from`, `to`, `via`, and `key`, its idempotency
//! key `<to>#<n>`: the target's n-th delivery of the run): the fleet's task comes `from`
//! `fleet` (`via` `task`), a plan entry from `plan`, a route's or a mention's from the
//! sessions whose output it carries. The router waits for the journal to sync it (and its
//! plan entry's `in_progress`) before the session gets its prompt (`journal::Durable`,
//! once at the end of each router message for every delivery the message made), and
//! records its end as `delivered` (`key`, the session's `turn` and its `outcome`, or the
//! `error` that kept it from running; a route's delivery refused because its session
//! reached `max_turns` is the exit fleet validation asks a route cycle to have, not a
//! failure of the run). A route's join state is a `join` record (`route`, the sessions
//! `arrived` since it last fired, `fired`) whenever it changes. Before the task goes out
//! the router records the run's `session`s (name, agent, binding, cwd) and `worktree`s
//! (session, path, branch, base), synced with the task's delivery.
//!
//! # Queues and the order at a turn's end
//!
//! A session runs one turn at a time; what arrives while it is busy waits in its queue
//! (at most `QUEUE_MAX`, 16), in arrival order — except planned work: a master-plan entry
//! goes before the deliveries that arrived after the plan was adopted
//! (`QueueOrder::PlanFirst`, the fleet's `queue = "plan_first"`, default); `queue =
//! "arrival"` keeps arrival order throughout. When a turn completes the router, in this
//! order: marks its plan entry `completed`; adopts a master plan from it (the first one);
//! hands out the plan entries that are now ready (each to its session, started now or
//! queued); delivers the turn's `@cap://` mentions; fires the routes. A plan entry is
//! `in_progress` when its turn starts (a `plan_entry` record right after its `routed`
//! record), not when it is handed out.
//!
//! A route fires on `<session>.done` for each session in its `when`: a session is done
//! when it has completed a turn since the route last fired and is idle now — no turn
//! running, no delivery waiting for it (its queue or `max_concurrent` admission), none of
//! its own master-plan entries pending or in progress. A join (`when` of several) fires
//! once all are done; a race (`collect`, `mode = "first"`) is won by the first candidate
//! done: the router records `race_won` (`winner`, `cancelled`) and cancels the candidates
//! still running (their cancelled turn is no failure).

mod dispatch;
pub(crate) mod mentions;
pub(crate) mod plan;
pub(crate) mod spec;
pub(crate) mod subtasks;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::mpsc;

pub(crate) use dispatch::{Origin, RouterRecovery};
pub use spec::{CollectMode, Picker, QueueOrder, Route, RouteAction, RoutingSpec, Split};

use crate::session::{SessionError, SessionMsg, TurnResult};
use capfleet_wire::events::{Published, RunOutcome, Signal};

pub(crate) struct Router;

/// What the router needs.
pub(crate) struct RouterArgs {
    pub fleet: String,
    pub spec: RoutingSpec,
    /// Every session's name, in the fleet's order. Each is reached once it is up
    /// ([`RouterMsg::SessionUp`]).
    pub sessions: Vec<String>,
    /// Where router records go (the journal, the run's view).
    pub sinks: Vec<mpsc::Sender<Published>>,
    /// `on_error = "abort"`: the first failed turn stops the run.
    pub abort_on_error: bool,
    /// The run's span and metrics.
    pub telemetry: crate::telemetry::TreeTelemetry,
    /// The coding sessions' workspaces: a collect picker sees each candidate's diff.
    pub candidates: Option<std::sync::Arc<crate::workspace::candidates::Candidates>>,
    /// The budget: read before each turn starts and after each ends (its crossings
    /// stop the run or a session).
    pub budget: Option<ActorRef<crate::budget::BudgetMsg>>,
    /// Waits for the journal to have a record on disk: each delivery is, before the
    /// session gets it.
    pub durable: Option<capfleet_wire::events::Durable>,
    /// Records journaled (and synced) before the task goes out: the sessions and
    /// their workspaces.
    pub preamble: Vec<capfleet_wire::events::EventBody>,
    /// A resumed run: where the router's stream goes on from, what it replays.
    pub recovered: Option<RouterRecovery>,
    /// The sessions whose agent takes text mid-turn (`SessionSpec::steers`): a
    /// mention arriving while one runs a turn joins that turn.
    pub steering: std::collections::HashSet<String>,
}

pub(crate) enum RouterMsg {
    /// Hand the task to the start sessions.
    Start,
    /// A session is up: what waited for it goes out.
    SessionUp {
        name: String,
        actor: ActorRef<SessionMsg>,
    },
    /// No more sessions come up (every one is, or the run stopped starting them).
    NoMoreSessions,
    /// A turn ended.
    TurnDone {
        session: String,
        /// The delivery's idempotency key.
        key: String,
        origin: Origin,
        result: Result<TurnResult, SessionError>,
    },
    /// A session answered a steer (`dispatch::steer`): `taken` by its running turn,
    /// else the message becomes a turn of its own.
    SteerAnswered {
        session: String,
        key: String,
        taken: bool,
    },
    /// Stop the run (Ctrl-C, a signal, a disk fault): no new turn starts, every session is closed.
    /// `signal` (if one asked) is recorded in `run_ended`.
    Stop {
        outcome: RunOutcome,
        reason: String,
        signal: Option<Signal>,
    },
    /// A budget was crossed mid-turn (the budget's alert): the fleet's stops the run,
    /// a session's own stops that session.
    Budget(crate::budget::Crossing),
    /// Reply when the run has ended.
    WaitEnd(RpcReplyPort<RunOutcome>),
    /// The master plan as it stands (statuses followed), if one was adopted.
    MasterPlan(RpcReplyPort<Option<Vec<crate::protocol::PlanEntry>>>),
    /// The races decided so far.
    Races(RpcReplyPort<Vec<RaceWon>>),
    /// A chaos `self_kill` is due: journal its record on the router's stream and
    /// reply once the journal has synced it (capfleet is killed right after).
    SelfKill {
        seed_pos: u64,
        detail: String,
        reply: RpcReplyPort<()>,
    },
}

/// A decided race (`collect`, `mode = "first"`): who won, whom it cancelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaceWon {
    /// The route's index in the fleet's `routes`.
    pub route: usize,
    pub winner: String,
    /// The candidates still running when it won.
    pub cancelled: Vec<String>,
}

pub(crate) struct RouterState {
    core: dispatch::Core,
    waiters: Vec<RpcReplyPort<RunOutcome>>,
}

impl RouterState {
    fn answer_waiters(&mut self) {
        if let Some(outcome) = self.core.outcome {
            for w in self.waiters.drain(..) {
                let _caller_gone = w.send(outcome);
            }
        }
    }
}

impl Actor for Router {
    type Msg = RouterMsg;
    type State = RouterState;
    type Arguments = RouterArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<RouterMsg>,
        a: RouterArgs,
    ) -> Result<RouterState, ActorProcessingErr> {
        let sinks = a.sinks.clone();
        let mut core = dispatch::Core::new(
            a.fleet,
            a.spec,
            a.sessions,
            a.sinks,
            a.abort_on_error,
            a.telemetry,
            &a.steering,
        );
        if let Some(r) = a.recovered {
            core.resume(r, sinks);
        }
        core.candidates = a.candidates;
        core.budget = a.budget;
        core.durable = a.durable;
        core.preamble = a.preamble;
        Ok(RouterState {
            core,
            waiters: Vec::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<RouterMsg>,
        msg: RouterMsg,
        st: &mut RouterState,
    ) -> Result<(), ActorProcessingErr> {
        st.core.next_message();
        match msg {
            RouterMsg::Start => {
                st.core.start().await;
                st.core.release().await;
                st.core.note_pending();
            }
            RouterMsg::SessionUp { name, actor } => st.core.session_up(&myself, &name, actor),
            RouterMsg::NoMoreSessions => st.core.no_more_sessions(&myself),
            RouterMsg::TurnDone {
                session,
                key,
                origin,
                result,
            } => {
                // A live turn of a resumed run waits until the replay is done.
                if let Some((session, key, origin, result)) =
                    st.core.hold((session, key, origin, result))
                {
                    st.core.turn_done((session, key), origin, result).await;
                }
            }
            RouterMsg::SteerAnswered {
                session,
                key,
                taken,
            } => {
                st.core.steer_answered(&session, &key, taken).await;
                st.core.note_pending();
                st.core.check_end().await;
            }
            RouterMsg::Stop {
                outcome,
                reason,
                signal,
            } => {
                st.core.stop(outcome, &reason, signal).await;
                st.core.check_end().await;
            }
            RouterMsg::Budget(crossing) => {
                st.core.settle_budget().await;
                // Already acted on when the settled budget held it.
                st.core.on_crossing(&crossing, 0.0).await;
                st.core.check_end().await;
            }
            RouterMsg::WaitEnd(reply) => st.waiters.push(reply),
            RouterMsg::MasterPlan(reply) => {
                let _caller_gone = reply.send(st.core.master_plan());
            }
            RouterMsg::Races(reply) => {
                let _caller_gone = reply.send(st.core.races.clone());
            }
            RouterMsg::SelfKill {
                seed_pos,
                detail,
                reply,
            } => {
                st.core.record_self_kill(seed_pos, detail).await;
                let _caller_gone = reply.send(());
            }
        }
        // The message's deliveries: on disk, then to their sessions.
        st.core.send_asks(&myself).await;
        st.answer_waiters();
        Ok(())
    }
}
