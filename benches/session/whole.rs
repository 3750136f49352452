//! Part 2: the whole process — `capfleet chat` and `capfleet run` of one session on
//! the same flood, interleaved, against the sim alone and a raw parse.

use crate::measure::{
    best_of, count_lines, flood_script, mb, median_usage, ratio, raw_parse, run_sim, timed,
};
use crate::{CHAT_FRAMES, CHAT_RUNS, CHUNK, EXE};
use std::path::Path;
use std::process::{Command, Stdio};

pub(crate) fn whole_chat(dir: &Path, user_frame: &Path) {
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
