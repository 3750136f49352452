//! A2A sessions under the session's rules, on the simulator (`capfleet sim --mode
//! a2a`): a peer that hangs is a turn timeout; a peer that dies and never comes back
//! fails the session at its meltdown, never hanging the run; the bearer token shows
//! nowhere — not in the events, the journal, the trace, `resolve` or an error; and
//! every request carries the W3C `traceparent` of the turn it belongs to; and a fleet
//! mixing stream-json, A2A and PTY sessions routes between them alike.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::a2a::{chat, manifest, sim};
use crate::common::chaos::{error_code, lines, ty};
use crate::common::otel::{Collector, finish};
use crate::common::{self, journal_records, of_type, texts};

/// A peer whose every turn hangs: killed at the turn timeout (`agent_hung`), its
/// connection restarted and the turn re-issued, hung again, and with one restart
/// allowed the session melts down — within seconds, exit 1.
#[test]
fn a_hanging_peer_is_a_turn_timeout_then_a_meltdown() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The turn and its re-issue after the restart each hang.
    let hang = "[[turn]]\nsteps = [{ say = \"about-to-hang.\" }, { hang = true }]\n";
    let script = hang.repeat(2);
    let peer = sim(dir.path(), &script, &[]);
    let m = manifest(dir.path(), &peer.url, "");
    let started = Instant::now();
    let (ev, code) = chat(
        dir.path(),
        &m,
        &["go"],
        &["--turn-timeout-s", "1", "--max-restarts", "1"],
    );
    assert_eq!(code, Some(1), "{}", lines(&ev));
    let turns: Vec<&Value> = ev.iter().filter(|e| ty(e) == "turn_started").collect();
    let hung: Vec<&Value> = ev
        .iter()
        .filter(|e| error_code(e) == Some("agent_hung"))
        .collect();
    assert_eq!(turns.len(), 2, "{}", lines(&ev));
    assert_eq!(hung.len(), 2, "{}", lines(&ev));
    let restarts = of_type(&ev, "restart");
    assert_eq!(restarts.len(), 1, "{}", lines(&ev));
    assert_eq!(restarts[0]["cause"]["kind"], "hung");
    let failed = of_type(&ev, "failed");
    let reason = failed[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("meltdown"), "{reason}");
    assert!(texts(&ev).starts_with("about-to-hang."), "{}", lines(&ev));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // Each try was one streaming send to the same peer.
    assert_eq!(peer.requests().matches("SendStreamingMessage").count(), 2);
}

/// A peer that exits mid-turn and never comes back: the connection's death, restarts
/// that cannot connect within the init timeout, and the session fails at its
/// meltdown; the run ends (exit 1) well within the chat's bound instead of waiting
/// for the peer.
#[test]
fn a_peer_that_never_comes_back_fails_the_session_at_its_meltdown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = "[[turn]]\nsteps = [{ say = \"partial \" }, { crash = 3 }]\n";
    let peer = sim(dir.path(), script, &[]);
    let m = manifest(dir.path(), &peer.url, "");
    // Each restart waits for the peer to come back up to the init timeout: 2 s here.
    let text = std::fs::read_to_string(&m).expect("manifest");
    let short = text.replace("init_timeout_seconds = 10", "init_timeout_seconds = 2");
    assert_ne!(short, text, "the template's init timeout changed");
    std::fs::write(&m, short).expect("manifest");
    let started = Instant::now();
    let (ev, code) = chat(
        dir.path(),
        &m,
        &["go"],
        &["--max-restarts", "2", "--restart-window-s", "60"],
    );
    let took = started.elapsed();
    assert_eq!(code, Some(1), "{}", lines(&ev));
    let failed = of_type(&ev, "failed");
    assert_eq!(failed.len(), 1, "{}", lines(&ev));
    let reason = failed[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("meltdown"), "{reason}");
    assert!(!of_type(&ev, "restart").is_empty(), "{}", lines(&ev));
    assert!(took < Duration::from_secs(30), "the run waited {took:?}");
}

const TOKEN: &str = "tok-NEVER-SHOWN-77a1";

fn all_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn token_chat(dir: &Path, m: &Path, token: &str, otlp: &str) -> std::process::Command {
    let mut c = common::otel::capfleet(dir);
    common::sandbox(&mut c, dir);
    c.env("A2A_TEST_TOKEN", token)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .arg("chat")
        .arg(m)
        .args(["--json", "--task", "hi", "--otlp", otlp, "--journal"])
        .arg(dir.join(format!("journal-{token}.jsonl")));
    c
}

/// The bearer token (and a wrong one) in none of: the events, stderr, the journal, the
/// spans exported, `resolve` (text and JSON), the 401's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_in_the_journal_the_trace_resolve_or_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let script = "[[turn]]\nsteps = [{ say = \"authorized\" }]\n";
    let peer = sim(d, script, &["--bearer-token", TOKEN]);
    let m = manifest(d, &peer.url, "\n[x-a2a]\nsecret_env = \"A2A_TEST_TOKEN\"\n");
    let wrong = "tok-WRONG-ALSO-SECRET-3c";
    let collector = Collector::start().await;
    let ok = finish(
        token_chat(d, &m, TOKEN, collector.endpoint()),
        Duration::from_secs(60),
    )
    .await;
    let refused = finish(
        token_chat(d, &m, wrong, collector.endpoint()),
        Duration::from_secs(60),
    )
    .await;
    let spans = format!("{:?}", collector.spans().await.spans);
    assert_eq!(ok.status.code(), Some(0), "{}", all_text(&ok));
    assert!(all_text(&ok).contains("authorized"));
    let refused_text = all_text(&refused);
    assert!(refused_text.contains("auth_error"), "{refused_text}");
    assert!(
        refused_text.contains("A2A_TEST_TOKEN"),
        "the error names the variable"
    );
    assert!(
        spans.contains("invoke_workflow chat"),
        "spans were exported"
    );
    let mut resolve = common::otel::capfleet(d);
    common::sandbox(&mut resolve, d);
    let resolved_json = resolve
        .arg("resolve")
        .arg(&m)
        .arg("--json")
        .output()
        .expect("resolve");
    let mut resolve = common::otel::capfleet(d);
    common::sandbox(&mut resolve, d);
    let resolved = resolve.arg("resolve").arg(&m).output().expect("resolve");
    let journals: Vec<String> = [TOKEN, wrong]
        .iter()
        .map(|t| {
            let records = journal_records(&d.join(format!("journal-{t}.jsonl")));
            assert!(!records.is_empty());
            serde_json::to_string(&records).expect("json")
        })
        .collect();
    for secret in [TOKEN, wrong] {
        for (what, text) in [
            ("the run", all_text(&ok)),
            ("the refused run", refused_text.clone()),
            ("the trace", spans.clone()),
            ("resolve --json", all_text(&resolved_json)),
            ("resolve", all_text(&resolved)),
            ("the journal", journals[0].clone()),
            ("the refused run's journal", journals[1].clone()),
        ] {
            assert!(!text.contains(secret), "{what} shows a credential: {text}");
        }
    }
}

/// Every JSON-RPC request of a turn — the streaming send and the answer to the
/// permission it asks — carries `traceparent` = the turn span's context, in each turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_carries_the_traceparent_of_its_turn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let turn = "[[turn]]\nsteps = [{ permission = \"Bash\", input = { command = \"ls\" }, risk = \"low\" }, { say = \"done\" }]\n";
    let peer = sim(d, &turn.repeat(2), &[]);
    let m = manifest(d, &peer.url, "");
    let collector = Collector::start().await;
    let mut c = common::otel::capfleet(d);
    common::sandbox(&mut c, d);
    c.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .arg("chat")
        .arg(&m)
        .args([
            "--json",
            "--task",
            "one",
            "--task",
            "two",
            "--allow-tool",
            "Bash",
        ])
        .args(["--otlp", collector.endpoint()]);
    let out = finish(c, Duration::from_secs(60)).await;
    assert_eq!(out.status.code(), Some(0), "{}", all_text(&out));
    let tree = collector.spans().await;
    let mut turn_spans = tree.named("turn");
    turn_spans.sort_by_key(|t| t.start_time_unix_nano);
    let turns: Vec<String> = turn_spans
        .iter()
        .map(|t| format!("00-{}-{}-01", t.trace_id, t.span_id))
        .collect();
    assert_eq!(turns.len(), 2, "{:?}", tree.names());
    let log = peer.requests();
    let sent: Vec<&str> = log.lines().collect();
    assert_eq!(sent.len(), 4, "two sends and two answers: {log}");
    for (i, line) in sent.iter().enumerate() {
        let tp = line.split("traceparent=").nth(1).unwrap_or("-");
        assert_eq!(tp, turns[i / 2], "request {i} ({line}) in turn {}", i / 2);
    }
}

/// A fleet of a local stream-json session, a remote A2A one and a PTY one, routed in a
/// pipeline (local -> remote -> pty): each answer is the next session's prompt, and the
/// journal records the same kinds of record and of CAP event for all three (but usage,
/// which a terminal cannot report).
#[test]
fn a_fleet_mixing_stream_json_a2a_and_pty_routes_between_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let peer = sim(d, "", &[]);
    let remote = manifest(d, &peer.url, "");
    let bin = common::BIN;
    let fleet = format!(
        "[fleet]\nname = \"mixed\"\nstart = \"local\"\ntask = \"ping\"\n\n\
         [[sessions]]\nname = \"local\"\nagent = \"sim\"\nargv = [\"{bin}\", \"sim\", \"--mode\", \"stream-json\"]\n\n\
         [[sessions]]\nname = \"remote\"\nagent = \"{}\"\n\n\
         [[sessions]]\nname = \"pty\"\nagent = \"sim-tui\"\nargv = [\"{bin}\", \"sim\", \"--mode\", \"tui\"]\n\n\
         [[routes]]\nwhen = \"local.done\"\nroute_to = \"remote\"\n\n\
         [[routes]]\nwhen = \"remote.done\"\nroute_to = \"pty\"\n",
        remote.display()
    );
    std::fs::write(d.join("fleet.toml"), fleet).expect("fleet");
    let out = common::capfleet(d)
        .args(["run", "fleet.toml"])
        .output()
        .expect("run");
    let records = common::run_journal(d);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{records:#?}",
        String::from_utf8_lossy(&out.stderr)
    );
    let of = |name: &str| -> Vec<&Value> {
        let urn = format!("cap://mixed/{name}");
        records
            .iter()
            .filter(|r| r["urn"] == urn.as_str())
            .collect()
    };
    let kinds = |name: &str| -> std::collections::BTreeSet<String> {
        of(name)
            .iter()
            .map(|r| match r["event"]["kind"].as_str() {
                Some(k) if r["type"] == "cap" => k.to_owned(),
                _ => r["type"].as_str().unwrap_or_default().to_owned(),
            })
            .collect()
    };
    let local = kinds("local");
    assert!(local.contains("cap.text_chunk"), "{local:?}");
    // A resume id is journaled where the binding learns one mid-turn (stream-json's
    // session_id, A2A's context and task, for `run --resume`); the PTY binding learns none.
    assert!(local.contains("resume_id"), "{local:?}");
    assert_eq!(kinds("remote"), local, "remote vs local");
    // A terminal has no channel for usage: the PTY binding reports none.
    let mut no_usage = local.clone();
    no_usage.remove("resume_id");
    no_usage.remove("cap.usage");
    assert_eq!(kinds("pty"), no_usage, "pty vs local");
    let text = |name: &str| -> String {
        of(name)
            .iter()
            .filter_map(|r| r["event"]["text"].as_str())
            .collect()
    };
    let (l, r, p) = (text("local"), text("remote"), text("pty"));
    assert!(l.contains("ping"), "{l}");
    assert!(r.contains(&l), "the remote session got local's answer: {r}");
    assert!(p.contains(&r), "the pty session got remote's answer: {p}");
}
