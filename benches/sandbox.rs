//! Sandbox figures (issue 38), each against the unsandboxed baseline measured in the
//! same run, the backends interleaved round by round (each round in a rotated order,
//! so that none always runs first or last on a loaded machine):
//!
//! 1. spawn-to-ready of the simulator: `capfleet sim --mode stream-json` spawned the
//!    way every driver spawns its agent (`LaunchSpec::spawn_piped`: the session's
//!    sandbox resolved and the spawn confined, then the spawn) until its
//!    `system/init` line; unsandboxed, under bubblewrap, under Landlock; the median
//!    of each and the difference per spawn against the goals (bubblewrap adds
//!    <= 15 ms, Landlock <= 2 ms); of it, the resolution and confinement alone
//!    (`LaunchSpec::confine`, no spawn); and the close, as a driver ends its agent
//!    (end of input, the exit, the group killed and settled);
//! 2. a 100-session fleet: `capfleet run` of simulator sessions with one short turn
//!    each, `sandbox = "none"` against `sandbox = "workspace"` on each backend
//!    (`[sandbox] backend`), from the spawn of `capfleet run` to its exit; the median
//!    of each and its ratio to unsandboxed (goal <= 1.15x); no agent left.
//!
//! A backend this host lacks is said and skipped. Run: `cargo bench --bench sandbox`
//! (`--profile dev` builds faster; the figures then are a debug build's: say which).
//! `CAPFLEET_BENCH_PARTS=1,2` runs some parts only; `CAPFLEET_BENCH_SPAWNS` (default
//! 21) and `CAPFLEET_BENCH_ROUNDS` (default 5) set the rounds of parts 1 and 2,
//! `CAPFLEET_BENCH_SESSIONS` (default 100) the fleet's size.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capfleet_wire::driver::LaunchSpec;
use capfleet_wire::process::DEFAULT_GRACE;
use capfleet_wire::process::sandbox::{self, BackendChoice, SandboxSpec};
use tokio::io::{AsyncBufReadExt as _, BufReader};

mod support;

use support::figures::{median, ms, ratio};
use support::{env_or, survivors};

const EXE: &str = env!("CARGO_BIN_EXE_capfleet");
const SIM_ARGV: [&str; 4] = ["capfleet", "sim", "--mode", "stream-json"];
const QUICK: &str = "[[turn]]\nsteps = [{ say = \"done\" }, { usage = { input_tokens = 10, output_tokens = 2 } }]\n";

/// What a session runs in: unconfined, or a sandbox on one backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    None,
    Bubblewrap,
    Landlock,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Bubblewrap => "bubblewrap",
            Mode::Landlock => "landlock",
        }
    }

    fn choice(self) -> Option<BackendChoice> {
        match self {
            Mode::None => None,
            Mode::Bubblewrap => Some(BackendChoice::Bubblewrap),
            Mode::Landlock => Some(BackendChoice::Landlock),
        }
    }

    /// What each backend may add to a spawn (part 1's goal).
    fn spawn_goal_ms(self) -> f64 {
        match self {
            Mode::None => 0.0,
            Mode::Bubblewrap => 15.0,
            Mode::Landlock => 2.0,
        }
    }
}

/// The modes this host can run: unconfined, and each backend it has (a missing one
/// said).
fn modes() -> Vec<Mode> {
    let mut out = vec![Mode::None];
    for m in [Mode::Bubblewrap, Mode::Landlock] {
        let choice = m.choice().expect("a backend");
        match sandbox::availability().choose(choice) {
            Ok(_) => out.push(m),
            Err(e) => println!("   {}: not on this host ({e}); skipped", m.name()),
        }
    }
    out
}

/// `modes` rotated by `round`: each mode takes each place in turn.
fn rotated(modes: &[Mode], round: usize) -> Vec<Mode> {
    let mut v = modes.to_vec();
    v.rotate_left(round % modes.len());
    v
}

fn main() {
    // The spawns made here go through capfleet's Landlock helper, as capfleet's do.
    sandbox::set_helper(&Path::new(EXE).with_file_name(sandbox::HELPER_BIN));
    let parts = std::env::var("CAPFLEET_BENCH_PARTS").unwrap_or_else(|_| "1,2".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = format!("sandbox-bench-{}", std::process::id());
    println!("capfleet sandbox bench");
    let modes = modes();
    if parts.contains('1') {
        spawns(
            dir.path(),
            &modes,
            &marker,
            env_or("CAPFLEET_BENCH_SPAWNS", 21),
        );
    }
    if parts.contains('2') {
        let n = env_or("CAPFLEET_BENCH_SESSIONS", 100);
        fleets(
            dir.path(),
            &modes,
            n,
            &marker,
            env_or("CAPFLEET_BENCH_ROUNDS", 5),
        );
    }
}

/// One spawn's figures.
#[derive(Default)]
struct Spawn {
    /// The spawn to the `system/init` line.
    ready: Vec<Duration>,
    /// The sandbox resolved and the spawn confined, alone.
    confine: Vec<Duration>,
    /// End of input to the group settled.
    close: Vec<Duration>,
}

/// Part 1: spawn-to-ready and close of the sim, per mode.
fn spawns(dir: &Path, modes: &[Mode], marker: &str, rounds: usize) {
    let rt = support::runtime();
    let ws = dir.join("spawn-ws");
    std::fs::create_dir_all(&ws).expect("workspace");
    let script = ws.join("quick.toml");
    std::fs::write(&script, QUICK).expect("script");
    let base = support::sim_sessions(&ws, "sbx", 1, marker, |_| script.clone())
        .pop()
        .expect("a session")
        .launch;
    let launches: Vec<(Mode, LaunchSpec)> = modes
        .iter()
        .map(|&m| {
            let mut l = base.clone();
            l.sandbox = m.choice().map(|backend| SandboxSpec {
                backend,
                ..SandboxSpec::default()
            });
            (m, l)
        })
        .collect();
    let mut figures: Vec<Spawn> = modes.iter().map(|_| Spawn::default()).collect();
    // A warm-up of each (the binary's pages, bubblewrap's, the probe).
    for (_, l) in &launches {
        rt.block_on(spawn_once(l, &ws));
    }
    for round in 0..rounds {
        for m in rotated(modes, round) {
            let i = modes.iter().position(|x| *x == m).expect("mode");
            let (ready, confine, close) = rt.block_on(spawn_once(&launches[i].1, &ws));
            figures[i].ready.push(ready);
            figures[i].confine.push(confine);
            figures[i].close.push(close);
        }
    }
    assert_eq!(survivors(marker), 0, "no agent left");
    println!(
        "\n1. spawn -> ready (`system/init`) of the sim through the drivers' spawn, median of {rounds} interleaved"
    );
    let none = median(&mut figures[0].ready);
    for (i, m) in modes.iter().enumerate() {
        let f = &mut figures[i];
        let (ready, confine, close) = (
            median(&mut f.ready),
            median(&mut f.confine),
            median(&mut f.close),
        );
        let added = ms(ready) - ms(none);
        let goal = match m {
            Mode::None => String::new(),
            _ => format!(
                "   adds {added:+6.2} ms (goal <= {:.0} ms: {})",
                m.spawn_goal_ms(),
                if added <= m.spawn_goal_ms() {
                    "met"
                } else {
                    "NOT met"
                }
            ),
        };
        println!(
            "   {:<10} ready {:>7.2} ms  (of it resolve + confine {:>5.2} ms)  close {:>7.2} ms{goal}",
            m.name(),
            ms(ready),
            ms(confine),
            ms(close),
        );
    }
}

/// One spawn of `launch` in `ws`: to ready, the confinement alone, the close.
async fn spawn_once(launch: &LaunchSpec, ws: &Path) -> (Duration, Duration, Duration) {
    let argv: Vec<String> = SIM_ARGV.map(String::from).to_vec();
    let t = Instant::now();
    let confined = launch.confine(Path::new(EXE)).expect("confine");
    let confine = t.elapsed();
    drop(confined);
    let t = Instant::now();
    let mut sp = launch.spawn_piped(&argv, ws).expect("spawn the sim");
    let mut out = BufReader::new(sp.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).await.expect("the init line");
    let ready = t.elapsed();
    assert!(line.contains("\"init\""), "the first line is init: {line}");
    let t = Instant::now();
    drop(sp.stdin.take());
    sp.group
        .wait()
        .await
        .expect("the sim exits at end of input");
    sp.group
        .kill(DEFAULT_GRACE)
        .await
        .expect("the group settles");
    (ready, confine, t.elapsed())
}

/// Part 2: `capfleet run` of an `n`-session fleet, per mode.
fn fleets(dir: &Path, modes: &[Mode], n: usize, marker: &str, rounds: usize) {
    let d = dir.join("fleet");
    std::fs::create_dir_all(&d).expect("fleet dir");
    std::fs::write(d.join("quick.toml"), QUICK).expect("script");
    for &m in modes {
        std::fs::write(d.join(format!("{}.toml", m.name())), fleet(m, n, marker)).expect("fleet");
    }
    let mut walls: Vec<Vec<Duration>> = modes.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        for m in rotated(modes, round) {
            let i = modes.iter().position(|x| *x == m).expect("mode");
            walls[i].push(run_fleet(&d, m));
            assert_eq!(survivors(marker), 0, "no agent left after {}", m.name());
        }
    }
    println!(
        "\n2. `capfleet run` of {n} sim sessions (one short turn each), median of {rounds} interleaved"
    );
    let none = median(&mut walls[0]);
    for (i, m) in modes.iter().enumerate() {
        let wall = median(&mut walls[i]);
        let goal = match m {
            Mode::None => String::new(),
            _ => {
                let r = ratio(wall, none);
                format!(
                    "   {r:.2}x unsandboxed (goal <= 1.15x: {}), {:+.1} ms per session",
                    if r <= 1.15 { "met" } else { "NOT met" },
                    (ms(wall) - ms(none)) / n as f64
                )
            }
        };
        println!("   {:<10} {:>8.0} ms{goal}", m.name(), ms(wall));
    }
}

/// The fleet file of `n` sessions in mode `m`, every agent carrying `marker`.
fn fleet(m: Mode, n: usize, marker: &str) -> String {
    let names: Vec<String> = (0..n).map(|i| format!("\"s{i}\"")).collect();
    let mut f = format!(
        "[fleet]\nname = \"sbx\"\nstart = [{}]\ntask = \"go\"\n",
        names.join(", ")
    );
    if m != Mode::None {
        f.push_str(&format!(
            "sandbox = \"workspace\"\n\n[sandbox]\nbackend = \"{}\"\n",
            m.name()
        ));
    }
    for i in 0..n {
        f.push_str(&format!(
            "\n[[sessions]]\nname = \"s{i}\"\nagent = \"sim\"\nscript = \"quick.toml\"\nenv = {{ {} = \"{marker}\" }}\n",
            support::MARKER
        ));
    }
    f
}

/// `capfleet run <mode>.toml` in `d`, from its spawn to its exit.
fn run_fleet(d: &Path, m: Mode) -> Duration {
    let t = Instant::now();
    let out = Command::new(EXE)
        .args(["run", &format!("{}.toml", m.name())])
        .current_dir(d)
        .env("XDG_CONFIG_HOME", d.join("config"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("capfleet run");
    let wall = t.elapsed();
    assert!(
        out.status.success(),
        "`capfleet run` of the {} fleet: {}",
        m.name(),
        String::from_utf8_lossy(&out.stderr)
    );
    wall
}
