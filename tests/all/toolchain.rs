//! The declared toolchain is the real one: no locked dependency (on any platform)
//! needs a newer Rust than the workspace's `rust-version`, and the README names that
//! version. A `cargo update` that raises the minimum fails here until Cargo.toml and
//! the README say so.

use std::process::Command;

use serde_json::Value;

use crate::common::repo_root;

/// `1.88`, `1.88.0` as (major, minor, patch).
fn version(v: &str) -> (u64, u64, u64) {
    let mut parts = v.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

#[test]
fn no_locked_dependency_needs_a_newer_rust_than_the_declared_one() {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--locked", "--format-version", "1"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo metadata: {stderr}");
    let metadata: Value = serde_json::from_slice(&out.stdout).expect(&stderr);
    let members: Vec<&str> = metadata["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let packages = metadata["packages"].as_array().expect("packages");
    let (ours, theirs): (Vec<&Value>, Vec<&Value>) = packages
        .iter()
        .partition(|p| p["id"].as_str().is_some_and(|id| members.contains(&id)));
    // Every member inherits the workspace's.
    let declared: Vec<&str> = ours
        .iter()
        .map(|p| p["rust_version"].as_str().unwrap_or("none"))
        .collect();
    assert!(
        declared.windows(2).all(|w| w[0] == w[1]),
        "members disagree: {declared:?}"
    );
    let declared = declared[0];
    let needs = |p: &&Value| p["rust_version"].as_str().map(version);
    let above: Vec<String> = theirs
        .iter()
        .filter(|p| needs(p).is_some_and(|v| v > version(declared)))
        .map(|p| format!("{} {} needs {}", p["name"], p["version"], p["rust_version"]))
        .collect();
    assert!(
        above.is_empty(),
        "rust-version {declared} in Cargo.toml is below what the locked dependencies \
         need; declare the largest (and say it in the README): {above:#?}"
    );
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let said = format!("toolchain of {declared} or later");
    assert!(
        readme
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .contains(&said),
        "the README does not say \"{said}\""
    );
}
