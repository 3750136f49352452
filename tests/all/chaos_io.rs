//! The chaos interposer and the A2A connection faults end to end, on real simulator
//! agents under the supervision tree. The faults are injected through the sessions'
//! handles ([`ByteFaults`], [`ConnFaults`] on the launch), as the chaos scheduler
//! injects them:
//!
//! - stream-json: `garble` and `truncate` make malformed frames, each a `cap.error`
//!   `parse_failed`, and the turn completes with the rest; `slow` and `stall_stdin`
//!   delay the turn, which completes;
//! - the PTY (the TUI sim): `garble` on the terminal's bytes panics nothing, and the
//!   turn completes or fails explicitly;
//! - A2A (the A2A sim): `latency` slows a turn that completes; `drop` mid-stream is
//!   resubscribed; `http_5xx` fails the turn explicitly and the next completes;
//!   `refuse` is the peer's loss, restarted per policy, and the turn completes.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use capfleet_engine::manifest::Manifest;
use capfleet_engine::protocol::{CapEvent, ErrorKind, SessionConfig};
use capfleet_engine::root::Orchestrator;
use capfleet_engine::session::{SessionMsg, SessionSpec, TurnResult};
use capfleet_wire::chaos::{ByteFault, ByteFaults};
use capfleet_wire::chaos::{ConnFault, ConnFaults};
use capfleet_wire::driver::{LaunchSpec, Shape};
use capfleet_wire::events::{EventBody, Published, SUBSCRIBER_CAPACITY, TurnOutcome, urn};
use capfleet_wire::registry::Binding;
use ractor::ActorRef;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::common::{self, EnvMarker};

const FLEET: &str = "chaos-io";

/// Turn 1 warms up (the agent's init is read before any fault); turn 2 says 20 bytes
/// in 10 frames of 2.
const TWO_TURNS: &str = r#"
[[turn]]
steps = [{ say = "warm." }]
[[turn]]
steps = [{ say = "0123456789abcdefghij", chunk = 2 }]
"#;

/// One test's directory, agent marker and tree.
struct Rig {
    dir: tempfile::TempDir,
    marker: EnvMarker,
    journal: PathBuf,
    tree: Orchestrator,
}

impl Rig {
    async fn new(label: &str) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("journal.jsonl");
        let tree = common::tree(FLEET, &journal).await;
        Rig {
            dir,
            marker: EnvMarker::new(label),
            journal,
            tree,
        }
    }

    /// A sim session (stream-json, or the TUI over a PTY) with `faults` installed.
    async fn sim(&self, script: &str, faults: &ByteFaults, pty: bool) -> ActorRef<SessionMsg> {
        let (dir, marker) = (self.dir.path(), &self.marker);
        let mut spec = match pty {
            false => common::sim::session_spec(dir, FLEET, "s", script, marker),
            true => common::sim::tui_session_spec(dir, FLEET, "s", script, marker),
        };
        spec.launch.byte_faults = Some(faults.clone());
        self.tree
            .spawn_session(spec, vec![])
            .await
            .expect("session")
    }

    /// Close everything: no agent survives; the journal.
    async fn finish(self) -> Vec<Value> {
        self.tree.shutdown().await;
        self.marker
            .wait_gone(Duration::from_secs(5), "the agents after the shutdown");
        common::journal_records(&self.journal)
    }
}

fn parse_failed(r: &TurnResult) -> usize {
    r.events
        .iter()
        .filter(|e| matches!(e, CapEvent::Error(e) if e.code == ErrorKind::ParseFailed))
        .count()
}

/// `garble` on a stream-json agent: each garbled frame is one `parse_failed`, the
/// session keeps its agent (no restart), the turn completes with the frames left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbled_stream_json_frames_are_parse_failures_and_the_turn_completes() {
    let rig = Rig::new("chaos-garble").await;
    let faults = ByteFaults::new(urn(FLEET, "s"), 11);
    let s = rig.sim(TWO_TURNS, &faults, false).await;
    assert_eq!(common::ask(&s, "one").await.text, "warm.");
    faults.inject(ByteFault::Garble {
        fraction: 1.0,
        frames: 3,
    });
    let r = common::ask(&s, "two").await;
    assert_eq!(r.outcome, TurnOutcome::Completed, "{r:?}");
    assert_eq!(parse_failed(&r), 3, "{:?}", r.events);
    assert_eq!(r.restarts, 0);
    assert!(r.text.ends_with("ghij") && r.text.len() >= 14, "{}", r.text);
    let stats = faults.stats();
    assert_eq!(stats.frames_garbled, 3);
    assert!(stats.bytes_garbled > 100, "{stats:?}");
    let journal = rig.finish().await;
    let failed = journal
        .iter()
        .filter(|r| r["event"]["code"] == "parse_failed")
        .count();
    assert_eq!(failed, 3, "each malformed frame journaled");
}

/// `truncate`: each cut frame is one `parse_failed`; the turn completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_stream_json_frames_are_parse_failures_and_the_turn_completes() {
    let rig = Rig::new("chaos-truncate").await;
    let faults = ByteFaults::new(urn(FLEET, "s"), 12);
    let s = rig.sim(TWO_TURNS, &faults, false).await;
    common::ask(&s, "one").await;
    faults.inject(ByteFault::Truncate { frames: 2 });
    let r = common::ask(&s, "two").await;
    assert_eq!(r.outcome, TurnOutcome::Completed, "{r:?}");
    assert_eq!(parse_failed(&r), 2, "{:?}", r.events);
    assert_eq!(r.restarts, 0);
    assert_eq!(faults.stats().frames_truncated, 2);
    assert!(faults.stats().bytes_cut > 0);
    rig.finish().await;
}

/// `slow` throttles the agent's output; `stall_stdin` holds the prompt: each turn
/// takes longer, and completes whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_output_and_a_stalled_stdin_delay_the_turn_which_completes() {
    let rig = Rig::new("chaos-slow").await;
    let faults = ByteFaults::new(urn(FLEET, "s"), 13);
    let script = format!("{TWO_TURNS}\n[[turn]]\nsteps = [{{ say = \"third\" }}]\n");
    let s = rig.sim(&script, &faults, false).await;
    common::ask(&s, "one").await;
    // Ten text frames and a result, about 2.5 KB: about a second at 2,500 B/s.
    faults.inject(ByteFault::Slow {
        bytes_per_sec: 2_500,
        for_ms: 60_000,
    });
    let t0 = Instant::now();
    let r = common::ask(&s, "two").await;
    assert_eq!(r.outcome, TurnOutcome::Completed, "{r:?}");
    assert_eq!(r.text, "0123456789abcdefghij");
    assert!(
        t0.elapsed() >= Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    assert!(faults.stats().slowed_reads >= 5, "{:?}", faults.stats());
    faults.inject(ByteFault::Slow {
        bytes_per_sec: 1,
        for_ms: 0,
    });
    faults.inject(ByteFault::StallStdin { for_ms: 700 });
    let t0 = Instant::now();
    let r = common::ask(&s, "three").await;
    assert_eq!(r.outcome, TurnOutcome::Completed, "{r:?}");
    assert_eq!(r.text, "third");
    assert!(
        t0.elapsed() >= Duration::from_millis(600),
        "{:?}",
        t0.elapsed()
    );
    assert!(faults.stats().stalled_writes >= 1);
    rig.finish().await;
}

/// `garble` on a terminal's bytes (the TUI sim over a PTY): no panic; the turn
/// completes or fails explicitly within its timeout, and the session answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbled_terminal_bytes_end_the_turn_explicitly() {
    let rig = Rig::new("chaos-pty").await;
    let faults = ByteFaults::new(urn(FLEET, "s"), 14);
    let script = r#"
[[turn]]
steps = [{ say = "warm" }]
[[turn]]
steps = [{ say = "a long answer in pieces", chunk = 3, delay_ms = 20 }]
[[turn]]
steps = [{ say = "after" }]
"#;
    let (dir, marker) = (rig.dir.path(), &rig.marker);
    let mut spec = common::sim::tui_session_spec(dir, FLEET, "s", script, marker);
    spec.launch.byte_faults = Some(faults.clone());
    spec.turn_timeout = Duration::from_secs(4);
    let s = rig.tree.spawn_session(spec, vec![]).await.expect("session");
    assert_eq!(common::ask(&s, "one").await.outcome, TurnOutcome::Completed);
    faults.inject(ByteFault::Garble {
        fraction: 0.3,
        frames: 4,
    });
    let garbled = common::turn(&s, "two").await;
    match &garbled {
        Ok(r) => assert!(
            matches!(r.outcome, TurnOutcome::Completed) || !r.events.is_empty(),
            "{r:?}"
        ),
        Err(e) => assert!(!format!("{e:?}").is_empty()),
    }
    assert_eq!(faults.stats().frames_garbled, 4);
    assert!(faults.stats().bytes_garbled > 0);
    let after = common::turn(&s, "three").await;
    assert!(
        after
            .as_ref()
            .is_ok_and(|r| r.outcome == TurnOutcome::Completed)
            || after.is_err(),
        "{after:?}"
    );
    rig.finish().await;
}

/// An A2A session on the A2A sim with `faults`; its events to `events`.
struct Peer {
    _sim: common::a2a::A2aPeer,
    session: ActorRef<SessionMsg>,
    events: mpsc::Receiver<Published>,
}

async fn a2a(rig: &Rig, script: &str, faults: &ConnFaults) -> Peer {
    let dir = rig.dir.path();
    let sim = common::a2a::sim(dir, script, &[]);
    let path = common::a2a::manifest(dir, &sim.url, "");
    let text = std::fs::read_to_string(&path).unwrap();
    let manifest = Manifest::parse(&text, &path.display().to_string())
        .unwrap()
        .manifest;
    let addr = capfleet_wire::driver::connect_addr(&sim.url).expect("the sim's address");
    let mut launch = LaunchSpec::new(
        urn(FLEET, "a"),
        manifest.into(),
        SessionConfig::new(dir.display().to_string()),
    );
    launch.shape = Shape::Connect(addr);
    launch.conn_faults = Some(faults.clone());
    let spec = SessionSpec::new("a", launch, Binding::A2a);
    let (tx, rx) = mpsc::channel(SUBSCRIBER_CAPACITY);
    let session = rig
        .tree
        .spawn_session(spec, vec![tx])
        .await
        .expect("session");
    Peer {
        _sim: sim,
        session,
        events: rx,
    }
}

impl Peer {
    /// Reads events until one satisfies `f` (the channel drained on the way).
    async fn until(&mut self, f: impl Fn(&EventBody) -> bool) {
        let wait = async {
            while let Some(e) = self.events.recv().await {
                if f(&e.body) {
                    return;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), wait)
            .await
            .expect("the event came");
    }

    /// A turn, the session's events drained meanwhile.
    async fn turn(&mut self, prompt: &str) -> TurnResult {
        self.turn_with(prompt, None).await
    }

    /// A turn `go` with `fault` injected once its first text has come.
    async fn turn_hit_mid_stream(&mut self, faults: &ConnFaults, fault: ConnFault) -> TurnResult {
        self.turn_with("go", Some((faults, fault))).await
    }

    async fn turn_with(
        &mut self,
        prompt: &str,
        hit: Option<(&ConnFaults, ConnFault)>,
    ) -> TurnResult {
        let s = self.session.clone();
        let prompt = prompt.to_owned();
        let ask = tokio::spawn(async move { common::ask(&s, &prompt).await });
        if let Some((faults, fault)) = hit {
            self.until(is_text).await;
            faults.inject(fault);
        }
        let drain = async { while self.events.recv().await.is_some() {} };
        tokio::select! {
            r = ask => r.expect("ask"),
            () = drain => panic!("the session's events ended"),
        }
    }
}

fn is_text(body: &EventBody) -> bool {
    matches!(
        body,
        EventBody::Cap {
            event: CapEvent::TextChunk(_)
        }
    )
}

fn is_ready(body: &EventBody) -> bool {
    matches!(
        body,
        EventBody::Cap {
            event: CapEvent::SessionReady(_)
        }
    )
}

/// `latency`: every chunk each way delayed; the turn completes, later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_latency_slows_a_turn_that_completes() {
    let rig = Rig::new("chaos-a2a-latency").await;
    let faults = ConnFaults::new(urn(FLEET, "a"));
    let script = "[[turn]]\nsteps = [{ say = \"slow but sure\" }]\n";
    let mut peer = a2a(&rig, script, &faults).await;
    faults.inject(ConnFault::Latency {
        ms: 150,
        for_ms: 60_000,
    });
    let t0 = Instant::now();
    let r = peer.turn("go").await;
    assert_eq!(r.outcome, TurnOutcome::Completed, "{r:?}");
    assert_eq!(r.text, "slow but sure");
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t0.elapsed()
    );
    assert!(faults.stats().delayed_chunks >= 2, "{:?}", faults.stats());
    rig.finish().await;
}

/// `drop` mid-stream: the driver resubscribes to the task and the turn completes
/// with the text said after the drop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_drop_mid_stream_is_resubscribed_and_the_turn_completes() {
    let rig = Rig::new("chaos-a2a-drop").await;
    let faults = ConnFaults::new(urn(FLEET, "a"));
    let script = r#"
[[turn]]
steps = [{ say = "before " }, { sleep_ms = 1000 }, { say = "after" }]
"#;
    let mut peer = a2a(&rig, script, &faults).await;
    let r = peer.turn_hit_mid_stream(&faults, ConnFault::Drop).await;
    assert_eq!(r.outcome, TurnOutcome::Completed, "{r:?}");
    assert!(r.text.ends_with("after"), "{}", r.text);
    assert!(faults.stats().dropped >= 1, "{:?}", faults.stats());
    assert!(
        faults.stats().connections >= 2,
        "a new connection after the drop"
    );
    rig.finish().await;
}

/// `http_5xx`: the prompt's request is answered 503 by the proxy; the turn fails
/// explicitly (a `cap.error` naming the status), and the next turn completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_http_5xx_fails_the_turn_explicitly_and_the_next_completes() {
    let rig = Rig::new("chaos-a2a-5xx").await;
    let faults = ConnFaults::new(urn(FLEET, "a"));
    let script = "[[turn]]\nsteps = [{ say = \"fine\" }]\n";
    let mut peer = a2a(&rig, script, &faults).await;
    // After the start's card requests: the 5xx is the prompt's.
    peer.until(is_ready).await;
    faults.inject(ConnFault::Http5xx { status: 503 });
    let r = peer.turn("one").await;
    assert_ne!(r.outcome, TurnOutcome::Completed, "{r:?}");
    let said = r.events.iter().any(|e| match e {
        CapEvent::Error(e) => e.message.contains("503"),
        _ => false,
    });
    assert!(said, "a cap.error names the status: {:?}", r.events);
    assert_eq!(faults.stats().answered_5xx, 1);
    let again = peer.turn("two").await;
    assert_eq!(again.outcome, TurnOutcome::Completed, "{again:?}");
    assert_eq!(again.text, "fine");
    rig.finish().await;
}

/// `refuse`: the connections end and new ones are refused for a while — the peer's
/// loss: the driver dies, the session restarts it (the start tries the peer again
/// until it is back) and the turn completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_refused_connections_are_a_restart_and_the_turn_completes() {
    let rig = Rig::new("chaos-a2a-refuse").await;
    let faults = ConnFaults::new(urn(FLEET, "a"));
    let script = r#"
[[turn]]
steps = [{ say = "before " }, { sleep_ms = 500 }, { say = "after" }]
"#;
    let mut peer = a2a(&rig, script, &faults).await;
    let fault = ConnFault::Refuse { for_ms: 1_000 };
    let r = peer.turn_hit_mid_stream(&faults, fault).await;
    assert_eq!(r.outcome, TurnOutcome::Completed, "{r:?}");
    assert!(r.text.ends_with("after"), "{}", r.text);
    assert_eq!(faults.stats().refusals, 1);
    let journal = rig.finish().await;
    assert!(
        !common::of_type(&journal, "restart").is_empty(),
        "the refusal was the connection's death: {journal:?}"
    );
}

/// End to end through `capfleet run --chaos`: `garble` at every turn attempt of a
/// fleet of sim sessions, armed before the prompt is written; each fault journaled,
/// the turn's first frame (its text "working") garbled, one `parse_failed` on the same
/// session, no restart, and the run completes.
#[test]
fn run_chaos_garble_is_journaled_counted_as_parse_failed_and_the_run_completes() {
    let marker = EnvMarker::new("chaos-io-run");
    let sessions = ["worker-1", "worker-2", "worker-3"];
    let dir = common::chaos_run::fleet(&sessions, &marker, 3, 300, 20);
    let spec = "seed=21,garble=1/turn,garble_fraction=1,garble_frames=1";
    let out = dir.capfleet(&["run", "fleet.toml", "--chaos", spec]);
    let journal = dir.journal();
    marker.wait_gone(Duration::from_secs(2), "agents after the chaos run");
    let stderr = common::repo::stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(common::run_ended(&journal).as_deref(), Some("completed"));
    let faults = common::chaos_run::records(&journal);
    assert_eq!(
        faults.len(),
        sessions.len(),
        "one per turn attempt: {faults:?}"
    );
    for f in &faults {
        assert_eq!(f["fault"], "garble", "{f}");
        let urn = &f["urn"];
        let failed = common::chaos_run::parse_failures(&journal, urn);
        assert_eq!(failed, 1, "one garbled frame on {urn}");
        let said = common::chaos_run::said(&journal, urn);
        assert_eq!(said, "done", "the first frame garbled on {urn}");
    }
    assert!(
        common::of_type(&journal, "restart").is_empty(),
        "{journal:?}"
    );
}
