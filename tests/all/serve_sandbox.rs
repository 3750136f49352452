//! Runs submitted to `capfleet serve` are sandboxed (issue 38, point 5): a fleet that
//! says nothing runs under `sandbox = "workspace"`; `sandbox = "none"` (in `[fleet]`
//! or on a session) is refused with `400 invalid_fleet` naming `fleet.toml`, the
//! line and the key — on submit and on `/v1/fleets/validate` — unless an `admin`
//! token asks a server started with `--allow-unsandboxed`; a queued run is checked
//! again at the next start; a host with no backend answers `503 no_sandbox`; the
//! server's token file and data dir are hidden from its sandboxes (the escape kit,
//! under both backends, with an unsandboxed control run that shows the attempts
//! catch what they look for); over NATS the rule travels in the message and the
//! worker obeys it, and a worker taking over a dead worker's run keeps its sandbox
//! with its own paths, not the dead worker's.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::nats::{NatsServer, Worker};
use crate::common::serve::{Server, add_token, chatty, sim_fleet, submission};
use crate::common::{EnvMarker, capfleet, journal_records, wait_until, wait_within};
use crate::nats_runs::{Chain, has};
use crate::sandbox_escape::kit_lines;

const SAY: &str = "[[turn]]\nsteps = [{ say = \"hi\" }]\n";

/// `fleet` with `sandbox = "none"` as its `[fleet]` default (line 2).
fn none_in_fleet(fleet: &str) -> String {
    fleet.replacen("[fleet]\n", "[fleet]\nsandbox = \"none\"\n", 1)
}

/// `fleet` with `sandbox = "none"` on its first session.
fn none_on_session(fleet: &str) -> String {
    fleet.replacen(
        "agent = \"sim\"\n",
        "agent = \"sim\"\nsandbox = \"none\"\n",
        1,
    )
}

/// The 1-based line of `text` that is `line`.
fn line_of(text: &str, line: &str) -> u64 {
    text.lines().position(|l| l == line).expect("the line") as u64 + 1
}

/// The sandbox the `session` record of `name` journaled (`null`: none); the last
/// such record.
fn sandbox_of(records: &[Value], name: &str) -> Value {
    records
        .iter()
        .rev()
        .find(|r| r["type"] == "session" && r["name"] == name)
        .unwrap_or_else(|| panic!("no session record of {name}: {records:?}"))["sandbox"]
        .clone()
}

/// The run's journal under the server's default data dir.
fn journal(server: &Server, id: &str) -> Vec<Value> {
    journal_records(&server.journal(id))
}

/// A refusal of `text` (its `sandbox = "none"` at `key` on line `line`), as the
/// server answers it.
fn assert_refused(body: &Value, key: &str, line: u64) {
    let f = &body["findings"][0];
    assert_eq!(
        (f["origin"].as_str(), f["line"].as_u64(), f["key"].as_str()),
        (Some("fleet.toml"), Some(line), Some(key)),
        "{body}"
    );
    let message = f["message"].as_str().expect("a message");
    for said in [
        format!("fleet.toml:{line}: {key}"),
        "set it to \"workspace\"".to_owned(),
        "admin token".to_owned(),
        "--allow-unsandboxed".to_owned(),
    ] {
        assert!(message.contains(&said), "{said:?} in {message}");
    }
}

#[test]
fn a_submitted_fleet_runs_sandboxed_and_none_is_refused_with_its_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ci = add_token(d, "ci", "run");
    let ops = add_token(d, "ops", "admin");
    let m = EnvMarker::new("serve-sandbox");
    let server = Server::start(d, &["--token-file", "tokens.txt"]);
    let fleet = sim_fleet("boxed", 1, m.pair());
    let files = [("script.toml", SAY)];
    let id = server.submit(Some(&ci), &submission(&fleet, &files))["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let run = server.wait_run(&id, Some(&ci), Duration::from_secs(60));
    assert_eq!(run["state"], "completed", "{run}\n{}", server.stderr());
    let sb = sandbox_of(&journal(&server, &id), "s0");
    assert!(
        matches!(sb["backend"].as_str(), Some("bubblewrap" | "landlock")),
        "a fleet that says nothing runs sandboxed: {sb}"
    );
    let fleet_none = none_in_fleet(&fleet);
    let session_none = none_on_session(&fleet);
    let session_line = line_of(&session_none, "sandbox = \"none\"");
    for (token, text, key, line) in [
        (&ci, &fleet_none, "fleet.sandbox", 2),
        (&ci, &session_none, "sessions[0].sandbox", session_line),
        // Without --allow-unsandboxed, not even an admin.
        (&ops, &fleet_none, "fleet.sandbox", 2),
    ] {
        let body = submission(text, &files);
        let (status, refused) = server.json("POST", "/v1/runs", Some(token), Some(&body));
        assert_eq!(status, 400, "{refused}");
        assert_eq!(refused["code"], "invalid_fleet", "{refused}");
        assert_refused(&refused, key, line);
        let (status, checked) =
            server.json("POST", "/v1/fleets/validate", Some(token), Some(&body));
        assert_eq!(status, 200, "{checked}");
        assert_eq!(checked["valid"], false, "{checked}");
        assert_refused(&checked, key, line);
    }
    let (_, checked) = server.json(
        "POST",
        "/v1/fleets/validate",
        Some(&ci),
        Some(&submission(&fleet, &files)),
    );
    assert_eq!(checked["valid"], true, "{checked}");
    let runs = std::fs::read_dir(d.join(".capfleet/runs")).unwrap().count();
    assert_eq!(runs, 1, "a refused submission leaves no run");
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}

#[test]
fn an_admin_token_on_a_server_allowing_unsandboxed_may_ask_for_none() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tokens: Vec<String> = [("ci", "run"), ("lead", "approve"), ("ops", "admin")]
        .iter()
        .map(|(name, role)| add_token(d, name, role))
        .collect();
    let (ops, lesser) = (&tokens[2], &tokens[..2]);
    let m = EnvMarker::new("serve-unsandboxed");
    let server = Server::start(d, &["--token-file", "tokens.txt", "--allow-unsandboxed"]);
    let fleet = sim_fleet("open", 1, m.pair());
    let files = [("script.toml", SAY)];
    let none = submission(&none_in_fleet(&fleet), &files);
    let plain = submission(&fleet, &files);
    for token in lesser {
        let (status, refused) = server.json("POST", "/v1/runs", Some(token), Some(&none));
        assert_eq!(status, 400, "{refused}");
        assert_refused(&refused, "fleet.sandbox", 2);
        let (_, checked) = server.json("POST", "/v1/fleets/validate", Some(token), Some(&none));
        assert_eq!(checked["valid"], false, "{checked}");
    }
    let (_, checked) = server.json("POST", "/v1/fleets/validate", Some(ops), Some(&none));
    assert_eq!(checked["valid"], true, "{checked}");
    for (body, confined) in [(&none, false), (&plain, true)] {
        let id = server.submit(Some(ops), body)["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let run = server.wait_run(&id, Some(ops), Duration::from_secs(60));
        assert_eq!(run["state"], "completed", "{run}\n{}", server.stderr());
        let sb = sandbox_of(&journal(&server, &id), "s0");
        assert_eq!(sb.is_object(), confined, "{sb}");
    }
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}

#[test]
fn a_queued_run_is_sandboxed_as_the_next_start_allows() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ops = add_token(d, "ops", "admin");
    let m = EnvMarker::new("serve-sandbox-queued");
    let base = ["--token-file", "tokens.txt", "--max-runs", "1"];
    let mut args = base.to_vec();
    args.extend(["--drain-timeout", "60s", "--allow-unsandboxed"]);
    let mut first = Server::start(d, &args);
    let fleet = sim_fleet("queued", 1, m.pair());
    let long = chatty(10, 100);
    let files = [("script.toml", long.as_str())];
    let submitted: Vec<(String, Value)> = [fleet.clone(), none_in_fleet(&fleet), fleet.clone()]
        .iter()
        .map(|text| {
            let c = first.submit(Some(&ops), &submission(text, &files));
            (c["id"].as_str().unwrap().to_owned(), c["state"].clone())
        })
        .collect();
    let states: Vec<&Value> = submitted.iter().map(|(_, s)| s).collect();
    assert_eq!(states, ["running", "queued", "queued"], "{submitted:?}");
    first.signal(libc::SIGTERM);
    assert_eq!(
        first.wait(Duration::from_secs(60)).code(),
        Some(0),
        "{}",
        first.stderr()
    );
    drop(first);
    // Started again without --allow-unsandboxed: the run queued with "none" is
    // refused (said, and ended); the other runs sandboxed.
    let second = Server::start(d, &base);
    let (unsandboxed, boxed) = (&submitted[1].0, &submitted[2].0);
    let said = second.stderr();
    assert!(
        said.contains(&format!(
            "run {unsandboxed}, queued before the last stop, cannot start: fleet.toml:2: fleet.sandbox: sandbox = \"none\" is refused"
        )),
        "{said}"
    );
    let refused = second.wait_run(unsandboxed, Some(&ops), Duration::from_secs(10));
    assert_eq!(refused["exit_code"], 2, "{refused}");
    let records = journal(&second, unsandboxed);
    assert!(
        !records.iter().any(|r| r["type"] == "session"),
        "it never started: {records:?}"
    );
    let run = second.wait_run(boxed, Some(&ops), Duration::from_secs(60));
    assert_eq!(run["state"], "completed", "{run}\n{}", second.stderr());
    assert!(sandbox_of(&journal(&second, boxed), "s0").is_object());
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}

#[test]
fn a_host_without_a_sandbox_backend_answers_503_no_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ci = add_token(d, "ci", "run");
    let ops = add_token(d, "ops", "admin");
    let m = EnvMarker::new("serve-no-sandbox");
    let server = Server::start_env(
        d,
        &["--token-file", "tokens.txt", "--allow-unsandboxed"],
        &[("CAPFLEET_SANDBOX_BACKEND", "none")],
    );
    let fleet = sim_fleet("nobox", 1, m.pair());
    let body = submission(&fleet, &[("script.toml", SAY)]);
    for route in ["/v1/runs", "/v1/fleets/validate"] {
        let (status, refused) = server.json("POST", route, Some(&ci), Some(&body));
        assert_eq!(status, 503, "{route}: {refused}");
        assert_eq!(refused["code"], "no_sandbox", "{refused}");
        let message = refused["message"].as_str().unwrap();
        for said in [
            "session \"s0\"",
            "bubblewrap",
            "Landlock",
            "not run unconfined",
        ] {
            assert!(message.contains(said), "{said:?} in {message}");
        }
    }
    assert!(
        std::fs::read_dir(d.join(".capfleet/runs"))
            .map(|r| r.count())
            .unwrap_or(0)
            == 0,
        "nothing kept, nothing run"
    );
    // What needs no sandbox still runs: an admin's "none".
    let none = submission(&none_in_fleet(&fleet), &[("script.toml", SAY)]);
    let id = server.submit(Some(&ops), &none)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let run = server.wait_run(&id, Some(&ops), Duration::from_secs(60));
    assert_eq!(run["state"], "completed", "{run}");
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}

/// The escape kit's attempts on a server's files.
const SERVER_FILES: &str = "read-serve-tokens,write-serve-tokens,read-serve-data";

/// A server whose token file and data dir lie outside its home and temporary
/// directory (hidden anyway) under `backend`; an admin's unsandboxed run and a
/// `run` token's sandboxed run of the kit's attempts on them.
fn server_files_under(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let d = std::fs::canonicalize(dir.path()).unwrap();
    let tmp = d.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let ci = add_token(&d, "ci", "run");
    let ops = add_token(&d, "ops", "admin");
    let tokens_before = std::fs::read(d.join("tokens.txt")).unwrap();
    let m = EnvMarker::new("serve-sandbox-files");
    let server = Server::start_env(
        &d,
        &[
            "--token-file",
            "tokens.txt",
            "--data-dir",
            "data",
            "--allow-unsandboxed",
        ],
        &[
            ("TMPDIR", tmp.to_str().unwrap()),
            ("CAPFLEET_SANDBOX_BACKEND", backend),
        ],
    );
    let (k, v) = m.pair();
    let fleet = format!(
        "[fleet]\nname = \"kit\"\nstart = \"s0\"\ntask = \"escape\"\n\n[[sessions]]\nname = \"s0\"\nagent = \"sim\"\nscript = \"script.toml\"\nenv = {{ {k} = \"{v}\", CAPFLEET_ESCAPE_TOKENS = \"{tokens}\", CAPFLEET_ESCAPE_DATA = \"{data}\", CAPFLEET_ESCAPE_ONLY = \"{SERVER_FILES}\" }}\n",
        tokens = d.join("tokens.txt").display(),
        data = d.join("data").display(),
    );
    let files = [("script.toml", "[[turn]]\nsteps = [{ escape = true }]\n")];
    let run_kit = |token: &str, text: &str| {
        let id = server.submit(Some(token), &submission(text, &files))["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let run = server.wait_run(&id, Some(token), Duration::from_secs(60));
        assert_eq!(run["state"], "completed", "{run}\n{}", server.stderr());
        let records = journal_records(&d.join("data/runs").join(&id).join("journal.jsonl"));
        (kit_lines(&records), sandbox_of(&records, "s0"))
    };
    // Nothing hidden: each attempt catches what it looks for.
    let (open, _) = run_kit(&ops, &none_in_fleet(&fleet));
    assert_eq!(open.len(), 3, "{open:#?}");
    for l in &open {
        assert!(l.ends_with(": ESCAPED"), "{backend}, unsandboxed: {l}");
    }
    let (boxed, sb) = run_kit(&ci, &fleet);
    assert_eq!(boxed.len(), 3, "{boxed:#?}");
    for l in &boxed {
        assert!(l.contains(": blocked: "), "{backend}: {l}\n{boxed:#?}");
    }
    assert_eq!(sb["backend"], backend, "{sb}");
    let hidden = sb["hidden"].to_string();
    for path in [d.join("tokens.txt"), d.join("data")] {
        assert!(hidden.contains(path.to_str().unwrap()), "{path:?} in {sb}");
    }
    assert_eq!(
        std::fs::read(d.join("tokens.txt")).unwrap(),
        tokens_before,
        "the token file is as it was"
    );
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}

#[test]
fn the_servers_token_file_and_data_dir_are_hidden_under_bubblewrap() {
    server_files_under("bubblewrap");
}

#[test]
fn the_servers_token_file_and_data_dir_are_hidden_under_landlock() {
    server_files_under("landlock");
}

/// The sandbox of `name` in run `id` on `worker`, as its journal says.
fn worker_sandbox(worker: &Worker, id: &str, name: &str) -> Value {
    let (_, records) = (worker.runs().into_iter())
        .find(|(run, _)| run == id)
        .unwrap_or_else(|| panic!("no run {id}: {}", worker.stderr()));
    sandbox_of(&records, name)
}

#[test]
fn over_nats_the_rule_travels_with_the_run_and_the_worker_obeys_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let nats = NatsServer::start();
    let url = nats.url();
    let m = EnvMarker::new("serve-sandbox-nats");
    let worker = Worker::start(&d.join("w"), &url, &[]);
    let srv = d.join("srv");
    std::fs::create_dir_all(&srv).unwrap();
    let ci = add_token(&srv, "ci", "run");
    let ops = add_token(&srv, "ops", "admin");
    let server = Server::start(
        &srv,
        &[
            "--nats",
            &url,
            "--token-file",
            "tokens.txt",
            "--allow-unsandboxed",
        ],
    );
    let fleet = sim_fleet("remote", 1, m.pair());
    let files = [("script.toml", SAY)];
    let (status, refused) = server.json(
        "POST",
        "/v1/runs",
        Some(&ci),
        Some(&submission(&none_in_fleet(&fleet), &files)),
    );
    assert_eq!(status, 400, "{refused}");
    assert_refused(&refused, "fleet.sandbox", 2);
    for (token, text, confined) in [
        (&ci, fleet.clone(), true),
        (&ops, none_in_fleet(&fleet), false),
    ] {
        let created = server.submit(Some(token), &submission(&text, &files));
        let id = created["id"].as_str().unwrap().to_owned();
        let run = server.wait_run(&id, Some(token), Duration::from_secs(60));
        assert_eq!(run["state"], "completed", "{run}\n{}", worker.stderr());
        let sb = worker_sandbox(&worker, &id, "s0");
        assert_eq!(sb.is_object(), confined, "{sb}");
    }
    // `capfleet submit --nats` queues sandboxed runs only.
    let work = d.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("fleet.toml"), none_in_fleet(&fleet)).unwrap();
    std::fs::write(work.join("script.toml"), SAY).unwrap();
    let out = capfleet(&work)
        .args(["submit", "fleet.toml", "--nats", &url])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("fleet.toml:2: fleet.sandbox: sandbox = \"none\" is refused"),
        "{err}"
    );
    drop(worker);
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}

/// Whether `path` (a journaled path) lies in `dir`.
fn inside(path: &Value, dir: &Path) -> bool {
    path.as_str().is_some_and(|p| Path::new(p).starts_with(dir))
}

#[test]
fn a_takeover_keeps_the_runs_sandbox_with_the_new_workers_paths() {
    let c = Chain::new("serve-sandbox-takeover", 1);
    let mut a = c.worker("a");
    let id = c.submit();
    c.under_way(std::slice::from_ref(&id), &a);
    let b = c.worker("b");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(a.child.id() as i32, libc::SIGKILL) };
    wait_within(&mut a.child, Duration::from_secs(5));
    assert!(
        wait_until(Duration::from_secs(90), Duration::from_millis(100), || has(
            &b,
            &id,
            "run_ended"
        )),
        "not taken over: {}",
        b.stderr()
    );
    let (_, j) = b.runs().into_iter().find(|(run, _)| *run == id).unwrap();
    let taken = j.iter().position(|r| r["type"] == "lease_taken").unwrap();
    let (a_dir, b_dir) = (
        std::fs::canonicalize(&a.dir).unwrap(),
        std::fs::canonicalize(&b.dir).unwrap(),
    );
    // `a` journaled its sessions' sandboxes with its paths; `b`'s `resumed` record
    // says what they run in on `b`: sandboxed, the network and backend as
    // journaled, every path its own.
    let journaled: Vec<&Value> = (j[..taken].iter())
        .filter(|r| r["type"] == "session")
        .collect();
    assert_eq!(journaled.len(), 3, "{j:?}");
    let resumed = (j[taken..].iter())
        .find(|r| r["type"] == "resumed")
        .unwrap_or_else(|| panic!("no resumed record: {j:?}"));
    let anew = resumed["sandboxes"].as_object().expect("sandboxes anew");
    assert_eq!(anew.len(), journaled.len(), "{resumed}");
    for record in journaled {
        let was = &record["sandbox"];
        assert!(inside(&was["workspace"], &a_dir), "{record}");
        let sb = &anew[record["name"].as_str().unwrap()];
        assert_eq!(
            (&sb["backend"], &sb["network"]),
            (&was["backend"], &was["network"])
        );
        assert!(inside(&sb["workspace"], &b_dir), "{sb}");
        let paths =
            (sb["writable"].as_array().unwrap().iter()).chain(sb["readable"].as_array().unwrap());
        for p in paths {
            assert!(!inside(p, &a_dir), "the dead worker's {p} in {sb}");
        }
    }
    let ends: Vec<&Value> = j.iter().filter(|r| r["type"] == "run_ended").collect();
    assert_eq!(ends.last().unwrap()["outcome"], "completed", "{j:?}");
    drop(b);
    c.m.wait_gone(Duration::from_secs(10), "the sim agents");
}
