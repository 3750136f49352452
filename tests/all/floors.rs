//! The crates' floors, kept by the build graph (`cargo metadata`'s resolve, what
//! `cargo tree -e normal` draws): the wire crate builds without the engine, and the
//! engine builds without the app's front ends (HTTP server, API document, terminal
//! views, argument parsing, NATS).

use std::collections::{BTreeSet, HashMap};
use std::process::Command;

use serde_json::Value;

use crate::common::repo_root;

/// What the engine must never pull in, however deep.
const NOT_UNDER_THE_ENGINE: [&str; 5] = ["axum", "utoipa", "indicatif", "clap", "async-nats"];

/// The packages `root` needs to build (its normal dependencies, transitively), by name.
fn normal_closure(metadata: &Value, root: &str) -> BTreeSet<String> {
    let names: HashMap<&str, &str> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p["name"].as_str()?)))
        .collect();
    let nodes: HashMap<&str, &Value> = metadata["resolve"]["nodes"]
        .as_array()
        .expect("resolve")
        .iter()
        .filter_map(|n| Some((n["id"].as_str()?, n)))
        .collect();
    let start = names
        .iter()
        .find(|(_, name)| **name == root)
        .map(|(id, _)| *id)
        .unwrap_or_else(|| panic!("no package {root}"));
    let (mut seen, mut todo) = (BTreeSet::new(), vec![start]);
    while let Some(id) = todo.pop() {
        if !seen.insert(id) {
            continue;
        }
        for dep in nodes[id]["deps"].as_array().into_iter().flatten() {
            // A normal dependency: kind null (not dev, not build), on some platform.
            let normal = dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|k| k["kind"].is_null());
            if normal && let Some(d) = dep["pkg"].as_str() {
                todo.push(d);
            }
        }
    }
    seen.iter().map(|id| names[id].to_owned()).collect()
}

#[test]
fn the_wire_builds_without_the_engine_and_the_engine_without_the_front_ends() {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--locked", "--format-version", "1"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo metadata: {stderr}");
    let metadata: Value = serde_json::from_slice(&out.stdout).expect(&stderr);

    let wire = normal_closure(&metadata, "capfleet-wire");
    assert!(wire.contains("capfleet-protocol"), "{wire:?}");
    for above in ["capfleet-engine", "capfleet"] {
        assert!(!wire.contains(above), "capfleet-wire depends on {above}");
    }

    let engine = normal_closure(&metadata, "capfleet-engine");
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
