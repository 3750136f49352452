//! Durable runs (issue 17), each figure against a baseline measured in the same run:
//!
//! 1. **Resume** of a run with 1,000 sessions and about 1,000,000 journal records, one
//!    session's turn cut: `capfleet run --resume` from its start to the first resumed
//!    turn in the journal (goal: under 2 s), and the journal's replay alone
//!    (`resume::recover`) against reading the same file's lines. The run is made from
//!    a real one-session run's journal (its records, each session's renamed), so the
//!    records are the ones capfleet writes.
//! 2. **Journal throughput** with the records durable runs added (`routed`,
//!    `delivered`, `session`, `resume_id`, `join`, turns with their prompt) against
//!    the same number of plain agent events, through the journal actor to disk (goal:
//!    >= 500k records/s).
//! 3. **Spawn cost** of the keeper and the marker: a process group spawned, waited for
//!    and dropped with the keeper running and a `CAPFLEET_AGENT` marker, against a
//!    plain spawn; and the time from capfleet's death to its keeper having killed
//!    every agent group.
//!
//! Run: `cargo bench --bench resume` (`CAPFLEET_BENCH_PARTS=1,3` runs some parts only,
//! `CAPFLEET_BENCH_SESSIONS=100` part 1 with fewer sessions;
//! `CAPFLEET_BENCH_EXE=<capfleet>` runs part 1's commands with another build, an
//! earlier one's for a figure before a change: the replay alone is this build's).
//! Prints figures; asserts nothing about time.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use capfleet_engine::protocol::CapEvent;
use capfleet_wire::events::{EventBody, Prompt, RouteVia, SessionEvent, TurnOutcome};
use capfleet_wire::process::{SpawnSpec, keeper};
use serde_json::Value;

mod support;

use support::figures::ms;

/// Sessions of the resumed run (`CAPFLEET_BENCH_SESSIONS` for a smaller one, say in a
/// debug build).
fn sessions() -> usize {
    std::env::var("CAPFLEET_BENCH_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1_000)
}
/// Tool calls of the template turn: about 1,000 records per session.
const TOOLS: usize = 495;
/// Records through the journal per throughput figure.
const RECORDS: u64 = 400_000;
const SPAWNS: usize = 400;

fn main() {
    let built = env!("CARGO_BIN_EXE_capfleet");
    let other = std::env::var("CAPFLEET_BENCH_EXE").ok();
    let exe = other.as_deref().unwrap_or(built);
    let parts = std::env::var("CAPFLEET_BENCH_PARTS").unwrap_or_else(|_| "1,2,3".into());
    let on = |p: &str| parts.split(',').any(|x| x.trim() == p);
    println!("capfleet resume bench");
    if on("1") {
        resume_figures(exe);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    if on("2") {
        let dir = tempfile::tempdir().expect("dir");
        let (plain_n, plain) = rt.block_on(journal(dir.path(), "plain", plain_events));
        let (new_n, new) = rt.block_on(journal(dir.path(), "durable", durable_events));
        let rate = |n: u64, d: Duration| n as f64 / d.as_secs_f64();
        println!(
            "journal  {plain_n} plain agent events: {:.0} ms, {:.0} records/s (baseline)",
            ms(plain),
            rate(plain_n, plain)
        );
        println!(
            "journal  {new_n} records of durable runs (routed, delivered, session, resume_id, join, turns with prompts): {:.0} ms, {:.0} records/s ({:.2}x baseline's rate; goal >= 500k/s)",
            ms(new),
            rate(new_n, new),
            rate(new_n, new) / rate(plain_n, plain)
        );
    }
    if on("3") {
        // Warm the path (as many spawns as measured), then the baseline: no keeper, no
        // marker.
        rt.block_on(spawns(SPAWNS, false));
        let plain = rt.block_on(spawns(SPAWNS, false));
        keeper::start(Path::new(built)).expect("the keeper starts");
        let kept = rt.block_on(spawns(SPAWNS, true));
        println!(
            "spawn    `true`, plain                   {:>8.1} µs/spawn (baseline)",
            us(plain)
        );
        println!(
            "spawn    `true`, keeper + marker         {:>8.1} µs/spawn ({:.3}x baseline, {:+.1} µs)",
            us(kept),
            kept.as_secs_f64() / plain.as_secs_f64(),
            us(kept) - us(plain)
        );
        let death = keeper_cleanup(built);
        println!(
            "death    capfleet SIGKILLed -> 20 agent groups gone  {:>8.1} ms",
            ms(death)
        );
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn capfleet(exe: &str, dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(exe);
    c.args(args)
        .current_dir(dir)
        .env("XDG_CONFIG_HOME", dir.join(".config-bench"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// The name of session `i` (as long as the template's, `sess0000`).
fn name(i: usize) -> String {
    format!("sess{i:04}")
}

fn fleet(n: usize) -> String {
    let start: Vec<String> = (0..n).map(|i| format!("\"{}\"", name(i))).collect();
    let sessions: String = (0..n)
        .map(|i| {
            format!(
                "[[sessions]]\nname = \"{}\"\nagent = \"sim\"\nscript = \"../turn.toml\"\n",
                name(i)
            )
        })
        .collect();
    format!(
        "[fleet]\nname = \"bench\"\nstart = [{}]\ntask = \"go\"\n\n{sessions}",
        start.join(", ")
    )
}

/// Part 1: a real one-session run made into a cut 1,000-session one, then resumed.
fn resume_figures(exe: &str) {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let tool = "{ tool = \"Read\", input = { file_path = \"README.md\" }, output = \"ok\" }";
    let steps = vec![tool; TOOLS].join(", ");
    std::fs::write(
        d.join("turn.toml"),
        format!("[[turn]]\nsteps = [{steps}, {{ say = \"done\" }}]\n"),
    )
    .expect("turn.toml");
    std::fs::create_dir_all(d.join("fleets")).expect("fleets");
    let fleet_file = d.join("fleets/bench.toml");
    std::fs::write(&fleet_file, fleet(1)).expect("fleet");
    let status = capfleet(exe, d, &["run", "fleets/bench.toml"])
        .status()
        .expect("the template run");
    assert!(status.success(), "the template run: {status}");
    let runs = d.join(".capfleet/runs");
    let run = std::fs::read_dir(&runs)
        .expect("runs")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("the run");
    let journal = run.join("journal.jsonl");
    let records = build_journal(&journal, sessions());
    // The fleet of all the sessions, as the run had it.
    let text = fleet(sessions());
    std::fs::write(&fleet_file, &text).expect("fleet");
    std::fs::write(run.join("fleet.toml"), &text).expect("fleet copy");
    let bytes = std::fs::metadata(&journal).expect("journal").len();
    println!(
        "resume   a run of {} sessions, {records} journal records ({:.0} MB), session 0's turn cut",
        sessions(),
        bytes as f64 / 1e6
    );

    // The replay alone, against reading the file's lines.
    let t = Instant::now();
    let mut lines = 0u64;
    let mut r = BufReader::new(std::fs::File::open(&journal).expect("open"));
    let mut buf = Vec::new();
    while r.read_until(b'\n', &mut buf).expect("read") > 0 {
        lines += 1;
        buf.clear();
    }
    let read = t.elapsed();
    let t = Instant::now();
    let rec = capfleet_engine::resume::recover(&journal, "bench").expect("recover");
    let replay = t.elapsed();
    assert_eq!(
        rec.replay.len(),
        sessions() - 1,
        "every turn but the cut one replayed"
    );
    println!(
        "resume   the journal read back (resume::recover): {:.0} ms, {:.0} records/s, vs reading its {lines} lines {:.0} ms: {:.2}x",
        ms(replay),
        records as f64 / replay.as_secs_f64(),
        ms(read),
        replay.as_secs_f64() / read.as_secs_f64()
    );

    decode_figures(&journal);

    // The baseline: a fresh run of the same fleet to its first turn (the same 1,000
    // agents started), then the resume to the cut turn started again.
    let id = run
        .file_name()
        .expect("run id")
        .to_string_lossy()
        .into_owned();
    let fresh = first_turn(exe, d, &["run", "fleets/bench.toml"], None, Some(&id));
    let resumed = first_turn(
        exe,
        d,
        &["run", "--resume", &id],
        Some((&journal, bytes)),
        None,
    );
    match (fresh, resumed) {
        (Some(fresh), Some(resumed)) => println!(
            "resume   `run --resume` to the first resumed turn: {:.0} ms (goal < 2000 ms) vs a fresh run of the fleet to its first turn {:.0} ms: {:.2}x; the replay alone is {:.0}% of it",
            ms(resumed),
            ms(fresh),
            resumed.as_secs_f64() / fresh.as_secs_f64(),
            100.0 * replay.as_secs_f64() / resumed.as_secs_f64()
        ),
        (fresh, resumed) => {
            println!("resume   no first turn seen: fresh {fresh:?}, resumed {resumed:?}")
        }
    }
}

/// The sessions' CAP events of the journal (what `recover` decodes), decoded with
/// the checks an agent's frame gets (`decode_event`: a `Value`, the kind's rules)
/// against typed straight from their text (`decode_trusted`, what `recover` does).
fn decode_figures(journal: &Path) {
    #[derive(serde::Deserialize)]
    struct Line<'a> {
        #[serde(borrow)]
        event: Option<&'a serde_json::value::RawValue>,
    }
    let text = std::fs::read_to_string(journal).expect("journal");
    let events: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("cap://bench/sess") && l.contains("\"type\":\"cap\""))
        .filter_map(|l| serde_json::from_str::<Line>(l).ok()?.event.map(|e| e.get()))
        .collect();
    let time = |decode: fn(&str) -> bool| {
        let t = Instant::now();
        let ok = events.iter().filter(|e| decode(e)).count();
        assert_eq!(ok, events.len(), "every event decodes");
        t.elapsed()
    };
    use capfleet_engine::protocol::{decode_event, decode_trusted};
    let checked = time(|e| decode_event(e).is_ok());
    let typed = time(|e| decode_trusted(e).is_ok());
    println!(
        "resume   its {} session events decoded typed (decode_trusted) {:.0} ms vs checked through a Value (decode_event) {:.0} ms: {:.2}x",
        events.len(),
        ms(typed),
        ms(checked),
        typed.as_secs_f64() / checked.as_secs_f64()
    );
}

/// `capfleet <args>` in `d` until its journal holds a `turn_started`: that journal
/// read from `at` (a path and offset), or else the newest run's other than `not`;
/// then `SIGKILL`ed (its keeper ends its agents). The time to that first turn.
fn first_turn(
    exe: &str,
    d: &Path,
    args: &[&str],
    at: Option<(&Path, u64)>,
    not: Option<&str>,
) -> Option<Duration> {
    let t = Instant::now();
    let mut child = capfleet(exe, d, args).spawn().expect("capfleet run");
    let runs = d.join(".capfleet/runs");
    let mut from = at.map(|(p, off)| (p.to_owned(), off));
    let mut tail = String::new();
    let first = loop {
        if from.is_none() {
            from = std::fs::read_dir(&runs)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .find(|e| not.is_none_or(|n| e.file_name().to_string_lossy() != n))
                .map(|e| (e.path().join("journal.jsonl"), 0));
        }
        if let Some((path, off)) = &from
            && let Ok(mut f) = std::fs::File::open(path)
            && f.seek(SeekFrom::Start(*off)).is_ok()
        {
            let mut more = String::new();
            let _partial = f.read_to_string(&mut more);
            tail = more;
        }
        if tail.contains("\"type\":\"turn_started\"") {
            break Some(t.elapsed());
        }
        if child.try_wait().expect("wait").is_some() || t.elapsed() > Duration::from_secs(300) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // SAFETY: kill(2) on our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _status = child.wait();
    let pid = child.id();
    let gone = Instant::now();
    while capfleet_agents(pid) > 0 && gone.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    first
}

/// Make the template run's journal one of `sessions` sessions whose session 0 was
/// cut mid-turn: each session's records renamed, the router's repeated per session
/// (the sessions, their deliveries; session 0's never ended), no end of the run.
fn build_journal(path: &Path, sessions: usize) -> u64 {
    let text = std::fs::read_to_string(path).expect("template journal");
    let one = format!("cap://bench/{}", name(0));
    let router = "cap://bench/router";
    let (mut session, mut routed, mut delivered, mut rest) = (Vec::new(), None, None, Vec::new());
    let mut own: Vec<&str> = Vec::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("a template record");
        let kind = v["type"].as_str().unwrap_or_default();
        if matches!(kind, "run_ended" | "collected" | "stopping") {
            continue;
        }
        match v["urn"].as_str() {
            Some(u) if u == one => own.push(line),
            Some(u) if u == router => match kind {
                "routed" => routed = Some(v),
                "delivered" => delivered = Some(v),
                "session" => session.push(v),
                _ => rest.push(v),
            },
            _ => rest.push(v),
        }
    }
    let (routed, delivered) = (routed.expect("routed"), delivered.expect("delivered"));
    let session = session.pop().expect("the session record");
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("journal"));
    let mut records = 0u64;
    let mut seq = 0u64;
    let mut router_line = |v: &Value, i: usize, out: &mut dyn Write| {
        seq += 1;
        let mut v: Value =
            serde_json::from_str(&v.to_string().replace(&name(0), &name(i))).expect("renamed");
        v["seq"] = seq.into();
        writeln!(out, "{v}").expect("write");
    };
    for v in &rest {
        writeln!(out, "{v}").expect("write");
        records += 1;
    }
    for i in 0..sessions {
        router_line(&session, i, &mut out);
    }
    for i in 0..sessions {
        router_line(&routed, i, &mut out);
    }
    // Session 0's turn is cut half-way: its first records only, no end.
    let cut = own
        .iter()
        .position(|l| l.contains("\"type\":\"turn_ended\""))
        .unwrap_or(own.len())
        / 2;
    for i in 0..sessions {
        let lines = if i == 0 { &own[..cut] } else { &own[..] };
        let new = name(i);
        for l in lines {
            writeln!(out, "{}", l.replace(&name(0), &new)).expect("write");
        }
        records += lines.len() as u64;
    }
    for i in 1..sessions {
        router_line(&delivered, i, &mut out);
    }
    out.flush().expect("flush");
    records + 2 * sessions as u64 + (sessions as u64 - 1)
}

/// Push events made by `make` through a journal actor to disk: the records written
/// and the time until all are on disk.
async fn journal(
    dir: &Path,
    label: &str,
    make: fn(u64, &Arc<str>) -> EventBody,
) -> (u64, Duration) {
    let urns: Vec<Arc<str>> = (0..8)
        .map(|i| Arc::from(format!("cap://bench/s{i}")))
        .collect();
    let path = dir.join(format!("{label}.jsonl"));
    support::journal_through(path, RECORDS, |seq| {
        let urn = &urns[(seq % 8) as usize];
        SessionEvent {
            seq,
            urn: urn.clone(),
            turn: Some(1),
            ts_ms: 0,
            body: make(seq, urn),
        }
    })
    .await
}

/// An agent's tool call (never joined with the one before).
fn plain_events(seq: u64, _urn: &Arc<str>) -> EventBody {
    EventBody::Cap {
        event: CapEvent::tool_start(format!("call_{seq}"), "Read", serde_json::json!({})),
    }
}

/// The records a durable run adds, in turn.
fn durable_events(seq: u64, urn: &Arc<str>) -> EventBody {
    let to = urn.rsplit('/').next().unwrap_or("s0").to_owned();
    let key = format!("{to}#{seq}");
    match seq % 7 {
        0 => EventBody::Routed {
            from: vec!["planner".into()],
            to,
            via: RouteVia::Route,
            bytes: 120,
            key,
        },
        1 => EventBody::Delivered {
            key,
            to,
            turn: Some(1),
            outcome: Some(TurnOutcome::Completed),
            error: None,
        },
        2 => EventBody::ResumeId {
            id: format!("c0ffee-{seq}"),
        },
        3 => EventBody::TurnStarted {
            prompt_bytes: 60,
            attempt: 1,
            prompt: Prompt::Text("Add a /health endpoint to the service, with tests.".into()),
            text_from: None,
        },
        4 => EventBody::Session {
            name: to,
            agent: "sim".into(),
            binding: "stream_json".into(),
            cwd: Some("/work/repo".into()),
            sandbox: None,
        },
        5 => EventBody::Join {
            route: 0,
            arrived: vec![to],
            fired: seq.is_multiple_of(2),
        },
        _ => plain_events(seq, urn),
    }
}

/// Spawn `true` `n` times (one after the other), waiting for each; per spawn.
/// `marked`: with a `CAPFLEET_AGENT` marker, as every agent is.
async fn spawns(n: usize, marked: bool) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        let mut spec = SpawnSpec::new("true");
        if marked {
            spec = spec.marked("bench");
        }
        let mut g = spec.spawn().expect("spawn true");
        g.wait().await.expect("wait");
    }
    t.elapsed() / n as u32
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
    let mut child = capfleet(exe, d, &["run", "fleet.toml"])
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
