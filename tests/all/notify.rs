//! Webhook notifications against a real HTTP receiver (Python's http.server, which
//! checks every signature with its own HMAC): `serve --notify` tells of a question
//! waiting (with where to answer it) and of the run's end; a fleet's `[notify]`
//! under `capfleet run` tells of a budget crossed and of the end, each notice
//! retried after a 500; a receiver that never answers does not hold the run up; and
//! `[notify]` is read strictly (file, line, key).

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::serve::{PERMISSION, Server};
use crate::common::sim::fleet_session;
use crate::common::webhook::{Mode, Receiver, SECRET};
use crate::common::{EnvMarker, capfleet};

const QUICK: &str = "[[turn]]\nsteps = [{ say = \"hello\" }]\n";
const SECRET_ENV: (&str, &str) = ("CAPFLEET_NOTIFY_SECRET", SECRET);

/// Every notice received was signed right, as JSON.
fn all_signed(r: &Receiver) {
    for n in r.received() {
        assert_eq!(n["signature_ok"], true, "{n}");
        assert_eq!(n["content_type"], "application/json", "{n}");
    }
}

#[test]
fn serve_tells_of_a_waiting_question_and_of_the_runs_end() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("notify-serve");
    let hook = Receiver::start(Mode::Ok);
    let url = hook.url();
    let server = Server::start_env(dir.path(), &["--notify", &url], &[SECRET_ENV]);
    let id = server.submit_script(None, m.pair(), PERMISSION);
    let waiting = hook.wait_for("waiting", 1, Duration::from_secs(30));
    let body = &waiting[0]["body"];
    assert_eq!(body["run_id"], id.as_str(), "{body}");
    assert_eq!(body["fleet"], "ask");
    assert_eq!(body["session"], "cap://ask/s0");
    assert_eq!(body["waiting_for"]["kind"], "permission");
    assert_eq!(body["waiting_for"]["tool"], "Bash");
    // Where to answer it, and the answer goes through.
    let answer = body["answer"].as_str().unwrap().to_owned();
    let decision = serde_json::json!({"decision": "allow_once"});
    let (status, said) = server.json("POST", &answer, None, Some(&decision));
    assert_eq!(status, 200, "{said}");
    let ended = hook.wait_for("run_ended", 1, Duration::from_secs(30));
    assert_eq!(ended[0]["body"]["outcome"], "completed", "{}", ended[0]);
    assert_eq!(ended[0]["body"]["exit_code"], 0);
    all_signed(&hook);
    // Counted on /metrics; the secret shows nowhere.
    let metrics = server
        .request("GET", "/metrics", None, "text/plain", b"")
        .body;
    assert!(
        metrics.contains("capfleet_server_notify_sent_total 2"),
        "{metrics}"
    );
    let journal = std::fs::read_to_string(server.journal(&id)).unwrap();
    assert!(!journal.contains(SECRET) && !server.stderr().contains(SECRET));
}

/// A fleet directory with `fleet.toml` (a `[fleet]` named `hooked` with `fleet`'s
/// lines, one sim session `s` on `script`, then `tail`) and the script.
fn fleet_dir(m: &EnvMarker, fleet: &str, script: &str, tail: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("script.toml"), script).unwrap();
    let toml = format!(
        "[fleet]\nname = \"hooked\"\nstart = [\"s\"]\ntask = \"go\"\n{fleet}\n\n{}\n{tail}",
        fleet_session("s", "script.toml", m, "")
    );
    std::fs::write(dir.path().join("fleet.toml"), toml).unwrap();
    dir
}

#[test]
fn a_fleets_notify_tells_of_a_budget_crossed_retrying_after_a_500() {
    let m = EnvMarker::new("notify-budget");
    let hook = Receiver::start(Mode::Flaky);
    let spend = "[[turn]]\nsteps = [{ usage = { input_tokens = 10, output_tokens = 10, cost_usd = 0.5 } }, { say = \"spent\" }]\n";
    let tail = format!(
        "[notify]\nurl = \"{}\"\nsecret_file = \"hook.secret\"\n",
        hook.url()
    );
    let dir = fleet_dir(&m, "budget_usd = 0.25", spend, &tail);
    std::fs::write(dir.path().join("hook.secret"), format!("{SECRET}\n")).unwrap();
    let out = capfleet(dir.path())
        .args(["run", "fleet.toml"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    let crossed = hook.wait_for("budget_exceeded", 1, Duration::from_secs(10));
    let body = &crossed[0]["body"];
    assert_eq!(body["scope"], "fleet", "{body}");
    assert_eq!(body["limit_usd"], 0.25);
    let ended = hook.wait_for("run_ended", 1, Duration::from_secs(10));
    assert_eq!(ended[0]["body"]["outcome"], "budget_exceeded");
    assert_eq!(ended[0]["body"]["exit_code"], 3);
    // Each notice was refused once (500) and delivered on its retry: same delivery id.
    let received = hook.received();
    for n in crossed.iter().chain(&ended) {
        let tries: Vec<&Value> = received
            .iter()
            .filter(|r| r["delivery"] == n["delivery"])
            .collect();
        assert_eq!(tries.len(), 2, "{tries:?}");
        assert_eq!(
            (&tries[0]["status"], &tries[1]["status"]),
            (&500.into(), &200.into())
        );
    }
    all_signed(&hook);
    assert!(!err.contains(SECRET), "{err}");
    assert!(!err.contains("not delivered"), "{err}");
}

#[test]
fn a_receiver_that_never_answers_does_not_hold_the_run() {
    let m = EnvMarker::new("notify-hang");
    let hook = Receiver::start(Mode::Hang);
    let dir = fleet_dir(&m, "", QUICK, "");
    let t0 = Instant::now();
    let out = capfleet(dir.path())
        .args(["run", "fleet.toml", "--notify", &hook.url()])
        .env(SECRET_ENV.0, SECRET_ENV.1)
        .output()
        .unwrap();
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // The run's end waits for its webhook 3 s at most.
    assert!(took < Duration::from_secs(12), "{took:?}\n{err}");
    assert!(err.contains("not delivered"), "{err}");
    assert!(m.processes().is_empty(), "no agent left");
}

/// `run --dry-run` of the fleet in `dir`, refused (exit 2); what it said.
fn refused(dir: &tempfile::TempDir) -> String {
    let out = capfleet(dir.path())
        .args(["run", "fleet.toml", "--dry-run"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    err
}

#[test]
fn notify_is_read_strictly_and_needs_its_secret() {
    let m = EnvMarker::new("notify-strict");
    let bad =
        "[notify]\nurl = \"ftp://x\"\nsekret_env = \"X\"\nevents = [\"waiting\", \"sometimes\"]\n";
    let err = refused(&fleet_dir(&m, "", QUICK, bad));
    for want in [
        "notify.sekret_env",
        "notify.url",
        "not an http:// or https:// URL",
        "\"sometimes\" is not one of waiting | run_ended | budget_exceeded",
        "set secret_env",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    // A variable that is not set is named, its (absent) value never.
    let unset =
        "[notify]\nurl = \"http://127.0.0.1:9/hook\"\nsecret_env = \"CAPFLEET_TEST_NO_SUCH_VAR\"\n";
    let dir = fleet_dir(&m, "", QUICK, unset);
    let out = capfleet(dir.path())
        .args(["run", "fleet.toml", "--dry-run"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("CAPFLEET_TEST_NO_SUCH_VAR is not set"),
        "{err}"
    );
    assert!(err.contains("fleet.toml:"), "file and line: {err}");
}
