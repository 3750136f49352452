//! Queued runs survive a stop (issue 35): a run answered `201 queued` is on disk
//! before the answer; SIGTERM lets the running run finish and leaves the queued ones
//! queued (not interrupted); `capfleet runs` reads them as queued meanwhile; the next
//! `capfleet serve` on the same data dir runs them in order and they complete; and
//! what the restarted server reads back of the old one's runs is what it said (a
//! completed run completed, a queued run cancelled interrupted with its exit code).

use std::time::Duration;

use serde_json::Value;

use crate::common::capfleet::capfleet;
use crate::common::serve::{Server, add_token, chatty, sim_fleet, submission};
use crate::common::{EnvMarker, journal_records, succeeded, wait_until};

const ARGS: [&str; 6] = [
    "--token-file",
    "tokens.txt",
    "--max-runs",
    "1",
    "--drain-timeout",
    "60s",
];

/// Run `id` as `server` says it (200).
fn view(server: &Server, token: &str, id: &str) -> Value {
    let (status, run) = server.json("GET", &format!("/v1/runs/{id}"), Some(token), None);
    assert_eq!(status, 200, "{run}");
    run
}

/// What `run` says and reads back the same across servers.
fn said(run: &Value) -> (Value, Value, Value) {
    (
        run["state"].clone(),
        run["outcome"].clone(),
        run["exit_code"].clone(),
    )
}

#[test]
fn queued_runs_stay_queued_through_a_stop_and_the_next_server_runs_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let token = add_token(d, "ci", "run");
    let m = EnvMarker::new("serve-requeue");
    let fleet = sim_fleet("queue", 1, m.pair());
    // Each run lasts about 2 s.
    let script = chatty(20, 100);
    let mut first = Server::start(d, &ARGS);
    let ids: Vec<String> = (0..4)
        .map(|i| {
            let c = first.submit(
                Some(&token),
                &submission(&fleet, &[("script.toml", &script)]),
            );
            let expected = if i == 0 { "running" } else { "queued" };
            assert_eq!(c["state"], expected, "{c}");
            c["id"].as_str().unwrap().to_owned()
        })
        .collect();
    // The last one is cancelled while it waits: it never runs, here or after.
    let (status, cancelled) = first.json(
        "POST",
        &format!("/v1/runs/{}/cancel", ids[3]),
        Some(&token),
        None,
    );
    assert_eq!(status, 202, "{cancelled}");
    let cancelled = view(&first, &token, &ids[3]);
    assert_eq!(cancelled["state"], "interrupted", "{cancelled}");
    assert_eq!(cancelled["exit_code"], 130, "{cancelled}");
    first.signal(libc::SIGTERM);
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(20), || {
            first.stderr().contains("draining")
        }),
        "draining"
    );
    for id in &ids[1..3] {
        let run = view(&first, &token, id);
        assert_eq!(run["state"], "queued", "draining, {id} still waits: {run}");
    }
    let status = first.wait(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{}", first.stderr());
    drop(first);
    // Between the servers the data dir says it.
    let listed = succeeded(capfleet(d).args(["runs", "--json"]).output().unwrap());
    let rows: Vec<Value> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let state_of = |id: &str| {
        rows.iter()
            .find(|r| r["run"] == id)
            .map(|r| r["state"].clone())
            .unwrap_or_else(|| panic!("{id} in {rows:?}"))
    };
    assert_eq!(state_of(&ids[0]), "completed");
    assert_eq!(state_of(&ids[1]), "queued");
    assert_eq!(state_of(&ids[2]), "queued");
    assert_eq!(state_of(&ids[3]), "interrupted");
    for id in &ids[1..] {
        assert!(
            !std::fs::read_to_string(d.join(".capfleet/runs").join(id).join("journal.jsonl"))
                .unwrap_or_default()
                .contains("\"turn_started\""),
            "{id} never started under the first server"
        );
    }

    let second = Server::start(d, &ARGS);
    let said_now = second.stderr();
    assert!(
        said_now.contains(&format!(
            "run {}, queued before the last stop, starts",
            ids[1]
        )),
        "{said_now}"
    );
    assert!(
        said_now.contains(&format!(
            "run {}, queued before the last stop, is queued again (1 in line)",
            ids[2]
        )),
        "{said_now}"
    );
    let waiting = view(&second, &token, &ids[2]);
    assert_eq!(
        (
            waiting["state"].as_str(),
            waiting["queue_position"].as_u64()
        ),
        (Some("queued"), Some(1)),
        "{waiting}"
    );
    assert_eq!(waiting["submitted_by"], "ci", "{waiting}");
    for id in &ids[1..3] {
        let run = second.wait_run(id, Some(&token), Duration::from_secs(60));
        assert_eq!(
            said(&run),
            ("completed".into(), "completed".into(), 0.into()),
            "{run}"
        );
        let ended: Vec<Value> = journal_records(&second.journal(id))
            .into_iter()
            .filter(|r| r["type"] == "run_ended")
            .collect();
        assert_eq!(ended.len(), 1, "{id}: {ended:?}");
    }
    // Read back: what the first server said of its runs.
    let done = view(&second, &token, &ids[0]);
    assert_eq!(
        said(&done),
        ("completed".into(), "completed".into(), 0.into()),
        "{done}"
    );
    assert!(done["ended_ms"].is_u64(), "{done}");
    let back = view(&second, &token, &ids[3]);
    assert_eq!(said(&back), said(&cancelled), "{back}\nwas {cancelled}");
    assert!(
        !second.stderr().contains(&ids[3]),
        "the cancelled run is not taken up again"
    );
    m.wait_gone(Duration::from_secs(10), "no agent left");
}
