//! Chaos runs (issue 18), each figure from a real `capfleet run` of sim agents and its
//! report (`chaos::report::Report`), against a baseline measured in the same run:
//!
//! 1. **Agent boot**, the baseline: `capfleet sim` (the soak agent, compressed time)
//!    spawned until its init frame is read, 30 times.
//! 2. **MTTR per fault kind**: a fleet of 4 sessions x 12 turns with that one agent
//!    fault at 0.25 per turn attempt (the signal faults and the byte interposer's);
//!    fault to the next `cap.session.ready` and to the completion of the turn it hit,
//!    p50 / p95 / max. Then `kill -> ready` apart from the restart policy's backoff
//!    (a session's second restart within its window waits `backoff_initial`, more
//!    after): each restart's journaled `delay_ms` taken off, and the first restarts
//!    alone (no backoff), from a wider fleet (16 sessions) for samples. Goal: kill ->
//!    ready p95 <= 50 ms + the agent's boot p95 (the ratio printed; <= 1 meets it).
//!    Then the A2A connection faults (latency, drop, http_5xx, refuse) the same way,
//!    on 4 A2A sessions of one `capfleet sim --mode a2a` peer.
//! 3. **Events lost**: every result the agents emitted against the journal, over all
//!    those runs (goal: 0 unexplained).
//! 4. **The 12-hour-equivalent soak**: `config/fleets/soak.toml` as shipped (8
//!    sessions x 480 turns of about 90 s of scripted work each, every agent fault
//!    kind), its wall time and its report's verdicts.
//!
//! Run: `cargo bench --bench chaos` (`CAPFLEET_BENCH_PARTS=1,2` runs some parts only).
//! Prints figures; asserts nothing about time.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use capfleet_engine::chaos::{Events, Mttr, Report};
use capfleet_wire::chaos::{FaultKind, Reach};
use serde_json::Value;

const BOOTS: usize = 30;
const TIME_SCALE: &str = "1000";

fn config() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/config"))
}

fn main() {
    let exe = env!("CARGO_BIN_EXE_capfleet");
    let parts = std::env::var("CAPFLEET_BENCH_PARTS").unwrap_or_else(|_| "1,2,3,4".into());
    let on = |p: &str| parts.split(',').any(|x| x.trim() == p);
    println!("capfleet chaos bench");
    let script = config().join("sim/soak.toml");
    let boot = boot_baseline(exe, &script);
    if on("1") {
        println!(
            "1. agent boot (sim, init frame read), {BOOTS} spawns: {}",
            boot
        );
    }
    let mut lost = Events::default();
    if on("2") || on("3") {
        println!("2. MTTR per fault kind (4 sessions x 12 turns, the kind at 0.25/turn)");
        println!(
            "   kind         faults detected recovered   to ready p50/p95/max       to turn end p50/p95/max"
        );
        // The agent faults (signals and the byte interposer's), one by one.
        let agent = |k: &FaultKind| matches!(k.reach(), Reach::Signal | Reach::Bytes);
        let mut kill = Vec::new();
        for kind in FaultKind::ALL
            .into_iter()
            .filter(agent)
            .map(FaultKind::as_str)
        {
            let (r, journal) = chaos_run(exe, &one_kind_fleet(kind, 4), "mttr", None);
            row(kind, &r);
            if kind == "kill" {
                kill = restarts(&r, &journal, kind);
            }
            lost += &r.events;
        }
        let (r, journal) = chaos_run(exe, &one_kind_fleet("kill", 16), "mttr", None);
        lost += &r.events;
        kill_apart_from_backoff(&kill, &restarts(&r, &journal, "kill"), &boot);
        // The A2A connection faults, on sessions of one A2A sim peer.
        for kind in FaultKind::ALL
            .into_iter()
            .filter(|k| k.reach() == Reach::Connection)
            .map(FaultKind::as_str)
        {
            let peer = A2aPeer::start(exe);
            let (r, _) = chaos_run(exe, &a2a_fleet(kind), "mttr", Some(&peer.manifest));
            row(kind, &r);
        }
        println!(
            "3. events lost over those runs: {} results emitted, {} journaled, {} lost ({} to faults, {} unexplained; goal 0); {} in flight at a death ({} journaled all the same)",
            lost.emitted,
            lost.journaled,
            lost.lost,
            lost.lost_to_faults,
            lost.unexplained,
            lost.in_flight,
            lost.in_flight_journaled
        );
    }
    if on("4") {
        let fleet = std::fs::read_to_string(config().join("fleets/soak.toml")).expect("soak");
        let t = Instant::now();
        let (r, _) = chaos_run(exe, &fleet, "soak", None);
        let wall = t.elapsed();
        let hours = (r.turns.completed as f64 * 90.0) / 8.0 / 3600.0;
        println!(
            "4. soak (config/fleets/soak.toml): {:.1} s wall for {hours:.1} h of scripted work per session ({:.0}x); outcome {}",
            wall.as_secs_f64(),
            hours * 3600.0 / wall.as_secs_f64(),
            r.outcome.as_deref().unwrap_or("none")
        );
        println!("{r}");
    }
}

/// One fault kind's row of part 2 (its report's broken invariants, if any, after it).
fn row(kind: &str, r: &Report) {
    let k = r.faults.by_kind.get(kind).cloned().unwrap_or_default();
    println!(
        "   {kind:<12} {:>6} {:>8} {:>9}   {:<26} {}",
        k.injected,
        k.detected,
        k.recovered,
        triple(&k.mttr_ready),
        triple(&k.mttr_turn)
    );
    if !r.holds {
        println!("   {kind}: invariants broken:\n{r}");
    }
}

/// A fault's time to ready and the restart it caused: its attempt within the
/// session's window and the backoff it waited.
struct Restarted {
    ready_ms: u64,
    attempt: u64,
    delay_ms: u64,
}

/// Each `kind` fault of `r` that took its agent down, with the first `restart` record
/// after its `chaos` record on its stream (in the journal's order: timestamps repeat
/// within a millisecond).
fn restarts(r: &Report, journal: &[Value], kind: &str) -> Vec<Restarted> {
    let restart_after = |urn: &str, seed_pos: Option<u64>| {
        let at = journal.iter().position(|l| {
            l["type"] == "chaos" && l["urn"] == urn && l["seed_pos"].as_u64() == seed_pos
        })?;
        journal[at..]
            .iter()
            .find(|l| l["type"] == "restart" && l["urn"] == urn)
    };
    r.faults
        .list
        .iter()
        .filter(|f| f.kind == kind)
        .filter_map(|f| {
            let restart = restart_after(&f.urn, f.seed_pos)?;
            Some(Restarted {
                ready_ms: f.ready_ms?,
                attempt: restart["attempt"].as_u64()?,
                delay_ms: restart["delay_ms"].as_u64()?,
            })
        })
        .collect()
}

/// `kill -> ready` with the backoff (the 4-session run), net of it, and the first
/// restarts alone (both runs), against the goal.
fn kill_apart_from_backoff(narrow: &[Restarted], wide: &[Restarted], boot: &Mttr) {
    let all = || narrow.iter().chain(wide);
    let with = Mttr::of(narrow.iter().map(|k| k.ready_ms));
    let net = Mttr::of(all().map(|k| k.ready_ms.saturating_sub(k.delay_ms)));
    let first = Mttr::of(all().filter(|k| k.attempt == 1).map(|k| k.ready_ms));
    println!(
        "   kill -> ready, with the backoff (4 sessions):  {}",
        triple(&with)
    );
    println!(
        "   kill -> ready, net of the backoff (both runs): {}",
        triple(&net)
    );
    println!(
        "   kill -> ready, first restarts (no backoff):    {}",
        triple(&first)
    );
    for (what, m) in [("first restart", &first), ("with backoff", &with)] {
        if let (Some(p95), Some(b)) = (m.p95_ms, boot.p95_ms) {
            let goal = 50 + b;
            println!(
                "   kill -> ready p95 ({what}) {p95} ms against the goal 50 ms + boot p95 {b} ms = {goal} ms: ratio {:.2} ({})",
                p95 as f64 / goal as f64,
                if p95 <= goal { "met" } else { "NOT met" }
            );
        }
    }
}

/// `p50/p95/max ms`, or `-`.
fn triple(m: &Mttr) -> String {
    match (m.p50_ms, m.p95_ms, m.max_ms) {
        (Some(a), Some(b), Some(c)) => format!("{a}/{b}/{c} ms (n={})", m.count),
        _ => "-".into(),
    }
}

/// Spawn the sim `BOOTS` times, each until its init frame is read.
fn boot_baseline(exe: &str, script: &Path) -> Mttr {
    let samples = (0..BOOTS).map(|_| {
        let t = Instant::now();
        let mut child = Command::new(exe)
            .args(["sim", "--script"])
            .arg(script)
            .env("CAPFLEET_SIM_TIME_SCALE", TIME_SCALE)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("sim");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("init frame");
        let d = t.elapsed();
        drop(child.stdin.take());
        child.wait().expect("sim ends");
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    });
    Mttr::of(samples.collect::<Vec<_>>())
}

/// A fleet of `sessions` soak sessions x 12 turns (each looping on itself), restart
/// budgets far above the rate, with `kind` at 0.25 per turn attempt.
fn one_kind_fleet(kind: &str, sessions: usize) -> String {
    let agent = format!(
        "agent = \"sim\"\nscript = \"../sim/soak.toml\"\n\
         env = {{ CAPFLEET_SIM_TIME_SCALE = \"{TIME_SCALE}\" }}"
    );
    fleet(kind, sessions, &agent, "allow_tools = [\"Read\"]\n")
}

/// [`one_kind_fleet`] of 4 A2A sessions of the peer whose manifest is
/// `agents/remote.toml`, with connection fault `kind`.
fn a2a_fleet(kind: &str) -> String {
    fleet(kind, 4, "agent = \"../agents/remote.toml\"", "")
}

/// `sessions` sessions of `agent` (its `[[sessions]]` keys) x 12 turns, `kind` at 0.25
/// per turn attempt; `extra` fleet keys.
fn fleet(kind: &str, sessions: usize, agent: &str, extra: &str) -> String {
    let names: Vec<String> = (1..=sessions).map(|i| format!("m{i}")).collect();
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    let mut f = format!(
        "[fleet]\nname = \"mttr\"\nstart = [{}]\ntask = \"one small step\"\n\
         max_concurrent = {sessions}\non_error = \"continue\"\nauto_answer = true\n\
         {extra}turn_timeout_s = 1.5\n\n[chaos]\nseed = 18\n\
         {kind} = \"0.25/turn\"\nhang_for = \"never\"\nslow_bytes_per_sec = 256\n\
         slow_for = \"300ms\"\nstall_for = \"300ms\"\n\
         latency_delay = \"500ms\"\nlatency_for = \"500ms\"\nrefuse_for = \"300ms\"\n",
        quoted.join(", ")
    );
    for n in names {
        f.push_str(&format!(
            "\n[[sessions]]\nname = \"{n}\"\n{agent}\nmax_turns = 12\n\
             restart = \"permanent\"\nmax_restarts = 1000\nrestart_window_s = 60\n\
             \n[[routes]]\nwhen = [\"{n}.done\"]\nroute_to = \"{n}\"\n"
        ));
    }
    f
}

/// The A2A sim's turn for the connection faults: text in pieces, a pause, more text.
const A2A_SCRIPT: &str = "repeat = true\n[[turn]]\nsteps = [{ say = \"working on it\", chunk = 4, \
                          delay_ms = 20 }, { sleep_ms = 150 }, { say = \" done\" }]\n";

/// `capfleet sim --mode a2a` on a loopback port, and an agent manifest naming it
/// (the A2A remote made from `tests/support/sim-acp.toml`); killed on drop.
struct A2aPeer {
    _sim: support::a2a_peer::A2aPeer,
    _dir: tempfile::TempDir,
    manifest: PathBuf,
}

impl A2aPeer {
    fn start(exe: &str) -> A2aPeer {
        let dir = tempfile::tempdir().expect("dir");
        let script = dir.path().join("a2a.toml");
        std::fs::write(&script, A2A_SCRIPT).expect("script");
        let sim = support::a2a_peer::sim_at(exe, &script, None, &[]);
        let manifest = support::a2a_peer::manifest(dir.path(), &sim.url, "");
        A2aPeer {
            _sim: sim,
            _dir: dir,
            manifest,
        }
    }
}

/// `capfleet run` of `fleet` in a fresh directory (with the soak script, and
/// `agents/remote.toml` copied from `manifest` when given): its report and journal.
fn chaos_run(exe: &str, fleet: &str, name: &str, manifest: Option<&Path>) -> (Report, Vec<Value>) {
    let dir = tempfile::tempdir().expect("dir");
    for sub in ["sim", "fleets", "agents"] {
        std::fs::create_dir_all(dir.path().join(sub)).expect("dir");
    }
    std::fs::copy(
        config().join("sim/soak.toml"),
        dir.path().join("sim/soak.toml"),
    )
    .expect("script");
    if let Some(m) = manifest {
        std::fs::copy(m, dir.path().join("agents/remote.toml")).expect("manifest");
    }
    let path = dir.path().join(format!("fleets/{name}.toml"));
    std::fs::write(&path, fleet).expect("fleet");
    let status = Command::new(exe)
        .arg("run")
        .arg(&path)
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env("CAPFLEET_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("capfleet run");
    if !status.success() {
        println!("   ({name}: capfleet run exited {status})");
    }
    let runs = dir.path().join(".capfleet/runs");
    let run = std::fs::read_dir(&runs)
        .expect("runs")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .next()
        .expect("a run");
    let path = run.join("journal.jsonl");
    let mut r = Report::from_journal(&path).expect("report");
    r.check_orphans(&[]);
    let journal = std::fs::read_to_string(&path)
        .expect("journal")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (r, journal)
}
