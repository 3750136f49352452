//! What a submitted fleet may name on the server's host (issue 35, points 3, 4, 7):
//! a session's own `cwd` resolves (symlinks and `..` too) inside an `--allow-root`,
//! and names none on a server without one; its agents inherit the server's
//! environment without the server's secrets; its `[notify]` signs with a secret file
//! of its own, never a variable of the server.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::serve::{PERMISSION, Server, submission};
use crate::common::webhook::{Mode, Receiver, SECRET};
use crate::common::{EnvMarker, journal_records};

const QUICK: &str = "[[turn]]\nsteps = [{ say = \"hello\" }]\n";
const RUN: Duration = Duration::from_secs(60);

/// A fleet of one sim session `s0` on `script.toml`, marked with `m`, with the
/// session's lines `more` (e.g. `cwd = "…"`) and the fleet's tail `tail`.
fn fleet(m: &EnvMarker, more: &str, tail: &str) -> String {
    let (k, v) = m.pair();
    format!(
        "[fleet]\nname = \"confined\"\nstart = [\"s0\"]\ntask = \"go\"\n\n\
         [[sessions]]\nname = \"s0\"\nagent = \"sim\"\nscript = \"script.toml\"\n\
         env = {{ {k} = \"{v}\" }}\n{more}\n{tail}"
    )
}

/// POST `fleet` (with `files` beside it): the status and body.
fn post(server: &Server, fleet: &str, files: &[(&str, &str)]) -> (u16, Value) {
    server.json("POST", "/v1/runs", None, Some(&submission(fleet, files)))
}

/// The one finding of a refused fleet: its key and message.
fn refused(server: &Server, fleet: &str, files: &[(&str, &str)]) -> (String, String) {
    let (status, body) = post(server, fleet, files);
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_fleet")),
        "{body}"
    );
    let f = &body["findings"][0];
    (
        f["key"].as_str().unwrap_or("").to_owned(),
        f["message"].as_str().unwrap_or("").to_owned(),
    )
}

#[test]
fn a_sessions_cwd_must_resolve_inside_an_allowed_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let work = root.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let link = root.path().join("away");
    std::os::unix::fs::symlink(outside.path(), &link).unwrap();
    let m = EnvMarker::new("serve-session-cwd");
    let server = Server::start(dir.path(), &["--allow-root", root.path().to_str().unwrap()]);
    let script = [("script.toml", QUICK)];
    for cwd in [
        outside.path().to_str().unwrap(),
        "../../../..",
        link.to_str().unwrap(),
        "/",
    ] {
        let (key, message) = refused(&server, &fleet(&m, &format!("cwd = {cwd:?}"), ""), &script);
        assert_eq!(key, "sessions[0].cwd", "{cwd}: {message}");
        assert!(
            message.contains("not inside a root this server allows"),
            "{cwd}: {message}"
        );
    }
    // Nothing was made where they pointed.
    assert!(!outside.path().join(".cap-worktrees").exists());
    let runs = std::fs::read_dir(dir.path().join(".capfleet/runs"))
        .unwrap()
        .count();
    assert_eq!(runs, 0, "no refused run kept");
    // Inside a root, it runs there.
    let (status, created) = post(
        &server,
        &fleet(&m, &format!("cwd = {:?}", work.to_str().unwrap()), ""),
        &script,
    );
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap();
    let run = server.wait_run(id, None, RUN);
    assert_eq!(run["state"], "completed", "{run}");
    let records = journal_records(&server.journal(id));
    let session = records.iter().find(|r| r["type"] == "session").unwrap();
    let want = std::fs::canonicalize(&work).unwrap();
    assert!(
        session["cwd"]
            .as_str()
            .unwrap()
            .starts_with(want.to_str().unwrap()),
        "{session}"
    );
    drop(server);
    // Without --allow-root, a session names no cwd at all, even the server's own.
    let other = tempfile::tempdir().unwrap();
    let server = Server::start(other.path(), &[]);
    let here = std::fs::canonicalize(other.path()).unwrap();
    for cwd in [here.to_str().unwrap(), "."] {
        let (key, message) = refused(&server, &fleet(&m, &format!("cwd = {cwd:?}"), ""), &script);
        assert_eq!(key, "sessions[0].cwd");
        assert!(
            message.contains("takes no cwd") && message.contains("--allow-root"),
            "{message}"
        );
    }
    // A session naming none works in the server's directory, as before.
    let (status, created) = post(&server, &fleet(&m, "", ""), &script);
    assert_eq!(status, 201, "{created}");
    let run = server.wait_run(created["id"].as_str().unwrap(), None, RUN);
    assert_eq!(run["state"], "completed", "{run}");
}

/// The environment of process `pid`, as `NAME=value` lines.
fn environ(pid: i32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    raw.split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .filter(|v| !v.is_empty())
        .collect()
}

#[test]
fn agents_inherit_the_servers_environment_but_not_its_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("serve-agent-env");
    let server = Server::start_env(
        dir.path(),
        &["--notify-secret-env", "MY_HOOK_SECRET"],
        &[
            ("CAPFLEET_NOTIFY_SECRET", "notify-secret-1"),
            ("CAPFLEET_NATS_TOKEN", "nats-secret-2"),
            ("CAPFLEET_TOKEN", "client-secret-3"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=collector-secret-4",
            ),
            ("MY_HOOK_SECRET", "hook-secret-5"),
            ("CAPFLEET_TEST_INHERITED", "plain-value"),
        ],
    );
    // A fleet's own `env` still sets a name the server withholds.
    let f = fleet(&m, "", "").replace("env = {", "env = { CAPFLEET_TOKEN = \"the-fleets-own\", ");
    let (status, created) = post(&server, &f, &[("script.toml", PERMISSION)]);
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    m.wait_for(1, "the agent runs");
    let pid = m.processes()[0];
    let env = environ(pid);
    assert!(
        env.iter()
            .any(|v| v == "CAPFLEET_TEST_INHERITED=plain-value"),
        "the rest is inherited: {env:?}"
    );
    assert!(
        env.iter().any(|v| v == "CAPFLEET_TOKEN=the-fleets-own"),
        "{env:?}"
    );
    for secret in [
        "notify-secret-1",
        "nats-secret-2",
        "client-secret-3",
        "collector-secret-4",
        "hook-secret-5",
    ] {
        assert!(
            !env.iter().any(|v| v.contains(secret)),
            "{secret} in {env:?}"
        );
    }
    for name in [
        "CAPFLEET_NOTIFY_SECRET=",
        "CAPFLEET_NATS_TOKEN=",
        "MY_HOOK_SECRET=",
    ] {
        assert!(
            !env.iter().any(|v| v.starts_with(name)),
            "{name} in {env:?}"
        );
    }
    let (status, _) = server.json("POST", &format!("/v1/runs/{id}/cancel"), None, None);
    assert_eq!(status, 202);
    server.wait_run(&id, None, RUN);
    m.wait_gone(Duration::from_secs(10), "no agent left");
}

#[test]
fn a_submitted_fleet_signs_its_notices_with_its_own_secret_only() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("serve-fleet-notify");
    let hook = Receiver::start(Mode::Ok);
    let server = Server::start_env(dir.path(), &[], &[("CAPFLEET_NOTIFY_SECRET", SECRET)]);
    let notify = |secret: &str| format!("[notify]\nurl = \"{}\"\n{secret}\n", hook.url());
    let script = ("script.toml", QUICK);
    // The server's variable: refused, naming the key; so is a file of the server's.
    let (key, message) = refused(
        &server,
        &fleet(&m, "", &notify("secret_env = \"CAPFLEET_NOTIFY_SECRET\"")),
        &[script],
    );
    assert_eq!(key, "notify.secret_env", "{message}");
    assert!(message.contains("secret_file"), "{message}");
    let (key, message) = refused(
        &server,
        &fleet(&m, "", &notify("secret_file = \"/etc/hostname\"")),
        &[script],
    );
    assert_eq!(key, "notify.secret_file", "{message}");
    assert!(hook.received().is_empty(), "nothing sent");
    // Its own secret, submitted beside it: its notices are signed with it.
    let (status, created) = post(
        &server,
        &fleet(&m, "", &notify("secret_file = \"hook.secret\"")),
        &[script, ("hook.secret", SECRET)],
    );
    assert_eq!(status, 201, "{created}");
    let ended = hook.wait_for("run_ended", 1, RUN);
    assert_eq!(ended[0]["body"]["run_id"], created["id"]);
    assert_eq!(ended[0]["signature_ok"], json!(true), "{}", ended[0]);
    assert!(!server.stderr().contains(SECRET));
}
