//! The Codex CLI (0.171.0) under the `codex_app_server` binding, offline against the
//! fake LLM (Responses API): one long-lived `codex app-server` per session, the
//! session a Codex thread. Two turns on one thread; a command Codex asks for is put
//! to the answerer, allowed by a command rule of the policy (`--allow-command`), run,
//! and its output is the tool's result; a second command a deny rule matches
//! (`--deny-command`) is denied by it and does not run, and the model is told; an
//! interrupt ends the turn cancelled; a SIGKILL of the app-server mid-turn is a
//! restart that resumes the thread (the fake LLM is sent its history again); nothing
//! is left running.

use std::time::Duration;

use serde_json::{Value, json};

use common::EnvMarker;
use common::chat::Run;
use common::codex::{Via, codex_chat, processes_with};

use crate::common;

fn outcomes(run: &Run) -> Vec<&str> {
    run.session("turn_ended")
        .iter()
        .map(|e| e["outcome"].as_str().unwrap_or_default())
        .collect()
}

#[test]
fn two_turns_in_one_thread_a_command_allowed_by_policy_and_one_denied() {
    let fake = common::FakeLlm::start();
    fake.script(json!([
        { "tool": { "name": "exec_command", "input": { "cmd": "echo hi > out.txt" } } },
        { "text": "Wrote it." },
        { "tool": { "name": "exec_command", "input": { "cmd": "rm -rf victim" } } },
        { "text": "It was not allowed." }
    ]));
    let work = tempfile::tempdir().expect("work");
    let work_path = std::fs::canonicalize(work.path()).expect("work");
    std::fs::create_dir(work_path.join("victim")).expect("victim");
    let marker = EnvMarker::new("codex-app");
    let run = codex_chat(
        Via::AppServer,
        fake.port(),
        &work_path,
        &["write hi to out.txt", "now remove victim"],
        // untrusted: Codex asks for every command; the policy's command rules answer.
        // `--max-risk high` would allow both: the denial is the deny rule's.
        &[
            "--permission-mode",
            "interactive",
            // Codex runs it through a shell (`bash -lc '…'`): unanchored.
            "--allow-command",
            r"echo hi > out\.txt",
            "--deny-command",
            r"rm\s+-rf",
            "--max-risk",
            "high",
        ],
        None,
        &marker,
    );
    assert!(run.status.success(), "{:?}\n{:#?}", run.status, run.events);
    assert_eq!(
        outcomes(&run),
        ["completed", "completed"],
        "{:#?}",
        run.events
    );
    assert!(run.session("restart").is_empty(), "{:#?}", run.events);
    // One thread: the second turn's model request carries the first turn.
    let requests = fake.requests_to("/v1/responses");
    let last = requests.last().expect("requests")["body"].to_string();
    assert!(
        last.contains("write hi to out.txt") && last.contains("now remove victim"),
        "{last}"
    );
    // The first command: asked, allowed by policy, run, its output the tool's result.
    let asked = run.kinds("cap.permission.request");
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert_eq!(asked[0]["tool"], "command_execution");
    assert!(
        asked[0]["intent"]["command"]
            .as_str()
            .unwrap_or("")
            .contains("echo hi > out.txt")
    );
    let answers = run.kinds("cap.permission.response");
    let decisions: Vec<(&Value, &Value)> = answers
        .iter()
        .map(|a| (&a["decision"], &a["_meta"]["capfleet.rule"]))
        .collect();
    assert_eq!(
        decisions,
        [
            (&json!("allow_once"), &json!("allow_commands")),
            (&json!("deny"), &json!("deny_commands"))
        ],
        "{answers:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(work_path.join("out.txt")).expect("out.txt"),
        "hi\n",
        "the allowed command ran"
    );
    let ends = run.kinds("cap.tool_call.end");
    assert_eq!(ends.len(), 2, "{ends:#?}");
    assert_eq!(
        (&ends[0]["is_error"], &ends[0]["output"]["exit_code"]),
        (&json!(false), &json!(0))
    );
    // The second: denied by the deny rule, not run, the model told.
    assert!(
        work_path.join("victim").is_dir(),
        "the denied command did not run"
    );
    assert_eq!(ends[1]["is_error"], true, "{:#?}", ends[1]);
    let after_denial = requests.last().expect("requests")["body"].to_string();
    assert!(after_denial.contains("rm -rf victim"), "{after_denial}");
    let denial = requests[requests.len() - 1]["body"]["input"]
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .rev()
                .find(|i| i["type"] == "function_call_output")
        })
        .map(|o| o["output"].to_string())
        .unwrap_or_default();
    assert!(
        ["reject", "declin", "denied", "not approved"]
            .iter()
            .any(|w| denial.to_lowercase().contains(w)),
        "the model is told of the denial: {denial}"
    );
    assert_eq!(run.texts().concat(), "Wrote it.It was not allowed.");
    // Usage per turn, summing to what the fake LLM served.
    let usage = run.kinds("cap.usage");
    assert_eq!(usage.len(), 2, "{usage:#?}");
    let served: u64 = requests
        .iter()
        .map(|r| r["usage"]["input_tokens"].as_u64().unwrap_or(0))
        .sum();
    let reported: u64 = usage
        .iter()
        .map(|u| {
            u["input_tokens"].as_u64().unwrap_or(0) + u["cache_read_tokens"].as_u64().unwrap_or(0)
        })
        .sum();
    assert_eq!(reported, served);
}

#[test]
fn an_interrupt_ends_the_turn_cancelled() {
    let fake = common::FakeLlm::start();
    fake.script(
        json!([{ "text": "slow slow slow slow slow slow slow slow", "delay": 1.0, "chunk": 4 }]),
    );
    let work = tempfile::tempdir().expect("work");
    let marker = EnvMarker::new("codex-app-cancel");
    let run = codex_chat(
        Via::AppServer,
        fake.port(),
        work.path(),
        &["slow please"],
        &[],
        Some(Duration::from_secs(5)),
        &marker,
    );
    assert_eq!(outcomes(&run), ["cancelled"], "{:#?}", run.events);
    assert!(run.wall < Duration::from_secs(30), "{:?}", run.wall);
    assert!(run.session("restart").is_empty(), "a cancel is no crash");
}

/// SIGKILL of the app-server while the second turn streams: the session restarts it,
/// `thread/resume` takes up the same thread (the fake LLM is sent the first turn's
/// exchange again), and the cut turn completes.
#[test]
fn a_killed_app_server_is_a_restart_that_resumes_the_thread() {
    let fake = common::FakeLlm::start();
    fake.script(json!([
        { "text": "First answer." },
        { "text": "slow slow slow slow slow slow slow slow slow slow", "delay": 1.0, "chunk": 5 },
        { "text": "Recovered answer." }
    ]));
    let marker = EnvMarker::new("codex-app-crash");
    let chat_marker = marker.clone();
    let port = fake.port();
    let chat = std::thread::spawn(move || {
        let work = tempfile::tempdir().expect("work");
        codex_chat(
            Via::AppServer,
            port,
            work.path(),
            &["first", "second"],
            &[],
            None,
            &chat_marker,
        )
    });
    assert!(
        common::wait_until(Duration::from_secs(60), Duration::from_millis(50), || {
            fake.requests_to("/v1/responses").len() >= 2
        }),
        "the second turn never reached the model"
    );
    std::thread::sleep(Duration::from_millis(1500));
    let servers = processes_with(&marker, "app-server");
    let (victim, _) = servers
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("no app-server: {servers:?}"));
    let pgid = common::procs::stat(victim).expect("stat").pgrp;
    common::procs::kill_group(pgid);
    let run = chat.join().expect("chat thread");
    assert_eq!(
        outcomes(&run),
        ["completed", "completed"],
        "{:#?}",
        run.events
    );
    assert_eq!(run.session("restart").len(), 1, "one restart, no meltdown");
    assert!(run.status.success(), "{:?}", run.status);
    assert!(
        run.texts().concat().contains("Recovered answer."),
        "{:?}",
        run.texts()
    );
    let requests = fake.requests_to("/v1/responses");
    assert_eq!(requests.len(), 3);
    let resumed = requests[2]["body"].to_string();
    assert!(
        resumed.contains("First answer.") && resumed.contains("\"first\""),
        "the resumed thread's history is sent again: {resumed}"
    );
}

/// `capfleet resolve codex --json` with `bin` first on `PATH`.
fn resolve(dir: &std::path::Path, bin: &std::path::Path) -> Value {
    let path = std::env::var("PATH").unwrap_or_default();
    let out = common::capfleet::capfleet(dir)
        .args(["resolve", "codex", "--json"])
        .env("PATH", format!("{}:{path}", bin.display()))
        .env("HOME", dir)
        .output()
        .expect("capfleet resolve");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("resolve --json")
}

/// The shipped Codex manifest takes app-server where the installed `codex --help`
/// lists it (the pinned 0.171.0), else `codex exec --json`; `resolve` says which and
/// why.
#[test]
fn resolve_says_app_server_where_codex_has_it_and_exec_where_not() {
    let dir = tempfile::tempdir().expect("dir");
    let pinned = common::peer("codex");
    let real = resolve(dir.path(), pinned.parent().expect("bin dir"));
    assert_eq!(real["binding"], "codex_app_server", "{real:#}");
    assert_eq!(real["flags"][0]["flag"], "fast_path.x-codex_app_server");
    assert_eq!(real["flags"][0]["used"], "kept");
    assert!(
        real["flags"][0]["why"]
            .as_str()
            .unwrap_or("")
            .contains("lists app-server"),
        "{real:#}"
    );
    // An older Codex (its help without app-server) is driven through exec.
    let old = dir.path().join("old");
    std::fs::create_dir(&old).expect("old");
    let script = old.join("codex");
    std::fs::write(
        &script,
        "#!/bin/sh\ncase \"$1\" in --version) echo 'codex-cli 0.40.0';; \
         *) printf 'Commands:\\n  exec   Run Codex non-interactively\\n';; esac\n",
    )
    .expect("script");
    std::fs::set_permissions(
        &script,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .expect("chmod");
    let older = resolve(dir.path(), &old);
    assert_eq!(older["binding"], "codex_exec", "{older:#}");
    assert_eq!(older["flags"][0]["used"], "dropped");
    assert!(
        older["flags"][0]["why"]
            .as_str()
            .unwrap_or("")
            .contains("does not list app-server"),
        "{older:#}"
    );
    let skipped: Vec<&Value> = older["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .map(|s| &s["binding"])
        .collect();
    assert!(skipped.contains(&&json!("codex_app_server")), "{older:#}");
}
