//! The supervision tree through the library: root → fleet → session → driver with a
//! real simulator process; the budget and telemetry taps and the journal see every
//! session's events; a session refuses a second concurrent turn and turns past
//! `max_turns`; shutting down leaves no agent behind.

use std::sync::Arc;
use std::time::Duration;

use capfleet_engine::session::{SessionError, SessionMsg, SessionSpec};
use capfleet_wire::events::{SessionState, TurnOutcome};
use common::EnvMarker;
use ractor::rpc::CallResult;

use crate::common;
use crate::common::chat::assert_no_survivor;

const SCRIPT: &str = r#"
[[turn]]
steps = [
  { sleep_ms = 300 },
  { say = "first answer" },
  { usage = { input_tokens = 100, output_tokens = 20, cost_usd = 0.25 } },
]
[[turn]]
steps = [
  { say = "second answer" },
  { usage = { input_tokens = 50, output_tokens = 10, cost_usd = 0.5 } },
]
"#;

fn sim_spec(dir: &std::path::Path, name: &str, marker: &EnvMarker) -> SessionSpec {
    let mut spec = common::sim::session_spec(dir, "tree", name, SCRIPT, marker);
    spec.max_turns = Some(2);
    spec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_under_the_tree_with_taps_and_journal() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.jsonl");
    let marker = EnvMarker::new("tree");
    let tree = common::tree("tree", &journal).await;
    let a = tree
        .spawn_session(sim_spec(dir.path(), "a", &marker), vec![])
        .await
        .unwrap();
    let b = tree
        .spawn_session(sim_spec(dir.path(), "b", &marker), vec![])
        .await
        .unwrap();

    // A second ask while the first turn runs is refused, not queued.
    let first = tokio::spawn({
        let a = a.clone();
        async move { common::turn(&a, "one").await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        common::turn(&a, "overlap").await.unwrap_err(),
        SessionError::Busy
    );
    let r1 = first.await.unwrap().unwrap();
    assert_eq!(r1.outcome, TurnOutcome::Completed);
    assert_eq!(r1.text, "first answer");
    assert_eq!(r1.usage.input_tokens, 100);

    let r2 = common::turn(&a, "two").await.unwrap();
    assert_eq!(r2.turn, 2);
    assert_eq!(r2.text, "second answer");
    assert_eq!(
        common::turn(&a, "three").await.unwrap_err(),
        SessionError::MaxTurns { max: 2 }
    );
    common::turn(&b, "one").await.unwrap();

    let snap = match a
        .call(SessionMsg::Snapshot, Some(Duration::from_secs(5)))
        .await
        .unwrap()
    {
        CallResult::Success(s) => s,
        other => panic!("{other:?}"),
    };
    assert_eq!(&*snap.urn, "cap://tree/a");
    assert_eq!(snap.state, SessionState::Done);
    assert_eq!(snap.turns, 2);

    // The taps saw both sessions (give the bounded channels a moment to drain).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let budget = tree.budget().await.unwrap();
    assert_eq!(budget.total.input_tokens, 250);
    assert!(
        (budget.total.cost_usd - 1.0).abs() < 1e-9,
        "{}",
        budget.total.cost_usd
    );
    assert_eq!(budget.by_session.len(), 2);
    assert_eq!(
        budget.by_session[&Arc::<str>::from("cap://tree/a")].output_tokens,
        30
    );
    let counters = tree.counters().await.unwrap();
    assert_eq!(counters.turns, 3);
    assert_eq!(counters.events.get("cap.usage"), Some(&3));
    assert_eq!(counters.sessions_in(SessionState::Done), 2);

    let written = tree.shutdown().await;
    let lines = std::fs::read_to_string(&journal).unwrap();
    let records: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        records.len() as u64,
        written,
        "every record was written before shutdown returned"
    );
    for urn in ["cap://tree/a", "cap://tree/b"] {
        let seqs: Vec<u64> = records
            .iter()
            .filter(|r| r["urn"] == urn)
            .map(|r| r["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "{urn}: seq without gaps"
        );
        assert!(
            records
                .iter()
                .any(|r| r["urn"] == urn && r["to"] == "closed"),
            "{urn} closed"
        );
    }
    assert_no_survivor(&marker);
}
