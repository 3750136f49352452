//! Session figures, each against a baseline measured in the same run:
//!
//! 1. driver + session throughput: a sim turn of 1,000,000 Claude-shaped `assistant`
//!    text frames (a `flood` step) through the real stream-json driver actor and
//!    session actor (`Orchestrator::start` + `spawn_session`, a subscriber counting
//!    events), in events/s by wall and by CPU time; against a raw
//!    `serde_json::from_slice::<Value>` parse of the same lines (captured from the sim
//!    to a file first) and the sim alone writing them to that file;
//! 2. the whole process: `capfleet chat sim --task x --script <200,000 frames>`,
//!    stdout to /dev/null, wall and CPU (user+sys of the child and its sim, from
//!    `wait4`), median of 5; against the sim alone producing the same frames to
//!    /dev/null and a raw parse of the lines; and `capfleet run` of a one-session
//!    fleet on the same script, interleaved: its wall over chat's (goal <= 1.3x) and
//!    its journal's bytes per text byte (goal <= 1.5);
//! 3. crash-to-ready restart latency: a turn whose sim kills itself once (SIGKILL),
//!    then answers; time from the `cap.error` of the death to the next
//!    `cap.session.ready` (and to the retried turn's first text), median over the
//!    sessions; against the sim's own boot (spawn to its `system/init` line).
//!
//! Run: `cargo bench --bench session`. Prints figures; asserts nothing about time.
//! `CAPFLEET_BENCH_PARTS=1,3` runs some parts only; `CAPFLEET_BENCH_FRAMES` changes
//! the frame count of part 1.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capfleet_actors::driver::LaunchSpec;
use capfleet_actors::events::{EventBody, Published, SUBSCRIBER_CAPACITY};
use capfleet_actors::manifest::Manifest;
use capfleet_actors::protocol::{CapEvent, SessionConfig};
use capfleet_actors::registry::Binding;
use capfleet_actors::root::{Orchestrator, RootArgs};
use capfleet_actors::session::{SessionMsg, SessionSpec};
use tokio::sync::mpsc;

const EXE: &str = env!("CARGO_BIN_EXE_capfleet");
const SIM_MANIFEST: &str = include_str!("../config/agents/sim.toml");
/// Text bytes per flood frame: a frame line is then ~195 bytes, as Claude's short
/// streamed chunks are.
const CHUNK: u64 = 8;
const THROUGHPUT_FRAMES: u64 = 1_000_000;
const CHAT_FRAMES: u64 = 200_000;
const CHAT_RUNS: usize = 5;
const RESTARTS: usize = 24;
const USER_FRAME: &str = "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}\n";

fn main() {
    let parts = std::env::var("CAPFLEET_BENCH_PARTS").unwrap_or_else(|_| "1,2,3".into());
    let frames: u64 = std::env::var("CAPFLEET_BENCH_FRAMES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(THROUGHPUT_FRAMES);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-session");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let user_frame = dir.join("user-frame.ndjson");
    std::fs::write(&user_frame, USER_FRAME).expect("user frame");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!("capfleet session bench (2 tokio workers, as `capfleet chat`)");
    if parts.contains('1') {
        throughput(&runtime, &dir, &user_frame, frames);
    }
    if parts.contains('2') {
        whole_chat(&dir, &user_frame);
    }
    if parts.contains('3') {
        restarts(&runtime, &dir);
    }
}

// ---- 1. driver + session throughput ----------------------------------------------

fn throughput(rt: &tokio::runtime::Runtime, dir: &Path, user_frame: &Path, frames: u64) {
    let script = flood_script(dir, "throughput", frames);
    let capture = dir.join("throughput.ndjson");
    let sim = run_sim(&script, user_frame, Some(&capture));
    let data = std::fs::read(&capture).expect("captured frames");
    let lines = count_lines(&data);
    // Warm once, then the better of two passes.
    let raw = best_of(2, || raw_parse(&data));
    let raw_cpu = best_of_cpu(1, || raw_parse(&data));

    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(rt.block_on(pipeline_run(&script)));
    }
    let expected_text = frames;
    for r in &runs {
        assert_eq!(
            r.texts, expected_text,
            "every flood frame reaches the subscriber as one cap.text_chunk"
        );
    }
    runs.sort_by_key(|r| r.wall);
    let best = &runs[0];
    let median = &runs[runs.len() / 2];
    let mut cpus: Vec<Duration> = runs.iter().map(|r| r.cpu).collect();
    cpus.sort();
    let cpu = cpus[cpus.len() / 2];

    let n = lines as f64;
    let rate = |d: Duration| n / d.as_secs_f64();
    println!(
        "\n1. driver + session throughput ({} frames, {:.1} MB, {} text bytes per frame)",
        lines,
        mb(data.len()),
        CHUNK
    );
    println!(
        "   baseline raw serde_json::from_slice::<Value>  {:>10.0} lines/s  ({:.3} s wall, {:.3} s CPU)",
        rate(raw),
        raw.as_secs_f64(),
        raw_cpu.as_secs_f64()
    );
    println!(
        "   baseline sim alone -> file                    {:>10.0} lines/s  ({:.3} s wall, {:.3} s CPU)",
        rate(sim.wall),
        sim.wall.as_secs_f64(),
        sim.cpu.as_secs_f64()
    );
    println!(
        "   driver+session, best of {} (wall)              {:>10.0} events/s ({:.3} s)  {:>5.1}% of raw",
        runs.len(),
        best.events as f64 / best.wall.as_secs_f64(),
        best.wall.as_secs_f64(),
        100.0 * raw.as_secs_f64() / best.wall.as_secs_f64() * best.events as f64 / n
    );
    println!(
        "   driver+session, median (wall)                 {:>10.0} events/s ({:.3} s)  {:>5.1}% of raw",
        median.events as f64 / median.wall.as_secs_f64(),
        median.wall.as_secs_f64(),
        100.0 * raw.as_secs_f64() / median.wall.as_secs_f64() * median.events as f64 / n
    );
    println!(
        "   driver+session, median CPU of this process    {:>10.0} events/CPU-s ({:.3} s)  {:>5.1}% of raw CPU",
        median.events as f64 / cpu.as_secs_f64(),
        cpu.as_secs_f64(),
        100.0 * raw_cpu.as_secs_f64() / cpu.as_secs_f64() * median.events as f64 / n
    );
    println!(
        "   (events = {} published, {} of them cap.text_chunk; the sim runs concurrently on the same cores)",
        median.events, median.texts
    );
}

struct PipelineRun {
    wall: Duration,
    cpu: Duration,
    events: u64,
    texts: u64,
}

/// One turn of the flood script through the real tree; timed from the ask to the
/// subscriber seeing the turn's end (every event delivered).
async fn pipeline_run(script: &Path) -> PipelineRun {
    let orchestrator = start_tree().await;
    let (tx, rx) = mpsc::channel::<Published>(SUBSCRIBER_CAPACITY);
    let (marks_tx, mut marks) = mpsc::unbounded_channel();
    let counter = tokio::spawn(watch(rx, marks_tx));
    let spec = sim_spec("throughput", script, None);
    let session = orchestrator
        .spawn_session(spec, vec![tx])
        .await
        .expect("session spawns");
    let ready = wait_mark(&mut marks, |m| m.kind == Kind::Ready).await;
    let cpu0 = self_cpu();
    let t0 = Instant::now();
    let seen0 = ready.seen;
    let ask = {
        let session = session.clone();
        tokio::spawn(async move {
            ractor::call!(session, |reply| SessionMsg::Ask {
                prompt: "flood".into(),
                reply
            })
        })
    };
    let end = wait_mark(&mut marks, |m| m.kind == Kind::TurnEnded).await;
    let wall = end.at - t0;
    let cpu = self_cpu() - cpu0;
    let result = ask.await.expect("ask task").expect("ask call");
    let result = result.expect("turn completes");
    std::hint::black_box(&result);
    let _closed = session.cast(SessionMsg::Close);
    orchestrator.shutdown().await;
    let _ = counter.await;
    PipelineRun {
        wall,
        cpu,
        events: end.seen - seen0,
        texts: end.texts,
    }
}

// ---- 2. whole process ------------------------------------------------------------

fn whole_chat(dir: &Path, user_frame: &Path) {
    let script = flood_script(dir, "chat", CHAT_FRAMES);
    let capture = dir.join("chat.ndjson");
    run_sim(&script, user_frame, Some(&capture));
    let data = std::fs::read(&capture).expect("captured frames");
    let lines = count_lines(&data);
    let raw = best_of(2, || raw_parse(&data));

    let fleet_dir = dir.join("fleet");
    std::fs::create_dir_all(&fleet_dir).expect("fleet dir");
    let fleet = format!(
        "[fleet]\nname = \"bench\"\nstart = [\"a\"]\ntask = \"x\"\n\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\nscript = {:?}\n",
        script.display().to_string()
    );
    std::fs::write(fleet_dir.join("fleet.toml"), fleet).expect("fleet.toml");
    let mut sims = Vec::new();
    let mut chats = Vec::new();
    let mut runs = Vec::new();
    for _ in 0..CHAT_RUNS {
        // Interleaved, so both see the same load on the shared cores.
        sims.push(run_sim(&script, user_frame, None));
        let mut c = Command::new(EXE);
        c.args(["chat", "sim", "--task", "x", "--script"])
            .arg(&script)
            .env("NO_COLOR", "1")
            .env("XDG_CONFIG_HOME", dir.join("xdg"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        chats.push(timed(c));
        let mut r = Command::new(EXE);
        r.args(["run", "fleet.toml"])
            .current_dir(&fleet_dir)
            .env("NO_COLOR", "1")
            .env("XDG_CONFIG_HOME", dir.join("xdg"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        runs.push(timed(r));
    }
    let sim = median_usage(&sims);
    let chat = median_usage(&chats);
    let run = median_usage(&runs);
    println!(
        "\n2. whole process: capfleet chat sim --task x ({} frames, {:.1} MB), stdout /dev/null, median of {}",
        lines,
        mb(data.len()),
        CHAT_RUNS
    );
    println!(
        "   baseline raw serde_json Value parse of the lines   {:>7.3} s",
        raw.as_secs_f64()
    );
    println!(
        "   baseline sim alone -> /dev/null                    {:>7.3} s wall  {:>7.3} s CPU",
        sim.wall.as_secs_f64(),
        sim.cpu.as_secs_f64()
    );
    println!(
        "   capfleet chat (CPU includes its sim)               {:>7.3} s wall  {:>7.3} s CPU  ({:.2}x sim wall, {:.2}x sim+raw CPU)  goal <= 0.700 s wall",
        chat.wall.as_secs_f64(),
        chat.cpu.as_secs_f64(),
        ratio(chat.wall, sim.wall),
        ratio(chat.cpu, sim.cpu + raw)
    );
    let walls: Vec<String> = chats
        .iter()
        .map(|u| format!("{:.3}", u.wall.as_secs_f64()))
        .collect();
    println!("   chat walls: {}", walls.join(" "));
    let journal = std::fs::read_dir(fleet_dir.join(".capfleet/runs"))
        .expect("run directories")
        .filter_map(|e| std::fs::metadata(e.ok()?.path().join("journal.jsonl")).ok())
        .map(|m| m.len())
        .max()
        .unwrap_or(0);
    println!(
        "   capfleet run of the same turn (one session)        {:>7.3} s wall  {:>7.3} s CPU  run/chat wall {:.2}x (goal <= 1.30x); journal {:.3} bytes per text byte (goal <= 1.5)",
        run.wall.as_secs_f64(),
        run.cpu.as_secs_f64(),
        ratio(run.wall, chat.wall),
        journal as f64 / (CHAT_FRAMES * CHUNK) as f64
    );
}

// ---- 3. restart latency ----------------------------------------------------------

fn restarts(rt: &tokio::runtime::Runtime, dir: &Path) {
    let script = dir.join("crash-once.toml");
    std::fs::write(
        &script,
        "[[turn]]\nsteps = [ { crash = \"sigkill\", once = true }, { say = \"recovered\" } ]\n",
    )
    .expect("crash script");
    let mut boots = Vec::new();
    let mut to_ready = Vec::new();
    let mut to_text = Vec::new();
    let mut stamped = Vec::new();
    let mut deaths = Vec::new();
    let mut echoes = Vec::new();
    for i in 0..RESTARTS {
        // Interleaved with the restarts, so both see the same load.
        boots.push(sim_boot());
        let state = dir.join(format!("crash-state-{i}"));
        let _ = std::fs::remove_dir_all(&state);
        let r = rt.block_on(restart_run(&script, &state));
        to_ready.push(r.ready);
        to_text.push(r.text);
        stamped.push(r.stamped_ms);
        deaths.push(r.death);
        echoes.push(r.echo);
    }
    let boot = median(&mut boots);
    let ready = median(&mut to_ready);
    let text = median(&mut to_text);
    let death = median(&mut deaths);
    let echo = median(&mut echoes);
    println!(
        "\n3. crash-to-ready restart latency (SIGKILL mid-turn, median of {RESTARTS} sessions)"
    );
    println!(
        "   baseline sim boot (spawn -> system/init line)        {:>8.2} ms",
        ms(boot)
    );
    println!(
        "   cap.error -> cap.session.ready (new driver)          {:>8.2} ms   (max {:.2} ms)  goal <= 50 ms + boot",
        ms(ready),
        ms(*to_ready.iter().max().expect("runs"))
    );
    stamped.sort();
    println!(
        "   (cross-check, the events' own ts_ms: median {} ms, max {} ms)",
        stamped[stamped.len() / 2],
        stamped[stamped.len() - 1]
    );
    println!(
        "   cap.error -> first text of the retried turn          {:>8.2} ms   ({:.2}x boot; includes the new sim's boot)",
        ms(text),
        ratio(text, boot)
    );
    println!(
        "   baseline ask -> first text of a normal turn          {:>8.2} ms",
        ms(echo)
    );
    println!(
        "   ask -> cap.error of the death (prompt, crash, reap)  {:>8.2} ms   ({:.2}x the normal turn)",
        ms(death),
        ratio(death, echo)
    );
}

/// One session whose first turn crashes once: error→ready, error→first text (stamped
/// on arrival) and error→ready by the events' own millisecond stamps.
/// Also ask→cap.error (prompt out, sim dies, EOF, reap) and, as its baseline, a
/// second, normal turn's ask→first text.
async fn restart_run(script: &Path, state: &Path) -> RestartRun {
    let orchestrator = start_tree().await;
    let (tx, rx) = mpsc::channel::<Published>(SUBSCRIBER_CAPACITY);
    let (marks_tx, mut marks) = mpsc::unbounded_channel();
    let counter = watch_thread(rx, marks_tx);
    let spec = sim_spec("crash", script, Some(state));
    let session = orchestrator
        .spawn_session(spec, vec![tx])
        .await
        .expect("session spawns");
    wait_mark(&mut marks, |m| m.kind == Kind::Ready).await;
    let asked = Instant::now();
    let result = ractor::call!(session, |reply| SessionMsg::Ask {
        prompt: "go".into(),
        reply
    })
    .expect("ask call")
    .expect("turn completes after the restart");
    assert_eq!(result.restarts, 1, "the turn restarted once");
    wait_mark(&mut marks, |m| m.kind == Kind::TurnEnded).await;
    let asked_again = Instant::now();
    ractor::call!(session, |reply| SessionMsg::Ask {
        prompt: "again".into(),
        reply
    })
    .expect("ask call")
    .expect("echo turn completes");
    wait_mark(&mut marks, |m| m.kind == Kind::TurnEnded).await;
    let _closed = session.cast(SessionMsg::Close);
    orchestrator.shutdown().await;
    drop(marks);
    let all = counter.join().expect("watcher");
    let error = all
        .iter()
        .find(|m| m.kind == Kind::Error)
        .expect("cap.error of the death");
    let ready = all
        .iter()
        .find(|m| m.kind == Kind::Ready && m.at > error.at)
        .expect("ready after the restart");
    let text = all
        .iter()
        .find(|m| m.kind == Kind::FirstText && m.at > error.at)
        .expect("text after the restart");
    let echo = all
        .iter()
        .find(|m| m.kind == Kind::FirstText && m.at > asked_again)
        .expect("text of the second turn");
    RestartRun {
        ready: ready.at - error.at,
        text: text.at - error.at,
        stamped_ms: ready.ts_ms - error.ts_ms,
        death: error.at - asked,
        echo: echo.at - asked_again,
    }
}

struct RestartRun {
    ready: Duration,
    text: Duration,
    stamped_ms: u64,
    /// Ask → the death's cap.error.
    death: Duration,
    /// Ask → first text of a normal turn.
    echo: Duration,
}

/// Spawn the sim with piped stdio; time until its first line (`system/init`).
fn sim_boot() -> Duration {
    let t0 = Instant::now();
    let mut child = Command::new(EXE)
        .args(["sim", "--mode", "stream-json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sim");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("init line");
    let boot = t0.elapsed();
    assert!(line.contains("\"init\""), "first line is init: {line}");
    drop(child.stdin.take());
    let _ = child.wait();
    boot
}

// ---- the tree and its events -----------------------------------------------------

async fn start_tree() -> Orchestrator {
    Orchestrator::start(RootArgs {
        fleet_name: "bench".into(),
        journal: None,
        faults: None,
        policy: Default::default(),
        budget: Default::default(),
        human: None,
        fleet_events: None,
        telemetry: Default::default(),
    })
    .await
    .expect("tree starts")
}

fn sim_spec(name: &str, script: &Path, state: Option<&Path>) -> SessionSpec {
    let manifest = Manifest::parse(SIM_MANIFEST, "config/agents/sim.toml")
        .expect("sim manifest")
        .manifest;
    let cwd = std::env::current_dir().expect("cwd").display().to_string();
    let mut launch = LaunchSpec::new(
        format!("cap://bench/{name}"),
        Arc::new(manifest),
        SessionConfig::new(cwd),
    );
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
enum Kind {
    Ready,
    Error,
    /// The first `cap.text_chunk` after a ready or a turn start.
    FirstText,
    TurnEnded,
}

#[derive(Debug, Clone, Copy)]
struct Mark {
    at: Instant,
    /// The event's own wall-clock stamp (ms), a cross-check of `at`.
    ts_ms: u64,
    kind: Kind,
    /// Events received so far, this one included.
    seen: u64,
    /// `cap.text_chunk`s received so far.
    texts: u64,
}

/// Counts every event and stamps the interesting ones on arrival.
#[derive(Default)]
struct Watcher {
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
async fn watch(mut rx: mpsc::Receiver<Published>, marks: mpsc::UnboundedSender<Mark>) -> Vec<Mark> {
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
fn watch_thread(
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

async fn wait_mark(
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

// ---- processes -------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct Usage {
    wall: Duration,
    cpu: Duration,
}

/// A flood turn of `frames` text frames of [`CHUNK`] bytes.
fn flood_script(dir: &Path, name: &str, frames: u64) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let mut f = std::fs::File::create(&path).expect("script");
    writeln!(
        f,
        "[[turn]]\nsteps = [ {{ flood = {}, chunk = {CHUNK} }} ]",
        frames * CHUNK
    )
    .expect("write script");
    path
}

/// The sim alone: one user frame in, the turn's frames to `out` (else /dev/null).
fn run_sim(script: &Path, user_frame: &Path, out: Option<&Path>) -> Usage {
    let mut c = Command::new(EXE);
    c.args(["sim", "--mode", "stream-json", "--script"])
        .arg(script)
        .stdin(std::fs::File::open(user_frame).expect("user frame"))
        .stderr(Stdio::null());
    match out {
        Some(path) => c.stdout(std::fs::File::create(path).expect("capture file")),
        None => c.stdout(Stdio::null()),
    };
    timed(c)
}

/// Runs to completion; wall time and the child's user+sys (its reaped descendants
/// included), from `wait4`.
fn timed(mut c: Command) -> Usage {
    let t0 = Instant::now();
    let child = c.spawn().expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our unreaped child; `status` and `ru` are valid out-pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let wall = t0.elapsed();
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{c:?} failed: status {status:#x}"
    );
    drop(child);
    Usage {
        wall,
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
    }
}

fn self_cpu() -> Duration {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

// ---- baselines and arithmetic ----------------------------------------------------

fn raw_parse(data: &[u8]) {
    for line in data.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line).expect("sim frames parse");
        std::hint::black_box(v);
    }
}

fn count_lines(data: &[u8]) -> usize {
    data.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count()
}

fn best_of(passes: usize, mut f: impl FnMut()) -> Duration {
    f();
    (0..passes)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .expect("at least one pass")
}

fn best_of_cpu(passes: usize, mut f: impl FnMut()) -> Duration {
    (0..passes)
        .map(|_| {
            let t = self_cpu();
            f();
            self_cpu() - t
        })
        .min()
        .expect("at least one pass")
}

fn median_usage(runs: &[Usage]) -> Usage {
    let mut walls: Vec<Duration> = runs.iter().map(|u| u.wall).collect();
    let mut cpus: Vec<Duration> = runs.iter().map(|u| u.cpu).collect();
    Usage {
        wall: median(&mut walls),
        cpu: median(&mut cpus),
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1e6
}
