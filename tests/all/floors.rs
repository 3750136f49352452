//! The crates' floors, kept by the build graph (`cargo tree -e normal`, each crate's
//! own build: its features as it alone asks them): the wire crate builds without the
//! engine, and the engine builds without the app's front ends (HTTP server, API
//! document, terminal views, argument parsing, NATS); the app crate (what the verbs
//! share) builds without the server, an HTTP server or the API document, the MCP
//! crate likewise over the app, and the server over the app, the engine and the MCP
//! crate, without the binary's package.

use std::collections::BTreeSet;
use std::process::Command;

use crate::common::repo_root;

mod cycles;

/// What the engine must never pull in, however deep.
const NOT_UNDER_THE_ENGINE: [&str; 5] = ["axum", "utoipa", "indicatif", "clap", "async-nats"];

/// What the app crate must never pull in: the server and its HTTP stack, the API
/// document (the server describes the app's types to it), the binary's package.
const NOT_UNDER_THE_APP: [&str; 5] = [
    "capfleet-server",
    "capfleet",
    "axum",
    "utoipa",
    "utoipa-axum",
];

/// The packages `package` needs to build (its normal dependencies, transitively, on
/// this platform), by name.
fn normal_closure(package: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--locked", "-e", "normal", "--prefix", "none"])
        .args(["--format", "{p}", "-p", package])
        .current_dir(repo_root())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo tree -p {package}: {stderr}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_wire_builds_without_the_engine_and_the_engine_without_the_front_ends() {
    let wire = normal_closure("capfleet-wire");
    assert!(wire.contains("capfleet-protocol"), "{wire:?}");
    for above in [
        "capfleet-engine",
        "capfleet-app",
        "capfleet-server",
        "capfleet",
    ] {
        assert!(!wire.contains(above), "capfleet-wire depends on {above}");
    }

    let engine = normal_closure("capfleet-engine");
    assert!(engine.contains("capfleet-wire"), "{engine:?}");
    for above in ["capfleet-app", "capfleet-server", "capfleet"] {
        assert!(
            !engine.contains(above),
            "capfleet-engine depends on {above}"
        );
    }
    let front: Vec<_> = NOT_UNDER_THE_ENGINE
        .iter()
        .filter(|name| engine.contains(**name))
        .collect();
    assert!(front.is_empty(), "capfleet-engine depends on {front:?}");
}

#[test]
fn the_app_builds_without_the_server_and_the_server_without_the_binary() {
    let app = normal_closure("capfleet-app");
    assert!(app.contains("capfleet-engine"), "{app:?}");
    let above: Vec<_> = NOT_UNDER_THE_APP
        .iter()
        .filter(|name| app.contains(**name))
        .collect();
    assert!(above.is_empty(), "capfleet-app depends on {above:?}");

    // The MCP crate: over the app, under the server, without an HTTP server of its
    // own or the API document.
    let mcp = normal_closure("capfleet-mcp");
    assert!(mcp.contains("capfleet-app"), "{mcp:?}");
    let above: Vec<_> = NOT_UNDER_THE_APP
        .iter()
        .filter(|name| mcp.contains(**name))
        .collect();
    assert!(above.is_empty(), "capfleet-mcp depends on {above:?}");

    let server = normal_closure("capfleet-server");
    for below in ["capfleet-app", "capfleet-engine", "capfleet-mcp"] {
        assert!(
            server.contains(below),
            "capfleet-server lacks {below}: {server:?}"
        );
    }
    assert!(
        !server.contains("capfleet"),
        "capfleet-server depends on the binary's package"
    );

    let binary = normal_closure("capfleet");
    for part in ["capfleet-server", "capfleet-app", "capfleet-sim"] {
        assert!(binary.contains(part), "capfleet lacks {part}");
    }
}
