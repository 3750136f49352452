//! The CLI skeleton end to end: `--cap-manifest`, `resolve`, `manifest validate`,
//! completions, `--version`, colour control.

use std::path::Path;
use std::process::{Command, Output};

use capfleet_engine::manifest::Manifest;

use crate::common::{self, sandbox};

/// The binary with `NO_COLOR` unset, so the colour tests see the defaults.
fn capfleet() -> Command {
    let mut c = Command::new(common::BIN);
    c.env_remove("NO_COLOR");
    c
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 stdout")
}

#[test]
fn cap_manifest_prints_a_valid_manifest_without_touching_disk() {
    let dir = tempfile::tempdir().unwrap();
    // No HOME, no PATH, a cwd that is read-only: printing the manifest needs none of them.
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let out = capfleet()
        .arg("--cap-manifest")
        .current_dir(&ro)
        .env_clear()
        .output()
        .unwrap();
    let text = ok(&out);
    let v = Manifest::parse(&text, "--cap-manifest").expect("capfleet's own manifest validates");
    assert_eq!(v.manifest.agent.name, "capfleet");
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
    assert!(out.stderr.is_empty());
    assert_eq!(
        std::fs::read_dir(&ro).unwrap().count(),
        0,
        "nothing written"
    );
}

#[test]
fn version_names_the_binary() {
    let text = ok(&capfleet().arg("--version").output().unwrap());
    assert!(text.starts_with("capfleet "), "{text}");
}

#[test]
fn resolve_shipped_sim_picks_stream_json() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = capfleet();
    sandbox(&mut c, dir.path());
    let text = ok(&c.args(["resolve", "sim", "--json"]).output().unwrap());
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["source"], "shipped manifest sim");
    assert_eq!(v["binding"], "stream_json");
    assert_eq!(v["skipped"][0]["binding"], "grpc");
    assert_eq!(v["manifest"]["agent"]["name"], "sim");
}

#[test]
fn resolve_prefers_user_local_and_prints_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("config/cap/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("sim.toml"),
        "[agent]\nname = \"sim\"\nbinary = \"sim\"\nprofiles = []\n[startup]\ncommand = [\"sim\"]\n\
         ready_when = { pattern = \"^ready\" }\n[pty]\ncols = 80\nrows = 24\n\
         [capabilities]\nstreaming_output = true\n",
    )
    .unwrap();
    let mut c = capfleet();
    sandbox(&mut c, dir.path());
    let text = ok(&c
        .args(["--color", "never", "resolve", "sim"])
        .output()
        .unwrap());
    assert!(text.contains("user-local"), "{text}");
    assert!(text.contains("binding   pty"), "{text}");
    // §5.3 defaults appear in the printed manifest.
    assert!(text.contains("sigint_cancels_turn = \"hard\""), "{text}");
    assert!(!text.contains('\x1b'), "no colour under --color never");
}

#[test]
fn resolve_unknown_agent_fails_with_the_spec_code() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = capfleet();
    sandbox(&mut c, dir.path());
    let out = c.args(["resolve", "no-such-agent"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cap_manifest_missing"), "{err}");
    assert!(
        err.contains("no-such-agent.toml"),
        "lists the places tried: {err}"
    );
}

#[test]
fn manifest_validate_reports_every_error_with_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[agent]\nname = \"x\"\nprofiles = []\n\n[startup]\ncommand = [\"x\"]\n\n[pty]\ncols = 80\n\n\
         [parse]\nidle = \"(?<=a)b\"\n\n[capabilities]\nstreaming_output = true\n",
    )
    .unwrap();
    let good = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/agents/capfleet.toml");
    let out = capfleet()
        .args(["--color", "never", "manifest", "validate"])
        .arg(&good)
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let bad_name = bad.display().to_string();
    for needle in [
        format!("{bad_name}:1: agent.binary"),
        format!("{bad_name}:5: startup.ready_when"),
        format!("{bad_name}:8: pty.rows"),
        format!("{bad_name}:12: parse.idle: look-behind"),
    ] {
        assert!(err.contains(&needle), "missing {needle:?} in:\n{err}");
    }
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("valid"),
        "the good file is reported valid"
    );
}

#[test]
fn every_shipped_manifest_validates_without_warnings() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/agents");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    assert!(
        files.len() >= 3,
        "sim, sim-tui and capfleet at least: {files:?}"
    );
    let out = capfleet()
        .args(["manifest", "validate", "--strict"])
        .args(&files)
        .output()
        .unwrap();
    ok(&out);
}

#[test]
fn manifest_validate_strict_refuses_an_unknown_section_and_names_the_key_meant() {
    let dir = tempfile::tempdir().unwrap();
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/agents/capfleet.toml"),
    )
    .unwrap();
    let file = dir.path().join("typo.toml");
    std::fs::write(
        &file,
        format!("{src}\n[capabilites]\nqueued_input = true\n"),
    )
    .unwrap();
    let run = |strict: bool| {
        let mut c = capfleet();
        c.args(["--color", "never", "manifest", "validate"]);
        if strict {
            c.arg("--strict");
        }
        c.arg(&file).output().unwrap()
    };
    let lenient = run(false);
    assert_eq!(lenient.status.code(), Some(0));
    let strict = run(true);
    assert_eq!(strict.status.code(), Some(1));
    let err = String::from_utf8_lossy(&strict.stderr);
    assert!(
        err.contains("capabilites: unknown key (ignored); did you mean `capabilities`?"),
        "{err}"
    );
    assert!(err.contains("warnings are errors under --strict"), "{err}");
}

#[test]
fn completions_for_each_shell() {
    for (shell, needle) in [
        ("bash", "_capfleet"),
        ("zsh", "#compdef capfleet"),
        ("fish", "complete -c capfleet"),
    ] {
        let text = ok(&capfleet().args(["completions", shell]).output().unwrap());
        assert!(text.contains(needle), "{shell}: {needle} missing");
        assert!(text.contains("resolve"), "{shell} completes the verbs");
    }
}

#[test]
fn color_always_paints_and_no_color_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let painted = ok(&{
        let mut c = capfleet();
        sandbox(&mut c, dir.path());
        c.args(["--color", "always", "resolve", "sim"])
            .output()
            .unwrap()
    });
    assert!(painted.contains("\x1b["), "--color always paints");
    let plain = ok(&{
        let mut c = capfleet();
        sandbox(&mut c, dir.path());
        c.env("NO_COLOR", "1")
            .args(["resolve", "sim"])
            .output()
            .unwrap()
    });
    assert!(!plain.contains('\x1b'), "NO_COLOR and a pipe: no escapes");
}

#[test]
fn a_journal_that_cannot_be_opened_is_named_before_any_agent_starts() {
    let dir = tempfile::tempdir().unwrap();
    // A regular file where the journal's directory should be: no one, root included,
    // can make the journal under it.
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let journal = blocker.join("journal.jsonl");
    let out = capfleet()
        .args(["chat", "sim", "--task", "hi", "--journal"])
        .arg(&journal)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{stderr}");
    assert!(
        stderr.contains(&format!("cannot open the journal {}", journal.display())),
        "the error names the journal's path:\n{stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "no ractor panic framing:\n{stderr}"
    );
    assert!(out.stdout.is_empty(), "no agent answered: {:?}", out.stdout);
}

/// Every verb's help at 80 columns: no line past the width, and each paragraph wrapped
/// where the width ends it — no word pushed onto a line of its own by a hard break in
/// the source (`under the current` / `directory (...)` at 80 columns) — and the global
/// `--color` in a verb's help is its two lines, not a block of possible values.
#[test]
fn help_fits_80_columns_and_wraps_paragraphs_at_the_width() {
    const WIDTH: usize = 80;
    let verbs: &[&[&str]] = &[
        &[],
        &["run"],
        &["chat"],
        &["log"],
        &["diff"],
        &["merge"],
        &["clean"],
        &["resolve"],
        &["manifest", "validate"],
        &["sim"],
    ];
    for verb in verbs {
        let out = capfleet()
            .args(*verb)
            .arg("--help")
            .env("COLUMNS", WIDTH.to_string())
            .output()
            .expect("run capfleet");
        let help = ok(&out);
        let lines: Vec<&str> = help.lines().collect();
        for line in &lines {
            assert!(
                line.chars().count() <= WIDTH,
                "`capfleet {verb:?} --help`: a line wider than {WIDTH} columns:\n{line}"
            );
        }
        // Two lines of one unindented paragraph: the second's first word would have
        // fitted on the first.
        for pair in lines.windows(2) {
            let (first, next) = (pair[0], pair[1]);
            let prose = |l: &str| !l.is_empty() && !l.starts_with(' ');
            if !(prose(first) && prose(next)) || first.ends_with(':') {
                continue;
            }
            let word = next.split_whitespace().next().unwrap_or_default();
            assert!(
                first.chars().count() + 1 + word.chars().count() > WIDTH,
                "`capfleet {verb:?} --help`: a paragraph broken before the width:\n{first}\n{next}"
            );
        }
        let color = lines
            .iter()
            .position(|l| l.trim_start().starts_with("--color"))
            .unwrap_or_else(|| panic!("`capfleet {verb:?} --help` lists --color"));
        let block = lines[color + 1..]
            .iter()
            .take_while(|l| !l.trim_start().starts_with('-'))
            .filter(|l| !l.trim().is_empty())
            .count();
        assert!(
            block <= 3,
            "`capfleet {verb:?} --help`: --color takes {block} lines:\n{help}"
        );
    }
}
