//! Rate limits pause a session, not fail it (issue 20, point 3), on the simulator:
//! a turn that hits a rate limit pauses for the reset the agent gave (or a backoff
//! step), is re-issued once per pause with its partial output, and completes, while
//! the other session runs on; no restart is counted. `on_rate_limit = "fail"` and
//! `max_pause` end the turn instead; Ctrl-C during a pause ends the run cleanly.
//! A rate limit written only as text (the shipped `config/sim/rate-limited.toml`:
//! no HTTP status) pauses too (issue 34, point 5a). The backoff's first step is set
//! short with the fleet's `rate_limit_backoff`. Real Claude Code: `rate_limit_claude.rs`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{self, EnvMarker, capfleet, wait_until};

/// Writes `fleet.toml` (fleet `rl`: sessions `a` on `a.toml` and `b` on `b.toml`,
/// both started on task `go`, `[fleet]` extra keys `fleet_keys`) and the scripts.
fn write_fleet(dir: &Path, fleet_keys: &str, a: &str, m: &EnvMarker) {
    write_fleet_of(dir, "sim", fleet_keys, a, m);
}

/// [`write_fleet`] with both sessions on `agent` (`sim` or `sim-tui`).
fn write_fleet_of(dir: &Path, agent: &str, fleet_keys: &str, a: &str, m: &EnvMarker) {
    let (k, v) = m.pair();
    std::fs::write(dir.join("a.toml"), a).unwrap();
    std::fs::write(
        dir.join("b.toml"),
        "[[turn]]\nsteps = [{ sleep_ms = 300 }, { say = \"b is done\" }]\n",
    )
    .unwrap();
    let fleet = format!(
        "[fleet]\nname = \"rl\"\nstart = [\"a\", \"b\"]\ntask = \"go\"\n{fleet_keys}\n\n\
         [[sessions]]\nname = \"a\"\nagent = \"{agent}\"\nscript = \"a.toml\"\nenv = {{ {k} = \"{v}\" }}\n\n\
         [[sessions]]\nname = \"b\"\nagent = \"{agent}\"\nscript = \"b.toml\"\nenv = {{ {k} = \"{v}\" }}\n"
    );
    std::fs::write(dir.join("fleet.toml"), fleet).unwrap();
}

/// `capfleet run fleet.toml --json` to its end.
fn run(dir: &Path) -> (Vec<Value>, String, Option<i32>) {
    let out = capfleet(dir)
        .args(["run", "fleet.toml", "--json"])
        .output()
        .unwrap();
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (
        events,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

/// The events of fleet `rl`'s `session` of type `ty`.
pub(crate) fn of<'a>(events: &'a [Value], session: &str, ty: &str) -> Vec<&'a Value> {
    let urn = format!("cap://rl/{session}");
    events
        .iter()
        .filter(|e| e["urn"] == urn.as_str() && e["type"] == ty)
        .collect()
}

/// Each pause of fleet `rl`'s `session`: its delay (ms) and its source.
pub(crate) fn pauses<'a>(events: &'a [Value], session: &str) -> Vec<(u64, &'a str)> {
    of(events, session, "paused")
        .iter()
        .map(|p| {
            (
                p["delay_ms"].as_u64().unwrap(),
                p["source"].as_str().unwrap(),
            )
        })
        .collect()
}

fn session_totals<'a>(events: &'a [Value], name: &str) -> &'a Value {
    let totals = events.last().expect("run_totals");
    assert_eq!(totals["type"], "run_totals", "{totals}");
    totals["sessions"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no totals for {name}: {totals}"))
}

/// A turn limited twice — first with a reset the agent names (`retry-after: 1`),
/// then without one (the backoff: `rate_limit_backoff` doubled once) — pauses twice,
/// each pause followed by exactly one retry no sooner than its end, and completes on
/// the third attempt with its partial answer handed back; no restart is counted and
/// the other session is done meanwhile.
#[test]
fn a_rate_limited_turn_pauses_and_is_reissued_once_per_pause() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("rate-limit");
    let script = r#"
[[turn]]
steps = [{ say = "partial answer" }, { error = "This request would exceed the rate limit; retry-after: 1", status = 429 }]
[[turn]]
steps = [{ error = "rate_limit_error: still limited", status = 429 }]
[[turn]]
steps = [{ echo = true }]
"#;
    write_fleet(dir.path(), "rate_limit_backoff = \"300ms\"", script, &m);
    let (events, stderr, code) = run(dir.path());
    assert_eq!(code, Some(0), "{stderr}");

    let paused = of(&events, "a", "paused");
    let shape: Vec<(u64, u64, &str)> = paused
        .iter()
        .map(|p| {
            (
                p["pause"].as_u64().unwrap(),
                p["delay_ms"].as_u64().unwrap(),
                p["source"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(shape, [(1, 1000, "reset"), (2, 600, "backoff")], "{stderr}");
    for p in &paused {
        let until = p["until_ms"].as_u64().unwrap();
        let at = p["ts_ms"].as_u64().unwrap();
        // Stamped as the pause is decided; the event a moment later.
        assert!(
            until.abs_diff(at + p["delay_ms"].as_u64().unwrap()) < 500,
            "{p}"
        );
    }
    assert!(of(&events, "a", "restart").is_empty(), "no restart counted");
    let states: Vec<&str> = of(&events, "a", "state")
        .iter()
        .filter_map(|s| s["to"].as_str())
        .collect();
    assert_eq!(
        states.iter().filter(|s| **s == "paused").count(),
        2,
        "{states:?}"
    );

    // One attempt before the first pause and exactly one after each, not before its end.
    let started = of(&events, "a", "turn_started");
    let attempts: Vec<u64> = started
        .iter()
        .map(|s| s["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 3]);
    for (p, s) in paused.iter().zip(&started[1..]) {
        assert!(
            s["ts_ms"].as_u64() >= p["until_ms"].as_u64(),
            "retried before the pause ended: {p} {s}"
        );
    }
    let ended = of(&events, "a", "turn_ended");
    assert_eq!(ended.len(), 1, "one turn, ended once");
    assert_eq!(ended[0]["outcome"], "completed");
    let text = common::texts(
        &of(&events, "a", "cap")
            .into_iter()
            .cloned()
            .collect::<Vec<_>>(),
    );
    assert!(
        text.contains("echo: go")
            && text.contains("hit a rate limit")
            && text.contains("partial answer"),
        "the re-issued prompt carries the partial answer: {text}"
    );
    // The other session ran meanwhile: it was done before a's first retry.
    let b_done = of(&events, "b", "turn_ended")[0]["ts_ms"].as_u64().unwrap();
    assert!(b_done < started[1]["ts_ms"].as_u64().unwrap());

    let a = session_totals(&events, "a");
    assert_eq!(
        (a["pauses"].as_u64(), a["restarts"].as_u64()),
        (Some(2), Some(0)),
        "{a}"
    );
    assert!(
        a.get("paused_until_ms").is_none(),
        "not paused at the end: {a}"
    );
    assert!(
        stderr.contains("rate limited: the session pauses"),
        "{stderr}"
    );
    // The journal has the pauses as the stream had them.
    let journal = common::run_journal(dir.path());
    assert_eq!(journal.iter().filter(|r| r["type"] == "paused").count(), 2);
}

/// `on_rate_limit = "fail"`: the rate-limited turn fails, as before pauses existed.
#[test]
fn on_rate_limit_fail_fails_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("rate-limit");
    let script = "[[turn]]\nsteps = [{ error = \"rate limited\", status = 429 }]\n";
    write_fleet(dir.path(), "on_rate_limit = \"fail\"", script, &m);
    let (events, stderr, _) = run(dir.path());
    assert!(of(&events, "a", "paused").is_empty(), "{stderr}");
    let ended = of(&events, "a", "turn_ended");
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0]["outcome"], "failed");
}

/// A reset further away than `max_pause` allows: no pause, the turn fails, and the
/// log says why.
#[test]
fn a_reset_past_max_pause_fails_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("rate-limit");
    let script = "[[turn]]\nsteps = [{ error = \"usage limit reached; try again in 3 hours\", status = 429 }]\n";
    write_fleet(dir.path(), "max_pause = \"2h\"", script, &m);
    let (events, stderr, _) = run(dir.path());
    assert!(of(&events, "a", "paused").is_empty(), "{stderr}");
    assert_eq!(of(&events, "a", "turn_ended")[0]["outcome"], "failed");
    assert!(stderr.contains("would pass max_pause (2h)"), "{stderr}");
}

fn sigint(child: &Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
}

/// Ctrl-C while every live session is paused (the run says so and waits): the run
/// ends at once and cleanly — the paused turn cancelled, `run_ended` interrupted by
/// SIGINT, exit 130, no agent left.
#[test]
fn ctrl_c_during_a_pause_ends_the_run_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("rate-limit-stop");
    let script =
        "[[turn]]\nsteps = [{ say = \"half\" }, { error = \"rate limited\", status = 429 }]\n";
    // b is done quickly; a pauses for an hour.
    write_fleet(dir.path(), "rate_limit_backoff = \"1h\"", script, &m);
    let mut child = capfleet(dir.path())
        .args(["run", "fleet.toml", "--json"])
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<Value>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let mut events = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let both = |events: &[Value]| {
        !of(events, "a", "paused").is_empty()
            && of(events, "b", "state").iter().any(|s| s["to"] == "done")
    };
    while !both(&events) && Instant::now() < deadline {
        if let Ok(v) = rx.recv_timeout(Duration::from_millis(100)) {
            events.push(v);
        }
    }
    assert!(both(&events), "a paused and b done: {events:?}");
    // The view has seen b's state too (it prints before it reads on).
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    sigint(&child);
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    reader.join().unwrap();
    events.extend(rx.try_iter());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.contains("every live session is paused by a rate limit: the run waits until"),
        "{stderr}"
    );
    let ended = of(&events, "a", "turn_ended");
    assert_eq!(ended.len(), 1, "{events:?}");
    assert_eq!(ended[0]["outcome"], "cancelled");
    let journal = common::run_journal(dir.path());
    let run_ended = journal.iter().find(|r| r["type"] == "run_ended").unwrap();
    assert_eq!(
        (run_ended["outcome"].as_str(), run_ended["signal"].as_str()),
        (Some("interrupted"), Some("SIGINT"))
    );
    assert!(
        wait_until(Duration::from_secs(3), Duration::from_millis(20), || m
            .processes()
            .is_empty()),
        "no agent survives: {:?}",
        m.processes()
    );
}

/// The keys are checked and shown by `--dry-run`.
#[test]
fn rate_limit_keys_are_validated_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("rate-limit");
    let script = "[[turn]]\nsteps = [{ say = \"hi\" }]\n";
    write_fleet(
        dir.path(),
        "max_pause = \"90m\"\nrate_limit_backoff = 30",
        script,
        &m,
    );
    let out = capfleet(dir.path())
        .args(["run", "--dry-run", "fleet.toml"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("rate limits: pause (max_pause 1h 30m; without a reset time, backoff 30s doubling to 1h)"),
        "{stdout}"
    );
    for (keys, says) in [
        ("max_pause = \"soon\"", "fleet.max_pause"),
        (
            "on_rate_limit = \"wait\"",
            "\"wait\" is not one of pause | fail",
        ),
        ("rate_limit_backoff = 0", "fleet.rate_limit_backoff"),
    ] {
        write_fleet(dir.path(), keys, script, &m);
        let out = capfleet(dir.path())
            .args(["run", "--dry-run", "fleet.toml"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{keys}: {stderr}");
        assert!(stderr.contains(says), "{keys}: {stderr}");
    }
}

/// The shipped `config/sim/rate-limited.toml` ("the first turn fails with
/// `rate_limit_error`, the retry succeeds") as a fleet, on both of the sim's wires:
/// stream-json (an `error_during_execution` result whose error says
/// `rate_limit_error: …`, no HTTP status) and TUI (a `rate_limit_error: …` line). The
/// text is a rate limit: the session pauses (a backoff step: the message names no
/// reset), re-issues the turn once and completes it; no restart, the run succeeds.
#[test]
fn the_shipped_rate_limited_script_pauses_then_succeeds() {
    let script = std::fs::read_to_string(common::repo_root().join("config/sim/rate-limited.toml"))
        .expect("config/sim/rate-limited.toml");
    for agent in ["sim", "sim-tui"] {
        let dir = tempfile::tempdir().unwrap();
        let m = EnvMarker::new("rate-limited-script");
        write_fleet_of(
            dir.path(),
            agent,
            "rate_limit_backoff = \"300ms\"",
            &script,
            &m,
        );
        let (events, stderr, code) = run(dir.path());
        assert_eq!(code, Some(0), "{agent}: {stderr}");
        let errors: Vec<&str> = of(&events, "a", "cap")
            .iter()
            .filter(|e| e["event"]["kind"] == "cap.error")
            .filter_map(|e| e["event"]["code"].as_str())
            .collect();
        assert_eq!(errors, ["rate_limit"], "{agent}: {stderr}");
        assert_eq!(
            pauses(&events, "a"),
            [(300, "backoff")],
            "{agent}: {stderr}"
        );
        assert!(of(&events, "a", "restart").is_empty(), "{agent}");
        let started = of(&events, "a", "turn_started");
        assert_eq!(started.len(), 2, "{agent}: one attempt and one retry");
        assert!(started[1]["ts_ms"].as_u64() >= of(&events, "a", "paused")[0]["until_ms"].as_u64());
        let ended = of(&events, "a", "turn_ended");
        assert_eq!(ended.len(), 1, "{agent}");
        assert_eq!(ended[0]["outcome"], "completed", "{agent}: {stderr}");
        let all: Vec<Value> = of(&events, "a", "cap").into_iter().cloned().collect();
        assert!(
            common::texts(&all).contains("Retry succeeded."),
            "{agent}: {}",
            common::texts(&all)
        );
        assert_eq!(
            session_totals(&events, "a")["pauses"].as_u64(),
            Some(1),
            "{agent}"
        );
        assert!(
            wait_until(Duration::from_secs(3), Duration::from_millis(20), || m
                .processes()
                .is_empty()),
            "{agent}: no agent survives"
        );
    }
}
