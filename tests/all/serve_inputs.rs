//! What a submission may say beyond its fleet, and what the server does by itself: a
//! `cwd` inside a root the server allows (outside: 400 naming the field), the
//! fleet's own `ask_timeout` over the server's, a PTY session's raw output on the
//! event stream only with `?include_raw=1`, and at start the sweep of what a dead
//! server's runs left (ended as interrupted, their agents killed, both said); each
//! request an `http.request` span, a submitted run's span in the submitter's trace.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::fake_llm::http_with;
use crate::common::otel::{Collector, attr};
use crate::common::procs::{keeper_of, sigkill};
use crate::common::serve::{PERMISSION, Server, SseEvent, sim_fleet, submission};
use crate::common::wires::{Wire, session};
use crate::common::{EnvMarker, capfleet, journal_records};

const QUICK: &str = "[[turn]]\nsteps = [{ say = \"hello\" }]\n";
const HANG: &str = "[[turn]]\nsteps = [{ say = \"started\" }, { hang = true }]\n";
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

#[test]
fn a_cwd_must_be_inside_an_allowed_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let m = EnvMarker::new("serve-cwd");
    let server = Server::start(dir.path(), &["--allow-root", root.path().to_str().unwrap()]);
    let fleet = sim_fleet("cwd", 1, m.pair());
    let with_cwd = |cwd: &str| {
        let mut s = submission(&fleet, &[("script.toml", QUICK)]);
        s["cwd"] = json!(cwd);
        s
    };
    let created = server.submit(None, &with_cwd(work.to_str().unwrap()));
    let id = created["id"].as_str().unwrap().to_owned();
    let run = server.wait_run(&id, None, RUN_TIMEOUT);
    assert_eq!(run["state"], "completed", "{run}");
    let records = journal_records(&server.journal(&id));
    let started: Vec<&Value> = records.iter().filter(|r| r["type"] == "session").collect();
    // A coding session works in its own worktree, made inside that directory.
    let want = std::fs::canonicalize(&work).unwrap();
    let cwd = started[0]["cwd"].as_str().unwrap();
    assert!(cwd.starts_with(want.to_str().unwrap()), "{started:?}");
    // Outside every root, or not there: 400 naming the field; nothing kept.
    let outside = dir.path().to_str().unwrap().to_owned();
    let missing = root.path().join("nope").display().to_string();
    for cwd in [outside.as_str(), "/", missing.as_str()] {
        let (status, body) = server.json("POST", "/v1/runs", None, Some(&with_cwd(cwd)));
        assert_eq!(
            (status, body["code"].as_str()),
            (400, Some("bad_request")),
            "{cwd}: {body}"
        );
        assert!(
            body["message"].as_str().unwrap().contains("`cwd`"),
            "{body}"
        );
    }
    // `capfleet submit --cwd` says the same, as a usage error.
    let local = tempfile::tempdir().unwrap();
    std::fs::write(local.path().join("fleet.toml"), &fleet).unwrap();
    std::fs::write(local.path().join("script.toml"), QUICK).unwrap();
    let url = format!("http://127.0.0.1:{}", server.port);
    let out = capfleet(local.path())
        .args(["submit", "fleet.toml", "--server", &url, "--cwd", "/"])
        .env("CAPFLEET_TOKEN", server.admin())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("`cwd` `/`"), "{err}");
    let kept = std::fs::read_dir(dir.path().join(".capfleet/runs"))
        .unwrap()
        .count();
    assert_eq!(kept, 1);
    // A server started without a root takes no cwd at all.
    drop(server);
    let other = tempfile::tempdir().unwrap();
    let server = Server::start(other.path(), &[]);
    let (status, body) = server.json(
        "POST",
        "/v1/runs",
        None,
        Some(&with_cwd(work.to_str().unwrap())),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("--allow-root"),
        "{body}"
    );
}

#[test]
fn the_fleets_ask_timeout_wins_over_the_servers() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("serve-fleet-ask-timeout");
    let server = Server::start(dir.path(), &["--ask-timeout", "10m"]);
    let fleet = sim_fleet("patient", 1, m.pair()).replacen(
        "task = \"go\"\n",
        "task = \"go\"\nask_timeout = \"1s\"\n",
        1,
    );
    let created = server.submit(None, &submission(&fleet, &[("script.toml", PERMISSION)]));
    let id = created["id"].as_str().unwrap().to_owned();
    // Far sooner than the server's 10 minutes: denied fail-safe by the fleet's 1 s.
    let run = server.wait_run(&id, None, Duration::from_secs(30));
    assert!(run["state"] != "running", "{run}");
    let denied: Vec<Value> = journal_records(&server.journal(&id))
        .into_iter()
        .filter(|r| r["event"]["kind"] == "cap.permission.response")
        .collect();
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(denied[0]["event"]["decision"], "deny");
    assert_eq!(denied[0]["event"]["_meta"]["capfleet.rule"], "ask_timeout");
}

/// The records of a stream (not its `end`).
fn records(events: &[SseEvent]) -> Vec<&SseEvent> {
    events.iter().filter(|e| e.event.is_none()).collect()
}

#[test]
fn raw_terminal_output_streams_only_when_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("serve-raw");
    let server = Server::start(dir.path(), &[]);
    let (k, v) = m.pair();
    let fleet = format!(
        "[fleet]\nname = \"raw\"\nstart = \"t\"\ntask = \"go\"\n\n[[sessions]]\nname = \"t\"\n\
         agent = \"sim-tui\"\nscript = \"script.toml\"\nraw_bytes = true\nenv = {{ {k} = \"{v}\" }}\n"
    );
    let created = server.submit(None, &submission(&fleet, &[("script.toml", QUICK)]));
    let id = created["id"].as_str().unwrap().to_owned();
    let run = server.wait_run(&id, None, RUN_TIMEOUT);
    assert_eq!(run["state"], "completed", "{run}");
    let journal = std::fs::read_to_string(server.journal(&id)).unwrap();
    let raw_in_journal = journal
        .lines()
        .filter(|l| l.contains("\"cap.pty.raw_bytes\""))
        .count();
    assert!(raw_in_journal > 0, "the journal holds the raw output");
    let path = format!("/v1/runs/{id}/events");
    let plain = server.sse(&path, None, None, None);
    let all = server.sse(&format!("{path}?include_raw=1"), None, None, None);
    let raw = |events: &[SseEvent]| {
        records(events)
            .iter()
            .filter(|e| e.data.contains("\"cap.pty.raw_bytes\""))
            .count()
    };
    assert_eq!(raw(&plain), 0, "left out by default");
    assert_eq!(raw(&all), raw_in_journal, "all of it when asked");
    assert_eq!(
        records(&all).len(),
        records(&plain).len() + raw_in_journal,
        "nothing else differs"
    );
    let (status, body) = server.json("GET", &format!("{path}?include_raw=maybe"), None, None);
    assert_eq!((status, body["code"].as_str()), (400, Some("bad_request")));
}

#[test]
fn a_dead_servers_runs_are_ended_and_their_agents_killed_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("serve-sweep");
    // The agent's program is named inside `sh -c` (the test binary, under the home a
    // sandbox hides): the run asks to be unsandboxed, as an admin token may here.
    let first = Server::start(dir.path(), &["--allow-unsandboxed"]);
    let fleet = format!(
        "[fleet]\nname = \"left\"\nstart = \"s0\"\ntask = \"go\"\nsandbox = \"none\"\n\n{}",
        session("s0", Wire::StreamJson, "script.toml", &m)
    );
    let created = first.submit(None, &submission(&fleet, &[("script.toml", HANG)]));
    let id = created["id"].as_str().unwrap().to_owned();
    m.wait_for(2, "the agent and its grandchild run");
    // Without its keeper, the server's death leaves its agents running.
    let pid = first.pid();
    sigkill(keeper_of(pid as u32).expect("a keeper"));
    sigkill(pid);
    drop(first);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !m.processes().is_empty(),
        "orphans survive a keeper-less death"
    );
    let second = Server::start(dir.path(), &["--allow-unsandboxed"]);
    let said = second.stderr();
    assert!(
        said.contains(&format!(
            "run {id} was left running by a dead capfleet (pid {pid}): ended as interrupted"
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "left running by run {id} (its capfleet, pid {pid}, is dead)"
        )),
        "{said}"
    );
    m.wait_gone(Duration::from_secs(2), "swept");
    let (_, run) = second.json("GET", &format!("/v1/runs/{id}"), None, None);
    assert_eq!(run["state"], "interrupted", "{run}");
    let records = journal_records(&second.journal(&id));
    let ended: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "run_ended")
        .collect();
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0]["outcome"], "interrupted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_is_a_span_and_a_submitted_run_continues_the_callers_trace() {
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("serve-spans");
    let endpoint = collector.endpoint().to_owned();
    let (trace, parent) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let d = dir.path().to_owned();
    let pair = (m.pair().0.to_owned(), m.pair().1.to_owned());
    tokio::task::spawn_blocking(move || {
        let mut server = Server::start_env(
            &d,
            &["--otlp", &endpoint],
            &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")],
        );
        let fleet = sim_fleet("traced", 1, (&pair.0, &pair.1));
        let body = submission(&fleet, &[("script.toml", QUICK)]).to_string();
        let tp = format!("00-{trace}-{parent}-01");
        let r = http_with(
            server.port,
            "POST",
            "/v1/runs",
            &[
                ("Content-Type", "application/json"),
                ("traceparent", &tp),
                ("Authorization", &format!("Bearer {}", server.admin())),
            ],
            body.as_bytes(),
        )
        .unwrap();
        assert_eq!(r.status, 201, "{}", r.body);
        let id = serde_json::from_str::<Value>(&r.body).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        server.wait_run(&id, None, RUN_TIMEOUT);
        assert_eq!(server.json("GET", "/v1/nothing", None, None).0, 404);
        server.signal(libc::SIGTERM);
        assert_eq!(server.wait(Duration::from_secs(30)).code(), Some(0));
    })
    .await
    .unwrap();
    let t = collector.spans().await;
    // Named `METHOD route` for the reader (`otel.name`), each with its attributes.
    let requests: Vec<_> = t
        .spans
        .iter()
        .filter(|s| s.attributes.contains_key("http.route"))
        .collect();
    let routed = |route: &str, status: &str| {
        requests.iter().any(|s| {
            attr(s, "http.route") == route && attr(s, "http.response.status_code") == status
        })
    };
    assert!(routed("/v1/runs", "201"), "{:?}", t.names());
    assert!(routed("/v1/runs/{id}", "200"), "{:?}", t.names());
    assert!(routed("other", "404"), "{:?}", t.names());
    let submit = requests
        .iter()
        .find(|s| attr(s, "http.route") == "/v1/runs")
        .unwrap();
    assert_eq!(attr(submit, "http.request.method"), "POST");
    assert_eq!(submit.name, "POST /v1/runs");
    // The run's span continues the submitter's trace; the engine's run is under it.
    let run = t.one("serve.run");
    assert_eq!(
        (run.trace_id.as_str(), run.parent_span_id.as_str()),
        (trace, parent)
    );
    let fleet = t.one("fleet.run");
    assert_eq!(fleet.parent_span_id, run.span_id);
    assert_eq!(fleet.trace_id, trace);
}
