//! Part 4: one nesting level — `capfleet chat capfleet` (capfleet's own manifest:
//! `capfleet speak --agent sim`, stream-json both ways) against `capfleet chat sim`
//! on the same flood, interleaved: the text throughput through one level as a share
//! of the direct one (goal >= 50%); and the first token's latency through it (spawn
//! to the first text event `chat --json` prints, one short turn), against direct.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::measure::{flood_script, median, median_usage, ms, ratio, timed};
use crate::{CHAT_FRAMES, CHAT_RUNS, CHUNK, EXE};

fn chat(dir: &Path, agent: &str, script: &Path) -> Command {
    let mut c = Command::new(EXE);
    c.args(["chat", agent, "--task", "x", "--script"])
        .arg(script)
        .args(["--env", "CAPFLEET_SPEAK_AGENT=sim"])
        .env("NO_COLOR", "1")
        .env("XDG_CONFIG_HOME", dir.join("xdg"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

pub(crate) fn nested(dir: &Path) {
    let script = flood_script(dir, "nested", CHAT_FRAMES);
    let mut direct = Vec::new();
    let mut nested = Vec::new();
    for _ in 0..CHAT_RUNS {
        direct.push(timed(chat(dir, "sim", &script)));
        nested.push(timed(chat(dir, "capfleet", &script)));
    }
    let direct = median_usage(&direct);
    let nested = median_usage(&nested);
    let mb = (CHAT_FRAMES * CHUNK) as f64 / 1e6;
    let rate = |wall: std::time::Duration| mb / wall.as_secs_f64();
    println!(
        "\n4. one nesting level: {CHAT_FRAMES} text frames ({mb:.1} MB of text), median of {CHAT_RUNS}"
    );
    println!(
        "   baseline capfleet chat sim                         {:>7.3} s wall  {:>7.3} s CPU  {:>6.2} MB/s",
        direct.wall.as_secs_f64(),
        direct.cpu.as_secs_f64(),
        rate(direct.wall)
    );
    println!(
        "   capfleet chat capfleet (speak --agent sim)         {:>7.3} s wall  {:>7.3} s CPU  {:>6.2} MB/s  {:.0}% of direct (goal >= 50%)",
        nested.wall.as_secs_f64(),
        nested.cpu.as_secs_f64(),
        rate(nested.wall),
        100.0 / ratio(nested.wall, direct.wall)
    );
    first_token(dir);
}

/// Spawn to the first `cap.text_chunk` line of `chat --json`, then the run's end.
fn to_first_text(mut c: Command) -> Duration {
    let t0 = Instant::now();
    let mut child = c
        .arg("--json")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = None;
    for line in out.lines() {
        let line = line.expect("line");
        if first.is_none() && line.contains("\"cap.text_chunk\"") {
            first = Some(t0.elapsed());
        }
    }
    assert!(child.wait().expect("wait").success(), "{c:?} failed");
    first.expect("a text event")
}

fn first_token(dir: &Path) {
    let script = dir.join("first-token.toml");
    std::fs::write(&script, "[[turn]]\nsteps = [{ say = \"hi\" }]\n").expect("script");
    let (mut direct, mut nested) = (Vec::new(), Vec::new());
    for _ in 0..CHAT_RUNS {
        direct.push(to_first_text(chat(dir, "sim", &script)));
        nested.push(to_first_text(chat(dir, "capfleet", &script)));
    }
    let (direct, nested) = (median(&mut direct), median(&mut nested));
    println!("   first token (spawn to the first text event), median of {CHAT_RUNS}:");
    println!(
        "     direct {:>7.1} ms   through speak {:>7.1} ms   (+{:.1} ms, {:.2}x)",
        ms(direct),
        ms(nested),
        ms(nested.saturating_sub(direct)),
        ratio(nested, direct)
    );
}
