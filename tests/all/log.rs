//! `capfleet log`: a recorded journal printed readably, filtered by session, raw
//! with `--json`, and followed until the run ends.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{capfleet, journal_records, sandboxed};

const RUN: &str = "20261130T121500Z-3fa9";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// 12:15:00.000 UTC on the run's day.
const T0: u64 = 1_796_040_900_000;

fn records() -> Vec<String> {
    [
        format!(r#"{{"seq":1,"urn":"cap://demo/planner","ts_ms":{T0},"type":"state","from":"starting","to":"ready"}}"#),
        format!(r#"{{"seq":2,"urn":"cap://demo/planner","turn":1,"ts_ms":{},"type":"turn_started","prompt_bytes":12,"attempt":1}}"#, T0 + 5),
        format!(r#"{{"seq":3,"urn":"cap://demo/planner","turn":1,"ts_ms":{},"type":"cap","event":{{"kind":"cap.text_chunk","message_id":"m1","text":"Plan:\nfirst","channel":"assistant"}}}}"#, T0 + 10),
        format!(r#"{{"seq":1,"urn":"cap://demo/worker-a","turn":1,"ts_ms":{},"type":"restart","cause":"killed","attempt":1,"delay_ms":0}}"#, T0 + 20),
        format!(r#"{{"seq":4,"urn":"cap://demo/planner","turn":1,"ts_ms":{},"type":"turn_ended","stop_reason":"end_turn","outcome":"completed","duration_ms":7}}"#, T0 + 1012),
        format!(r#"{{"type":"route","ts_ms":{},"from":"planner","to":"worker-a"}}"#, T0 + 1013),
    ]
    .into()
}

fn journal(dir: &Path, id: &str, lines: &[String]) -> PathBuf {
    let run = dir.join(".capfleet/runs").join(id);
    std::fs::create_dir_all(&run).unwrap();
    let path = run.join("journal.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn prints_one_readable_line_per_record() {
    let dir = tempfile::tempdir().unwrap();
    journal(dir.path(), "20261129T000000Z-0000", &records()[..1]);
    journal(dir.path(), RUN, &records());
    for id in [RUN, "latest"] {
        let stdout = ok(&capfleet(dir.path()).args(["log", id]).output().unwrap());
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 6, "{id}:\n{stdout}");
        let words = |l: &str| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(
            words(lines[0]),
            [
                "12:15:00.000",
                "planner",
                "-",
                "state",
                "starting",
                "->",
                "ready"
            ]
        );
        assert_eq!(
            words(lines[1])[..4],
            ["12:15:00.005", "planner", "t1", "turn_started"]
        );
        assert!(
            lines[2].contains("t1   cap.text_chunk") && lines[2].ends_with("Plan:⏎first"),
            "{}",
            lines[2]
        );
        assert!(
            lines[3].contains("worker-a") && lines[3].contains("attempt 1 in 0 ms: killed"),
            "{}",
            lines[3]
        );
        assert!(
            lines[4].starts_with("12:15:01.012")
                && lines[4].contains("completed (end_turn) in 7 ms")
        );
        assert!(
            lines[5].contains("route")
                && lines[5].contains(r#"{"from":"planner","to":"worker-a"}"#)
        );
    }
}

#[test]
fn filters_by_session_and_prints_raw_json() {
    let dir = tempfile::tempdir().unwrap();
    journal(dir.path(), RUN, &records());
    let stdout = ok(&capfleet(dir.path())
        .args(["log", RUN, "--session", "worker-a"])
        .output()
        .unwrap());
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.contains("restart"));
    let by_urn = ok(&capfleet(dir.path())
        .args(["log", RUN, "--session", "cap://demo/planner", "--json"])
        .output()
        .unwrap());
    let want: Vec<String> = records()
        .into_iter()
        .filter(|r| r.contains("cap://demo/planner"))
        .collect();
    assert_eq!(
        by_urn.lines().collect::<Vec<_>>(),
        want.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let all = ok(&capfleet(dir.path())
        .args(["log", RUN, "--json"])
        .output()
        .unwrap());
    assert_eq!(all, records().join("\n") + "\n");
    let unknown = capfleet(dir.path())
        .args(["log", RUN, "--session", "nosuch"])
        .output()
        .unwrap();
    assert_eq!(
        unknown.status.code(),
        Some(2),
        "an unknown session is no silent no-op"
    );
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        err.contains("has no session `nosuch` (sessions: ") && err.contains("worker-a"),
        "{err}"
    );
}

#[test]
fn unknown_runs_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = capfleet(dir.path())
        .args(["log", "latest"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no runs under"),
        "{}",
        text(&out.stderr)
    );
    journal(dir.path(), RUN, &records());
    let out = capfleet(dir.path()).args(["log", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no run `nope`"));
    // --dir reads runs started elsewhere.
    let other = tempfile::tempdir().unwrap();
    let out = capfleet(other.path())
        .args(["log", "latest", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(ok(&out).lines().count(), 6);
}

#[test]
fn follow_tails_the_journal_until_the_run_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = journal(dir.path(), RUN, &records()[..2]);
    let started = Instant::now();
    let child = capfleet(dir.path())
        .args(["log", "latest", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    // A record written in two pieces is printed once it is whole.
    let rest = records()[2..].join("\n") + "\n";
    let (a, b) = rest.split_at(30);
    f.write_all(a.as_bytes()).unwrap();
    f.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    f.write_all(b.as_bytes()).unwrap();
    writeln!(
        f,
        r#"{{"type":"run_ended","ts_ms":{},"run_id":"{RUN}","exit_code":0}}"#,
        T0 + 2000
    )
    .unwrap();
    // The sessions' last records follow the router's `run_ended`.
    writeln!(f, r#"{{"seq":9,"urn":"cap://demo/planner","ts_ms":{},"type":"state","from":"ready","to":"closed"}}"#, T0 + 3000).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = ok(&out);
    assert!(started.elapsed() < Duration::from_secs(10));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 8, "{stdout}");
    assert!(lines[6].contains("run_ended"), "{stdout}");
    assert!(lines[7].contains("ready -> closed"), "{stdout}");
}

#[test]
fn a_run_journals_where_it_was_started_and_log_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = concat!(env!("CARGO_MANIFEST_DIR"), "/config/fleets/pipeline.toml");
    let out = sandboxed(dir.path()).args(["run", fleet]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let runs: Vec<_> = std::fs::read_dir(dir.path().join(".capfleet/runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(runs.len(), 1);
    let id = &runs[0];
    // 20261130T121500Z-3fa9
    let shape = regex::Regex::new(r"^\d{8}T\d{6}Z-[0-9a-f]{4}$").unwrap();
    assert!(shape.is_match(id), "{id}");
    let journal = journal_records(
        &dir.path()
            .join(".capfleet/runs")
            .join(id)
            .join("journal.jsonl"),
    );
    let types: Vec<String> = journal.iter().map(|r| r["type"].to_string()).collect();
    assert!(types.iter().any(|t| t == "\"run_ended\""), "{types:?}");
    let stdout = ok(&capfleet(dir.path())
        .args(["log", "latest", "--session", "spec"])
        .output()
        .unwrap());
    assert!(stdout.contains("turn_ended"), "{stdout}");
    assert!(stdout.lines().all(|l| l.contains(" spec ")), "{stdout}");
}

#[test]
fn a_torn_last_record_is_reported_and_the_rest_printed() {
    // Torn inside a UTF-8 character (the first byte of `é`), and torn in plain ASCII.
    let mut cut_in_char = br#"{"seq":9,"urn":"cap://demo/planner","ts_ms":1,"type":"cap","event":{"kind":"cap.text_chunk","text":"caf"#.to_vec();
    cut_in_char.push(0xc3);
    let cut_in_ascii = br#"{"seq":9,"urn":"cap://demo/pla"#.to_vec();
    for torn in [cut_in_char, cut_in_ascii] {
        let dir = tempfile::tempdir().unwrap();
        let path = journal(dir.path(), RUN, &records());
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(&torn).unwrap();
        for json in [false, true] {
            let mut c = capfleet(dir.path());
            c.args(["log", "latest"]);
            if json {
                c.arg("--json");
            }
            let out = c.output().unwrap();
            let stdout = ok(&out);
            assert_eq!(stdout.lines().count(), 6, "every whole record: {stdout}");
            let stderr = text(&out.stderr);
            assert!(
                stderr.contains("the last record is torn")
                    && stderr.contains(&format!("{} bytes", torn.len())),
                "{stderr}"
            );
        }
    }
}

/// `log -f` on a run whose orchestrator was killed (SIGKILL: no `run_ended`, no
/// cleanup) ends by itself, saying the run was abandoned and how to start it again.
#[test]
fn follow_ends_when_the_orchestrator_died() {
    use crate::common::{EnvMarker, sim::fleet_session, wait_until};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("log-abandoned");
    std::fs::write(
        d.join("long.toml"),
        "[[turn]]\nsteps = [{ say = \"started\" }, { sleep_ms = 30000 }]\n",
    )
    .unwrap();
    std::fs::write(
        d.join("fleet.toml"),
        format!(
            "[fleet]\nname = \"l\"\nstart = [\"a\"]\ntask = \"go\"\n\n{}",
            fleet_session("a", "long.toml", &m, "")
        ),
    )
    .unwrap();
    let mut run = capfleet(d).args(["run", "fleet.toml"]).spawn().unwrap();
    assert!(
        wait_until(Duration::from_secs(20), Duration::from_millis(20), || !m
            .processes()
            .is_empty()),
        "the agent runs"
    );
    let follow = capfleet(d)
        .args(["log", "latest", "--follow"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    run.kill().unwrap();
    run.wait().unwrap();
    // The orphaned agent is the test's to end (the orchestrator could not).
    for pid in m.processes() {
        // SAFETY: kill(2) on a process this test started (it carries its marker).
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    let killed = Instant::now();
    let out = follow.wait_with_output().unwrap();
    assert!(
        killed.elapsed() < Duration::from_secs(10),
        "log -f returned"
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("abandoned")
            && stderr.contains("cannot resume")
            && stderr.contains("capfleet run fleet.toml")
            && stderr.contains(&d.canonicalize().unwrap().display().to_string()),
        "{stderr}"
    );
    assert!(text(&out.stdout).contains("started"), "the records before");
}
