//! `fleet.toml` validation through `capfleet run --dry-run`: every error kind with
//! its line and key, all errors at once, the cycle rule, unknown keys as warnings.

use std::path::Path;
use std::process::Output;

use crate::common::sandboxed;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn dry_run(dir: &Path, src: &str, extra: &[&str]) -> Output {
    std::fs::write(dir.join("fleet.toml"), src).unwrap();
    sandboxed(dir)
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
            "unknown answer_from",
            fleet(&format!("{start}\n{task}answer_from = \"zz\""), ""),
            "answer_from = \"zz\"",
            "fleet.answer_from",
            "unknown session `zz`",
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
            "paths leaving the workspace",
            format!(
                "[fleet]\nstart = \"a\"\n{task}\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\npaths = [\"src/**\", \"../etc\"]\n"
            ),
            "paths = ",
            "sessions[0].paths",
            "\"../etc\": a declared path is a glob relative to the workspace root",
        ),
        (
            "empty test_command",
            format!(
                "[fleet]\nstart = \"a\"\n{task}\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\ntest_command = \" \"\n"
            ),
            "test_command = ",
            "sessions[0].test_command",
            "the test command is empty",
        ),
        (
            "test_command of the wrong type",
            format!(
                "[fleet]\nstart = \"a\"\n{task}\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\ntest_command = 3\n"
            ),
            "test_command = ",
            "sessions[0].test_command",
            "expected a command line or an argv array of strings, found integer",
        ),
        (
            "base outside a repository",
            fleet(&format!("{start}\n{task}base = \"main\""), ""),
            "base = ",
            "fleet.base",
            "base \"main\" is set, but session `a` works in",
        ),
        (
            "bad max_risk",
            fleet(&format!("{start}\n{task}max_risk = \"extreme\""), ""),
            "max_risk",
            "fleet.max_risk",
            "not one of low | medium | high",
        ),
        (
            "a command rule that is no regular expression",
            fleet(
                &format!("{start}\n{task}deny_commands = [\n  'ok',\n  'rm (-rf',\n]"),
                "",
            ),
            "'rm (-rf'",
            "fleet.deny_commands[1]",
            "\"rm (-rf\" is not a regular expression (unclosed group); fix its syntax",
        ),
        (
            "bad timeout",
            fleet(&format!("{start}\n{task}turn_timeout_s = 0"), ""),
            "turn_timeout_s",
            "fleet.turn_timeout_s",
            "not a positive number of seconds",
        ),
        (
            "zero journal_max_mb",
            fleet(&format!("{start}\n{task}journal_max_mb = 0"), ""),
            "journal_max_mb",
            "fleet.journal_max_mb",
            "0 is not a size in MiB from 1 to 16777216",
        ),
        (
            "negative journal_max_mb",
            fleet(&format!("{start}\n{task}journal_max_mb = -5"), ""),
            "journal_max_mb",
            "fleet.journal_max_mb",
            "out of range",
        ),
        (
            "journal_max_mb not an integer",
            fleet(&format!("{start}\n{task}journal_max_mb = \"big\""), ""),
            "journal_max_mb",
            "fleet.journal_max_mb",
            "an integer",
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

#[test]
fn typos_are_reported_with_the_errors_they_cause_and_the_key_meant() {
    let dir = tempfile::tempdir().unwrap();
    let src = "[fleet]\nstart = \"a\"\ntaks = \"go\"\n\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\n\n[[route]]\nwhen = \"a\"\nroute_to = \"a\"\n";
    let out = dry_run(dir.path(), src, &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error: fleet.toml:1: fleet.task: required key missing"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "warning: fleet.toml:3: fleet.taks: unknown key (ignored); did you mean `task`?"
        ),
        "the typo is shown beside the error it causes: {stderr}"
    );
    assert!(
        stderr.contains("error: fleet.toml:9: route: unknown table")
            && stderr.contains("did you mean `routes`?"),
        "an unknown table is an error, not a run without routes: {stderr}"
    );
    let far = dry_run(
        dir.path(),
        "[fleet]\nstart = \"a\"\ntask = \"go\"\ncolour = 1\n\n[[sessions]]\nname = \"a\"\nagent = \"sim\"\n\n[[hooks]]\nx = 1\n",
        &[],
    );
    let stderr = text(&far.stderr);
    assert_eq!(far.status.code(), Some(2), "{stderr}");
    assert!(
        !stderr.contains("did you mean"),
        "no suggestion for a word that is no typo: {stderr}"
    );
}

#[test]
fn a_wrong_type_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dry_run(dir.path(), &fleet("start = \"a\"\ntask = 5", ""), &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("fleet.toml:4: fleet.task: expected a string, found integer"),
        "{stderr}"
    );
}
