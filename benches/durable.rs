//! Durable runs, against a baseline measured in the same run: the cost the keeper
//! (`process::keeper`) adds to each spawn — a process group spawned, waited for and
//! dropped (registered and withdrawn) with a keeper running, against the same without
//! one — and the time from capfleet's death to its keeper having killed every agent
//! group.
//!
//! Run: `cargo bench --bench durable`. Prints figures; asserts nothing about time.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use capfleet_actors::process::{SpawnSpec, keeper};

const SPAWNS: usize = 400;

fn main() {
    let exe = env!("CARGO_BIN_EXE_capfleet");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!("capfleet durable bench ({SPAWNS} spawns per figure)");
    // Warm the path once, then the baseline: no keeper.
    rt.block_on(spawns(SPAWNS / 4));
    let before = rt.block_on(spawns(SPAWNS));
    keeper::start(Path::new(exe)).expect("the keeper starts");
    let with = rt.block_on(spawns(SPAWNS));
    println!(
        "spawn    `true` without keeper     {:>8.1} µs/spawn (baseline)",
        us(before)
    );
    println!(
        "spawn    `true` with keeper        {:>8.1} µs/spawn ({:.3}x baseline, {:+.1} µs)",
        us(with),
        with.as_secs_f64() / before.as_secs_f64(),
        us(with) - us(before)
    );
    let death = keeper_cleanup(exe);
    println!(
        "death    capfleet SIGKILLed -> 20 agent groups gone  {:>8.1} ms",
        death.as_secs_f64() * 1e3
    );
}

/// Spawn `true` `n` times (one after the other), waiting for each; per spawn.
async fn spawns(n: usize) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        let mut g = SpawnSpec::new("true").spawn().expect("spawn true");
        g.wait().await.expect("wait");
    }
    t.elapsed() / n as u32
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `capfleet run` of 20 hanging sim sessions, SIGKILLed once they run: how long
/// until none of its agents is left.
fn keeper_cleanup(exe: &str) -> Duration {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    std::fs::write(
        d.join("hang.toml"),
        "[[turn]]\nsteps = [{ say = \"started\" }, { hang = true }]\n",
    )
    .expect("hang.toml");
    let names: Vec<String> = (0..20).map(|i| format!("\"s{i}\"")).collect();
    let sessions: String = (0..20)
        .map(|i| {
            format!("[[sessions]]\nname = \"s{i}\"\nagent = \"sim\"\nscript = \"hang.toml\"\n")
        })
        .collect();
    std::fs::write(
        d.join("fleet.toml"),
        format!(
            "[fleet]\nname = \"b\"\nstart = [{}]\ntask = \"go\"\n\n{sessions}",
            names.join(", ")
        ),
    )
    .expect("fleet.toml");
    let mut child = Command::new(exe)
        .args(["run", "fleet.toml"])
        .current_dir(d)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("capfleet run");
    let pid = child.id();
    let agents = || capfleet_agents(pid);
    let up = Instant::now();
    while agents() < 20 && up.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    let t = Instant::now();
    let _status = child.wait();
    while agents() > 0 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(2));
    }
    t.elapsed()
}

/// Live processes whose marker names capfleet `pid`.
fn capfleet_agents(pid: u32) -> usize {
    let needle = format!("#{pid}.");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter(|e| {
            std::fs::read(e.path().join("environ")).is_ok_and(|env| {
                env.split(|&b| b == 0).any(|kv| {
                    kv.strip_prefix(b"CAPFLEET_AGENT=")
                        .is_some_and(|v| String::from_utf8_lossy(v).contains(&needle))
                })
            })
        })
        .count()
}
