//! The research desk: the answerer's researchers. An open question the policy left
//! open becomes a job; identical open questions (same [`question_key`]) wait on one
//! job; at most `parallel` jobs run at once, the others queue. A job is one session of
//! the configured researcher agent, spawned under the fleet like any session (the
//! same session and driver machinery; the fleet's journal, budget and telemetry see
//! it), in a fresh temporary workspace, with one turn: the prompt of
//! [`research::prompt`]. Its reply's last `ANSWER:` line, validated by
//! [`research::verdict`], answers every waiter; a failure, a timeout or an invalid
//! answer answers them fail-safe, saying why. Either way the answer carries a note
//! (the research session's URN, whose events the journal holds as its transcript,
//! the answer line, the reply's tail, the reason, the cost), and the job is a
//! `research` span under the first asker's `decide` span, the research session's
//! spans under it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::ActorRef;
use serde_json::json;

use super::AnswererMsg;
use super::research::{
    self, Invalid, MAX_REPLY, RULE_RESEARCH_FAIL_SAFE, ResearchSpec, question_key,
};
use crate::error::TreeError;
use crate::fleet::FleetMsg;
use crate::protocol::CancelScope;
use crate::session::{SessionError, SessionMsg, TurnResult};
use capfleet_wire::events::TurnOutcome;
use capfleet_wire::events::{Answer, AnswerTo, Decide, OpenRequest, fail_safe_by};

/// How long a research session may take to close before it is stopped.
const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// Why research gave no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    #[error("the research answerer has no fleet to start its session in")]
    NoFleet,
    #[error("no temporary workspace for the researcher: {0}")]
    Workspace(#[source] std::io::Error),
    #[error("the researcher could not start: {0}")]
    Spawn(#[source] TreeError),
    #[error("the researcher did not answer within {} s", .0.as_secs_f64())]
    Timeout(Duration),
    #[error("the researcher's turn did not run: {0}")]
    Session(#[source] SessionError),
    #[error("the researcher's turn {0}")]
    Turn(&'static str),
    #[error("the researcher's answer is refused: {0}")]
    Invalid(#[source] Invalid),
}

/// One asker waiting on a job.
struct Waiter {
    session: AnswerTo,
    request: OpenRequest,
}

/// A question not yet researched.
struct Job {
    key: String,
    prompt: String,
    span: tracing::Span,
}

/// A finished job, from its task to the answerer.
#[derive(Debug)]
pub(crate) struct Done {
    key: String,
    session: Arc<str>,
    reply: String,
    cost_usd: f64,
    started: Instant,
    result: Result<(), Failure>,
}

/// The answerer's researchers and the questions waiting on them.
pub(super) struct Desk {
    spec: ResearchSpec,
    fleet: Option<ActorRef<FleetMsg>>,
    /// Waiters by question key, for jobs queued or running.
    waiting: HashMap<String, Vec<Waiter>>,
    queue: VecDeque<Job>,
    running: usize,
    /// The research sessions' URNs: their own requests are answered fail-safe.
    researchers: HashSet<Arc<str>>,
    next: u64,
}

impl Desk {
    pub(super) fn new(spec: ResearchSpec) -> Self {
        Desk {
            spec,
            fleet: None,
            waiting: HashMap::new(),
            queue: VecDeque::new(),
            running: 0,
            researchers: HashSet::new(),
            next: 0,
        }
    }

    /// The fleet research sessions are started in.
    pub(super) fn attach(&mut self, fleet: ActorRef<FleetMsg>) {
        self.fleet = Some(fleet);
    }

    /// Research goes before any human (`auto_answer = "research"`).
    pub(super) fn first(&self) -> bool {
        self.spec.first
    }

    /// `urn` is one of the desk's research sessions.
    pub(super) fn is_researcher(&self, urn: &str) -> bool {
        self.researchers.contains(urn)
    }

    /// Research `d`'s question (or wait on the job already researching it).
    pub(super) fn take(&mut self, myself: &ActorRef<AnswererMsg>, d: Decide, span: tracing::Span) {
        let key = question_key(&d.request);
        let waiter = Waiter {
            session: d.session,
            request: d.request,
        };
        if let Some(waiters) = self.waiting.get_mut(&key) {
            tracing::info!(parent: &span, urn = %d.urn, "an identical question is being researched; waiting on it");
            waiters.push(waiter);
            return;
        }
        let prompt = research::prompt(&waiter.request, &d.urn, &d.context, self.spec.max_risk);
        self.waiting.insert(key.clone(), vec![waiter]);
        self.queue.push_back(Job { key, prompt, span });
        self.pump(myself);
    }

    /// Start queued jobs while fewer than `parallel` run.
    fn pump(&mut self, myself: &ActorRef<AnswererMsg>) {
        while self.running < self.spec.parallel.max(1) {
            let Some(job) = self.queue.pop_front() else {
                return;
            };
            self.next += 1;
            let mut spec = self.spec.template.clone();
            spec.name = format!("{}.{}.{}", spec.name, std::process::id(), self.next);
            spec.launch.urn = format!("{}.{}.{}", spec.launch.urn, std::process::id(), self.next);
            let urn: Arc<str> = spec.launch.urn.clone().into();
            self.researchers.insert(urn.clone());
            self.running += 1;
            let span = tracing::info_span!(
                parent: &job.span, "research",
                cap.research.session = %urn,
                cap.research.outcome = tracing::field::Empty,
                cap.research.reason = tracing::field::Empty,
                cap.research.cost_usd = tracing::field::Empty,
            );
            let run = Run {
                fleet: self.fleet.clone(),
                spec,
                timeout: self.spec.timeout,
                prompt: job.prompt,
                span,
            };
            let myself = myself.clone();
            let key = job.key;
            tokio::spawn(async move {
                let done = run.run(key, urn).await;
                let _answerer_gone = myself.cast(AnswererMsg::Researched(done));
            });
        }
    }

    /// A job ended: answer its waiters, start the next.
    pub(super) fn done(&mut self, myself: &ActorRef<AnswererMsg>, done: Done) {
        self.running = self.running.saturating_sub(1);
        self.researchers.remove(&done.session);
        let waiters = self.waiting.remove(&done.key).unwrap_or_default();
        let shared = waiters.len();
        for w in waiters {
            let answer = match &done.result {
                Ok(()) => research::verdict(&w.request, &done.reply, self.spec.max_risk)
                    .map_err(|e| Failure::Invalid(e).to_string()),
                Err(e) => Err(e.to_string()),
            };
            let (answer, reason) = match answer {
                Ok(a) => (a, None),
                Err(r) => (fail_safe_by(&w.request, RULE_RESEARCH_FAIL_SAFE), Some(r)),
            };
            if let Some(r) = &reason {
                tracing::warn!(session = %done.session, "research gave no answer ({r}); answering fail-safe");
            }
            let note = json!({
                "session": &*done.session,
                "answer": research::answer_line(&done.reply),
                "reply": crate::session::tail(&done.reply, MAX_REPLY),
                "reason": reason,
                "cost_usd": done.cost_usd,
                "duration_ms": u64::try_from(done.started.elapsed().as_millis()).unwrap_or(u64::MAX),
                "askers": shared,
            });
            let _session_gone = w.session.cast(Answer::Researched {
                answer: Box::new(answer),
                note,
            });
        }
        self.pump(myself);
    }
}

/// One research session's run, on its own task.
struct Run {
    fleet: Option<ActorRef<FleetMsg>>,
    spec: crate::session::SessionSpec,
    timeout: Duration,
    prompt: String,
    span: tracing::Span,
}

impl Run {
    async fn run(self, key: String, urn: Arc<str>) -> Done {
        let started = Instant::now();
        let result = match tokio::time::timeout(self.timeout, self.turn()).await {
            Ok(r) => r,
            Err(_) => Err(Failure::Timeout(self.timeout)),
        };
        let (reply, cost_usd, result) = match result {
            Err(e) => (String::new(), 0.0, Err(e)),
            Ok(t) => {
                let ended = match t.outcome {
                    TurnOutcome::Completed => Ok(()),
                    TurnOutcome::Cancelled => Err(Failure::Turn("was cancelled")),
                    TurnOutcome::Failed => Err(Failure::Turn("failed")),
                };
                (t.text, t.usage.cost_usd, ended)
            }
        };
        let span = &self.span;
        span.record(
            "cap.research.outcome",
            if result.is_ok() { "answered" } else { "failed" },
        );
        if let Err(e) = &result {
            span.record("cap.research.reason", e.to_string().as_str());
        }
        span.record("cap.research.cost_usd", cost_usd);
        capfleet_wire::events::trace::end(span);
        Done {
            key,
            session: urn,
            reply,
            cost_usd,
            started,
            result,
        }
    }

    /// Spawn the session in a temporary workspace, run its one turn, close it.
    async fn turn(&self) -> Result<TurnResult, Failure> {
        let fleet = self.fleet.as_ref().ok_or(Failure::NoFleet)?;
        let dir = tempfile::Builder::new()
            .prefix("capfleet-research-")
            .tempdir()
            .map_err(Failure::Workspace)?;
        let mut spec = self.spec.clone();
        spec.launch.config.cwd = dir.path().display().to_string();
        let session = ractor::call!(fleet, |reply| FleetMsg::Spawn {
            spec: Box::new(spec),
            subscribers: Vec::new(),
            parent: Some(self.span.clone()),
            reply,
        })
        .map_err(|e| Failure::Spawn(TreeError::unreachable("fleet", e)))?
        .map_err(Failure::Spawn)?;
        // Closed however the run ends, also when the timeout drops it mid-turn.
        let mut closing = Closing(Some(session.clone()));
        let prompt = self.prompt.clone();
        let asked = ractor::call!(session, |reply| SessionMsg::Ask {
            prompt,
            traceparent: None,
            reply
        });
        closing.close().await;
        drop(dir);
        asked
            .map_err(|_| Failure::Session(SessionError::Closed))?
            .map_err(Failure::Session)
    }
}

/// A research session to close, also when its run is dropped at the timeout.
struct Closing(Option<ActorRef<SessionMsg>>);

impl Closing {
    /// Close the session and wait for it (stopped past the grace).
    async fn close(&mut self) {
        if let Some(s) = self.0.take() {
            stop(&s).await;
        }
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            tokio::spawn(async move { stop(&s).await });
        }
    }
}

async fn stop(s: &ActorRef<SessionMsg>) {
    let _gone = s.cast(SessionMsg::Cancel {
        scope: CancelScope::Session,
        reason: "research over".into(),
    });
    if s.get_cell().wait(Some(CLOSE_GRACE)).await.is_err() {
        s.stop(Some("research over".into()));
    }
}
