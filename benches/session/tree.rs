//! The tree the in-process parts start, the sim sessions they spawn, and the
//! subscribers that count and stamp their events.

use crate::{EXE, SIM_MANIFEST};
use capfleet_engine::manifest::Manifest;
use capfleet_engine::protocol::{CapEvent, SessionConfig};
use capfleet_engine::root::{Orchestrator, RootArgs};
use capfleet_engine::session::SessionSpec;
use capfleet_wire::driver::LaunchSpec;
use capfleet_wire::events::{EventBody, Published};
use capfleet_wire::registry::Binding;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub(crate) async fn start_tree() -> Orchestrator {
    Orchestrator::start(RootArgs::new("bench"))
        .await
        .expect("tree starts")
}

/// The launch of session `name` of the manifest `text` (read from `origin`), in the
/// current directory.
pub(crate) fn launch(name: &str, text: &str, origin: &str) -> LaunchSpec {
    let manifest = Manifest::parse(text, origin).expect("manifest").manifest;
    let cwd = std::env::current_dir().expect("cwd").display().to_string();
    LaunchSpec::new(
        format!("cap://bench/{name}"),
        Arc::new(manifest),
        SessionConfig::new(cwd),
    )
}

pub(crate) fn sim_spec(name: &str, script: &Path, state: Option<&Path>) -> SessionSpec {
    let mut launch = launch(name, SIM_MANIFEST, "config/agents/sim.toml");
    launch.program = Some(PathBuf::from(EXE));
    launch
        .env
        .push(("CAPFLEET_SIM_SCRIPT".into(), script.display().to_string()));
    if let Some(state) = state {
        launch
            .env
            .push(("CAPFLEET_SIM_STATE".into(), state.display().to_string()));
    }
    SessionSpec::new(name, launch, Binding::StreamJson)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Ready,
    Error,
    /// The first `cap.text_chunk` after a ready or a turn start.
    FirstText,
    TurnEnded,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    pub(crate) at: Instant,
    /// The event's own wall-clock stamp (ms), a cross-check of `at`.
    pub(crate) ts_ms: u64,
    pub(crate) kind: Kind,
    /// Events received so far, this one included.
    pub(crate) seen: u64,
    /// `cap.text_chunk`s received so far.
    pub(crate) texts: u64,
}

/// Counts every event and stamps the interesting ones on arrival.
#[derive(Default)]
pub(crate) struct Watcher {
    seen: u64,
    texts: u64,
    after_ready: bool,
    all: Vec<Mark>,
}

impl Watcher {
    fn on_event(&mut self, event: &Published) -> Option<Mark> {
        self.seen += 1;
        let kind = match &event.body {
            EventBody::Cap { event } => match event {
                CapEvent::TextChunk(_) => {
                    self.texts += 1;
                    std::mem::take(&mut self.after_ready).then_some(Kind::FirstText)
                }
                CapEvent::SessionReady(_) => {
                    self.after_ready = true;
                    Some(Kind::Ready)
                }
                CapEvent::Error(_) => Some(Kind::Error),
                _ => None,
            },
            EventBody::TurnStarted { .. } => {
                self.after_ready = true;
                None
            }
            EventBody::TurnEnded { .. } => Some(Kind::TurnEnded),
            _ => None,
        }?;
        let mark = Mark {
            at: Instant::now(),
            ts_ms: event.ts_ms,
            kind,
            seen: self.seen,
            texts: self.texts,
        };
        self.all.push(mark);
        Some(mark)
    }
}

/// The subscriber as a task on the runtime (as `capfleet chat`'s printer is).
pub(crate) async fn watch(
    mut rx: mpsc::Receiver<Published>,
    marks: mpsc::UnboundedSender<Mark>,
) -> Vec<Mark> {
    let mut w = Watcher::default();
    while let Some(event) = rx.recv().await {
        if let Some(mark) = w.on_event(&event) {
            let _ = marks.send(mark);
        }
    }
    w.all
}

/// The subscriber on its own thread, so an event is stamped when it is published,
/// not when a busy runtime gets round to a task (latency figures).
pub(crate) fn watch_thread(
    mut rx: mpsc::Receiver<Published>,
    marks: mpsc::UnboundedSender<Mark>,
) -> std::thread::JoinHandle<Vec<Mark>> {
    std::thread::spawn(move || {
        let mut w = Watcher::default();
        while let Some(event) = rx.blocking_recv() {
            if let Some(mark) = w.on_event(&event) {
                let _ = marks.send(mark);
            }
        }
        w.all
    })
}

pub(crate) async fn wait_mark(
    marks: &mut mpsc::UnboundedReceiver<Mark>,
    want: impl Fn(&Mark) -> bool,
) -> Mark {
    let deadline = Duration::from_secs(300);
    loop {
        match tokio::time::timeout(deadline, marks.recv()).await {
            Ok(Some(m)) if want(&m) => return m,
            Ok(Some(_)) => {}
            Ok(None) => panic!("the session ended before the awaited event"),
            Err(_) => panic!("no awaited event within {deadline:?}"),
        }
    }
}
