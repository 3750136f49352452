//! Chaos runs (issue 18), each figure from a real `capfleet run` of sim agents and its
//! report (`chaos::report::Report`), against a baseline measured in the same run:
//!
//! 1. **Agent boot**, the baseline: `capfleet sim` (the soak agent, compressed time)
//!    spawned until its init frame is read, 30 times.
//! 2. **MTTR per fault kind**: a fleet of 4 sessions x 12 turns with that one agent
//!    fault at 0.25 per turn attempt; fault to the next `cap.session.ready` and to the
//!    completion of the turn it hit, p50 / p95 / max. Goal: kill -> ready p95 <= 50 ms
//!    + the agent's boot p95 (the ratio printed; <= 1 meets it).
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

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use capfleet_actors::chaos::report::{Events, Mttr, Report};
use capfleet_actors::chaos::{FaultKind, Reach};

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
        for kind in FaultKind::ALL
            .into_iter()
            .filter(agent)
            .map(FaultKind::as_str)
        {
            let r = chaos_run(exe, &one_kind_fleet(kind), "mttr");
            let k = r.faults.by_kind.get(kind).cloned().unwrap_or_default();
            println!(
                "   {kind:<12} {:>6} {:>8} {:>9}   {:<26} {}",
                k.injected,
                k.detected,
                k.recovered,
                triple(&k.mttr_ready),
                triple(&k.mttr_turn)
            );
            if kind == "kill"
                && let (Some(p95), Some(b)) = (k.mttr_ready.p95_ms, boot.p95_ms)
            {
                let goal = 50 + b;
                println!(
                    "   kill -> ready p95 {p95} ms against the goal 50 ms + boot p95 {b} ms = {goal} ms: ratio {:.2} ({})",
                    p95 as f64 / goal as f64,
                    if p95 <= goal { "met" } else { "NOT met" }
                );
            }
            lost += &r.events;
            if !r.holds {
                println!("   {kind}: invariants broken:\n{r}");
            }
        }
        println!(
            "3. events lost over those runs: {} results emitted, {} journaled, {} lost ({} to garble/truncate, {} unexplained; goal 0)",
            lost.emitted, lost.journaled, lost.lost, lost.lost_to_faults, lost.unexplained
        );
    }
    if on("4") {
        let fleet = std::fs::read_to_string(config().join("fleets/soak.toml")).expect("soak");
        let t = Instant::now();
        let r = chaos_run(exe, &fleet, "soak");
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

/// A fleet of 4 soak sessions x 12 turns (each looping on itself), restart budgets
/// far above the rate, with `kind` at 0.25 per turn attempt.
fn one_kind_fleet(kind: &str) -> String {
    let names = ["m1", "m2", "m3", "m4"];
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    let mut f = format!(
        "[fleet]\nname = \"mttr\"\nstart = [{}]\ntask = \"one small step\"\n\
         max_concurrent = 4\non_error = \"continue\"\nauto_answer = true\n\
         allow_tools = [\"Read\"]\nturn_timeout_s = 1.5\n\n[chaos]\nseed = 18\n\
         {kind} = \"0.25/turn\"\nhang_for = \"never\"\nslow_bytes_per_sec = 256\n\
         slow_for = \"300ms\"\nstall_for = \"300ms\"\n",
        quoted.join(", ")
    );
    for n in names {
        f.push_str(&format!(
            "\n[[sessions]]\nname = \"{n}\"\nagent = \"sim\"\nscript = \"../sim/soak.toml\"\n\
             env = {{ CAPFLEET_SIM_TIME_SCALE = \"{TIME_SCALE}\" }}\nmax_turns = 12\n\
             restart = \"permanent\"\nmax_restarts = 1000\nrestart_window_s = 60\n\
             \n[[routes]]\nwhen = [\"{n}.done\"]\nroute_to = \"{n}\"\n"
        ));
    }
    f
}

/// `capfleet run` of `fleet` in a fresh directory (with the soak script), its report.
fn chaos_run(exe: &str, fleet: &str, name: &str) -> Report {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::create_dir_all(dir.path().join("sim")).expect("sim dir");
    std::fs::create_dir_all(dir.path().join("fleets")).expect("fleets dir");
    std::fs::copy(
        config().join("sim/soak.toml"),
        dir.path().join("sim/soak.toml"),
    )
    .expect("script");
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
    let mut r = Report::from_journal(&run.join("journal.jsonl")).expect("report");
    r.check_orphans(&[]);
    r
}
