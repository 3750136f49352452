//! The crates' floors, kept by the build graph (`cargo tree -e normal`, each crate's
//! own build: its features as it alone asks them): the wire crate builds without the
//! engine, and the engine builds without the app's front ends (HTTP server, API
//! document, terminal views, argument parsing, NATS).

use std::collections::BTreeSet;
use std::process::Command;

use crate::common::repo_root;

mod cycles;

/// What the engine must never pull in, however deep.
const NOT_UNDER_THE_ENGINE: [&str; 5] = ["axum", "utoipa", "indicatif", "clap", "async-nats"];

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
    for above in ["capfleet-engine", "capfleet"] {
        assert!(!wire.contains(above), "capfleet-wire depends on {above}");
    }

    let engine = normal_closure("capfleet-engine");
    assert!(engine.contains("capfleet-wire"), "{engine:?}");
    assert!(
        !engine.contains("capfleet"),
        "capfleet-engine depends on the app"
    );
    let front: Vec<_> = NOT_UNDER_THE_ENGINE
        .iter()
        .filter(|name| engine.contains(**name))
        .collect();
    assert!(front.is_empty(), "capfleet-engine depends on {front:?}");
}
