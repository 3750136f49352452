//! Codex (the pinned 0.171.0, offline against the fake LLM) in fleets: `run
//! --resume` after capfleet itself was SIGKILLed mid-turn continues the same Codex
//! thread over app-server (`thread/resume` of the journaled resume id).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::durable::stop;
use crate::common::repo::{Fixture, stderr};
use crate::common::{FakeLlm, peer, peers, wait_until};

/// A fleet file of one session per `(name, agent manifest)`, each with Codex's
/// offline environment against `fake` (its home under `home`).
fn fleet(f: &Fixture, fake: &FakeLlm, home: &Path, sessions: &[(&str, &str)], task: &str) {
    let bin = peer("codex").parent().expect("bin dir").to_owned();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut env: Vec<(String, String)> = peers::peer_env("codex", fake.port(), home, f.path())
        .into_iter()
        .filter(|(k, _)| k != "PATH")
        .collect();
    env.push(("PATH".into(), path));
    let env = env
        .iter()
        .map(|(k, v)| format!("{k} = {}", json!(v)))
        .collect::<Vec<_>>()
        .join(", ");
    let mut text = format!(
        "[fleet]\nname = \"codexf\"\nstart = \"{}\"\ntask = \"{task}\"\n",
        sessions[0].0
    );
    for (name, agent) in sessions {
        text.push_str(&format!(
            "\n[[sessions]]\nname = \"{name}\"\nagent = \"{agent}\"\nenv = {{ {env} }}\n"
        ));
    }
    f.write("fleet.toml", &text);
}

/// The text a session's turn `turn` said, joined.
fn said(j: &[Value], urn: &str, turn: u64) -> String {
    j.iter()
        .filter(|r| r["urn"] == urn && r["turn"] == turn)
        .filter_map(|r| r["event"]["text"].as_str())
        .collect()
}

/// The session ids of `urn`'s ready events.
fn readies(j: &[Value], urn: &str) -> Vec<String> {
    j.iter()
        .filter(|r| r["urn"] == urn && r["event"]["kind"] == "cap.session.ready")
        .map(|r| {
            r["event"]["session_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn run_resume_after_capfleet_is_killed_continues_the_same_codex_thread() {
    let fake = FakeLlm::start();
    fake.script(json!([
        { "text": "partial partial partial partial partial partial", "delay": 1.0, "chunk": 8 },
        { "text": "Resumed answer." }
    ]));
    let f = Fixture::git_repo(&[("README.md", "a service\n")]);
    let home = tempfile::tempdir().expect("home");
    let manifest = crate::common::repo_root().join("config/agents/codex.toml");
    fleet(
        &f,
        &fake,
        home.path(),
        &[("a", manifest.to_str().expect("utf8"))],
        "go on",
    );
    let urn = "cap://codexf/a";
    let mut child = f.command(&["run", "fleet.toml"]).spawn().expect("run");
    let cut = wait_until(Duration::from_secs(60), Duration::from_millis(50), || {
        said(&f.journal_so_far(), urn, 1).contains("partial")
    });
    stop(&mut child, libc::SIGKILL, "the kill");
    assert!(cut, "the session streamed its first words");
    let out = f.capfleet(&["run", "--resume", "latest"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let j = f.journal();
    let ends: Vec<&Value> = j.iter().filter(|r| r["type"] == "run_ended").collect();
    assert_eq!(ends.last().expect("run_ended")["outcome"], "completed");
    let ids = readies(&j, urn);
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], ids[1], "the same Codex thread, resumed");
    let sessions: Vec<&Value> = j.iter().filter(|r| r["type"] == "session").collect();
    assert!(
        !sessions.is_empty() && sessions.iter().all(|r| r["binding"] == "codex_app_server"),
        "{sessions:#?}"
    );
    assert!(
        said(&j, urn, 2).contains("Resumed answer."),
        "{}",
        said(&j, urn, 2)
    );
    // The resumed thread's request carries the first prompt, from Codex's own record.
    let requests = fake.requests_to("/v1/responses");
    let last = requests.last().expect("requests")["body"].to_string();
    assert!(last.contains("go on"), "{last}");
}

/// The kinds of CAP event a run's journal holds for `urn`, sorted.
fn kinds(j: &[Value], urn: &str) -> std::collections::BTreeSet<String> {
    j.iter()
        .filter(|r| r["urn"] == urn)
        .filter_map(|r| r["event"]["kind"].as_str().map(str::to_owned))
        .collect()
}

/// What the journals of one fleet differ in by Codex's binding, and why: every other
/// kind of event is in all three.
///
/// | kind | app-server | exec | codex-acp | why |
/// |---|---|---|---|---|
/// | `cap.error` (`agent_warning`) | yes | yes | no | Codex warns that the fake model has no metadata; app-server sends it as `warning`, exec as an `error` item; codex-acp drops it |
/// | `cap.tool_call.delta` | yes | yes | maybe | app-server streams `outputDelta`, exec has the output in the item; codex-acp sends the output in the call's update, which capfleet maps as a delta only when it comes in pieces |
/// | `cap.plan` | no | no | maybe | codex-acp may send an empty plan update at the turn's start |
const MAY_DIFFER: &[&str] = &["cap.error", "cap.tool_call.delta", "cap.plan"];

/// The same one-session fleet, run with Codex on app-server, on exec and on
/// codex-acp: the same turn (a shell command, then an answer) gives the same kinds of
/// events, but for the ones [`MAY_DIFFER`] names.
#[test]
fn the_same_fleet_on_app_server_exec_and_codex_acp_journals_the_same_kinds() {
    let mut seen = Vec::new();
    for via in ["app_server", "exec", "acp"] {
        let fake = FakeLlm::start();
        fake.script(json!([
            { "tool": { "name": "exec_command", "input": { "cmd": "echo hi from shell" } } },
            { "text": "Done." }
        ]));
        let f = Fixture::git_repo(&[("README.md", "a service\n")]);
        let home = tempfile::tempdir().expect("home");
        let shipped = crate::common::repo_root().join("config/agents");
        let agent = match via {
            "app_server" => shipped.join("codex.toml"),
            "exec" => {
                let text = std::fs::read_to_string(shipped.join("codex.toml")).expect("codex.toml");
                let exec = text.replace(
                    "x-codex_app_server = [\"codex\", \"app-server\"]",
                    "x-codex_app_server = false",
                );
                let path = home.path().join("codex-exec.toml");
                std::fs::write(&path, exec).expect("manifest");
                path
            }
            _ => shipped.join("codex-acp.toml"),
        };
        fleet(
            &f,
            &fake,
            home.path(),
            &[("a", agent.to_str().expect("utf8"))],
            "run the echo",
        );
        if via == "acp" {
            // codex-acp is on no PATH: the pinned peer's path, with Codex's config.
            let text = std::fs::read_to_string(f.path().join("fleet.toml")).expect("fleet");
            let argv = format!(
                "argv = [{}]\n",
                json!(peer("codex-acp").display().to_string())
            );
            f.write("fleet.toml", &format!("{text}{argv}"));
        }
        let out = f.capfleet(&["run", "fleet.toml"]);
        assert_eq!(out.status.code(), Some(0), "{via}: {}", stderr(&out));
        let j = f.journal();
        let binding = j
            .iter()
            .find(|r| r["type"] == "session")
            .map(|r| r["binding"].clone())
            .unwrap_or_default();
        let want = match via {
            "app_server" => "codex_app_server",
            "exec" => "codex_exec",
            _ => "acp_stdio",
        };
        assert_eq!(binding, want, "{via}");
        let k = kinds(&j, "cap://codexf/a");
        for must in [
            "cap.session.ready",
            "cap.text_chunk",
            "cap.tool_call.start",
            "cap.tool_call.end",
            "cap.usage",
        ] {
            assert!(k.contains(must), "{via} journals no {must}: {k:?}");
        }
        seen.push((via, k));
    }
    let (first, rest) = seen.split_first().expect("three runs");
    for (via, k) in rest {
        let differ: Vec<&String> = first.1.symmetric_difference(k).collect();
        assert!(
            differ.iter().all(|d| MAY_DIFFER.contains(&d.as_str())),
            "{} and {via} differ in {differ:?}, which the table does not explain",
            first.0
        );
    }
}
