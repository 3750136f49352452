//! A run's artifacts and diffs over the API: listed, each returned as stored, the
//! workspaces' diffs whole or per session; nothing outside the run's `artifacts/` is
//! ever served.

use std::time::Duration;

use crate::common::EnvMarker;
use crate::common::serve::{Server, sim_fleet, submission};

const WRITE: &str = "[[turn]]\nsteps = [{ write = \"notes.txt\", content = \"hello from s0\\n\" }, { say = \"wrote it\" }]\n";

#[test]
fn artifacts_and_diffs_are_served_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("serve-artifacts");
    let server = Server::start(dir.path(), &[]);
    let created = server.submit(
        None,
        &submission(&sim_fleet("art", 1, m.pair()), &[("script.toml", WRITE)]),
    );
    let id = created["id"].as_str().unwrap().to_owned();
    let run = server.wait_run(&id, None, Duration::from_secs(60));
    assert_eq!(run["state"], "completed", "{run}");
    let (status, list) = server.json("GET", &format!("/v1/runs/{id}/artifacts"), None, None);
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = list["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"s0/transcript.json"), "{names:?}");
    assert!(names.contains(&"s0/diff.patch"), "{names:?}");
    for a in list["artifacts"].as_array().unwrap() {
        let r = server.request("GET", a["href"].as_str().unwrap(), None, "text/plain", b"");
        assert_eq!(r.status, 200, "{a}");
        assert_eq!(r.body.len() as u64, a["bytes"].as_u64().unwrap(), "{a}");
    }
    let one = server.request(
        "GET",
        &format!("/v1/runs/{id}/diff/s0"),
        None,
        "text/plain",
        b"",
    );
    assert_eq!(one.status, 200);
    assert!(
        one.body.contains("notes.txt") && one.body.contains("hello from s0"),
        "{}",
        one.body
    );
    let all = server.request(
        "GET",
        &format!("/v1/runs/{id}/diff"),
        None,
        "text/plain",
        b"",
    );
    assert_eq!((all.status, &all.body), (200, &one.body));
    for path in [
        format!("/v1/runs/{id}/artifacts/s0/..%2F..%2Fjournal.jsonl"),
        format!("/v1/runs/{id}/artifacts/s0/nope.txt"),
        format!("/v1/runs/{id}/diff/nobody"),
    ] {
        let (status, body) = server.json("GET", &path, None, None);
        assert_eq!(
            (status, body["code"].as_str()),
            (404, Some("artifact_not_found")),
            "{path}"
        );
    }
}
