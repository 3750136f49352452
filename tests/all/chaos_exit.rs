//! `exit`, a clean exit mid-turn, on a real sim agent that exits at once at the end
//! of its input (`exit_at_eof = true`): the fault closes the agent's input while its
//! turn is in flight, the sim exits with status 0 without finishing the turn, and the
//! session notices the death. `permanent` restarts the agent and the turn is retried
//! and completes; `transient` leaves a clean exit alone: the turn fails explicitly
//! (the session is closed). Either way well before the turn could have ended.

use std::time::{Duration, Instant};

use capfleet_engine::chaos::ChaosSpec;
use capfleet_engine::protocol::CapEvent;
use capfleet_engine::session::{SessionError, SessionMsg, TurnResult};
use capfleet_wire::chaos::FaultKind;
use capfleet_wire::events::{EventBody, Published, SUBSCRIBER_CAPACITY, TurnOutcome};
use capfleet_wire::supervision::{ExitCause, Restart};
use tokio::sync::mpsc;

use crate::common::{self, EnvMarker};

const FLEET: &str = "chaos-exit";

/// A turn that says something, then works for 4 s before it ends.
const SCRIPT: &str = r#"
exit_at_eof = true
[[turn]]
steps = [{ say = "before " }, { sleep_ms = 4000 }, { say = "after" }]
"#;

/// How long after the fault its consequence must come: far less than the 4 s the
/// turn had left (an exit after the turn would take that long).
const MID_TURN: Duration = Duration::from_millis(2500);

/// What one session's turn did with an `exit` injected once its first text came.
struct Hit {
    result: Result<TurnResult, SessionError>,
    /// Fault to the session's restart (`None`: none came before the turn ended).
    restart_after: Option<(Duration, ExitCause)>,
    /// Fault to the turn's answer.
    answered_after: Duration,
    journal: Vec<serde_json::Value>,
}

async fn exit_mid_turn(label: &str, restart: Restart) -> Hit {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.jsonl");
    let tree = common::tree(FLEET, &journal).await;
    let marker = EnvMarker::new(label);
    let mut spec = common::sim::session_spec(dir.path(), FLEET, "s", SCRIPT, &marker);
    spec.policy.restart = restart;
    // The session takes faults from a chaos run's spec; this one's are sent by hand.
    spec.chaos = Some(
        ChaosSpec::parse_inline("seed=1,exit=0/turn")
            .unwrap()
            .into(),
    );
    let (tx, mut events) = mpsc::channel::<Published>(SUBSCRIBER_CAPACITY);
    let s = tree.spawn_session(spec, vec![tx]).await.expect("session");
    let asker = s.clone();
    let mut ask = tokio::spawn(async move { common::turn(&asker, "go").await });
    let text = async {
        while let Some(e) = events.recv().await {
            if let EventBody::Cap {
                event: CapEvent::TextChunk(_),
            } = &e.body
            {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), text)
        .await
        .expect("the turn's first text");
    s.cast(SessionMsg::Chaos {
        fault: FaultKind::Exit,
        seed_pos: 0,
    })
    .expect("the session takes the fault");
    let t0 = Instant::now();
    let mut restart_after = None;
    let watch = async {
        while let Some(e) = events.recv().await {
            if let EventBody::Restart { cause, .. } = &e.body {
                restart_after.get_or_insert((t0.elapsed(), cause.clone()));
            }
        }
    };
    let result = tokio::select! {
        r = &mut ask => r,
        // The session closed (its events ended): its answer is on the way.
        () = watch => (&mut ask).await,
    }
    .expect("the ask");
    let answered_after = t0.elapsed();
    tree.shutdown().await;
    marker.wait_gone(Duration::from_secs(5), "the agents after the shutdown");
    Hit {
        result,
        restart_after,
        answered_after,
        journal: common::journal_records(&journal),
    }
}

/// The `chaos` record of the fault precedes everything it caused.
fn assert_journaled_first(journal: &[serde_json::Value], then: &str) {
    let fault = journal
        .iter()
        .position(|r| r["type"] == "chaos" && r["fault"] == "exit");
    let after = journal.iter().position(|r| r["type"] == then);
    assert!(
        fault.is_some() && fault < after,
        "the exit's record before the {then}: {journal:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_restarts_a_clean_exit_mid_turn_and_the_turn_is_retried() {
    let hit = exit_mid_turn("chaos-exit-permanent", Restart::Permanent).await;
    let (after, cause) = hit.restart_after.clone().expect("a restart");
    assert_eq!(cause, ExitCause::Normal, "a clean exit (status 0)");
    assert!(after < MID_TURN, "restarted {after:?} after the fault");
    let r = hit.result.expect("the retried turn");
    assert_eq!(r.outcome, TurnOutcome::Completed, "{r:?}");
    assert_eq!(r.restarts, 1);
    assert!(r.text.ends_with("after"), "{}", r.text);
    // The retry is a whole new turn of the sim: it took the full 4 s again.
    assert!(hit.answered_after >= Duration::from_secs(4));
    assert_journaled_first(&hit.journal, "restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_leaves_a_clean_exit_mid_turn_and_the_turn_fails_explicitly() {
    let hit = exit_mid_turn("chaos-exit-transient", Restart::Transient).await;
    assert!(hit.restart_after.is_none(), "a clean exit is not restarted");
    assert_eq!(hit.result.as_ref().err(), Some(&SessionError::Closed));
    assert!(
        hit.answered_after < MID_TURN,
        "failed {:?} after the fault",
        hit.answered_after
    );
    assert_journaled_first(&hit.journal, "turn_ended");
    let ended = hit.journal.iter().find(|r| r["type"] == "turn_ended");
    assert_eq!(
        ended.map(|r| r["outcome"].clone()),
        Some("failed".into()),
        "{ended:?}"
    );
}
