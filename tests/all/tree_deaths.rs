//! Root reports what dies: a child of the supervision tree killed under a running
//! session (a real simulator process) is reported (the run's sink, the metric, the
//! log), handled as `death.rs` says (a dead budget or journal fails the run, a dead
//! telemetry or metrics tap degrades it) and never handed out again (a typed error).
//! The fault: the child is found among the root's children by its message type, as a
//! supervisor sees it, and killed (a tap's handler that panics fails the tap the same
//! way: `tap.rs`'s own test).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capfleet_engine::budget::BudgetMsg;
use capfleet_engine::death::{Child, ChildDeath, DEATHS_CAPACITY, Handling};
use capfleet_engine::error::TreeError;
use capfleet_engine::journal::JournalMsg;
use capfleet_engine::root::{Orchestrator, RootArgs};
use capfleet_engine::session::SessionMsg;
use capfleet_engine::telemetry::MetricsTapMsg;
use capfleet_engine::telemetry::TelemetryMsg;
use capfleet_engine::telemetry::TreeTelemetry;
use capfleet_engine::telemetry::metrics::{FleetMetrics, Metrics};
use common::EnvMarker;
use ractor::ActorRef;
use tokio::sync::mpsc;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::common;
use crate::common::chat::assert_no_survivor;

const SCRIPT: &str = r#"
[[turn]]
steps = [
  { say = "first answer" },
  { usage = { input_tokens = 100, output_tokens = 20, cost_usd = 0.25 } },
]
[[turn]]
steps = [
  { say = "second answer" },
  { usage = { input_tokens = 50, output_tokens = 10, cost_usd = 0.5 } },
]
"#;

/// A tree with a journal, metrics and a death sink, one simulator session under it
/// that has taken one turn.
struct Running {
    tree: Orchestrator,
    session: ActorRef<SessionMsg>,
    deaths: mpsc::Receiver<ChildDeath>,
    metrics: Metrics,
    marker: EnvMarker,
    journal: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

async fn running(fleet: &str) -> Running {
    running_under(fleet, tracing::Span::none()).await
}

/// [`running`], the tree's spans under `span`.
async fn running_under(fleet: &str, span: tracing::Span) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.jsonl");
    let marker = EnvMarker::new(fleet);
    let metrics: Metrics = Arc::new(FleetMetrics::default());
    let (tx, deaths) = mpsc::channel(DEATHS_CAPACITY);
    let tree = Orchestrator::start(RootArgs {
        journal: Some(journal.clone().into()),
        deaths: Some(tx),
        telemetry: TreeTelemetry {
            span,
            metrics: Some(metrics.clone()),
        },
        ..RootArgs::new(fleet)
    })
    .await
    .expect("the supervision tree starts");
    let spec = common::sim::session_spec(dir.path(), fleet, "a", SCRIPT, &marker);
    let session = tree.spawn_session(spec, vec![]).await.unwrap();
    assert_eq!(common::ask(&session, "one").await.text, "first answer");
    Running {
        tree,
        session,
        deaths,
        metrics,
        marker,
        journal,
        _dir: dir,
    }
}

impl Running {
    /// Kill the root's child whose messages are `M`.
    fn kill<M: ractor::Message>(&self) {
        let cell = self
            .tree
            .root_cell()
            .get_children()
            .into_iter()
            .find(|c| c.is_message_type_of::<M>() == Some(true))
            .expect("the root has that child");
        cell.kill();
    }

    /// The next death reported to the run, within 5 s.
    async fn death(&mut self) -> ChildDeath {
        tokio::time::timeout(Duration::from_secs(5), self.deaths.recv())
            .await
            .expect("the death is reported to the run")
            .expect("the sink is open while the tree runs")
    }

    fn deaths_counted(&self, child: &str) -> bool {
        let line = format!("capfleet_tree_deaths_total{{child=\"{child}\"}} 1");
        self.metrics.encode().lines().any(|l| l == line)
    }

    /// Shut the tree down (no agent left behind); what the journal holds.
    async fn end(self) -> String {
        self.tree.shutdown().await;
        assert_no_survivor(&self.marker);
        std::fs::read_to_string(&self.journal).unwrap()
    }
}

/// A span as opened: its name, its parent's, its fields.
#[derive(Debug)]
struct Opened {
    name: &'static str,
    parent: Option<&'static str>,
    fields: Vec<(String, String)>,
}

/// Keeps every span opened (the process's subscriber: nextest runs each test alone).
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Opened>>>);

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> tracing_subscriber::Layer<S> for Spans {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        struct Fields(Vec<(String, String)>);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                self.0.push((f.name().to_owned(), format!("{v:?}")));
            }
            fn record_str(&mut self, f: &tracing::field::Field, v: &str) {
                self.0.push((f.name().to_owned(), v.to_owned()));
            }
        }
        let mut fields = Fields(Vec::new());
        attrs.record(&mut fields);
        let parent = ctx.span(id).and_then(|s| s.parent()).map(|p| p.name());
        let opened = Opened {
            name: attrs.metadata().name(),
            parent,
            fields: fields.0,
        };
        self.0.lock().unwrap().push(opened);
    }
}

fn died(r: Result<impl std::fmt::Debug, TreeError>, child: Child) {
    match r {
        Err(TreeError::Died(d)) => assert_eq!(d.child, child),
        other => panic!("a dead {} handed out: {other:?}", child.name()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_budget_is_reported_fails_the_run_and_is_not_handed_out() {
    let spans = Spans::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(spans.clone()))
        .unwrap();
    let mut run = running_under("budget-dies", tracing::info_span!("fleet.run")).await;
    assert!(run.tree.budget_actor().await.is_ok());
    run.kill::<BudgetMsg>();
    let death = run.death().await;
    assert_eq!(
        (death.child, death.cause.as_str()),
        (Child::Budget, "killed")
    );
    assert_eq!(death.handling(), Handling::FailsRun);
    assert!(
        death
            .to_string()
            .contains("no turn may spend without a budget"),
        "{death}"
    );
    assert!(run.deaths_counted("budget"), "{}", run.metrics.encode());
    died(run.tree.budget_actor().await, Child::Budget);
    died(run.tree.budget().await, Child::Budget);
    // The other children live on.
    assert!(run.tree.counters().await.is_ok());
    assert!(matches!(run.tree.journal_tap().await, Ok(Some(_))));
    assert!(run.deaths.try_recv().is_err(), "one death, reported once");
    run.end().await;
    // A `child_died` span under the run's says which child, what it does to the run.
    let spans = spans.0.lock().unwrap();
    let died: Vec<&Opened> = spans.iter().filter(|s| s.name == "child_died").collect();
    let [died] = died[..] else {
        panic!("one child_died span: {spans:?}")
    };
    assert_eq!(died.parent, Some("fleet.run"));
    for (k, v) in [
        ("cap.tree.child", "budget"),
        ("cap.tree.handling", "fails_run"),
        ("cap.tree.cause", "killed"),
    ] {
        assert!(died.fields.contains(&(k.into(), v.into())), "{died:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_telemetry_and_metrics_taps_degrade_the_run_loudly() {
    let mut run = running("taps-die").await;
    run.kill::<TelemetryMsg>();
    let death = run.death().await;
    assert_eq!(
        (death.child, death.handling()),
        (Child::Telemetry, Handling::Degraded)
    );
    died(run.tree.counters().await, Child::Telemetry);
    run.kill::<MetricsTapMsg>();
    let death = run.death().await;
    assert_eq!(
        (death.child, death.handling()),
        (Child::Metrics, Handling::Degraded)
    );
    assert!(run.deaths_counted("telemetry") && run.deaths_counted("metrics"));
    // The run goes on: the next turn completes, the budget and the journal see it.
    assert_eq!(common::ask(&run.session, "two").await.text, "second answer");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let budget = run.tree.budget().await.unwrap();
    assert!((budget.total.cost_usd - 0.75).abs() < 1e-9, "{budget:?}");
    let text = run.end().await;
    assert!(text.contains("second answer"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_journal_is_reported_fails_the_run_and_is_not_handed_out() {
    let mut run = running("journal-dies").await;
    run.kill::<JournalMsg>();
    let death = run.death().await;
    assert_eq!(
        (death.child, death.handling()),
        (Child::Journal, Handling::FailsRun)
    );
    assert!(run.deaths_counted("journal"));
    died(run.tree.journal_tap().await, Child::Journal);
    died(run.tree.journal_durable().await, Child::Journal);
    assert!(run.tree.budget_actor().await.is_ok());
    run.end().await;
}
