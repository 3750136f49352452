//! The web console as the server serves it (`GET /`, `/console/<version>/…`): the
//! page and every module it imports with their types, caching and strict
//! Content-Security-Policy, the page holding nothing of any run without a token;
//! and the API the console reads beyond the runs' own routes — who the token is,
//! the open questions of every run (with the risk's reasons, and who answered one
//! first), a fleet checked without running it, a run's fleet as a graph, and each
//! coding session's diff with its vetting findings. The console itself, driven in
//! a real Chromium, is the browser tests' part.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::serve::{Server, add_token, sim_fleet, submission};
use crate::common::{EnvMarker, wait_until};

/// A script saying one line.
const HI: &str = "[[turn]]\nsteps = [{ say = \"hi\" }]\n";

/// A GET without a token.
fn get(server: &Server, path: &str) -> crate::common::fake_llm::Response {
    server.request("GET", path, None, "text/plain", b"")
}

/// The modules `js` imports (`from "./x.js"`).
fn imports(js: &str) -> Vec<String> {
    js.split("from \"./")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_page_and_its_modules_are_served_typed_cached_and_under_a_strict_policy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let reader = add_token(d, "viewer", "read");
    let server = Server::start(d, &["--token-file", "tokens.txt"]);
    let page = get(&server, "/");
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(
        page.header("content-type").as_deref(),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(page.header("cache-control").as_deref(), Some("no-cache"));
    let csp = page.header("content-security-policy").expect("a CSP");
    for rule in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(rule), "{rule} in {csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(
        page.header("x-content-type-options").as_deref(),
        Some("nosniff")
    );
    assert_eq!(
        page.header("referrer-policy").as_deref(),
        Some("no-referrer")
    );
    // The page is a shell: one module script from the server, no inline script.
    let start = page.body.find("src=\"/console/").expect("the app's module") + 5;
    let app = page.body[start..].split('"').next().unwrap().to_owned();
    assert!(app.ends_with("/app.js"), "{app}");
    assert_eq!(page.body.matches("<script").count(), 1, "{}", page.body);
    let base = app.trim_end_matches("app.js").to_owned();
    // Every module reachable from app.js, and the stylesheet.
    let mut todo = vec!["app.js".to_owned()];
    let mut seen = BTreeSet::new();
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let r = get(&server, &format!("{base}{name}"));
        assert_eq!(r.status, 200, "{name}");
        assert_eq!(
            r.header("content-type").as_deref(),
            Some("text/javascript; charset=utf-8"),
            "{name}"
        );
        assert_eq!(
            r.header("cache-control").as_deref(),
            Some("public, max-age=31536000, immutable"),
            "{name}"
        );
        assert!(r.header("content-security-policy").is_some(), "{name}");
        todo.extend(imports(&r.body));
    }
    for module in [
        "api.js",
        "sse.js",
        "login.js",
        "runs.js",
        "run.js",
        "session.js",
        "events.js",
        "approvals.js",
        "graph.js",
        "diff.js",
        "submit.js",
    ] {
        assert!(seen.contains(module), "{module} in {seen:?}");
    }
    let css = get(&server, &format!("{base}console.css"));
    assert_eq!(
        (css.status, css.header("content-type").as_deref()),
        (200, Some("text/css; charset=utf-8"))
    );
    // Another version's asset, or a file that is none, is not there.
    for path in [
        "/console/0000000000000000/app.js".to_owned(),
        format!("{base}nope.js"),
        format!("{base}..%2Fmod.rs"),
    ] {
        assert_eq!(get(&server, &path).status, 404, "{path}");
    }
    // The page's requests are counted like the API's, by route pattern.
    let (status, _) = server.json("GET", "/v1/runs", Some(&reader), None);
    assert_eq!(status, 200);
    let metrics = server.request("GET", "/metrics", Some(&reader), "text/plain", b"");
    for route in ["route=\"/\"", "route=\"/console/{version}/{file}\""] {
        assert!(
            metrics
                .body
                .lines()
                .any(|l| l.starts_with("capfleet_server_requests_total")
                    && l.contains(route)
                    && l.contains("status=\"200\"")),
            "{route} counted\n{}",
            metrics.body
        );
    }
}

#[test]
fn without_a_token_the_page_shows_nothing_of_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let runner = add_token(d, "ci", "run");
    let m = EnvMarker::new("console-login");
    let server = Server::start(d, &["--token-file", "tokens.txt"]);
    let created = server.submit(
        Some(&runner),
        &submission(
            &sim_fleet("secretfleet", 1, m.pair()),
            &[("script.toml", HI)],
        ),
    );
    let id = created["id"].as_str().unwrap().to_owned();
    server.wait_run(&id, Some(&runner), Duration::from_secs(60));
    let page = get(&server, "/");
    assert_eq!(page.status, 200);
    assert!(!page.body.contains(&id) && !page.body.contains("secretfleet"));
    // What the page would read, it may not without a token (or with a wrong one).
    for path in [
        "/v1/me",
        "/v1/runs",
        "/v1/asks",
        &format!("/v1/runs/{id}"),
        &format!("/v1/runs/{id}/fleet"),
    ] {
        for token in [None, Some("cft_wrong")] {
            let (status, body) = server.json("GET", path, token, None);
            assert_eq!(
                (status, body["code"].as_str()),
                (401, Some("unauthorized")),
                "{path}"
            );
            assert!(!body.to_string().contains(&id), "{body}");
        }
    }
    let (status, me) = server.json("GET", "/v1/me", Some(&runner), None);
    assert_eq!((status, me), (200, json!({"name": "ci", "role": "run"})));
}

/// A script asking leave for a recursive delete (its content raises the risk, and
/// says why), then saying a line.
const RISKY: &str = "[[turn]]\nsteps = [{ permission = \"Bash\", input = { command = \"rm -rf build\" }, risk = \"low\" }, { say = \"after the tool\" }]\n";

#[test]
fn open_questions_of_every_run_in_one_list_and_a_second_answer_says_who_was_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let runner = add_token(d, "ci", "run");
    let alice = add_token(d, "alice", "approve");
    let bob = add_token(d, "bob", "approve");
    let m = EnvMarker::new("console-asks");
    let server = Server::start(d, &["--token-file", "tokens.txt"]);
    let ids: Vec<String> = (0..2)
        .map(|i| {
            let c = server.submit(
                Some(&runner),
                &submission(
                    &sim_fleet(&format!("asks{i}"), 1, m.pair()),
                    &[("script.toml", RISKY)],
                ),
            );
            c["id"].as_str().unwrap().to_owned()
        })
        .collect();
    let mut asks = Value::Null;
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(20), || {
            let (status, body) = server.json("GET", "/v1/asks", Some(&runner), None);
            assert_eq!(status, 200, "{body}");
            asks = body["asks"].clone();
            asks.as_array().unwrap().len() == 2
        }),
        "both runs' questions listed: {asks}\n{}",
        server.stderr()
    );
    let runs: BTreeSet<&str> = asks
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["run"].as_str().unwrap())
        .collect();
    assert_eq!(runs, ids.iter().map(String::as_str).collect());
    let first = &asks[0];
    assert_eq!(
        (
            first["kind"].as_str(),
            first["tool"].as_str(),
            first["risk"].as_str()
        ),
        (Some("permission"), Some("Bash"), Some("high")),
        "{first}"
    );
    assert_eq!(first["intent"]["command"], "rm -rf build");
    let why = first["why"].as_array().expect("the risk's reasons");
    assert!(
        why.iter().any(|w| w.as_str().unwrap().contains("rm")),
        "{first}"
    );
    let path = format!(
        "/v1/runs/{}/asks/{}",
        first["run"].as_str().unwrap(),
        first["ask_id"].as_str().unwrap()
    );
    let (status, body) = server.json(
        "POST",
        &path,
        Some(&alice),
        Some(&json!({"decision": "allow_once"})),
    );
    assert_eq!(
        (status, body["by"].as_str()),
        (200, Some("alice")),
        "{body}"
    );
    let (status, body) = server.json(
        "POST",
        &path,
        Some(&bob),
        Some(&json!({"decision": "deny"})),
    );
    assert_eq!(
        (status, body["code"].as_str(), body["answered_by"].as_str()),
        (409, Some("ask_closed"), Some("alice")),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("answered by alice"),
        "{body}"
    );
    let (_, left) = server.json("GET", "/v1/asks", Some(&runner), None);
    assert_eq!(left["asks"].as_array().unwrap().len(), 1, "{left}");
    for id in &ids {
        let (status, _) = server.json(
            "POST",
            &format!("/v1/runs/{id}/cancel"),
            Some(&runner),
            None,
        );
        assert!(status == 202 || status == 409);
    }
}

#[test]
fn a_fleet_is_checked_without_running_and_its_findings_name_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let runner = add_token(d, "ci", "run");
    let reader = add_token(d, "viewer", "read");
    let m = EnvMarker::new("console-validate");
    let server = Server::start(d, &["--token-file", "tokens.txt", "--max-sessions", "2"]);
    let good = submission(&sim_fleet("good", 2, m.pair()), &[("script.toml", HI)]);
    let (status, v) = server.json("POST", "/v1/fleets/validate", Some(&runner), Some(&good));
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (
            v["valid"].as_bool(),
            v["fleet"].as_str(),
            v["sessions"].as_u64()
        ),
        (Some(true), Some("good"), Some(2)),
        "{v}"
    );
    // Line 7 names an agent that is not there; a key is misspelt on line 3.
    let bad = "[fleet]\nname = \"bad\"\nstrat = \"a\"\ntask = \"go\"\n\n[[sessions]]\nname = \"a\"\nagent = 5\n";
    let r = server.request(
        "POST",
        "/v1/fleets/validate",
        Some(&runner),
        "application/toml",
        bad.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["valid"], false, "{v}");
    let lines: Vec<u64> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["line"].as_u64())
        .collect();
    assert!(lines.contains(&8), "the agent's line: {v}");
    // Too many sessions for this server is a finding too; nothing ran.
    let big = submission(&sim_fleet("big", 3, m.pair()), &[("script.toml", HI)]);
    let (_, v) = server.json("POST", "/v1/fleets/validate", Some(&runner), Some(&big));
    assert_eq!(v["valid"], false, "{v}");
    assert!(
        v["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("3 sessions"),
        "{v}"
    );
    let (_, runs) = server.json("GET", "/v1/runs", Some(&runner), None);
    assert_eq!(runs["runs"].as_array().unwrap().len(), 0, "{runs}");
    assert!(m.processes().is_empty());
    // Not a body at all: 400; a read token: 403.
    let (status, body) = server.json(
        "POST",
        "/v1/fleets/validate",
        Some(&runner),
        Some(&json!({"nope": 1})),
    );
    assert_eq!((status, body["code"].as_str()), (400, Some("bad_request")));
    let (status, _) = server.json("POST", "/v1/fleets/validate", Some(&reader), Some(&good));
    assert_eq!(status, 403);
}

/// A pipeline into a join: a -> b, and (a, b) -> c.
fn graph_fleet(marker: (&str, &str)) -> String {
    let (k, v) = marker;
    let mut f = "[fleet]\nname = \"g\"\nstart = \"a\"\ntask = \"go\"\n".to_owned();
    for s in ["a", "b", "c"] {
        f.push_str(&format!("\n[[sessions]]\nname = \"{s}\"\nagent = \"sim\"\nscript = \"script.toml\"\nenv = {{ {k} = \"{v}\" }}\n"));
    }
    f.push_str("\n[[routes]]\nwhen = [\"a.done\"]\nroute_to = \"b\"\n\n[[routes]]\nwhen = [\"a.done\", \"b.done\"]\nroute_to = \"c\"\n");
    f
}

/// A script writing a private key into the workspace (a vetting finding), then
/// saying a line.
const KEY: &str = "[[turn]]\nsteps = [{ write = \"id_rsa\", content = \"-----BEGIN OPENSSH PRIVATE KEY-----\\nAAAA\\n\" }, { say = \"wrote it\" }]\n";

#[test]
fn a_runs_graph_and_its_sessions_changes_with_their_vetting_findings() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("console-graph");
    let server = Server::start(dir.path(), &[]);
    let created = server.submit(
        None,
        &submission(&graph_fleet(m.pair()), &[("script.toml", KEY)]),
    );
    let id = created["id"].as_str().unwrap().to_owned();
    let (status, g) = server.json("GET", &format!("/v1/runs/{id}/fleet"), None, None);
    assert_eq!(status, 200, "{g}");
    assert_eq!(g["start"], json!(["a"]));
    let names: Vec<&str> = g["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(
        g["routes"][0],
        json!({"index": 0, "kind": "pipe", "when": ["a"], "to": ["b"]})
    );
    assert_eq!(
        g["routes"][1],
        json!({"index": 1, "kind": "join", "when": ["a", "b"], "to": ["c"]})
    );
    let run = server.wait_run(&id, None, Duration::from_secs(60));
    assert_eq!(run["state"], "completed", "{run}");
    assert!(run["sessions"][0]["pauses"].is_u64(), "{run}");
    let (status, c) = server.json("GET", &format!("/v1/runs/{id}/changes"), None, None);
    assert_eq!(status, 200, "{c}");
    let a = c["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["diff"].is_string())
        .unwrap_or_else(|| panic!("a session changed something: {c}"));
    let diff = a["diff"].as_str().unwrap();
    let r = get(&server, diff);
    assert_eq!(r.status, 200);
    assert!(r.body.contains("id_rsa"), "{}", r.body);
    assert!(
        a["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["path"] == "id_rsa" && f["reason"] == "secret"),
        "{c}"
    );
    let (status, body) = server.json("GET", "/v1/runs/nope/changes", None, None);
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("run_not_found"))
    );
    let (status, _) = server.json("GET", "/v1/runs/nope/fleet", None, None);
    assert_eq!(status, 404);
}

#[test]
fn with_a_trace_ui_a_run_links_to_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("console-trace");
    let server = Server::start(
        dir.path(),
        &[
            "--trace-file",
            "spans.jsonl",
            "--trace-ui",
            "http://jaeger.example:16686/",
        ],
    );
    let created = server.submit(
        None,
        &submission(&sim_fleet("traced", 1, m.pair()), &[("script.toml", HI)]),
    );
    let id = created["id"].as_str().unwrap().to_owned();
    let run = server.wait_run(&id, None, Duration::from_secs(60));
    let url = run["trace_url"]
        .as_str()
        .unwrap_or_else(|| panic!("a trace link: {run}"));
    let trace = url
        .strip_prefix("http://jaeger.example:16686/trace/")
        .unwrap_or_else(|| panic!("{url}"));
    assert!(
        trace.len() == 32
            && trace.chars().all(|c| c.is_ascii_hexdigit())
            && trace.chars().any(|c| c != '0'),
        "{trace}"
    );
    // Without traces, or without a UI, there is no link.
    let other = tempfile::tempdir().unwrap();
    let plain = Server::start(other.path(), &["--trace-ui", "http://jaeger.example:16686"]);
    let created = plain.submit(
        None,
        &submission(&sim_fleet("untraced", 1, m.pair()), &[("script.toml", HI)]),
    );
    let run = plain.wait_run(
        created["id"].as_str().unwrap(),
        None,
        Duration::from_secs(60),
    );
    assert!(run.get("trace_url").is_none(), "{run}");
}
