//! The journal as the run's source of truth (issue 17, point 2): the demo fleet's
//! journal (a plan, a mention, a join, a budget, worktrees, a restart mid-turn) holds
//! what a resume needs — each session and workspace before the task goes out, every
//! delivery with its idempotency key and the turn it ran, the join's arrivals, every
//! turn's prompt (a large one by reference to a content-addressed blob) — and the run's
//! outcome.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::common::repo::{Fixture, stderr};

fn of_type<'a>(j: &'a [Value], ty: &str) -> Vec<(usize, &'a Value)> {
    j.iter()
        .enumerate()
        .filter(|(_, r)| r["type"] == ty)
        .collect()
}

#[test]
fn the_demo_journal_holds_what_a_resume_needs() {
    let repo = Fixture::git_repo(&[("README.md", "a service\n")]);
    // A task past the 4 KiB inline limit: the start session's prompt is kept by reference.
    let task = format!("add a health endpoint\n{}", "context line\n".repeat(400));
    std::fs::write(repo.path().join("task.md"), &task).unwrap();
    let fleet = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/fleets/demo.toml");
    let out = repo.capfleet(&["run", fleet.to_str().unwrap(), "--task", "@task.md"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let j = repo.journal();
    let run_dir = repo.run_dir();

    // The sessions and their workspaces, before the task goes out.
    let first_routed = of_type(&j, "routed")[0].0;
    let sessions: Vec<&str> = of_type(&j, "session")
        .iter()
        .map(|(i, r)| {
            assert!(*i < first_routed, "{r}");
            assert_eq!(r["agent"], "sim", "{r}");
            r["name"].as_str().unwrap()
        })
        .collect();
    assert_eq!(sessions, ["planner", "worker-a", "worker-b", "reviewer"]);
    let worktrees = of_type(&j, "worktree");
    assert_eq!(worktrees.len(), 4, "{worktrees:?}");
    for (i, w) in &worktrees {
        assert!(*i < first_routed);
        let branch = w["branch"].as_str().unwrap();
        assert!(
            branch.starts_with("capfleet/") && branch.ends_with(w["session"].as_str().unwrap())
        );
        assert!(Path::new(w["path"].as_str().unwrap()).is_dir(), "{w}");
        assert_eq!(w["base"].as_str().unwrap().len(), 40, "{w}");
    }

    // Every delivery: a unique key, then exactly one `delivered` naming its turn.
    let mut keys: HashMap<&str, usize> = HashMap::new();
    for (i, r) in of_type(&j, "routed") {
        let key = r["key"].as_str().unwrap();
        assert!(
            key.starts_with(&format!("{}#", r["to"].as_str().unwrap())),
            "{r}"
        );
        assert!(keys.insert(key, i).is_none(), "key {key} delivered twice");
    }
    let vias: std::collections::BTreeSet<&str> = of_type(&j, "routed")
        .iter()
        .map(|(_, r)| r["via"].as_str().unwrap())
        .collect();
    assert_eq!(
        vias.into_iter().collect::<Vec<_>>(),
        ["mention", "plan", "route", "task"]
    );
    for (i, d) in of_type(&j, "delivered") {
        let key = d["key"].as_str().unwrap();
        let routed = keys
            .remove(key)
            .unwrap_or_else(|| panic!("{d}: no such delivery"));
        assert!(routed < i);
        assert_eq!(d["outcome"], "completed", "{d}");
        let urn = format!("cap://demo/{}", d["to"].as_str().unwrap());
        assert!(
            j[routed..i]
                .iter()
                .any(|r| r["urn"] == urn && r["type"] == "turn_ended" && r["turn"] == d["turn"]),
            "{d}: its turn ended between its routing and it"
        );
    }
    assert!(keys.is_empty(), "deliveries without their end: {keys:?}");

    // The join: each arrival, then its firing with both.
    let joins: Vec<&Value> = of_type(&j, "join").into_iter().map(|(_, r)| r).collect();
    let fired: Vec<&&Value> = joins.iter().filter(|r| r["fired"] == true).collect();
    assert_eq!(fired.len(), 1, "{joins:?}");
    assert_eq!(
        fired[0]["arrived"],
        serde_json::json!(["worker-a", "worker-b"])
    );
    assert!(
        joins
            .iter()
            .any(|r| r["fired"] == false && r["arrived"].as_array().unwrap().len() == 1)
    );

    // Every turn's prompt: inline, or a blob of the right bytes.
    let mut by_ref = 0;
    for (_, t) in of_type(&j, "turn_started") {
        let bytes = t["prompt_bytes"].as_u64().unwrap() as usize;
        match (t["prompt"].as_str(), t["prompt_ref"].as_str()) {
            (Some(p), None) => assert_eq!(p.len(), bytes, "{t}"),
            (None, Some(r)) => {
                by_ref += 1;
                let hex = r.strip_prefix("sha256:").unwrap();
                let blob = std::fs::read(run_dir.join("blobs").join(hex)).unwrap();
                assert_eq!(blob.len(), bytes, "{t}");
                assert!(bytes > 4096);
            }
            _ => panic!("a turn without its prompt: {t}"),
        }
    }
    assert!(by_ref >= 1, "the large task is kept by reference");
    let planner = of_type(&j, "turn_started")
        .into_iter()
        .find(|(_, t)| t["urn"] == "cap://demo/planner")
        .unwrap()
        .1;
    let hex = planner["prompt_ref"]
        .as_str()
        .unwrap()
        .strip_prefix("sha256:")
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(run_dir.join("blobs").join(hex)).unwrap(),
        task
    );

    // The agents' resume ids, the usage, the outcome.
    assert!(
        j.iter()
            .any(|r| r["type"] == "cap" && r["event"]["kind"] == "cap.session.ready"),
        "ready events carry the agents' sessions"
    );
    assert!(
        j.iter()
            .any(|r| r["type"] == "cap" && r["event"]["kind"] == "cap.usage")
    );
    let ends: Vec<&Value> = j.iter().filter(|r| r["type"] == "run_ended").collect();
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["outcome"], "completed");
}
