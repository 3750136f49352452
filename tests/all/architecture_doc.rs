//! The crate graph `docs/ARCHITECTURE.md` draws is the one cargo builds: the block
//! between `<!-- crate-graph -->` and `<!-- /crate-graph -->` names every workspace
//! crate, its folder and the workspace crates it depends on (normal dependencies),
//! and `cargo metadata` must say the same.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

use crate::common::repo_root;

/// A crate as drawn or as built: its folder (`./` for the root) and its workspace
/// dependencies.
type Graph = BTreeMap<String, (String, BTreeSet<String>)>;

/// The graph as the doc draws it: `name  folder/  -> dep, dep` per line.
fn drawn(doc: &str) -> Graph {
    let start = doc
        .find("<!-- crate-graph -->")
        .expect("docs/ARCHITECTURE.md has no <!-- crate-graph --> block");
    let end = doc[start..]
        .find("<!-- /crate-graph -->")
        .expect("the crate-graph block is not closed by <!-- /crate-graph -->");
    doc[start..start + end]
        .lines()
        .filter(|l| l.contains("->") && !l.starts_with("<!--"))
        .map(|l| {
            let (crate_and_dir, deps) = l.split_once("->").unwrap();
            let mut words = crate_and_dir.split_whitespace();
            let name = words.next().unwrap().to_owned();
            let dir = words
                .next()
                .unwrap_or_else(|| panic!("line {l:?}: no folder"))
                .to_owned();
            let deps = deps
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_owned)
                .collect();
            (name, (dir, deps))
        })
        .collect()
}

/// The graph as cargo builds it.
fn built() -> Graph {
    let root = repo_root();
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--locked"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let members: BTreeSet<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    packages
        .iter()
        .map(|p| {
            let manifest = std::path::Path::new(p["manifest_path"].as_str().unwrap());
            let dir = manifest.parent().unwrap().strip_prefix(&root).unwrap();
            let dir = if dir.as_os_str().is_empty() {
                "./".to_owned()
            } else {
                format!("{}/", dir.display())
            };
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null() && members.contains(d["name"].as_str().unwrap()))
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .collect();
            (p["name"].as_str().unwrap().to_owned(), (dir, deps))
        })
        .collect()
}

#[test]
fn the_crate_graph_drawn_is_the_one_cargo_builds() {
    let doc = std::fs::read_to_string(repo_root().join("docs/ARCHITECTURE.md")).unwrap();
    let drawn = drawn(&doc);
    let built = built();
    let show = |g: &Graph| {
        g.iter()
            .map(|(name, (dir, deps))| {
                let deps: Vec<_> = deps.iter().map(String::as_str).collect();
                format!("{name:<18} {dir:<10} -> {}", deps.join(", "))
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        show(&drawn),
        show(&built),
        "docs/ARCHITECTURE.md's crate graph (left) differs from cargo's (right); redraw it"
    );
}
