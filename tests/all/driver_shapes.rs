//! The three shapes the driver contract admits, end to end on the real simulator
//! under the supervision tree, each run journaled:
//!
//! - one long-lived process per session: three turns, one process;
//! - one process per turn (`capfleet sim --one-turn`, resumed with `--resume <id>`):
//!   three turns, three processes, one session; a process crashing mid-turn is a
//!   restart and the turn completes on the next process;
//! - no process at all (`capfleet sim --listen`, stream-json over TCP): the
//!   connection dropping mid-turn is a restart, which reconnects and completes the turn.
//!
//! Agents are counted by a shell wrapper that notes its pid before it `exec`s the sim.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::chat::assert_no_survivor;
use crate::common::{self, EnvMarker, ask, of_type};
use capfleet_engine::protocol::SessionConfig;
use capfleet_engine::root::Orchestrator;
use capfleet_engine::session::{SessionMsg, SessionSnapshot, SessionSpec};
use capfleet_wire::driver::{LaunchSpec, Shape};
use capfleet_wire::events::{TurnOutcome, urn};
use capfleet_wire::registry::Binding;
use ractor::ActorRef;
use ractor::rpc::CallResult;
use serde_json::Value;

const SIM: &str = common::BIN;

/// A turn that crashes its agent once (exit 3) between two texts.
const CRASH_ONCE: &str = r#"
[[turn]]
steps = [
  { say = "first-try." },
  { crash = 3, once = true },
  { say = "second-try-done." },
]
"#;

/// One test's directory, agent marker and tree.
struct Bench {
    dir: tempfile::TempDir,
    marker: EnvMarker,
    journal: PathBuf,
    tree: Orchestrator,
}

impl Bench {
    async fn new(label: &str) -> Bench {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("journal.jsonl");
        let tree = common::tree("shapes", &journal).await;
        Bench {
            dir,
            marker: EnvMarker::new(label),
            journal,
            tree,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The sim's session spec in `shape`; `script` (if any) in the environment, and
    /// `once` markers kept in the test's directory.
    fn spec(
        &self,
        name: &str,
        shape: Shape,
        argv: Option<Vec<String>>,
        script: &str,
    ) -> SessionSpec {
        let manifest = common::sim::manifest();
        let config = SessionConfig::new(self.dir.path().display().to_string());
        let mut launch = LaunchSpec::new(urn("shapes", name), manifest, config);
        launch.program = Some(PathBuf::from(SIM));
        launch.argv = argv;
        launch.shape = shape;
        let (k, v) = self.marker.pair();
        launch.env = vec![
            (
                "CAPFLEET_SIM_STATE".into(),
                self.path("state").display().to_string(),
            ),
            (k.into(), v.into()),
        ];
        if !script.is_empty() {
            let file = self.path(&format!("{name}.toml"));
            std::fs::write(&file, script).unwrap();
            launch
                .env
                .push(("CAPFLEET_SIM_SCRIPT".into(), file.display().to_string()));
        }
        SessionSpec::new(name, launch, Binding::StreamJson)
    }

    /// Close everything and read the journal.
    async fn finish(self) -> Vec<Value> {
        self.tree.shutdown().await;
        assert_no_survivor(&self.marker);
        common::journal_records(&self.journal)
    }
}

/// `capfleet sim --mode stream-json EXTRA…` behind a wrapper that appends its pid to
/// `pids` first (the driver's own flags, `--resume <id>`, follow).
fn counted_sim(pids: &Path, extra: &[&str]) -> Vec<String> {
    let wrapper = format!("echo $$ >> '{}'; exec \"$0\" \"$@\"", pids.display());
    let mut argv: Vec<String> = ["sh", "-c", &wrapper, SIM, "sim", "--mode", "stream-json"]
        .map(String::from)
        .to_vec();
    argv.extend(extra.iter().map(|a| a.to_string()));
    argv
}

fn agents_started(pids: &Path) -> usize {
    std::fs::read_to_string(pids)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

async fn snapshot(s: &ActorRef<SessionMsg>) -> SessionSnapshot {
    match s
        .call(SessionMsg::Snapshot, Some(Duration::from_secs(5)))
        .await
    {
        Ok(CallResult::Success(snap)) => snap,
        other => panic!("{other:?}"),
    }
}

fn error_codes(journal: &[Value]) -> Vec<&str> {
    of_type(journal, "cap")
        .into_iter()
        .filter(|r| r["event"]["kind"] == "cap.error")
        .filter_map(|r| r["event"]["code"].as_str())
        .collect()
}

/// Three echo turns in `shape`: the answers, the agents started, the session's
/// resume id after the first and after the last turn, and the journal.
async fn three_turns(
    label: &str,
    shape: Shape,
    extra: &[&str],
) -> (usize, [Option<String>; 2], Vec<Value>) {
    let bench = Bench::new(label).await;
    let pids = bench.path("pids");
    let spec = bench.spec("s", shape, Some(counted_sim(&pids, extra)), "");
    let s = bench.tree.spawn_session(spec, vec![]).await.unwrap();
    let mut ids = [None, None];
    for (i, prompt) in ["one", "two", "three"].into_iter().enumerate() {
        let r = ask(&s, prompt).await;
        assert_eq!(r.outcome, TurnOutcome::Completed, "{r:?}");
        assert_eq!(r.turn, i as u32 + 1);
        assert_eq!(r.text, format!("echo: {prompt}"));
        assert_eq!(r.restarts, 0);
        match i {
            0 => ids[0] = snapshot(&s).await.resume_id,
            2 => ids[1] = snapshot(&s).await.resume_id,
            _ => {}
        }
    }
    let snap = snapshot(&s).await;
    assert_eq!((snap.turns, snap.restarts), (3, 0));
    let started = agents_started(&pids);
    let journal = bench.finish().await;
    (started, ids, journal)
}

/// Shape a: one process answers every turn of its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_lived_process_answers_three_turns() {
    let (started, ids, journal) = three_turns("long-lived", Shape::LongLived, &[]).await;
    assert_eq!(started, 1, "one process for the whole session");
    assert!(ids[0].is_some() && ids[0] == ids[1], "{ids:?}");
    assert!(of_type(&journal, "restart").is_empty());
}

/// Shape b: a process per turn. Each one exits after its answer (a clean end of
/// output ends the turn, not the session), the next resumes the conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_turn_processes_answer_three_turns_of_one_session() {
    let (started, ids, journal) = three_turns("per-turn", Shape::PerTurn, &["--one-turn"]).await;
    assert_eq!(started, 3, "one process per turn");
    assert!(
        ids[0].is_some() && ids[0] == ids[1],
        "every process resumed the first one's conversation: {ids:?}"
    );
    assert!(
        of_type(&journal, "restart").is_empty(),
        "no exit was a death"
    );
    assert!(
        error_codes(&journal).is_empty(),
        "{:?}",
        error_codes(&journal)
    );
    assert_eq!(of_type(&journal, "turn_ended").len(), 3);
    let urns: std::collections::BTreeSet<&str> =
        journal.iter().filter_map(|r| r["urn"].as_str()).collect();
    assert!(urns.contains("cap://shapes/s"));
    let ready = of_type(&journal, "cap")
        .into_iter()
        .filter(|r| r["event"]["kind"] == "cap.session.ready")
        .count();
    assert_eq!(ready, 1, "one driver, ready once, for the three processes");
}

/// Shape b: the turn's process crashing mid-turn is a death — `cap.error`, a
/// journaled restart — and the turn is resumed on the next process and completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_turn_process_crashing_mid_turn_is_a_restart() {
    let bench = Bench::new("per-turn-crash").await;
    let pids = bench.path("pids");
    let argv = counted_sim(&pids, &["--one-turn"]);
    let spec = bench.spec("s", Shape::PerTurn, Some(argv), CRASH_ONCE);
    let s = bench.tree.spawn_session(spec, vec![]).await.unwrap();
    let r = ask(&s, "go").await;
    assert_eq!(r.outcome, TurnOutcome::Completed, "{r:?}");
    assert_eq!(r.restarts, 1);
    assert!(r.text.ends_with("second-try-done."), "{}", r.text);
    // The session goes on: the next turn is the next process's.
    let again = ask(&s, "again").await;
    assert_eq!(again.outcome, TurnOutcome::Completed, "{again:?}");
    assert_eq!(
        agents_started(&pids),
        3,
        "the crashed one, its restart, the next turn's"
    );
    let journal = bench.finish().await;
    let restarts = of_type(&journal, "restart");
    assert_eq!(restarts.len(), 1, "{restarts:?}");
    assert_eq!(restarts[0]["cause"]["kind"], "exited");
    assert_eq!(restarts[0]["cause"]["code"], 3);
    assert_eq!(restarts[0]["turn"], 1);
    assert_eq!(error_codes(&journal), ["agent_exited"]);
    let attempts: Vec<&Value> = of_type(&journal, "turn_started")
        .into_iter()
        .filter(|r| r["turn"] == 1)
        .map(|r| &r["attempt"])
        .collect();
    assert_eq!(attempts, [1, 2], "the interrupted turn was issued again");
}

/// A `capfleet sim --listen 127.0.0.1:0` peer in its own process group (the sims
/// serving its connections carry its marker), killed with it when dropped.
struct Listener {
    child: Child,
    addr: std::net::SocketAddr,
    marker: EnvMarker,
}

impl Listener {
    fn start(bench: &Bench, script: &str) -> Listener {
        let marker = EnvMarker::new("listener");
        let (k, v) = marker.pair();
        let mut child = Command::new(SIM)
            .args(["sim", "--mode", "stream-json", "--listen", "127.0.0.1:0"])
            .args(["--script-inline", script])
            .env("CAPFLEET_SIM_STATE", bench.path("state"))
            .env(k, v)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let addr = first
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{first:?}: {e}"));
        Listener {
            child,
            addr,
            marker,
        }
    }

    /// The sims serving connections (the listener itself aside).
    fn serving(&self) -> Vec<i32> {
        let me = self.child.id() as i32;
        self.marker
            .processes()
            .into_iter()
            .filter(|p| *p != me)
            .collect()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        common::kill_group(self.child.id() as i32);
        let _reaped = self.child.wait();
    }
}

/// Shape c: no process of ours; the peer's connection dropping mid-turn is the
/// death. The restart reconnects, the turn is re-issued and completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_dropping_mid_turn_is_a_restart() {
    let bench = Bench::new("connection").await;
    let listener = Listener::start(&bench, CRASH_ONCE);
    let spec = bench.spec("s", Shape::Connect(listener.addr), None, "");
    let s = bench.tree.spawn_session(spec, vec![]).await.unwrap();
    let r = ask(&s, "go").await;
    assert_eq!(r.outcome, TurnOutcome::Completed, "{r:?}");
    assert_eq!(r.restarts, 1);
    assert!(r.text.ends_with("second-try-done."), "{}", r.text);
    let again = ask(&s, "again").await;
    assert_eq!(again.outcome, TurnOutcome::Completed, "{again:?}");
    // Closing the session closes its connection, and that ends the peer's sim.
    let journal_of = bench.finish().await;
    assert!(
        common::wait_until(Duration::from_secs(5), Duration::from_millis(50), || {
            listener.serving().is_empty()
        }),
        "the connection's sim ends with the connection: {:?}",
        listener.serving()
    );
    let restarts = of_type(&journal_of, "restart");
    assert_eq!(restarts.len(), 1, "{restarts:?}");
    assert_eq!(restarts[0]["cause"]["kind"], "driver_error");
    let message = restarts[0]["cause"]["message"].as_str().unwrap_or("");
    assert!(message.contains("connection"), "{message}");
    assert_eq!(error_codes(&journal_of), ["agent_exited"]);
    let attempts = of_type(&journal_of, "turn_started")
        .into_iter()
        .filter(|r| r["turn"] == 1)
        .count();
    assert_eq!(attempts, 2, "the dropped turn was issued again");
}
