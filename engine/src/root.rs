//! The root of the supervision tree and the handle the application holds.
//!
//! ```text
//! root
//! ├── journal     (when a path is given)
//! ├── budget      usage per session and in total
//! ├── telemetry   counters: events by kind, sessions by state, turns, restarts
//! ├── answerer    (its research sessions run under the fleet)
//! └── fleet       one session per child, each supervising its driver
//! ```
//!
//! Journal, budget and telemetry see every session's events through bounded
//! channels. The router joins this tree with fleets. Every death of a child is reported
//! and handled as [`crate::death`] says: the answerer is restarted (with its policy,
//! human and research spec) and told the fleet again; a dead journal, budget or fleet
//! fails the run (whoever runs the tree is told through [`RootArgs::deaths`]); a dead
//! telemetry or metrics tap degrades the run. A dead child is never handed out again:
//! asking for it is [`TreeError::Died`].

use ractor::{
    Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort, SpawnErr, SupervisionEvent,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::answerer::research::ResearchSpec;
use crate::answerer::{Answerer, AnswererArgs, AnswererMsg, HumanQuestion, Policy};
use crate::budget::{Budget, BudgetBook, BudgetMsg, BudgetSnapshot};
use crate::death::{self, Child, ChildDeath, DeathSink};
use crate::error::TreeError;
use crate::fault::FaultSink;
use crate::fleet::{Fleet, FleetArgs, FleetEvent, FleetMsg};
use crate::journal::{Journal, JournalArgs, JournalMsg, JournalSpec, JournalTally};
use crate::session::{SessionMsg, SessionSpec};
use crate::tap::TapMsg;
use crate::telemetry::feed::{MetricsFeed, MetricsTap};
use crate::telemetry::metrics::Metrics;
use crate::telemetry::{Counters, Telemetry, TelemetryMsg, TreeTelemetry};
use capfleet_wire::events::Durable;
use capfleet_wire::events::Published;

pub(crate) struct Root;

/// How long the root's shutdown waits for its children to stop.
const CHILDREN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// How to build the tree.
pub struct RootArgs {
    pub fleet_name: String,
    /// Write the journal here (JSONL), at most this large.
    pub journal: Option<JournalSpec>,
    /// Where a failed write of the journal is reported (the run fails with it).
    pub faults: Option<FaultSink>,
    /// Where a child's death is reported (the run stops on a fatal one); without
    /// one, deaths are logged, traced and counted only.
    pub deaths: Option<DeathSink>,
    /// How permissions are decided before anyone is asked.
    pub policy: Policy,
    /// The budget's limits and where it alerts (default: no limits).
    pub budget: BudgetBook,
    /// Where asks go when a human is attached (else they are answered fail-safe).
    pub human: Option<mpsc::Sender<HumanQuestion>>,
    /// The research answerer, if the fleet has one (`[answerer]`).
    pub research: Option<ResearchSpec>,
    /// Where the fleet reports sessions ending.
    pub fleet_events: Option<mpsc::Sender<FleetEvent>>,
    /// The span sessions hang under, and the metrics to feed (if any).
    pub telemetry: TreeTelemetry,
}

impl RootArgs {
    /// A tree for fleet `fleet_name` with every default: no journal, no fault sink,
    /// the default policy, no budget limits, no human, no fleet events, no telemetry.
    pub fn new(fleet_name: impl Into<String>) -> Self {
        Self {
            fleet_name: fleet_name.into(),
            journal: None,
            faults: None,
            deaths: None,
            policy: Policy::default(),
            budget: BudgetBook::default(),
            human: None,
            fleet_events: None,
            telemetry: TreeTelemetry::default(),
            research: None,
        }
    }
}

/// A child of the root, or how it died.
type Live<M> = Result<ActorRef<M>, ChildDeath>;

pub(crate) enum RootMsg {
    Fleet(RpcReplyPort<ActorRef<FleetMsg>>),
    Budget(RpcReplyPort<Live<BudgetMsg>>),
    Telemetry(RpcReplyPort<Live<TelemetryMsg>>),
    /// A sender into the journal (for records that are not a session's), if any.
    JournalTap(RpcReplyPort<Result<Option<mpsc::Sender<Published>>, ChildDeath>>),
    /// A handle to wait for the journal to be on disk, if there is a journal.
    JournalDurable(RpcReplyPort<Result<Option<Durable>, ChildDeath>>),
    /// Close every session, finish the journal; reply with what it kept.
    Shutdown(RpcReplyPort<JournalTally>),
}

pub(crate) struct RootState {
    /// `None` when the tree keeps no journal.
    journal: Option<Live<JournalMsg>>,
    budget: Live<BudgetMsg>,
    telemetry: Live<TelemetryMsg>,
    /// The metrics tap, while it lives (only with metrics).
    metrics_tap: Option<ActorCell>,
    answerer: ActorRef<AnswererMsg>,
    fleet: ActorRef<FleetMsg>,
    /// What a restarted answerer starts from.
    answerer_args: AnswererSeed,
    /// Where deaths are reported.
    reports: Reports,
    /// Shutting down: the children stopping now are no deaths.
    closing: bool,
}

/// Where the root reports a child's death.
struct Reports {
    span: tracing::Span,
    metrics: Option<Metrics>,
    deaths: Option<DeathSink>,
}

impl RootState {
    /// Which child `cell` is, if it is one (the router is linked here too).
    fn child(&self, cell: &ActorCell) -> Option<Child> {
        let id = cell.get_id();
        [
            (Child::Answerer, Some(self.answerer.get_cell())),
            (Child::Fleet, Some(self.fleet.get_cell())),
            (Child::Budget, cell_of(&self.budget)),
            (Child::Telemetry, cell_of(&self.telemetry)),
            (Child::Journal, self.journal.as_ref().and_then(cell_of)),
            (Child::Metrics, self.metrics_tap.clone()),
        ]
        .into_iter()
        .find_map(|(child, c)| c.is_some_and(|c| c.get_id() == id).then_some(child))
    }

    /// `child` died of `cause`: report it, hand it out no more, and handle it. An
    /// error fails the root (the fleet's death).
    async fn bury(
        &mut self,
        myself: &ActorRef<RootMsg>,
        child: Child,
        cause: String,
    ) -> Result<(), ActorProcessingErr> {
        let death = ChildDeath { child, cause };
        let r = &self.reports;
        death::report(&death, &r.span, r.metrics.as_ref(), r.deaths.as_ref());
        match child {
            Child::Answerer => {
                self.answerer = spawn_answerer(myself, &self.answerer_args).await?;
                self.answerer.cast(AnswererMsg::Fleet(self.fleet.clone()))?;
            }
            Child::Journal => self.journal = Some(Err(death)),
            Child::Budget => self.budget = Err(death),
            Child::Telemetry => self.telemetry = Err(death),
            Child::Metrics => self.metrics_tap = None,
            Child::Fleet => return Err(death.into()),
        }
        Ok(())
    }
}

fn cell_of<M>(live: &Live<M>) -> Option<ActorCell> {
    live.as_ref().ok().map(ActorRef::get_cell)
}

/// The answerer's start arguments, kept to restart it.
struct AnswererSeed {
    policy: Policy,
    human: Option<mpsc::Sender<HumanQuestion>>,
    research: Option<ResearchSpec>,
}

async fn spawn_answerer(
    root: &ActorRef<RootMsg>,
    seed: &AnswererSeed,
) -> Result<ActorRef<AnswererMsg>, SpawnErr> {
    let args = AnswererArgs {
        policy: seed.policy.clone(),
        human: seed.human.clone(),
        research: seed.research.clone(),
    };
    let (a, _) = Actor::spawn_linked(None, Answerer, args, root.get_cell()).await?;
    Ok(a)
}

impl Actor for Root {
    type Msg = RootMsg;
    type State = RootState;
    type Arguments = RootArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<RootMsg>,
        args: RootArgs,
    ) -> Result<RootState, ActorProcessingErr> {
        let journal = match args.journal {
            Some(spec) => Some(
                Actor::spawn_linked(
                    None,
                    Journal,
                    JournalArgs {
                        spec,
                        faults: args.faults,
                    },
                    myself.get_cell(),
                )
                .await?
                .0,
            ),
            None => None,
        };
        let (budget, _) =
            Actor::spawn_linked(None, Budget::default(), args.budget, myself.get_cell()).await?;
        let (telemetry, _) = Actor::spawn_linked(
            None,
            Telemetry::default(),
            Counters::default(),
            myself.get_cell(),
        )
        .await?;
        let mut taps = vec![
            ("budget", ractor::call!(budget, TapMsg::Subscribe)?),
            ("telemetry", ractor::call!(telemetry, TapMsg::Subscribe)?),
        ];
        if let Some(j) = &journal {
            taps.push(("journal", ractor::call!(j, JournalMsg::Subscribe)?));
        }
        let mut metrics_tap = None;
        if let Some(m) = &args.telemetry.metrics {
            let feed = MetricsFeed::new(m.clone());
            let (tap, _) =
                Actor::spawn_linked(None, MetricsTap::default(), feed, myself.get_cell()).await?;
            taps.push(("metrics", ractor::call!(tap, TapMsg::Subscribe)?));
            for (name, tx) in &taps {
                m.watch_queue(name, tx);
            }
            metrics_tap = Some(tap.get_cell());
        }
        let taps = taps.into_iter().map(|(_, tx)| tx).collect();
        let reports = Reports {
            span: args.telemetry.span.clone(),
            metrics: args.telemetry.metrics.clone(),
            deaths: args.deaths,
        };
        let seed = AnswererSeed {
            policy: args.policy,
            human: args.human,
            research: args.research,
        };
        let answerer = spawn_answerer(&myself, &seed).await?;
        let fleet_args = FleetArgs {
            answerer: Some(answerer.get_derived()),
            taps,
            events: args.fleet_events,
            telemetry: args.telemetry,
        };
        let (fleet, _) = Actor::spawn_linked(None, Fleet, fleet_args, myself.get_cell()).await?;
        answerer.cast(AnswererMsg::Fleet(fleet.clone()))?;
        Ok(RootState {
            journal: journal.map(Ok),
            budget: Ok(budget),
            telemetry: Ok(telemetry),
            metrics_tap,
            answerer,
            fleet,
            answerer_args: seed,
            reports,
            closing: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<RootMsg>,
        msg: RootMsg,
        st: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RootMsg::Fleet(reply) => {
                let _caller_gone = reply.send(st.fleet.clone());
            }
            RootMsg::Budget(reply) => {
                let _caller_gone = reply.send(st.budget.clone());
            }
            RootMsg::Telemetry(reply) => {
                let _caller_gone = reply.send(st.telemetry.clone());
            }
            RootMsg::JournalTap(reply) => {
                let tx = match &st.journal {
                    Some(Ok(j)) => Ok(ractor::call!(j, JournalMsg::Subscribe).ok()),
                    Some(Err(death)) => Err(death.clone()),
                    None => Ok(None),
                };
                let _caller_gone = reply.send(tx);
            }
            RootMsg::JournalDurable(reply) => {
                let durable = match &st.journal {
                    Some(Ok(j)) => Ok(ractor::call!(j, JournalMsg::Durable).ok()),
                    Some(Err(death)) => Err(death.clone()),
                    None => Ok(None),
                };
                let _caller_gone = reply.send(durable);
            }
            RootMsg::Shutdown(reply) => {
                st.closing = true;
                if let Err(e) = ractor::call!(st.fleet, FleetMsg::Shutdown) {
                    tracing::error!("fleet shutdown: {e}");
                }
                let written = match &st.journal {
                    Some(Ok(j)) => ractor::call!(j, JournalMsg::Finish).unwrap_or_default(),
                    _ => JournalTally::default(),
                };
                // Every child gone (and its state with it: the run's span ends with the
                // tree) before the caller goes on to flush the telemetry.
                myself
                    .stop_children_and_wait(Some("shutdown".into()), Some(CHILDREN_DEADLINE))
                    .await;
                let _caller_gone = reply.send(written);
                myself.stop(Some("shutdown".into()));
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<RootMsg>,
        evt: SupervisionEvent,
        st: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, cause) = match evt {
            SupervisionEvent::ActorFailed(cell, err) => (cell, err.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, reason.unwrap_or_else(|| "stopped".into()))
            }
            _ => return Ok(()),
        };
        match st.child(&cell) {
            Some(child) if !st.closing => st.bury(&myself, child, cause).await,
            _ => Ok(()),
        }
    }
}

/// Starts sessions under a running tree's fleet ([`Orchestrator::spawner`]).
#[derive(Clone)]
pub struct Spawner {
    fleet: ActorRef<FleetMsg>,
}

impl Spawner {
    /// Start one session under the fleet.
    pub async fn spawn(
        &self,
        spec: SessionSpec,
        subscribers: Vec<mpsc::Sender<Published>>,
    ) -> Result<ActorRef<SessionMsg>, TreeError> {
        self.spawn_in(spec, subscribers, None).await
    }

    /// Start one session under the fleet, its span a child of `parent` rather than
    /// the tree's (an exposed agent's session continues its A2A client's trace).
    pub async fn spawn_in(
        &self,
        spec: SessionSpec,
        subscribers: Vec<mpsc::Sender<Published>>,
        parent: Option<tracing::Span>,
    ) -> Result<ActorRef<SessionMsg>, TreeError> {
        ractor::call!(self.fleet, |reply| FleetMsg::Spawn {
            spec: Box::new(spec),
            subscribers,
            parent,
            reply,
        })
        .map_err(|e| TreeError::unreachable("fleet", e))?
    }
}

/// The application's handle on a running tree.
pub struct Orchestrator {
    root: ActorRef<RootMsg>,
    fleet: ActorRef<FleetMsg>,
    join: JoinHandle<()>,
}

impl Orchestrator {
    pub async fn start(args: RootArgs) -> Result<Self, TreeError> {
        let (root, join) = Actor::spawn(None, Root, args)
            .await
            .map_err(|e| TreeError::spawn("supervision tree", e))?;
        let fleet = ractor::call!(root, RootMsg::Fleet)
            .map_err(|e| TreeError::unreachable("supervision tree", e))?;
        Ok(Orchestrator { root, fleet, join })
    }

    pub fn fleet(&self) -> &ActorRef<FleetMsg> {
        &self.fleet
    }

    /// Usage so far, per session and in total (every usage event published before
    /// the call included).
    pub async fn budget(&self) -> Result<BudgetSnapshot, TreeError> {
        let budget = self.budget_actor().await?;
        ractor::call!(budget, TapMsg::Snapshot).map_err(|e| TreeError::unreachable("budget", e))
    }

    /// The budget actor (the router reads it before turns start and after they end);
    /// [`TreeError::Died`] once it died.
    pub async fn budget_actor(&self) -> Result<ActorRef<BudgetMsg>, TreeError> {
        Ok(ractor::call!(self.root, RootMsg::Budget)
            .map_err(|e| TreeError::unreachable("supervision tree", e))??)
    }

    /// A sender into the journal, when the tree keeps one ([`TreeError::Died`] once
    /// it died). Drop it before [`Orchestrator::shutdown`], or the journal waits for it.
    pub async fn journal_tap(&self) -> Result<Option<mpsc::Sender<Published>>, TreeError> {
        Ok(ractor::call!(self.root, RootMsg::JournalTap)
            .map_err(|e| TreeError::unreachable("supervision tree", e))??)
    }

    /// A handle to wait for the journal to have what was published on disk, when the
    /// tree keeps one ([`TreeError::Died`] once it died).
    pub async fn journal_durable(&self) -> Result<Option<Durable>, TreeError> {
        Ok(ractor::call!(self.root, RootMsg::JournalDurable)
            .map_err(|e| TreeError::unreachable("supervision tree", e))??)
    }

    /// The root, to link further actors (the router) under it.
    pub fn root_cell(&self) -> ractor::ActorCell {
        self.root.get_cell()
    }

    /// Fleet counters so far ([`TreeError::Died`] once the telemetry tap died).
    pub async fn counters(&self) -> Result<Counters, TreeError> {
        let t = ractor::call!(self.root, RootMsg::Telemetry)
            .map_err(|e| TreeError::unreachable("supervision tree", e))??;
        ractor::call!(t, TapMsg::Snapshot).map_err(|e| TreeError::unreachable("telemetry", e))
    }

    /// Start one session under the fleet.
    pub async fn spawn_session(
        &self,
        spec: SessionSpec,
        subscribers: Vec<mpsc::Sender<Published>>,
    ) -> Result<ActorRef<SessionMsg>, TreeError> {
        self.spawner().spawn(spec, subscribers).await
    }

    /// A handle that starts sessions under this tree's fleet from anywhere (it does
    /// not keep the tree alive: once the tree is down, spawning fails).
    pub fn spawner(&self) -> Spawner {
        Spawner {
            fleet: self.fleet.clone(),
        }
    }

    /// Close every session (their agents with them), finish the journal, stop the
    /// tree. Returns the journal records written.
    pub async fn shutdown(self) -> u64 {
        self.finish().await.records
    }

    /// [`Orchestrator::shutdown`], returning what the journal kept (and lost).
    pub async fn finish(self) -> JournalTally {
        let kept = ractor::call!(self.root, RootMsg::Shutdown).unwrap_or_default();
        if let Err(e) = self.join.await {
            tracing::error!("the supervision tree ended abnormally: {e}");
        }
        kept
    }
}
