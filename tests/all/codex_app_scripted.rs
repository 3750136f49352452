//! The `codex_app_server` binding against a scripted app-server
//! (`tests/support/codex_app_scripted.py`, manifest `codex-app-scripted.toml`), for
//! what the real Codex cannot do on demand:
//!
//! - `-32001 Server overloaded`: a refused `turn/start` is sent again after a backoff
//!   that doubles (100, 200, 400 ms: the scripted server's log has the times), each
//!   retry journaled as a `cap.error` `server_overloaded` and counted in
//!   `capfleet_overload_retries_total{session}`; the turn then completes;
//! - steering: a session from a manifest that says `queued_input`, a turn held open,
//!   `SessionMsg::Steer` mid-turn is a `turn/steer` on that turn (journaled as
//!   `cap.user_input.inject`) and the turn's answer is the steered one; a steer with no
//!   turn, or of a manifest without `queued_input`, is refused;
//! - a prompt right after a turn's end is always a `turn/start`, never a `turn/steer`
//!   on the ended turn: many short turns back to back, each answered, none steered.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::repo::Fixture;
use crate::common::sim::fleet_session;
use crate::common::{self, EnvMarker, support, wait_until};
use capfleet_engine::manifest::Manifest;
use capfleet_engine::protocol::SessionConfig;
use capfleet_engine::root::Orchestrator;
use capfleet_engine::session::{SessionError, SessionMsg, SessionSpec};
use capfleet_wire::driver::LaunchSpec;
use capfleet_wire::events::{TurnOutcome, urn};
use capfleet_wire::registry::Binding;
use ractor::ActorRef;
use ractor::rpc::CallResult;

/// Refused `turn/start`s before the scripted server takes one.
const OVERLOADS: usize = 3;

/// The argv that runs the scripted server from anywhere.
pub(crate) fn argv() -> Vec<String> {
    vec![
        "python3".into(),
        support("codex_app_scripted.py").display().to_string(),
    ]
}

/// The scripted server's request log, oldest first.
pub(crate) fn requests(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("log line"))
        .collect()
}

pub(crate) fn of_method<'a>(log: &'a [Value], method: &str) -> Vec<&'a Value> {
    log.iter().filter(|r| r["method"] == method).collect()
}

/// A `capfleet run` of the scripted session (it overloads) beside an idle sim
/// session that holds the run open while `/metrics` is scraped.
#[test]
fn an_overloaded_turn_start_is_retried_with_backoff_counted_and_journaled() {
    let f = Fixture::plain();
    let m = EnvMarker::new("codex-overload");
    let log = f.path().join("scripted.jsonl");
    f.write("idle.toml", "[[turn]]\nsteps = [{ sleep_ms = 10000 }]\n");
    let (k, v) = m.pair();
    f.write(
        "fleet.toml",
        &format!(
            "[fleet]\nname = \"ov\"\nstart = [\"codex\", \"idle\"]\ntask = \"go\"\n\n\
             [[sessions]]\nname = \"codex\"\nagent = {agent}\nargv = {argv}\n\
             env = {{ {k} = \"{v}\", CODEX_SCRIPTED_LOG = {log}, CODEX_SCRIPTED_OVERLOAD = \"{OVERLOADS}\" }}\n\n{idle}",
            agent = json!(support("codex-app-scripted.toml")),
            argv = json!(argv()),
            log = json!(log),
            idle = fleet_session("idle", "idle.toml", &m, ""),
        ),
    );
    let done = "capfleet_turns_total{session=\"cap://ov/codex\",agent=\"codex-app-scripted\",outcome=\"completed\"} 1";
    let (seen, status, scraped) = crate::common::scraped::run_scraped_until(&f, done);
    assert!(seen, "the overloaded session's turn completes:\n{scraped}");
    let counted =
        format!("capfleet_overload_retries_total{{session=\"cap://ov/codex\"}} {OVERLOADS}");
    assert!(scraped.contains(&counted), "{counted} in\n{scraped}");
    assert!(status.success(), "{status:?}");
    // The backoff: each turn/start waits at least twice the wait before it.
    let log = requests(&log);
    let starts: Vec<f64> = of_method(&log, "turn/start")
        .iter()
        .map(|r| r["t"].as_f64().expect("t"))
        .collect();
    assert_eq!(starts.len(), OVERLOADS + 1, "{log:#?}");
    let gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    for (i, gap) in gaps.iter().enumerate() {
        let floor = 0.1 * f64::from(1u32 << i);
        assert!(
            *gap >= floor,
            "retry {} after {gap:.3} s, under {floor} s: {gaps:?}",
            i + 1
        );
    }
    // Journaled: one server_overloaded per retry, with its attempt and wait.
    let journal = f.journal();
    let retries: Vec<(u64, u64)> = journal
        .iter()
        .filter(|r| r["urn"] == "cap://ov/codex" && r["event"]["code"] == "server_overloaded")
        .map(|r| {
            let d = &r["event"]["details"];
            (
                d["attempt"].as_u64().unwrap_or(0),
                d["retry_in_ms"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(retries, [(1, 100), (2, 200), (3, 400)], "{journal:#?}");
    let text: String = journal
        .iter()
        .filter(|r| r["urn"] == "cap://ov/codex")
        .filter_map(|r| r["event"]["text"].as_str())
        .collect();
    assert_eq!(text, "echo: go");
}

/// A session of the scripted server from its manifest, `queued_input` as given.
fn spec(
    dir: &std::path::Path,
    name: &str,
    queued_input: bool,
    log: &std::path::Path,
) -> SessionSpec {
    let text = std::fs::read_to_string(support("codex-app-scripted.toml")).expect("manifest");
    let text = if queued_input {
        text
    } else {
        text.replace("queued_input = true", "queued_input = false")
    };
    let manifest = Manifest::parse(&text, "codex-app-scripted.toml")
        .expect("the scripted manifest")
        .manifest;
    let mut launch = LaunchSpec::new(
        urn("steer", name),
        Arc::new(manifest),
        SessionConfig::new(dir.display().to_string()),
    );
    launch.argv = Some(argv());
    launch.env = vec![("CODEX_SCRIPTED_LOG".into(), log.display().to_string())];
    SessionSpec::new(name, launch, Binding::CodexAppServer)
}

/// A tree journaling into `dir` with one session of the scripted server (see
/// [`spec`]), and the server's request log.
async fn scripted_session(
    dir: &std::path::Path,
    name: &str,
    queued_input: bool,
) -> (Orchestrator, ActorRef<SessionMsg>, std::path::PathBuf) {
    let log = dir.join("scripted.jsonl");
    let tree = common::tree("steer", &dir.join("journal.jsonl")).await;
    let session = tree
        .spawn_session(spec(dir, name, queued_input, &log), vec![])
        .await
        .expect("session");
    (tree, session, log)
}

async fn steer(s: &ActorRef<SessionMsg>, text: &str) -> Result<(), SessionError> {
    let text = text.to_owned();
    match s
        .call(
            |reply| SessionMsg::Steer { text, reply },
            Some(Duration::from_secs(10)),
        )
        .await
    {
        Ok(CallResult::Success(r)) => r,
        other => panic!("the session did not answer the steer: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_mid_turn_is_turn_steer_on_that_turn() {
    let dir = tempfile::tempdir().expect("dir");
    let (tree, session, log) = scripted_session(dir.path(), "s", true).await;
    // No turn yet: nothing to steer.
    assert_eq!(steer(&session, "early").await, Err(SessionError::NoTurn));
    let s = session.clone();
    let turn = tokio::spawn(async move { common::ask(&s, "wait-for-steer please").await });
    let started = wait_until(Duration::from_secs(10), Duration::from_millis(20), || {
        !of_method(&requests(&log), "turn/start").is_empty()
    });
    assert!(started, "the turn never started: {:?}", requests(&log));
    // The session may still wait for turn/start's answer: the steer queues behind it.
    steer(&session, "use postcard").await.expect("steer taken");
    let result = turn.await.expect("turn task");
    assert_eq!(result.outcome, TurnOutcome::Completed);
    assert_eq!(result.text, "steered: use postcard");
    let log_now = requests(&log);
    let steers = of_method(&log_now, "turn/steer");
    assert_eq!(steers.len(), 1, "{log_now:#?}");
    assert_eq!(steers[0]["params"]["expectedTurnId"], "turn-1");
    assert_eq!(steers[0]["params"]["input"][0]["text"], "use postcard");
    // The next prompt is a turn of its own.
    let next = common::ask(&session, "next").await;
    assert_eq!(next.text, "echo: next");
    assert_eq!(of_method(&requests(&log), "turn/start").len(), 2);
    let _closed = session.cast(SessionMsg::Close);
    tree.shutdown().await;
    let journal = common::journal_records(&dir.path().join("journal.jsonl"));
    let injected: Vec<&Value> = journal
        .iter()
        .filter(|r| r["event"]["kind"] == "cap.user_input.inject")
        .collect();
    assert_eq!(injected.len(), 1, "{journal:#?}");
    assert_eq!(injected[0]["event"]["content"][0]["text"], "use postcard");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_without_queued_input_refuses_a_steer() {
    let dir = tempfile::tempdir().expect("dir");
    let (tree, session, log) = scripted_session(dir.path(), "plain", false).await;
    let s = session.clone();
    let turn = tokio::spawn(async move { common::ask(&s, "wait-for-steer please").await });
    assert!(wait_until(
        Duration::from_secs(10),
        Duration::from_millis(20),
        || { !of_method(&requests(&log), "turn/start").is_empty() }
    ));
    let refused = steer(&session, "use postcard").await;
    assert!(
        matches!(&refused, Err(SessionError::QueuedInputUnsupported { why }) if why.contains("queued_input = false")),
        "{refused:?}"
    );
    // Nothing steers it: the scripted server gives up waiting and answers.
    let result = turn.await.expect("turn task");
    assert_eq!(result.text, "steered: None");
    assert!(of_method(&requests(&log), "turn/steer").is_empty());
    let _closed = session.cast(SessionMsg::Close);
    tree.shutdown().await;
}

/// Turns back to back on a session that steers: each prompt that comes right after a
/// turn's end starts a turn (the control loop sees the end first), none is sent as a
/// `turn/steer` of the ended turn (which the server would refuse, leaving the turn
/// unanswered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_right_after_a_turns_end_start_turns_never_steer() {
    const TURNS: usize = 40;
    let dir = tempfile::tempdir().expect("dir");
    let (tree, session, log) = scripted_session(dir.path(), "quick", true).await;
    for i in 0..TURNS {
        let r = common::ask(&session, &format!("turn {i}")).await;
        assert_eq!(r.text, format!("echo: turn {i}"));
    }
    let log = requests(&log);
    assert_eq!(of_method(&log, "turn/start").len(), TURNS);
    assert!(of_method(&log, "turn/steer").is_empty(), "{log:#?}");
    let _closed = session.cast(SessionMsg::Close);
    tree.shutdown().await;
}
