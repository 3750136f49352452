//! One pass of one binding: a fresh Codex session under the supervision tree, its
//! three turns (a first, the second timed from its start, the flood), every event
//! stamped on arrival by a subscriber on its own thread.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capfleet_engine::manifest::Manifest;
use capfleet_engine::protocol::{CapEvent, SessionConfig};
use capfleet_engine::root::{Orchestrator, RootArgs};
use capfleet_engine::session::{SessionMsg, SessionSpec};
use capfleet_wire::driver::{LaunchSpec, natural_shape};
use capfleet_wire::events::{EventBody, Published, SUBSCRIBER_CAPACITY, TurnOutcome};
use capfleet_wire::registry::Binding;
use serde_json::json;
use tokio::sync::mpsc;

use crate::figures::ms;
pub(crate) use crate::peer::Via;
use crate::peer::{FakeLlm, manifest, peer_env};

impl Via {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Via::AppServer => "app-server",
            Via::Exec => "exec",
        }
    }

    fn binding(self) -> Binding {
        match self {
            Via::AppServer => Binding::CodexAppServer,
            Via::Exec => Binding::CodexExec,
        }
    }
}

/// One pass's figures.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pass {
    pub(crate) second_first_event: Duration,
    pub(crate) second_first_text: Duration,
    pub(crate) flood_events: u64,
    pub(crate) flood_wall: Duration,
    /// This process's CPU over the flood turn.
    pub(crate) our_cpu: Duration,
    /// Codex's CPU over the session (its processes, reaped at the session's end).
    pub(crate) codex_cpu: Duration,
}

impl Pass {
    pub(crate) fn events_per_s(&self) -> f64 {
        self.flood_events as f64 / self.flood_wall.as_secs_f64()
    }

    pub(crate) fn our_cpu_per_k_events(&self) -> f64 {
        ms(self.our_cpu) * 1e3 / self.flood_events as f64
    }
}

impl std::fmt::Display for Pass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "2nd turn: first event {:.1} ms, first text {:.1} ms; flood: {} events in {:.2} s \
             ({:.0}/s), capfleet CPU {:.0} ms, Codex CPU {:.2} s",
            ms(self.second_first_event),
            ms(self.second_first_text),
            self.flood_events,
            self.flood_wall.as_secs_f64(),
            self.events_per_s(),
            ms(self.our_cpu),
            self.codex_cpu.as_secs_f64(),
        )
    }
}

/// A stamped event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    TurnStarted,
    /// An agent event (a CAP event) of the turn.
    Agent {
        text: bool,
    },
    TurnEnded,
}

/// Stamps every event of the session on arrival (its own thread: not when a busy
/// runtime gets round to a task).
fn watch(
    mut rx: mpsc::Receiver<Published>,
    marks: mpsc::UnboundedSender<(Instant, Mark)>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while let Some(event) = rx.blocking_recv() {
            let mark = match &event.body {
                EventBody::TurnStarted { .. } => Mark::TurnStarted,
                EventBody::TurnEnded { .. } => Mark::TurnEnded,
                EventBody::Cap { event } => Mark::Agent {
                    text: matches!(event, CapEvent::TextChunk(_)),
                },
                _ => continue,
            };
            let _bench_gone = marks.send((Instant::now(), mark));
        }
    })
}

/// The marks of one turn, turn start to turn end.
async fn turn_marks(marks: &mut mpsc::UnboundedReceiver<(Instant, Mark)>) -> Vec<(Instant, Mark)> {
    let deadline = Duration::from_secs(600);
    let mut turn = Vec::new();
    loop {
        let m = tokio::time::timeout(deadline, marks.recv())
            .await
            .unwrap_or_else(|_| panic!("no turn end within {deadline:?}"))
            .expect("the session ended mid-turn");
        if m.1 == Mark::TurnStarted {
            turn.clear();
        }
        turn.push(m);
        if m.1 == Mark::TurnEnded {
            return turn;
        }
    }
}

fn spec(via: Via, codex: &Path, env: Vec<(String, String)>, work: &Path) -> SessionSpec {
    let name = format!("codex-{}", via.name());
    let text = manifest(via);
    let parsed = Manifest::parse(&text, "config/agents/codex.toml")
        .expect("shipped codex manifest")
        .manifest;
    let mut launch = LaunchSpec::new(
        format!("cap://bench/{name}"),
        Arc::new(parsed),
        SessionConfig::new(work.display().to_string()),
    );
    let bin = codex
        .parent()
        .expect("codex's bin dir")
        .display()
        .to_string();
    launch.env = env
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "PATH" => (k, format!("{bin}:{v}")),
            _ => (k, v),
        })
        .collect();
    launch.shape = natural_shape(via.binding(), &launch.manifest);
    let mut spec = SessionSpec::new(name, launch, via.binding());
    spec.turn_timeout = Duration::from_secs(600);
    spec
}

fn rusage(who: libc::c_int) -> Duration {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// One fresh session on `via`: three turns; the second and the flood timed.
pub(crate) async fn pass(via: Via, fake: &FakeLlm, codex: &Path, items: u64) -> Pass {
    fake.reset();
    fake.script(json!([
        { "text": "first answer" },
        { "text": "second answer" },
        { "text": "xxxxxxxx", "items": items, "chunk": 64 }
    ]));
    let home = tempfile::tempdir().expect("home");
    let work = tempfile::tempdir().expect("work");
    let work = std::fs::canonicalize(work.path()).expect("work");
    let env = peer_env("codex", fake.port(), home.path(), &work);
    let children_before = rusage(libc::RUSAGE_CHILDREN);
    let tree = Orchestrator::start(RootArgs::new("bench"))
        .await
        .expect("tree starts");
    let (tx, rx) = mpsc::channel::<Published>(SUBSCRIBER_CAPACITY);
    let (marks_tx, mut marks) = mpsc::unbounded_channel();
    let watcher = watch(rx, marks_tx);
    let session = tree
        .spawn_session(spec(via, codex, env, &work), vec![tx])
        .await
        .expect("session spawns");
    let mut turns = Vec::new();
    let mut cpu = Vec::new();
    for prompt in ["first", "second", "flood"] {
        let s = session.clone();
        let ask = tokio::spawn(async move {
            ractor::call!(s, |reply| SessionMsg::Ask {
                prompt: prompt.into(),
                traceparent: None,
                reply
            })
        });
        let before = rusage(libc::RUSAGE_SELF);
        turns.push(turn_marks(&mut marks).await);
        cpu.push(rusage(libc::RUSAGE_SELF) - before);
        let result = ask.await.expect("ask task").expect("ask call");
        let result = result.expect("turn completes");
        assert!(
            result.outcome == TurnOutcome::Completed && result.restarts == 0,
            "{} turn {prompt:?}: {:?}, {} restarts",
            via.name(),
            result.outcome,
            result.restarts
        );
    }
    let _closed = session.cast(SessionMsg::Close);
    tree.shutdown().await;
    watcher.join().expect("watcher");
    let codex_cpu = rusage(libc::RUSAGE_CHILDREN) - children_before;
    let second = &turns[1];
    let t0 = second[0].0;
    let after = |want: fn(&Mark) -> bool| {
        second
            .iter()
            .find(|(_, m)| want(m))
            .map(|(at, _)| *at - t0)
            .expect("the second turn has its event")
    };
    let flood = &turns[2];
    let agent_events = flood
        .iter()
        .filter(|(_, m)| matches!(m, Mark::Agent { .. }))
        .count() as u64;
    let flood_wall = flood[flood.len() - 1].0 - flood[0].0;
    Pass {
        second_first_event: after(|m| matches!(m, Mark::Agent { .. })),
        second_first_text: after(|m| *m == Mark::Agent { text: true }),
        flood_events: agent_events,
        flood_wall,
        our_cpu: cpu[2],
        codex_cpu,
    }
}
