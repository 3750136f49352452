//! An actor that panics mid-message: ractor catches the panic (the actor fails, its
//! supervisor is told), the spans it had open end as the stack unwinds, and the span
//! pipeline's shutdown on the normal exit path still exports them, parent links intact.
//! (One test, which installs the process's global subscriber: nextest runs it in a
//! process of its own. The spans use a `capfleet_engine` target: the pipeline exports
//! capfleet's spans only.) The pipeline is the binary's (`app/src/telemetry/pipeline.rs`)
//! over the engine's parts.

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::Value;
use tracing_subscriber::layer::SubscriberExt;

use capfleet::TracePipeline;
use capfleet_engine::telemetry::TraceConfig;

struct Panicky;

impl Actor for Panicky {
    type Msg = tracing::Span;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<Self::Msg>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _: ActorRef<Self::Msg>,
        parent: tracing::Span,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        let work = tracing::info_span!(target: "capfleet_engine::test", parent: &parent, "work", cap.step = 1_i64);
        let _in = work.enter();
        panic!("a bug in an actor");
    }
}

#[test]
fn spans_open_in_a_panicking_actor_are_exported_on_the_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spans.jsonl");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cfg = TraceConfig {
            otlp: None,
            trace_file: Some(file.clone()),
        };
        let pipeline = TracePipeline::start(&cfg, |_| None).unwrap().unwrap();
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(pipeline.layer()),
        )
        .unwrap();
        let run = tracing::info_span!(target: "capfleet_engine::test", "fleet.run");
        let (actor, join) = Actor::spawn(None, Panicky, ()).await.unwrap();
        actor.cast(run.clone()).unwrap();
        join.await.unwrap();
        drop(run);
        let totals = tokio::task::spawn_blocking(move || pipeline.shutdown())
            .await
            .unwrap();
        assert_eq!((totals.exported, totals.dropped), (2, 0));
    });
    let spans: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let find = |n: &str| {
        spans
            .iter()
            .find(|s| s["name"] == n)
            .unwrap_or_else(|| panic!("{n}: {spans:?}"))
    };
    let (work, run) = (find("work"), find("fleet.run"));
    assert_eq!(work["parent_span_id"], run["span_id"]);
    assert_eq!(work["trace_id"], run["trace_id"]);
    assert_eq!(work["attributes"]["cap.step"], 1);
}
