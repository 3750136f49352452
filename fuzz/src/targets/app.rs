//! What the app reads from people and clients: fleet.toml files, and `capfleet
//! serve`'s request bodies, through the app library's [`capfleet::fuzzing`].

use std::path::{Component, Path};

use capfleet::fuzzing;

use super::{Framing, Memory, Target};

/// fleet.toml as untrusted input: random and mutated files through the reader and the
/// validator, every finding rendered as `run --dry-run` and the server print them.
pub(super) const FLEET_TOML: Target = Target {
    name: "fleet_toml",
    reads: "fleet.toml: [fleet], sessions, routes, joins, plans, budgets, workspaces, answerer",
    framing: Framing::Toml,
    seeds: &["config/fleets", "tests/fixtures/sim/coding_turn.toml"],
    dict: &[
        "[fleet]",
        "[[session]]",
        "[[route]]",
        "[budget]",
        "[answerer]",
        "[workspace]",
        "[session.env]",
        "name",
        "agent",
        "start",
        "task",
        "when",
        "from",
        "to",
        "join",
        "fan_out",
        "race",
        "plan",
        "master_plan",
        "on_error",
        "abort",
        "max_usd",
        "max_tokens",
        "alert_at",
        "max_turns",
        "restart",
        "turn_timeout",
        "auto_answer",
        "research",
        "max_risk",
        "low",
        "high",
        "sim",
        "parallel",
        "timeout",
        "\"30s\"",
        "\"1h 20m\"",
        "{ text = \"x\" }",
        "[\"a\", \"b\"]",
        "1e309",
        "-1",
        "true",
    ],
    run: fleet_toml,
    memory: Memory {
        fixed: 1 << 20,
        per_byte: 256,
    },
};

/// Every finding, and the error of a file that is not TOML, says something.
fn fleet_toml(input: &[u8]) {
    let Ok(src) = std::str::from_utf8(input) else {
        return;
    };
    match fuzzing::fleet_toml("fuzz.toml", src) {
        Ok(findings) => {
            for f in &findings {
                assert!(!f.trim().is_empty(), "an empty finding among {findings:?}");
            }
        }
        Err(error) => assert!(!error.trim().is_empty(), "a TOML error without a message"),
    }
}

/// `capfleet serve`'s request bodies: random and mutated submissions
/// (`application/toml` and JSON `{fleet, task, files, cwd}`) read the way every
/// `POST /v1/runs` is; an accepted body names no file that would land outside the
/// run's input directory.
pub(super) const SERVE_BODY: Target = Target {
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
    run: serve_body,
    memory: Memory {
        fixed: 256 << 10,
        per_byte: 48,
    },
};

/// The first byte picks the content type; the rest is the body.
fn serve_body(input: &[u8]) {
    let (kind, body) = match input.split_first() {
        Some((k, rest)) if k % 2 == 0 => ("application/toml", rest),
        Some((_, rest)) => ("application/json", rest),
        None => ("application/json", input),
    };
    match fuzzing::serve_body(kind, body) {
        Ok(files) => {
            for name in &files {
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
        Err(error) => assert!(
            !error.trim().is_empty(),
            "a rejected body without a message"
        ),
    }
}
