//! `capfleet serve`'s request bodies as untrusted input (issue 18, point 5): random and
//! mutated submissions (`application/toml` and JSON `{fleet, task, files, cwd}`)
//! through `Submission::parse`, the way every `POST /v1/runs` is read. No panic, heap
//! and time bounded (the fuzz crate's harness); an accepted body names no file that
//! would land outside the run's input directory.

use std::path::{Component, Path};

use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use capfleet_fuzz::check::{replay_in_suite, search_in_suite};
use capfleet_fuzz::targets::{Framing, Memory, Target};

use super::submission::Submission;

const BODY: Target = Target {
    name: "serve_body",
    reads: "the body of POST /v1/runs: a fleet.toml, or JSON with the fleet, a task, files beside it and a cwd",
    framing: Framing::Json,
    seeds: &["fuzz/seeds/serve_body"],
    dict: &[
        "fleet",
        "task",
        "files",
        "cwd",
        "[fleet]",
        "[[session]]",
        "name",
        "agent",
        "sim",
        "../x",
        "/etc/passwd",
        "a/../../b",
        "./a",
        "fleet.toml",
        "@task.md",
        "C:\\x",
        "\u{0}",
    ],
    run: body,
    memory: Memory {
        fixed: 256 << 10,
        per_byte: 48,
    },
};

/// The first byte picks the content type; the rest is the body.
fn body(input: &[u8]) {
    let (kind, body) = match input.split_first() {
        Some((k, rest)) if k % 2 == 0 => ("application/toml", rest),
        Some((_, rest)) => ("application/json", rest),
        None => ("application/json", input),
    };
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, kind.parse().expect("a content type"));
    if let Ok(s) = Submission::parse(&headers, body) {
        for name in s.files.keys() {
            let inside = Path::new("/input").join(name);
            assert!(
                inside.starts_with("/input")
                    && Path::new(name)
                        .components()
                        .all(|c| matches!(c, Component::Normal(_))),
                "accepted file name {name:?} leaves the input directory"
            );
        }
    }
}

#[test]
fn random_bodies_break_no_promise() {
    search_in_suite(&BODY);
}

#[test]
fn body_seeds_and_kept_regressions_pass() {
    replay_in_suite(&BODY);
}
