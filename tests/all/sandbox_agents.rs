//! Real agents under `sandbox = "workspace"` (issue 38), offline against the fake LLM
//! with `network = "host"`, five sessions in one run: Claude Code 2.1.337 over
//! stream-json (its Write tool, then `ls` with its Bash tool), Codex 0.171.0 over
//! `codex exec --json` and codex-acp 0.16.0 (a command writing the file, then `ls`),
//! Gemini CLI 0.61.0 over ACP (its write_file served by capfleet's `fs/*`, then `ls`
//! run by Gemini itself) and aider 0.86.2 over the PTY (a diff edit creating the file,
//! then `ls` as its test command). Each `ls` writes its listing into the worktree and
//! tries to write beside it. The same fleet runs unsandboxed, under bubblewrap and
//! under Landlock (one test each): every session's collected diff (the file, the
//! listing) is the one the scenario makes, the same in the three runs, and the writes
//! beside the worktrees land only in the unsandboxed run (the sandbox was there, and
//! the agents worked inside it).
//!
//! Settings a sandboxed session needs (config/agents/*.toml, docs/guide/sandboxing.md):
//! Codex runs with its own sandbox off (`--sandbox danger-full-access`; its nested
//! bubblewrap cannot start inside either backend), aider with `--no-git` (its `git
//! add` of a new file writes the repository's object store, read-only in the sandbox).
//! Gemini rewrites a committed file: capfleet's `fs/read_text_file` answers a missing
//! file with "resource not found", which Gemini 0.61.0 takes as a failed write.
//! A missing peer fails the test (run `./tests/run.sh`, which installs it).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use common::repo::{Fixture, stderr};
use common::{EnvMarker, FakeLlm};
use serde_json::json;

use crate::common;

/// The sessions, the file each writes (Gemini rewrites a committed one).
const SESSIONS: &[(&str, &str)] = &[
    ("s-claude", "hello.txt"),
    ("s-codex-exec", "hello.txt"),
    ("s-codex-acp", "hello.txt"),
    ("s-gemini", "README.md"),
    ("s-aider", "hello.txt"),
];

/// The command each agent runs: `ls` into the worktree, then a write beside it.
fn command(session: &str) -> String {
    format!("ls > listing.txt; echo x > ../{session}.beside 2>/dev/null; true")
}

/// Each session's model turns, matched by its worktree's name in the request (aider's
/// requests carry no path: by its system prompt).
fn script(fake: &FakeLlm) {
    let m = |s: &str| format!("/{s}");
    let (claude, exec, acp, gemini) = (
        m("s-claude"),
        m("s-codex-exec"),
        m("s-codex-acp"),
        m("s-gemini"),
    );
    let aider = "expert software developer";
    let edit = "hello.txt\n```\n<<<<<<< SEARCH\n=======\nhi\n>>>>>>> REPLACE\n```\n";
    fake.script(json!([
        {"match": claude, "tool": {"name": "Write", "input": {"file_path": "hello.txt", "content": "hi\n"}}},
        {"match": claude, "tool": {"name": "Bash", "input": {"command": command("s-claude"), "description": "list"}}},
        {"match": claude, "text": "done"},
        {"match": exec, "tool": {"name": "exec_command", "input": {"cmd": "echo hi > hello.txt"}}},
        {"match": exec, "tool": {"name": "exec_command", "input": {"cmd": command("s-codex-exec")}}},
        {"match": exec, "text": "done"},
        {"match": acp, "tool": {"name": "exec_command", "input": {"cmd": "echo hi > hello.txt"}}},
        {"match": acp, "tool": {"name": "exec_command", "input": {"cmd": command("s-codex-acp")}}},
        {"match": acp, "text": "done"},
        {"match": gemini, "tool": {"name": "write_file", "input": {"file_path": "README.md", "content": "hi\n"}}},
        {"match": gemini, "tool": {"name": "run_shell_command", "input": {"command": command("s-gemini")}}},
        {"match": gemini, "text": "done"},
        {"match": aider, "text": edit},
    ]));
}

/// The fleet: every session `sandbox` ("none" or "workspace") on `backend`.
fn fleet(
    sandbox: &str,
    backend: &str,
    fake: &FakeLlm,
    marker: &EnvMarker,
    codex_exec: &Path,
) -> String {
    let (k, v) = marker.pair();
    let path = |name: &str| common::peer(name).display().to_string();
    format!(
        r#"[fleet]
name = "sbx-agents"
start = ["s-claude", "s-codex-exec", "s-codex-acp", "s-gemini", "s-aider"]
task = "Write hi to the file, then list the directory."
sandbox = "{sandbox}"
auto_answer = true
max_risk = "high"
turn_timeout_s = 150

[sandbox]
network = "host"
backend = "{backend}"

[[sessions]]
name = "s-claude"
agent = "claude-code"
env = {{ {k} = "{v}" }}

[[sessions]]
name = "s-codex-exec"
agent = "{codex_manifest}"
argv = ["{codex}", "exec", "--json", "--skip-git-repo-check", "--sandbox", "danger-full-access"]
env = {{ {k} = "{v}" }}

[[sessions]]
name = "s-codex-acp"
agent = "codex-acp"
argv = ["{codex_acp}", "-c", "sandbox_mode=\"danger-full-access\""]
env = {{ {k} = "{v}" }}

[[sessions]]
name = "s-gemini"
agent = "gemini-acp"
env = {{ {k} = "{v}" }}

[[sessions]]
name = "s-aider"
agent = "aider"
argv = ["{aider}", "--no-fancy-input", "--no-pretty", "--no-check-update", "--no-show-release-notes", "--analytics-disable", "--no-show-model-warnings", "--model", "openai/fake-model", "--openai-api-base", "{base}/v1", "--openai-api-key", "dummy", "--no-git", "--edit-format", "diff", "--yes-always", "--auto-test", "--test-cmd", "{aider_test}"]
env = {{ {k} = "{v}", LITELLM_LOCAL_MODEL_COST_MAP = "True" }}
"#,
        codex = path("codex"),
        codex_manifest = codex_exec.display(),
        codex_acp = path("codex-acp"),
        aider = path("aider"),
        base = fake.url(),
        aider_test = command("s-aider"),
    )
}

/// The peers' offline environment (Claude Code, Codex, Gemini CLI: one `home`),
/// Claude Code's and Gemini CLI's directories first on `PATH` (their manifests name
/// them by name).
fn env(fake: &FakeLlm, home: &Path, dir: &Path) -> Vec<(String, String)> {
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for peer in ["claude", "codex", "gemini"] {
        env.extend(common::peer_env(peer, fake.port(), home, dir));
    }
    let dirs: Vec<String> = ["claude-code", "gemini"]
        .iter()
        .map(|p| {
            let exe = common::peer(p);
            exe.parent().expect("bin dir").display().to_string()
        })
        .collect();
    let path = env.get("PATH").cloned().unwrap_or_default();
    env.insert("PATH".into(), format!("{}:{path}", dirs.join(":")));
    env.into_iter().collect()
}

/// One run of the five sessions: the run's output and each session's diff, by file.
struct Run {
    out: Output,
    diffs: BTreeMap<String, BTreeMap<String, String>>,
    beside: Vec<String>,
}

fn run(sandbox: &str, backend: &str) -> Run {
    let f = Fixture::git_repo(&[("README.md", "# r\n")]);
    let home = tempfile::tempdir().expect("home");
    let fake = FakeLlm::start();
    script(&fake);
    let marker = EnvMarker::new("sbx-agents");
    // `codex exec --json` as a Codex without `app-server` gets it (the shipped
    // manifest prefers the app-server where Codex has it).
    let codex_exec = home.path().join("codex-exec.toml");
    std::fs::write(
        &codex_exec,
        common::codex::manifest(common::codex::Via::Exec),
    )
    .expect("manifest");
    f.write(
        "fleet.toml",
        &fleet(sandbox, backend, &fake, &marker, &codex_exec),
    );
    let out = f
        .command(&["run", "fleet.toml"])
        .env_clear()
        .envs(env(&fake, home.path(), f.path()))
        .env("XDG_CONFIG_HOME", f.path().join(".config-test"))
        .env("NO_COLOR", "1")
        .output()
        .expect("capfleet runs");
    assert!(
        common::wait_until(
            std::time::Duration::from_secs(3),
            std::time::Duration::from_millis(50),
            || marker.processes().is_empty()
        ),
        "{sandbox}/{backend}: agents left behind: {:?}",
        marker.processes()
    );
    let worktrees = f.worktree("s-claude");
    let worktrees = worktrees.parent().expect("worktrees");
    let beside = SESSIONS
        .iter()
        .map(|(s, _)| *s)
        .filter(|s| worktrees.join(format!("{s}.beside")).exists())
        .map(str::to_owned)
        .collect();
    let diffs = SESSIONS
        .iter()
        .map(|(s, _)| {
            let patch = f.run_dir().join("artifacts").join(s).join("diff.patch");
            let text = std::fs::read_to_string(&patch).unwrap_or_default();
            (s.to_string(), by_file(&text))
        })
        .collect();
    Run { out, diffs, beside }
}

/// A patch split by file: each `diff --git` section under its path.
fn by_file(patch: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut current = None;
    for line in patch.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("diff --git a/") {
            let name = rest.split(" b/").next().unwrap_or(rest).to_owned();
            current = Some(name.clone());
            out.insert(name, String::new());
        }
        if let Some(section) = current.as_ref().and_then(|c| out.get_mut(c)) {
            section.push_str(line);
        }
    }
    out
}

/// A diff section's added and removed lines.
fn changes(section: &str) -> (Vec<&str>, Vec<&str>) {
    let lines = |mark: char, header: &str| -> Vec<&str> {
        section
            .lines()
            .filter(|l| l.starts_with(mark) && !l.starts_with(header))
            .map(|l| &l[1..])
            .collect()
    };
    (lines('+', "+++"), lines('-', "---"))
}

/// The diffs as the scenario makes them without a sandbox: each session's file
/// written, its listing of the worktree, nothing else but aider's own files (its chat
/// history, with the run's timestamps). The unsandboxed run is held to it as each
/// sandboxed one: the diffs of the three are the same.
fn diffs_as_unsandboxed(label: &str, r: &Run) {
    let summary = stderr(&r.out);
    assert_eq!(r.out.status.code(), Some(0), "{label}: {summary}");
    for (s, file) in SESSIONS {
        let diff = &r.diffs[*s];
        let mut names: Vec<&str> = diff
            .keys()
            .map(String::as_str)
            .filter(|n| !n.starts_with(".aider"))
            .collect();
        names.sort_unstable();
        let mut want = vec![*file, "listing.txt"];
        want.sort_unstable();
        assert_eq!(names, want, "{label}: {s}: {diff:#?}\n{summary}");
        let removed: &[&str] = if *file == "README.md" { &["# r"] } else { &[] };
        assert_eq!(
            changes(&diff[*file]),
            (vec!["hi"], removed.to_vec()),
            "{label}: {s} wrote {file}"
        );
        // `ls` sorts by the locale: compared as sets.
        let mut listed = vec!["README.md", *file, "listing.txt"];
        listed.dedup();
        listed.sort_unstable();
        let (mut got, gone) = changes(&diff["listing.txt"]);
        got.sort_unstable();
        assert_eq!(
            (got, gone),
            (listed, vec![]),
            "{label}: {s}'s ls ran in its worktree"
        );
    }
}

fn sandboxed(backend: &str) {
    let r = run("workspace", backend);
    diffs_as_unsandboxed(backend, &r);
    assert!(
        r.beside.is_empty(),
        "{backend}: written beside the worktree: {:?}",
        r.beside
    );
}

#[test]
fn real_agents_unsandboxed_write_and_list_their_worktrees() {
    let r = run("none", "auto");
    diffs_as_unsandboxed("unsandboxed", &r);
    let every: Vec<String> = SESSIONS.iter().map(|(s, _)| s.to_string()).collect();
    assert_eq!(
        r.beside, every,
        "unsandboxed, each command also wrote beside"
    );
}

#[test]
fn real_agents_work_under_bubblewrap_as_without_the_sandbox() {
    sandboxed("bubblewrap");
}

#[test]
fn real_agents_work_under_landlock_as_without_the_sandbox() {
    sandboxed("landlock");
}
