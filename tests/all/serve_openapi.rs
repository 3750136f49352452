//! `GET /openapi.json` against real third-party tools: `openapi-spec-validator`
//! (0.9.0) validates the served document, and `schemathesis` (4.32.5) fuzzes a live
//! server from it with an admin token, for a bounded number of cases: no 5xx, and
//! every status, content type, header and body the server answers is the one the
//! document describes. (Walking the document for its auth is `serve::tokens_…`.)

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::EnvMarker;
use crate::common::peers::peer;
use crate::common::serve::{Server, add_token, operations, sim_fleet, submission};

const QUICK: &str = "[[turn]]\nsteps = [{ say = \"hello\" }]\n";

/// A server with one completed run and an admin token; the token, the run's id.
fn server_with_a_run(dir: &std::path::Path, m: &EnvMarker) -> (Server, String, String) {
    let admin = add_token(dir, "fuzz", "admin");
    let server = Server::start(dir, &["--token-file", "tokens.txt"]);
    let fleet = sim_fleet("quick", 1, m.pair());
    let created = server.submit(Some(&admin), &submission(&fleet, &[("script.toml", QUICK)]));
    let id = created["id"].as_str().unwrap().to_owned();
    server.wait_run(&id, Some(&admin), Duration::from_secs(60));
    (server, admin, id)
}

#[test]
fn the_served_document_is_valid_openapi_and_lists_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("serve-openapi");
    let (server, _admin, _id) = server_with_a_run(dir.path(), &m);
    let r = server.request("GET", "/openapi.json", None, "application/json", b"");
    assert_eq!(r.status, 200);
    let doc: Value = serde_json::from_str(&r.body).unwrap();
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, &r.body).unwrap();
    let out = Command::new(peer("openapi-spec-validator"))
        .arg(&file)
        .output()
        .expect("openapi-spec-validator");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("OK"), "{said}");
    // The routes the API has, each with its method, are all described.
    let ops: Vec<(String, String)> = operations(&doc)
        .into_iter()
        .map(|o| (o.method, o.path))
        .collect();
    for want in [
        ("POST", "/v1/runs"),
        ("GET", "/v1/runs"),
        ("GET", "/v1/runs/{id}"),
        ("POST", "/v1/runs/{id}/cancel"),
        ("GET", "/v1/runs/{id}/events"),
        ("GET", "/v1/runs/{id}/asks"),
        ("POST", "/v1/runs/{id}/asks/{ask_id}"),
        ("GET", "/v1/runs/{id}/artifacts"),
        ("GET", "/v1/runs/{id}/artifacts/{session}/{name}"),
        ("GET", "/v1/runs/{id}/diff"),
        ("GET", "/v1/runs/{id}/diff/{session}"),
        ("GET", "/v1/runs/{id}/fleet"),
        ("GET", "/v1/runs/{id}/changes"),
        ("GET", "/v1/asks"),
        ("GET", "/v1/me"),
        ("POST", "/v1/fleets/validate"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
    ] {
        assert!(
            ops.contains(&(want.0.to_owned(), want.1.to_owned())),
            "{want:?} in {ops:?}"
        );
    }
    // The bearer scheme, and the error body with its codes.
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let codes = doc["components"]["schemas"]["ErrorCode"].to_string();
    for code in [
        "unauthorized",
        "run_not_found",
        "invalid_fleet",
        "server_full",
    ] {
        assert!(codes.contains(code), "{codes}");
    }
    assert!(m.processes().is_empty(), "no agent left");
}

#[test]
fn schemathesis_finds_no_server_error_and_no_answer_off_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("serve-fuzz");
    let (server, admin, id) = server_with_a_run(dir.path(), &m);
    // The run's names for the path parameters, so that the run's routes answer with
    // its data (events, artifacts, diff), not only 404s.
    std::fs::write(
        dir.path().join("schemathesis.toml"),
        format!(
            "[parameters]\n\"path.id\" = \"{id}\"\n\"path.session\" = \"s0\"\n\"path.name\" = \"transcript.json\"\n"
        ),
    )
    .unwrap();
    let report = dir.path().join("schemathesis");
    let out = Command::new(peer("schemathesis"))
        .current_dir(dir.path())
        .args([
            "run",
            &format!("http://127.0.0.1:{}/openapi.json", server.port),
            "--header",
            &format!("Authorization: Bearer {admin}"),
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,\
             response_headers_conformance,response_schema_conformance",
            "--phases",
            "examples,coverage,fuzzing",
            "--max-examples",
            "15",
            "--seed",
            "1",
            "--no-shrink",
            "--generation-database",
            "none",
            "--request-timeout",
            "10",
            "--workers",
            "1",
            "--no-color",
            "--report-dir",
        ])
        .arg(&report)
        .output()
        .expect("schemathesis");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}\n{}", server.stderr());
    // It did test: every operation, cases sent.
    assert!(said.contains("19 selected / 19 total"), "{said}");
    assert!(said.contains("generated"), "{said}");
    assert!(!server.stderr().contains(&admin), "the token never shows");
    assert!(m.processes().is_empty(), "no agent left");
}
