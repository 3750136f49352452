//! A child of the root died: which one, why, and what the run does about it.
//!
//! Every death of a child (a failure, a panic, a kill; not the tree's own shutdown)
//! is an event: logged, a `child_died` span under the run's, counted
//! (`capfleet_tree_deaths_total{child}`) when the run has metrics, and sent to whoever
//! runs the tree ([`DeathSink`]). What happens next is the child's [`Handling`]:
//!
//! | child | handling | why |
//! |---|---|---|
//! | answerer | restarted | its policy, human and research spec are kept; jobs in flight are lost |
//! | journal | the run fails | the run's record can no longer be written (as a disk fault) |
//! | budget | the run fails | fail closed: no turn spends without a budget that sees it |
//! | telemetry | the run goes on | its counters are lost: the run's report has none |
//! | metrics | the run goes on | the Prometheus series stop moving; this counter says why |
//! | fleet | the run fails | every session went with it |
//!
//! A dead child is never handed out again: asking the root for it returns
//! [`TreeError::Died`](crate::error::TreeError::Died).

use tokio::sync::mpsc;

use crate::telemetry::metrics::{ChildLabels, Metrics};
use capfleet_wire::events::trace;

/// Deaths reported at most this many at once (each child dies once).
pub const DEATHS_CAPACITY: usize = 8;

/// Where deaths go: whoever runs the tree stops the run on a fatal one.
pub(crate) type DeathSink = mpsc::Sender<ChildDeath>;

/// A child of the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child {
    Journal,
    Budget,
    Telemetry,
    Metrics,
    Answerer,
    Fleet,
}

impl Child {
    /// Its name in logs, spans and the metric's `child` label.
    pub fn name(self) -> &'static str {
        match self {
            Child::Journal => "journal",
            Child::Budget => "budget",
            Child::Telemetry => "telemetry",
            Child::Metrics => "metrics",
            Child::Answerer => "answerer",
            Child::Fleet => "fleet",
        }
    }

    /// What its death does to the run (the module's table).
    pub fn handling(self) -> Handling {
        match self {
            Child::Answerer => Handling::Restarted,
            Child::Telemetry | Child::Metrics => Handling::Degraded,
            Child::Journal | Child::Budget | Child::Fleet => Handling::FailsRun,
        }
    }
}

/// What a death does to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// A new one took its place.
    Restarted,
    /// The run goes on without it.
    Degraded,
    /// The run stops and fails.
    FailsRun,
}

impl Handling {
    fn name(self) -> &'static str {
        match self {
            Handling::Restarted => "restarted",
            Handling::Degraded => "degraded",
            Handling::FailsRun => "fails_run",
        }
    }
}

/// A child that died, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {} died ({cause}); {}", child.name(), consequence(*child))]
pub struct ChildDeath {
    pub child: Child,
    /// The failure (a panic's message) or the reason it was stopped (`killed`).
    pub cause: String,
}

impl ChildDeath {
    pub fn handling(&self) -> Handling {
        self.child.handling()
    }
}

fn consequence(child: Child) -> &'static str {
    match child {
        Child::Answerer => "restarted; its research jobs in flight are lost",
        Child::Journal => "the run's record can no longer be written: the run fails",
        Child::Budget => "no turn may spend without a budget: the run fails",
        Child::Telemetry => "the run goes on without its counters",
        Child::Metrics => "the run goes on; its metrics no longer move",
        Child::Fleet => "every session went with it: the run fails",
    }
}

/// Report `death`: the log, a `child_died` span under `parent` (ERROR), the metric,
/// and `sink`. Returns whether whoever runs the tree was told.
pub(crate) fn report(
    death: &ChildDeath,
    parent: &tracing::Span,
    metrics: Option<&Metrics>,
    sink: Option<&DeathSink>,
) -> bool {
    let span = tracing::error_span!(
        parent: parent, "child_died",
        cap.tree.child = death.child.name(),
        cap.tree.handling = death.handling().name(),
        cap.tree.cause = %death.cause,
    );
    trace::fail(&span, "child_died", &death.to_string());
    let _in = span.enter();
    tracing::error!(child = death.child.name(), "{death}");
    if let Some(m) = metrics {
        let child = death.child.name().to_owned();
        m.tree_deaths.get_or_create(&ChildLabels { child }).inc();
    }
    let told = sink.is_some_and(|tx| tx.try_send(death.clone()).is_ok());
    if sink.is_some() && !told {
        tracing::error!(
            "the death of the {} could not be reported to the run",
            death.child.name()
        );
    }
    told
}
