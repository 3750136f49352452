//! `capfleet serve --nats` (the real `nats-server`): `POST /v1/runs` queues the
//! submission for the workers (an invalid fleet is refused, never queued), and the
//! run's state and event stream are read from NATS — the note of its submission,
//! its lease, its journal as JetStream keeps it — while it runs on a worker
//! elsewhere: the server never has the run on its disk.

use std::time::Duration;

use crate::common::nats::{NatsServer, Worker};
use crate::common::serve::{Server, chatty, sim_fleet, submission};
use crate::common::{EnvMarker, capfleet, wait_until};

/// Bytes a sim agent says in one line: a journal record larger than a NATS message
/// may be (published through the object store).
const LARGE: usize = 600 << 10;

#[test]
fn serve_with_nats_queues_a_run_and_reads_its_state_and_events_from_nats() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let nats = NatsServer::start();
    let url = nats.url();
    let m = EnvMarker::new("nats-serve");
    let worker = Worker::start(&d.join("w"), &url, &[]);
    std::fs::create_dir_all(d.join("srv")).unwrap();
    let server = Server::start(&d.join("srv"), &["--nats", &url]);
    let fleet = sim_fleet("tiny", 1, m.pair());
    let body = submission(&fleet, &[("script.toml", &chatty(4, 500))]);
    let (status, created) = server.json("POST", "/v1/runs", None, Some(&body));
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["state"], "queued");
    let id = created["id"].as_str().unwrap().to_owned();
    // Readable at once, from NATS: the fleet's name, queued or running already.
    let (status, run) = server.json("GET", &format!("/v1/runs/{id}"), None, None);
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["fleet"], "tiny", "{run}");
    assert!(
        matches!(run["state"].as_str(), Some("queued" | "running")),
        "{run}"
    );
    // While the worker holds it: running.
    assert!(
        wait_until(Duration::from_secs(30), Duration::from_millis(50), || {
            server.json("GET", &format!("/v1/runs/{id}"), None, None).1["state"] == "running"
        }),
        "never running: {}",
        worker.stderr()
    );
    // An invalid fleet is refused with its findings, never queued; an unknown run is
    // no run.
    let (status, refused) = server.json(
        "POST",
        "/v1/runs",
        None,
        Some(&submission("[fleet]\nname = \"x\"\n", &[])),
    );
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["code"], "invalid_fleet");
    let (status, _) = server.json("GET", "/v1/runs/no-such-run", None, None);
    assert_eq!(status, 404);
    let events = format!("/v1/runs/{id}/events");
    assert!(
        server
            .sse("/v1/runs/no-such-run/events", None, None, None)
            .is_empty()
    );
    // The event stream, followed live from JetStream to the run's end: every record
    // of the worker's journal, in order, ids their positions, then `end`.
    let streamed = server.sse(&events, None, None, None);
    let (last, records) = streamed.split_last().expect("events");
    assert_eq!(last.event.as_deref(), Some("end"), "{:?}", last.data);
    let end: serde_json::Value = serde_json::from_str(&last.data).unwrap();
    assert_eq!(end["state"], "completed", "{end}");
    let journal = std::fs::read_to_string(
        worker
            .dir
            .join(".capfleet/runs")
            .join(&id)
            .join("journal.jsonl"),
    )
    .unwrap();
    let lines: Vec<&str> = journal.lines().collect();
    assert_eq!(records.len(), lines.len());
    for (i, (e, line)) in records.iter().zip(&lines).enumerate() {
        assert_eq!(e.id, Some(i as u64 + 1));
        assert_eq!(e.data, *line);
    }
    assert_eq!(end["records"], lines.len());
    // A client that reconnects with the last id it saw gets the rest only.
    let rest = server.sse(&events, None, Some(3), None);
    assert_eq!(rest.first().and_then(|e| e.id), Some(4));
    assert_eq!(rest.len(), records.len() - 3 + 1);
    // Its state once ended, from the journal JetStream keeps.
    let (status, run) = server.json("GET", &format!("/v1/runs/{id}"), None, None);
    assert_eq!(status, 200);
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["outcome"], "completed", "{run}");
    assert!(run["started_ms"].as_u64().is_some() && run["ended_ms"].as_u64().is_some());
    // The worker ran it, not the server; only the valid submission was queued.
    assert_eq!(worker.runs().len(), 1);
    assert!(!d.join("srv/.capfleet/runs").join(&id).exists());
    artifacts_and_large_records(&server, &worker, &fleet, &url);
    drop(worker);
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}

/// A run whose agent says one line of [`LARGE`] bytes: its journal (with `capfleet
/// log --nats` and the event stream) and its artifacts (listed, each read back
/// byte for byte) come back whole from NATS, through the object store.
fn artifacts_and_large_records(server: &Server, worker: &Worker, fleet: &str, url: &str) {
    let script = format!(
        "[[turn]]\nsteps = [{{ say = \"{}\\n\" }}]\n",
        "x".repeat(LARGE)
    );
    let body = submission(fleet, &[("script.toml", &script)]);
    let (status, created) = server.json("POST", "/v1/runs", None, Some(&body));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let run = server.wait_run(&id, None, Duration::from_secs(60));
    assert_eq!(run["state"], "completed", "{run}\n{}", worker.stderr());
    let here = worker.dir.join(".capfleet/runs").join(&id);
    let journal = std::fs::read_to_string(here.join("journal.jsonl")).unwrap();
    assert!(
        journal.lines().any(|l| l.len() > LARGE),
        "no record of the large line"
    );
    let out = capfleet(&worker.dir)
        .args(["log", "--nats", url, "--json", &id])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), journal);
    let streamed = server.sse(&format!("/v1/runs/{id}/events"), None, None, None);
    let data: Vec<&str> = streamed[..streamed.len() - 1]
        .iter()
        .map(|e| e.data.as_str())
        .collect();
    assert_eq!(data, journal.lines().collect::<Vec<_>>());
    // The artifacts, as the worker has them (put once the journal is published).
    let artifacts = || {
        let (status, listed) = server.json("GET", &format!("/v1/runs/{id}/artifacts"), None, None);
        assert_eq!(status, 200, "{listed}");
        listed["artifacts"].as_array().unwrap().clone()
    };
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(50), || {
            !artifacts().is_empty()
        }),
        "no artifacts: {}",
        worker.stderr()
    );
    let listed = artifacts();
    let root = here.join("artifacts");
    let mut local: Vec<String> = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
            if e.path().is_dir() {
                dirs.push(e.path());
            } else {
                let rel = e.path().strip_prefix(&root).unwrap().display().to_string();
                local.push(rel);
            }
        }
    }
    local.sort();
    let names: Vec<&str> = listed.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, local);
    let mut largest = 0;
    for a in &listed {
        let name = a["name"].as_str().unwrap();
        let r = server.request("GET", a["href"].as_str().unwrap(), None, "", b"");
        assert_eq!(r.status, 200, "{name}");
        let want = std::fs::read(root.join(name)).unwrap();
        assert_eq!(r.body.as_bytes(), want.as_slice(), "{name}");
        assert_eq!(a["bytes"], want.len());
        largest = largest.max(want.len());
    }
    assert!(largest > LARGE, "the transcript holds the large line");
    let (status, _) = server.json(
        "GET",
        &format!("/v1/runs/{id}/artifacts/s0/no-such-file"),
        None,
        None,
    );
    assert_eq!(status, 404);
}
