//! The router's state and decisions: who runs next, with what text.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use ractor::ActorRef;
use tokio::sync::mpsc;

use super::mentions::{mentions, target_of};
use super::plan::MasterPlan;

mod budget;
mod ended;
mod keys;
mod metrics;
mod plan;
mod reach;
mod replaying;
mod routes;
mod self_kill;
mod steer;
use super::spec::{QueueOrder, RoutingSpec};
use crate::budget::{BudgetMsg, BudgetScope};
use crate::protocol::{CancelScope, CapEvent, HasMeta, PlanStatus};
use crate::session::{SessionError, SessionMsg, TurnResult};
use crate::telemetry::TreeTelemetry;
use capfleet_wire::events::trace::int;
use capfleet_wire::events::{
    EventBody, Published, Publisher, RouteVia, RunOutcome, Signal, TurnOutcome, urn,
};
pub(crate) use replaying::RouterRecovery;

mod collect;

/// Deliveries waiting for a busy session, at most (tai's `CAP_ROUTE_QUEUE_MAX`).
pub(crate) const QUEUE_MAX: usize = 16;

/// The `from` of the fleet's task as routed to the start sessions.
pub(crate) const FLEET_SOURCE: &str = "fleet";

/// Why a turn was started, so its end can be accounted for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    Task,
    Route,
    Mention,
    Plan(usize),
}

/// Text for a session.
#[derive(Debug, Clone)]
pub(super) struct Delivery {
    pub from: Vec<String>,
    pub text: String,
    pub via: RouteVia,
    pub origin: Origin,
    /// The key it was given as a steer its session did not take (`steer`): it keeps
    /// it as the turn it runs instead.
    pub key: Option<String>,
}

/// A delivery waiting for its busy session, stamped with when it arrived.
struct Queued {
    arrived: u64,
    d: Delivery,
}

pub(super) struct Slot {
    /// The session, once it is up (`reach`).
    pub actor: Option<ActorRef<SessionMsg>>,
    /// The ask of a turn launched before the session was up.
    waiting: Option<reach::Ask>,
    /// What was sent the session before it was up, sent after that ask.
    deferred: Vec<SessionMsg>,
    running: Option<Origin>,
    queue: VecDeque<Queued>,
    /// The last completed turn's text.
    output: Option<String>,
    failed: bool,
    /// Stopped by its own budget: no further turn.
    over_budget: bool,
    /// Its agent takes text mid-turn (`SessionSpec::steers`): a mention arriving
    /// while it runs a turn joins that turn (`steer`).
    steers: bool,
    /// Its running turn is a resumed run's delivery with a recorded end (parked).
    parked: bool,
    /// Steers sent and not yet answered, by key: what they carry, for the turn of
    /// their own they become if the session does not take them.
    steering: Vec<(String, Delivery)>,
}

pub(super) struct Core {
    fleet: String,
    /// The router's stream (`cap://<fleet>/router`): its records.
    bus: Publisher,
    spec: RoutingSpec,
    pub slots: HashMap<String, Slot>,
    order: Vec<String>,
    running: usize,
    admission: VecDeque<(String, Delivery)>,
    /// Per route: `when` sessions that finished since the route last fired.
    done_since: Vec<HashSet<String>>,
    collected: Vec<bool>,
    plan: Option<MasterPlan>,
    /// Deliveries so far (each queued one is stamped with its number).
    arrivals: u64,
    /// `arrivals` when the master plan was adopted: its entries were there before
    /// any delivery stamped later.
    plan_arrived: u64,
    abort_on_error: bool,
    stopped: Option<RunOutcome>,
    /// The signal that stopped the run, if one did.
    signal: Option<Signal>,
    any_failed: bool,
    /// Race candidates the router cancelled itself: their cancelled turn is no failure.
    race_losers: HashSet<String>,
    /// The races decided so far.
    pub races: Vec<super::RaceWon>,
    pub outcome: Option<RunOutcome>,
    /// The run's span (routes hang under it) and metrics (pending deliveries).
    telemetry: TreeTelemetry,
    /// The coding sessions' workspaces, for collect pickers.
    pub candidates: Option<Arc<crate::workspace::candidates::Candidates>>,
    /// The budget, read (settled) before each turn starts and after each ends.
    pub budget: Option<ActorRef<BudgetMsg>>,
    /// The limits whose crossing was acted on.
    budget_acted: HashSet<BudgetScope>,
    /// A session crossed its own budget.
    session_over_budget: bool,
    /// Waits for the journal to have a record on disk (deliveries take effect after it).
    pub durable: Option<capfleet_wire::events::Durable>,
    /// Records journaled before the task goes out (the sessions, their workspaces).
    pub preamble: Vec<EventBody>,
    /// Deliveries keyed so far, per target: the next key is `<to>#<n + 1>`.
    pub(super) keys: HashMap<String, u32>,
    /// A resumed run's replay of the journal, until its recorded ends are taken.
    pub(super) replay: Option<replaying::Replay>,
    /// No session comes up any more: a delivery to one not up ends as closed.
    sessions_ended: bool,
    /// Sessions whose ask waits for the end of the router's message (to be on disk).
    unsent: Vec<String>,
    /// Steers (session, key) waiting for the end of the router's message, likewise.
    unsent_steers: Vec<(String, String)>,
    /// The budget was settled during the router's current message.
    settled: bool,
}

impl Core {
    pub(super) fn new(
        fleet: String,
        spec: RoutingSpec,
        sessions: Vec<String>,
        sinks: Vec<mpsc::Sender<Published>>,
        abort_on_error: bool,
        telemetry: TreeTelemetry,
        steering: &HashSet<String>,
    ) -> Self {
        let order = sessions.clone();
        let slots = sessions
            .into_iter()
            .map(|name| {
                let slot = Slot {
                    actor: None,
                    waiting: None,
                    deferred: Vec::new(),
                    running: None,
                    queue: VecDeque::new(),
                    output: None,
                    failed: false,
                    over_budget: false,
                    steers: steering.contains(&name),
                    parked: false,
                    steering: Vec::new(),
                };
                (name, slot)
            })
            .collect();
        let routes = spec.routes.len();
        Core {
            bus: Publisher::new(
                urn(&fleet, capfleet_wire::events::ROUTER_URN_SEGMENT),
                sinks,
            ),
            fleet,
            spec,
            slots,
            order,
            running: 0,
            admission: VecDeque::new(),
            done_since: vec![HashSet::new(); routes],
            collected: vec![false; routes],
            plan: None,
            arrivals: 0,
            plan_arrived: 0,
            abort_on_error,
            stopped: None,
            signal: None,
            any_failed: false,
            race_losers: HashSet::new(),
            races: Vec::new(),
            outcome: None,
            telemetry,
            candidates: None,
            budget: None,
            budget_acted: HashSet::new(),
            session_over_budget: false,
            durable: None,
            preamble: Vec::new(),
            keys: HashMap::new(),
            replay: None,
            sessions_ended: false,
            unsent: Vec::new(),
            unsent_steers: Vec::new(),
            settled: false,
        }
    }

    /// Every mediation is a record in the journal (and for the run's watchers) — but
    /// one a resumed run's replay derives again, which is there already.
    pub(super) async fn record(&mut self, body: EventBody) {
        if self.replay.as_mut().is_some_and(replaying::Replay::skip) {
            return;
        }
        self.bus.publish(None, body).await;
    }

    pub(super) async fn start(&mut self) {
        self.record_resumed().await;
        for body in std::mem::take(&mut self.preamble) {
            self.record(body).await;
        }
        let task = self.spec.task.clone();
        for name in self.spec.start.clone() {
            let d = Delivery {
                from: vec![FLEET_SOURCE.into()],
                text: task.clone(),
                via: RouteVia::Task,
                origin: Origin::Task,
                key: None,
            };
            self.deliver(&name, d).await;
        }
        self.check_end().await;
    }

    /// Hand `d` to `to`: now if it is idle and admission allows, else queue it.
    async fn deliver(&mut self, to: &str, d: Delivery) {
        let from = d.from.join("+");
        if let Some(reason) = self.refusal(to) {
            self.record(EventBody::Refused {
                from,
                to: to.into(),
                reason,
            })
            .await;
            return;
        }
        let Some(slot) = self.slots.get_mut(to) else {
            return;
        };
        self.arrivals += 1;
        // A delivery already waiting for admission makes it busy too: one turn at a time.
        let admitting = self.admission.iter().any(|(name, _)| name == to);
        let busy = slot.running.is_some() || !slot.queue.is_empty() || admitting;
        // A peer's message to a session mid-turn joins that turn where its agent
        // takes queued input (nothing waits before it).
        if slot.running.is_some() && slot.queue.is_empty() && !admitting && slot.steerable(&d) {
            self.steer(to, d).await;
            return;
        }
        if busy {
            if slot.queue.len() >= QUEUE_MAX {
                let reason = format!("the session's pending queue is full ({QUEUE_MAX})");
                self.record(EventBody::Refused {
                    from,
                    to: to.into(),
                    reason,
                })
                .await;
            } else {
                // Planned work goes before what arrived after the plan was adopted,
                // unless the fleet asks for arrival order.
                let at = match d.origin {
                    Origin::Plan(_) if self.spec.queue == QueueOrder::PlanFirst => {
                        slot.queue.iter().position(|q| {
                            !matches!(q.d.origin, Origin::Plan(_)) && q.arrived > self.plan_arrived
                        })
                    }
                    _ => None,
                };
                let q = Queued {
                    arrived: self.arrivals,
                    d,
                };
                match at {
                    Some(i) => slot.queue.insert(i, q),
                    None => slot.queue.push_back(q),
                }
            }
            return;
        }
        let limit = self.spec.max_concurrent;
        if limit > 0 && self.running >= limit {
            self.admission.push_back((to.to_owned(), d));
            return;
        }
        self.launch(to, d).await;
    }

    /// Why `to` takes no delivery now, if it does not.
    fn refusal(&self, to: &str) -> Option<String> {
        if let Some(outcome) = self.stopped {
            return Some(format!("the run is stopping ({outcome:?})"));
        }
        match self.slots.get(to) {
            None => Some(format!("no session `{to}` in fleet {}", self.fleet)),
            Some(slot) if slot.failed => Some("the session has failed".to_owned()),
            Some(slot) if slot.over_budget => Some("the session's budget is spent".to_owned()),
            Some(_) => None,
        }
    }

    async fn launch(&mut self, to: &str, d: Delivery) {
        // No turn starts past a limit: the budget's verdict on what is spent so far.
        self.settle_budget().await;
        if let Some(reason) = self.refusal(to) {
            let from = d.from.join("+");
            self.record(EventBody::Refused {
                from,
                to: to.into(),
                reason,
            })
            .await;
            if let Origin::Plan(i) = d.origin {
                self.set_plan(i, PlanStatus::Blocked).await;
            }
            return;
        }
        let Some(slot) = self.slots.get_mut(to) else {
            return;
        };
        slot.running = Some(d.origin.clone());
        self.running += 1;
        let (origin, prompt) = (d.origin.clone(), d.text.clone());
        let kept_key = d.key.clone();
        // The route lasts until the turn it started ends; the turn links back to it.
        let route = tracing::info_span!(
            parent: &self.telemetry.span, "route",
            cap.route.from = %d.from.join("+"),
            cap.route.to = to,
            cap.route.via = d.via.as_str(),
            cap.route.bytes = int(d.text.len()),
        );
        let key = kept_key.unwrap_or_else(|| self.next_key(to));
        self.record(EventBody::Routed {
            from: d.from,
            to: to.into(),
            via: d.via,
            bytes: d.text.len(),
            key: key.clone(),
        })
        .await;
        // A plan entry is in progress from its turn's start, not from its dispatch.
        if let Origin::Plan(i) = origin {
            self.set_plan(i, PlanStatus::InProgress).await;
        }
        // A resumed run's delivery whose turn ended: its recorded result, in its order.
        if self.park(&key, to, &origin) {
            if let Some(slot) = self.slots.get_mut(to) {
                slot.parked = true;
            }
            return;
        }
        // On disk before the session has it (sent at the end of the router's message):
        // a resume never delivers it again.
        let ask = reach::Ask {
            key,
            prompt,
            origin,
            route,
        };
        self.ask(to, ask);
    }

    pub(super) async fn turn_done(
        &mut self,
        (session, key): (String, String),
        origin: Origin,
        result: Result<TurnResult, SessionError>,
    ) {
        self.record_delivered(key, &session, &result).await;
        self.running = self.running.saturating_sub(1);
        if let Some(slot) = self.slots.get_mut(&session) {
            slot.running = None;
            slot.parked = false;
        }
        // What the turn spent decides before anything follows from it (or the run ends).
        self.settle_budget().await;
        let lost_race = self.race_losers.remove(&session);
        match result {
            Ok(r) if r.outcome == TurnOutcome::Completed => {
                self.completed(&session, origin, r).await
            }
            other => self.not_completed(&session, origin, other, lost_race).await,
        }
        self.pump().await;
        self.note_pending();
        self.check_end().await;
    }

    async fn completed(&mut self, session: &str, origin: Origin, r: TurnResult) {
        if let Some(slot) = self.slots.get_mut(session) {
            slot.output = Some(r.text.clone());
        }
        if let Origin::Plan(i) = origin {
            self.set_plan(i, PlanStatus::Completed).await;
        }
        self.adopt_plan(&r).await;
        // Planned work the turn made ready is handed out before its mentions; in
        // arrival order after them (they were written before the turn ended).
        let plan_first = self.spec.queue == QueueOrder::PlanFirst;
        if plan_first {
            self.dispatch_plan().await;
        }
        for m in mentions(&r.text) {
            let d = Delivery {
                from: vec![session.into()],
                text: format!("Message from cap://{}/{session}: {}", self.fleet, m.message),
                via: RouteVia::Mention,
                origin: Origin::Mention,
                key: None,
            };
            self.deliver(&m.to, d).await;
        }
        for event in &r.events {
            if let CapEvent::TextChunk(t) = event
                && let Some(to) = t.message_to()
            {
                let d = Delivery {
                    from: vec![session.into()],
                    text: t.text.clone(),
                    via: RouteVia::Mention,
                    origin: Origin::Mention,
                    key: None,
                };
                self.deliver(target_of(to), d).await;
            }
        }
        if !plan_first {
            self.dispatch_plan().await;
        }
        self.fire_routes(session).await;
    }

    /// Start what waits: each idle session's own queue, then the admission queue.
    async fn pump(&mut self) {
        for i in 0..self.order.len() {
            let next = match self.slots.get_mut(&self.order[i]) {
                Some(s) if s.running.is_none() => s.queue.pop_front().map(|q| q.d),
                _ => None,
            };
            if let Some(d) = next {
                let name = self.order[i].clone();
                let limit = self.spec.max_concurrent;
                if limit > 0 && self.running >= limit {
                    self.admission.push_back((name, d));
                } else {
                    self.launch(&name, d).await;
                }
            }
        }
        while self.spec.max_concurrent == 0 || self.running < self.spec.max_concurrent {
            let Some((name, d)) = self.admission.pop_front() else {
                break;
            };
            if self.stopped.is_some() {
                continue;
            }
            self.launch(&name, d).await;
        }
    }

    /// Stop dispatching; close every session. The first stop decides the outcome
    /// (and the signal recorded).
    pub(super) async fn stop(&mut self, outcome: RunOutcome, reason: &str, signal: Option<Signal>) {
        if self.stopped.is_some() {
            return;
        }
        tracing::warn!(?outcome, reason, "stopping the run");
        self.record_stopping(outcome, reason).await;
        self.stopped = Some(outcome);
        self.signal = signal;
        self.admission.clear();
        for slot in self.slots.values_mut() {
            slot.queue.clear();
            slot.cast(SessionMsg::Cancel {
                scope: CancelScope::Session,
                reason: reason.to_owned(),
            });
        }
    }

    pub(super) async fn check_end(&mut self) {
        if self.outcome.is_some() || self.running > 0 || !self.admission.is_empty() {
            return;
        }
        // A steer not yet answered may still become a turn of its own.
        if self
            .slots
            .values()
            .any(|s| !s.queue.is_empty() || !s.steering.is_empty())
        {
            return;
        }
        let outcome = match self.stopped {
            Some(o) => o,
            None if self.session_over_budget => RunOutcome::BudgetExceeded,
            None if self.any_failed => RunOutcome::SessionFailed,
            None => RunOutcome::Completed,
        };
        self.outcome = Some(outcome);
        let signal = self.signal;
        self.record(EventBody::RunEnded { outcome, signal }).await;
    }
}
