//! `fleet.toml` loading and validation through `capfleet run --dry-run`: every error
//! kind with its line and key, `@file` tasks, paths relative to the fleet file, the
//! shipped examples, and the printed plan.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn capfleet(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_capfleet"));
    // A registry sandbox: only the shipped manifests count.
    c.env("PATH", dir.join("bin"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("HOME", dir.join("home"))
        .env("NO_COLOR", "1")
        .current_dir(dir);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn dry_run(dir: &Path, src: &str, extra: &[&str]) -> Output {
    std::fs::write(dir.join("fleet.toml"), src).unwrap();
    capfleet(dir)
        .args(["run", "--dry-run", "fleet.toml"])
        .args(extra)
        .output()
        .unwrap()
}

const SESSIONS: &str = r#"
[[sessions]]
name = "a"
agent = "sim"

[[sessions]]
name = "b"
agent = "sim"
"#;

/// `[fleet]` (lines 1-3) + sessions a (line 6) and b (line 10) + `extra`, which
/// therefore starts on line 12.
fn fleet(head: &str, extra: &str) -> String {
    format!("[fleet]\nname = \"t\"\n{head}\n{SESSIONS}{extra}")
}

#[test]
fn every_validation_error_names_line_and_key() {
    let start = r#"start = "a""#;
    let task = "task = \"go\"\n";
    let cases: Vec<(&str, String, &str, &str, &str)> = vec![
        (
            "unknown start",
            fleet(&format!("start = \"zz\"\n{task}"), ""),
            "start = \"zz\"",
            "fleet.start",
            "unknown session `zz`",
        ),
        (
            "empty start",
            fleet(&format!("start = []\n{task}"), ""),
            "start = []",
            "fleet.start",
            "no start session",
        ),
        (
            "missing start",
            fleet(task, ""),
            "[fleet]",
            "fleet.start",
            "no start session",
        ),
        (
            "missing task",
            fleet(start, ""),
            "[fleet]",
            "fleet.task",
            "required key missing",
        ),
        (
            "unknown route_to",
            fleet(
                &format!("{start}\n{task}"),
                "\n[[routes]]\nwhen = \"a.done\"\nroute_to = \"zz\"\n",
            ),
            "route_to = \"zz\"",
            "routes[0].route_to",
            "unknown session `zz`",
        ),
        (
            "unknown when",
            fleet(
                &format!("{start}\n{task}"),
                "\n[[routes]]\nwhen = [\"a\", \"zz.done\"]\nroute_to = \"b\"\n",
            ),
            "when = [",
            "routes[0].when",
            "unknown session `zz`",
        ),
        (
            "unknown fan_out target",
            fleet(
                &format!("{start}\n{task}"),
                "\n[[routes]]\nwhen = \"a\"\nfan_out = { to = [\"b\", \"zz\"] }\n",
            ),
            "fan_out = {",
            "routes[0].fan_out.to",
            "unknown session `zz`",
        ),
        (
            "unknown picker",
            fleet(
                &format!("{start}\n{task}"),
                "\n[[routes]]\nwhen = [\"a\", \"b\"]\ncollect = \"zz\"\n",
            ),
            "collect = \"zz\"",
            "routes[0].collect",
            "unknown session `zz`",
        ),
        (
            "duplicate session",
            fleet(
                &format!("{start}\n{task}"),
                "\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\n",
            ),
            "name = \"a\"",
            "sessions[2].name",
            "duplicate session name `a` (first defined on line",
        ),
        (
            "cycle",
            fleet(
                &format!("{start}\n{task}"),
                "\n[[routes]]\nwhen = \"a\"\nroute_to = \"b\"\n\n[[routes]]\nwhen = \"b.done\"\nroute_to = \"a\"\n",
            ),
            "when = \"b.done\"",
            "routes[1].when",
            "route cycle without an exit: a -> b -> a",
        ),
        (
            "self cycle",
            fleet(
                &format!("{start}\n{task}"),
                "\n[[routes]]\nwhen = \"a\"\nroute_to = \"a\"\n",
            ),
            "when = \"a\"",
            "routes[0].when",
            "route cycle without an exit: a -> a",
        ),
        (
            "unknown agent",
            format!(
                "[fleet]\nstart = \"a\"\n{task}\n[[sessions]]\nname = \"a\"\nagent = \"no-such-agent\"\n"
            ),
            "agent = \"no-such-agent\"",
            "sessions[0].agent",
            "unknown agent `no-such-agent`: no manifest for agent `no-such-agent`",
        ),
        (
            "negative budget",
            fleet(&format!("{start}\n{task}budget_usd = -1.5"), ""),
            "budget_usd",
            "fleet.budget_usd",
            "bad budget: -1.5 is negative",
        ),
        (
            "NaN budget",
            fleet(&format!("{start}\n{task}budget_usd = nan"), ""),
            "budget_usd",
            "fleet.budget_usd",
            "bad budget: NaN",
        ),
        (
            "session over fleet budget",
            format!(
                "[fleet]\nstart = \"a\"\n{task}budget_usd = 1.0\n\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\nbudget_usd = 2\n"
            ),
            "budget_usd = 2",
            "sessions[0].budget_usd",
            "more than the fleet's budget_usd (1)",
        ),
        (
            "wrong type",
            fleet(&format!("{start}\n{task}max_concurrent = \"two\""), ""),
            "max_concurrent",
            "fleet.max_concurrent",
            "expected an integer, found string",
        ),
        (
            "bad on_error",
            fleet(&format!("{start}\n{task}on_error = \"explode\""), ""),
            "on_error",
            "fleet.on_error",
            "\"explode\" is not one of continue | abort",
        ),
        (
            "bad restart",
            format!(
                "[fleet]\nstart = \"a\"\n{task}\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\nrestart = \"always\"\n"
            ),
            "restart = ",
            "sessions[0].restart",
            "is not one of permanent | transient | temporary",
        ),
        (
            "bad max_risk",
            fleet(&format!("{start}\n{task}max_risk = \"extreme\""), ""),
            "max_risk",
            "fleet.max_risk",
            "not one of low | medium | high",
        ),
        (
            "bad timeout",
            fleet(&format!("{start}\n{task}turn_timeout_s = 0"), ""),
            "turn_timeout_s",
            "fleet.turn_timeout_s",
            "not a positive number of seconds",
        ),
        (
            "two actions",
            fleet(
                &format!("{start}\n{task}"),
                "\n[[routes]]\nwhen = \"a\"\nroute_to = \"b\"\ncollect = \"human\"\n",
            ),
            "[[routes]]",
            "routes[0]",
            "exactly one of route_to | fan_out | collect, found route_to, collect",
        ),
        (
            "no action",
            fleet(&format!("{start}\n{task}"), "\n[[routes]]\nwhen = \"a\"\n"),
            "[[routes]]",
            "routes[0]",
            "found none",
        ),
        (
            "bad split",
            fleet(
                &format!("{start}\n{task}"),
                "\n[[routes]]\nwhen = \"a\"\nfan_out = { to = [\"b\"], split = \"halves\" }\n",
            ),
            "fan_out = {",
            "routes[0].fan_out.split",
            "not one of broadcast | by_subtask",
        ),
        (
            "missing cwd",
            format!(
                "[fleet]\nstart = \"a\"\n{task}\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\ncwd = \"no/such/dir\"\n"
            ),
            "cwd = ",
            "sessions[0].cwd",
            "cannot read",
        ),
        (
            "missing task file",
            fleet(&format!("{start}\ntask = \"@nope.md\""), ""),
            "task = ",
            "fleet.task",
            "nope.md",
        ),
        (
            "missing agent key",
            format!("[fleet]\nstart = \"a\"\n{task}\n[[sessions]]\nname = \"a\"\n"),
            "[[sessions]]",
            "sessions[0].agent",
            "required key missing",
        ),
        (
            "bad session name",
            format!(
                "[fleet]\nstart = \"a b\"\n{task}\n[[sessions]]\nname = \"a b\"\nagent = \"sim\"\n"
            ),
            "name = \"a b\"",
            "sessions[0].name",
            "letters, digits",
        ),
        (
            "syntax",
            "[fleet\nname = 1\n".to_owned(),
            "[fleet",
            "",
            "TOML syntax error",
        ),
    ];
    for (what, src, needle, key, message) in cases {
        // The line of the key at fault: the last line containing `needle`.
        let line = src
            .lines()
            .enumerate()
            .filter(|(_, l)| l.contains(needle))
            .map(|(i, _)| i + 1)
            .last()
            .unwrap_or_else(|| panic!("{what}: {needle:?} not in the source"));
        let dir = tempfile::tempdir().unwrap();
        let out = dry_run(dir.path(), &src, &[]);
        let stderr = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{what}: exit code\n{stderr}\n--- fleet.toml\n{src}"
        );
        let at = if key.is_empty() {
            format!("fleet.toml:{line}: ")
        } else {
            format!("fleet.toml:{line}: {key}: ")
        };
        let found = stderr
            .lines()
            .any(|l| l.contains(&at) && l.contains(message));
        assert!(
            found,
            "{what}: want `{at}…{message}` in:\n{stderr}\n--- fleet.toml\n{src}"
        );
        assert!(out.stdout.is_empty(), "{what}: no plan printed on error");
    }
}

#[test]
fn every_error_is_reported_at_once_in_line_order() {
    let dir = tempfile::tempdir().unwrap();
    let src = "[fleet]\nstart = \"zz\"\ntask = \"go\"\nbudget_usd = -1\n\n[[sessions]]\nname = \"a\"\nagent = \"nope-agent\"\n";
    let out = dry_run(dir.path(), src, &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    assert!(lines[0].contains("fleet.toml:2: fleet.start"), "{stderr}");
    assert!(
        lines[1].contains("fleet.toml:4: fleet.budget_usd"),
        "{stderr}"
    );
    assert!(
        lines[2].contains("fleet.toml:8: sessions[0].agent"),
        "{stderr}"
    );
}

#[test]
fn a_cycle_through_a_session_with_max_turns_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let src = "[fleet]\nstart = \"a\"\ntask = \"go\"\n\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\nmax_turns = 3\n\n[[sessions]]\nname = \"b\"\nagent = \"sim\"\n\n[[routes]]\nwhen = \"a\"\nroute_to = \"b\"\n\n[[routes]]\nwhen = \"b\"\nroute_to = \"a\"\n";
    let out = dry_run(dir.path(), src, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[test]
fn unknown_keys_are_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let src = "[fleet]\nstart = \"a\"\ntask = \"go\"\ncolour = \"red\"\nx-note = \"fine\"\n\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\nflavour = 1\n";
    let out = dry_run(dir.path(), src, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("warning: fleet.toml:4: fleet.colour: unknown key (ignored)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("fleet.toml:10: sessions[0].flavour: unknown key"),
        "{stderr}"
    );
    assert!(!stderr.contains("x-note"), "{stderr}");
}

fn plan(dir: &Path, fleet_file: &str, extra: &[&str]) -> Value {
    let out = capfleet(dir)
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

    let out = capfleet(dir.path())
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
    let out = capfleet(dir.path())
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
    let out = capfleet(dir.path())
        .args(["run", "a.toml", "b.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = capfleet(dir.path())
        .args(["run", "--dry-run", "missing.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("missing.toml: cannot read the fleet file"));
}

#[test]
fn help_documents_the_exit_codes() {
    let out = Command::new(env!("CARGO_BIN_EXE_capfleet"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    let help = text(&out.stdout);
    assert!(
        help.contains("0 completed, 1 a session failed, 2 invalid config"),
        "{help}"
    );
    assert!(
        help.contains("3 budget exceeded, 130 interrupted"),
        "{help}"
    );
}
