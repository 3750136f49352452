//! `fleet.toml` loading through `capfleet run --dry-run`: `@file` tasks, paths
//! relative to the fleet file, the printed plan (text and JSON), the shipped examples.
//! (Validation errors: `fleet_validation.rs`.)

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::{self, sandboxed};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn plan(dir: &Path, fleet_file: &str, extra: &[&str]) -> Value {
    let out = sandboxed(dir)
        .args(["run", "--dry-run", "--json", fleet_file])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON plan")
}

#[test]
fn task_from_a_file_and_paths_relative_to_the_fleet_file() {
    let dir = tempfile::tempdir().unwrap();
    let fleets = dir.path().join("fleets");
    std::fs::create_dir_all(fleets.join("work")).unwrap();
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    let sim = concat!(env!("CARGO_MANIFEST_DIR"), "/config/agents/sim.toml");
    std::fs::copy(sim, dir.path().join("agents/my-sim.toml")).unwrap();
    std::fs::write(fleets.join("task.md"), "Write the README.\nThen stop.\n").unwrap();
    std::fs::write(
        fleets.join("script.toml"),
        "[[turn]]\nsteps = [{ say = \"hi\" }]\n",
    )
    .unwrap();
    let src = "[fleet]\nname = \"rel\"\nstart = \"a\"\ntask = \"@task.md\"\n\n[[sessions]]\nname = \"a\"\nagent = \"../agents/my-sim.toml\"\ncwd = \"work\"\nscript = \"script.toml\"\nenv = { LEVEL = \"3\" }\nargv = [\"capfleet\", \"sim\"]\n";
    std::fs::write(fleets.join("f.toml"), src).unwrap();
    let p = plan(dir.path(), "fleets/f.toml", &[]);
    assert_eq!(p["task"], "Write the README.\nThen stop.\n");
    let s = &p["sessions"][0];
    let root = dir.path().canonicalize().unwrap();
    assert_eq!(s["cwd"], root.join("fleets/work").display().to_string());
    assert_eq!(s["urn"], "cap://rel/a");
    assert!(
        s["manifest"]
            .as_str()
            .unwrap()
            .contains("agents/my-sim.toml"),
        "{s}"
    );
    assert_eq!(s["argv"], serde_json::json!(["capfleet", "sim"]));
    let env = s["env"].as_array().unwrap();
    assert!(env.contains(&serde_json::json!(["LEVEL", "3"])), "{s}");
    let script = root.join("fleets/script.toml").display().to_string();
    assert!(
        env.contains(&serde_json::json!(["CAPFLEET_SIM_SCRIPT", script])),
        "{s}"
    );

    // --task replaces the fleet's task; `@` reads from the current directory.
    std::fs::write(dir.path().join("other.md"), "Other task").unwrap();
    let p = plan(dir.path(), "fleets/f.toml", &["--task", "@other.md"]);
    assert_eq!(p["task"], "Other task");
    let p = plan(dir.path(), "fleets/f.toml", &["--task", "inline"]);
    assert_eq!(p["task"], "inline");
}

#[test]
fn the_plan_carries_sessions_routes_policy_and_budgets() {
    let dir = tempfile::tempdir().unwrap();
    let src = "[fleet]\nname = \"p\"\nstart = [\"a\", \"b\"]\ntask = \"go\"\nbudget_usd = 2\nmax_concurrent = 2\non_error = \"abort\"\nauto_answer = true\nallow_tools = [\"Read\"]\ndeny_tools = [\"Bash\"]\nmax_risk = \"low\"\nturn_timeout_s = 30\n\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\nrestart = \"permanent\"\nmax_restarts = 5\nrestart_window_s = 10\nbudget_usd = 1\nmax_turns = 4\n\n[[sessions]]\nname = \"b\"\nagent = \"sim\"\n\n[[sessions]]\nname = \"c\"\nagent = \"sim\"\n\n[[routes]]\nwhen = [\"cap://p/a.done\", \"b\"]\ncollect = \"c\"\nmode = \"all\"\n\n[[routes]]\nwhen = \"c\"\ncollect = \"human\"\n";
    std::fs::write(dir.path().join("fleet.toml"), src).unwrap();
    let p = plan(dir.path(), "fleet.toml", &[]);
    assert_eq!(p["start"], serde_json::json!(["a", "b"]));
    assert_eq!(p["max_concurrent"], 2);
    assert_eq!(p["on_error"], "abort");
    assert_eq!(p["turn_timeout_s"], 30.0);
    assert_eq!(p["budget_usd"], 2.0);
    assert_eq!(p["session_budgets_usd"], serde_json::json!([["a", 1.0]]));
    assert_eq!(p["policy"]["deny_tools"], serde_json::json!(["Bash"]));
    assert_eq!(p["policy"]["max_risk"], "low");
    assert_eq!(p["policy"]["auto_answer"], true);
    let a = &p["sessions"][0];
    assert_eq!(a["binding"], "stream_json");
    assert_eq!(a["restart"]["restart"], "permanent");
    assert_eq!(a["restart"]["max_restarts"], 5);
    assert_eq!(a["restart"]["restart_window_s"], 10.0);
    assert_eq!(a["max_turns"], 4);
    assert_eq!(p["routes"][0]["when"], serde_json::json!(["a", "b"]));
    assert_eq!(p["routes"][0]["action"], "-> collect all results for c");
    assert_eq!(
        p["routes"][1]["action"],
        "-> collect the first result for the human"
    );

    let out = sandboxed(dir.path())
        .args(["run", "--dry-run", "fleet.toml"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    for want in [
        "fleet p  (fleet.toml)",
        "start:     a, b",
        "budget:    $2.00",
        "max_concurrent 2, on_error abort, turn timeout 30s",
        "deny [Bash], allow [Read], max_risk low, auto_answer on",
        "a  cap://p/a  agent sim (shipped manifest sim), binding stream_json",
        "restart permanent (5 within 10s), max_turns 4, budget $1.00",
        "a + b -> collect all results for c",
    ] {
        assert!(stdout.contains(want), "want {want:?} in:\n{stdout}");
    }
}

/// The journal's bound, `journal_max_mb`, in both forms of the plan: the fleet's, or
/// the default 1024.
#[test]
fn the_plan_shows_journal_max_mb() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = |extra: &str| {
        format!(
            "[fleet]\nname = \"j\"\nstart = \"a\"\ntask = \"go\"\n{extra}\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\n"
        )
    };
    std::fs::write(dir.path().join("set.toml"), fleet("journal_max_mb = 7")).unwrap();
    std::fs::write(dir.path().join("default.toml"), fleet("")).unwrap();
    for (file, mb) in [("set.toml", 7), ("default.toml", 1024)] {
        assert_eq!(plan(dir.path(), file, &[])["journal_max_mb"], mb, "{file}");
        let out = sandboxed(dir.path())
            .args(["run", "--dry-run", file])
            .output()
            .unwrap();
        let stdout = text(&out.stdout);
        let want = format!("journal:   journal_max_mb {mb} (");
        assert!(stdout.contains(&want), "want {want:?} in:\n{stdout}");
    }
}

#[test]
fn every_shipped_example_validates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut fleets: Vec<_> = std::fs::read_dir(root.join("config/fleets"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    fleets.sort();
    for name in ["by_subtask", "demo", "pipeline", "race"] {
        assert!(
            fleets.iter().any(|p| p.ends_with(format!("{name}.toml"))),
            "{name}.toml shipped"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let out = sandboxed(dir.path())
        .args(["run", "--dry-run"])
        .args(&fleets)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "examples warn:\n{stderr}");
    let stdout = text(&out.stdout);
    for name in ["by_subtask", "demo", "pipeline", "race"] {
        assert!(stdout.contains(&format!("fleet {name}  (")), "{stdout}");
    }
}

#[test]
fn several_fleets_run_only_with_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = sandboxed(dir.path())
        .args(["run", "a.toml", "b.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = sandboxed(dir.path())
        .args(["run", "--dry-run", "missing.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("missing.toml: cannot read the fleet file"));
}

#[test]
fn help_documents_the_exit_codes() {
    let out = Command::new(common::BIN)
        .args(["run", "--help"])
        .output()
        .unwrap();
    // Wrapped at the terminal's width: compared as words.
    let help = text(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        help.contains("0 completed, 1 a session failed, 2 invalid config"),
        "{help}"
    );
    assert!(
        help.contains("3 budget exceeded, 130 interrupted"),
        "{help}"
    );
}
