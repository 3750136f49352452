//! Artifacts and vetting end to end (coding §6, §7.3): a secret-looking file and a
//! 20 MB binary a session writes are flagged (`git_dirty` warnings, the summary)
//! and keep `--commit` from committing; artifacts the agent emits itself
//! (stream-json `artifact` frames, ACP `diff` content) are stored, large ones by
//! URI; every session gets its transcript, a master plan its `plan_doc`; a
//! session's `test_command` runs in its worktree; a race's picker sees the
//! candidates' diffs; an interrupted run leaves every worktree as it was.

use std::time::Duration;

use common::EnvMarker;
use common::repo::{Fixture, cap_events, stderr};
use common::sim::fleet_session;
use serde_json::Value;

use crate::common;

const MIME_DIFF: &str = "application/vnd.cap.coding.diff.v1+text";

fn run_ok(f: &Fixture, args: &[&str]) -> std::process::Output {
    let out = f.capfleet(args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    out
}

fn fleet(name: &str, start: &str, body: &str) -> String {
    format!("[fleet]\nname = \"{name}\"\nstart = \"{start}\"\ntask = \"do it\"\n\n{body}")
}

#[test]
fn a_secret_and_a_20_mb_binary_are_flagged_and_not_committed() {
    let f = Fixture::git_repo(&[("README.md", "# r\n"), ("src/lib.rs", "// lib\n")]);
    let m = EnvMarker::new("art-vet");
    f.write(
        "s.toml",
        "[[turn]]\nsteps = [\n  { write = \"config/.env\", content = \"AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\\n\" },\n  { write = \"assets/blob.bin\", bytes = 20971520 },\n  { write = \"src/lib.rs\", content = \"pub fn f() {}\\n\" },\n  { delete = \"README.md\" },\n  { say = \"done\" },\n]\n",
    );
    let body = fleet_session(
        "s",
        "s.toml",
        &m,
        "paths = [\"src/**\", \"config\", \"README.md\"]",
    );
    f.write("fleet.toml", &fleet("vet", "s", &body));
    let out = run_ok(&f, &["run", "fleet.toml", "--commit"]);
    let summary = stderr(&out);
    for expected in [
        "likely secret (AWS access key id) in config/.env line 1",
        "likely secret (environment file): config/.env",
        "large binary assets/blob.bin (20.0 MB)",
        "assets/blob.bin is outside the declared paths",
        "deleted README.md",
        "not committed: likely secret",
    ] {
        assert!(
            summary.contains(expected),
            "{expected:?} missing from:\n{summary}"
        );
    }
    let journal = f.journal();
    let warnings: Vec<&Value> = cap_events(&journal, "cap.error")
        .into_iter()
        .filter(|e| e["code"] == "git_dirty")
        .collect();
    assert_eq!(warnings.len(), 5, "{warnings:#?}");
    assert!(
        warnings
            .iter()
            .all(|w| w["_meta"]["capfleet.severity"] == "warning")
    );
    let reasons: Vec<&str> = warnings
        .iter()
        .map(|w| w["details"]["reason"].as_str().unwrap())
        .collect();
    assert!(reasons.contains(&"secret") && reasons.contains(&"large_binary"));
    // Nothing committed: the branch is still at the base.
    let run = f.run_id();
    let tip = f.git(&["rev-parse", &format!("capfleet/{run}/s")]);
    assert_eq!(tip, f.git(&["rev-parse", "HEAD"]));
    // The stored diff names the binary without its bytes.
    let diff = f.artifact("s", "diff.patch");
    assert!(diff.contains("Binary files /dev/null and b/assets/blob.bin differ"));
    assert!(diff.len() < 4096, "{} bytes", diff.len());
}

#[test]
fn agent_artifacts_are_stored_and_large_ones_travel_by_uri() {
    let f = Fixture::git_repo(&[("notes.txt", "old line\n")]);
    let m = EnvMarker::new("art-agent");
    let big = "x".repeat(70 * 1024);
    f.write(
        "s.toml",
        &format!(
            "[[turn]]\nsteps = [\n  {{ artifact = \"summary.md\", mime_type = \"text/markdown\", content = \"# Done\" }},\n  {{ artifact = \"big.log\", mime_type = \"text/plain\", content = \"{big}\" }},\n  {{ say = \"done\" }},\n]\n"
        ),
    );
    f.write(
        "acp.toml",
        "[[turn]]\nsteps = [{ write = \"notes.txt\", content = \"new line\\n\" }, { say = \"edited\" }]\n",
    );
    let acp = common::support("sim-acp.toml");
    let (k, v) = m.pair();
    let body = fleet_session("s", "s.toml", &m, "")
        + format!(
            "[[sessions]]\nname = \"e\"\nagent = \"{}\"\nscript = \"acp.toml\"\nenv = {{ {k} = \"{v}\" }}\n",
            acp.display()
        ).as_str();
    f.write(
        "fleet.toml",
        &format!("[fleet]\nname = \"own\"\nstart = [\"s\", \"e\"]\ntask = \"go\"\n\n{body}"),
    );
    run_ok(&f, &["run", "fleet.toml"]);
    let journal = f.journal();
    let from = |urn: &str| -> Vec<&Value> {
        journal
            .iter()
            .filter(|r| r["urn"] == urn && r["event"]["kind"] == "cap.artifact")
            .map(|r| &r["event"])
            .collect()
    };
    let own = from("cap://own/s");
    assert_eq!(own.len(), 2, "{own:#?}");
    let small = own.iter().find(|a| a["name"] == "summary.md").unwrap();
    assert_eq!(small["content"], "# Done");
    let path = small["uri"]
        .as_str()
        .unwrap()
        .strip_prefix("file://")
        .unwrap();
    assert_eq!(std::fs::read_to_string(path).unwrap(), "# Done");
    let large = own.iter().find(|a| a["name"] == "big.log").unwrap();
    assert!(large.get("content").is_none(), "over 64 KiB: by URI only");
    assert_eq!(large["size"], 70 * 1024);
    let path = large["uri"]
        .as_str()
        .unwrap()
        .strip_prefix("file://")
        .unwrap();
    assert_eq!(std::fs::read_to_string(path).unwrap().len(), 70 * 1024);
    // The ACP agent's edit carried `diff` content: a diff artifact, stored too.
    let edits = from("cap://own/e");
    let d = edits
        .iter()
        .find(|a| a["mime_type"] == MIME_DIFF)
        .expect("a diff artifact");
    let text = d["content"].as_str().unwrap();
    assert!(text.contains("-old line\n+new line\n"), "{text}");
    assert!(d["uri"].as_str().unwrap().contains("/artifacts/e/"));
    // And the session really changed its own worktree only.
    assert_eq!(f.read("notes.txt"), "old line\n");
    let wt = std::fs::read_to_string(f.worktree("e").join("notes.txt")).unwrap();
    assert_eq!(wt, "new line\n");
}

#[test]
fn transcripts_for_every_session_and_the_master_plan_as_plan_doc() {
    let f = Fixture::git_repo(&[("a.txt", "a\n")]);
    let m = EnvMarker::new("art-plan");
    f.write(
        "planner.toml",
        "[[turn]]\nsteps = [{ plan = [\n  { id = \"p1\", content = \"write a\", status = \"pending\", _meta = { \"cap.assigned_to\" = \"cap://plan/worker\" } },\n] }, { say = \"planned\" }]\n",
    );
    f.write(
        "worker.toml",
        "[[turn]]\nsteps = [{ write = \"a.txt\", content = \"A\\n\" }, { say = \"wrote a\" }]\n",
    );
    let body = fleet_session("planner", "planner.toml", &m, "max_turns = 1")
        + fleet_session("worker", "worker.toml", &m, "").as_str();
    f.write("fleet.toml", &fleet("plan", "planner", &body));
    run_ok(&f, &["run", "fleet.toml"]);
    for s in ["planner", "worker"] {
        let t: Value = serde_json::from_str(&f.artifact(s, "transcript.json")).unwrap();
        let events = t["events"].as_array().unwrap();
        assert!(
            events.iter().any(|e| e["kind"] == "cap.session.ready"),
            "{s}"
        );
        assert!(
            events
                .iter()
                .all(|e| e["kind"].as_str().unwrap().starts_with("cap."))
        );
        assert_eq!(t["agent"], "sim");
        assert!(t["started_at"].as_str().unwrap() <= t["ended_at"].as_str().unwrap());
        // It decodes as the coding profile's transcript type.
        serde_json::from_value::<capfleet_engine::protocol::coding::Transcript>(t).unwrap();
    }
    let journal = f.journal();
    let mimes: Vec<&str> = cap_events(&journal, "cap.artifact")
        .iter()
        .filter_map(|a| a["mime_type"].as_str())
        .collect();
    let transcripts = mimes.iter().filter(|m| m.contains("transcript")).count();
    assert_eq!(transcripts, 2);
    let plan: Value = serde_json::from_str(
        &std::fs::read_to_string(f.run_dir().join("artifacts/plan_doc.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(plan["entries"][0]["id"], "p1");
    assert_eq!(plan["entries"][0]["status"], "completed", "the final plan");
    assert_eq!(plan["entries"][0]["_meta"]["cap.assigned_to"], "worker");
    assert!(mimes.contains(&"application/vnd.cap.coding.plan_doc.v1+json"));
}

#[test]
fn a_sessions_test_command_runs_in_its_worktree() {
    let python = common::peer("pytest").display().to_string();
    let f = Fixture::git_repo(&[("calc.py", "def add(a, b):\n    return a - b\n")]);
    let m = EnvMarker::new("art-tests");
    f.write(
        "s.toml",
        "[[turn]]\nsteps = [{ write = \"test_calc.py\", content = \"from calc import add\\ndef test_add():\\n    assert add(1, 2) == 3\\ndef test_zero():\\n    assert add(0, 0) == 0\\n\" }, { say = \"tests written\" }]\n",
    );
    let extra =
        format!("test_command = [\"{python}\", \"-m\", \"pytest\", \"-p\", \"no:cacheprovider\"]");
    f.write(
        "fleet.toml",
        &fleet("t", "s", &fleet_session("s", "s.toml", &m, &extra)),
    );
    let out = run_ok(&f, &["run", "fleet.toml"]);
    let summary = stderr(&out);
    assert!(
        summary.contains("tests (pytest) FAILED: 1 passed, 1 failed, 0 skipped"),
        "{summary}"
    );
    let result: Value = serde_json::from_str(&f.artifact("s", "test_result.json")).unwrap();
    assert_eq!(result["framework"], "pytest");
    assert_eq!(
        (result["passed"].as_u64(), result["failed"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(result["output"].as_str().unwrap().contains("test_add"));
    let journal = f.journal();
    let failed = cap_events(&journal, "cap.error")
        .into_iter()
        .find(|e| e["code"] == "test_failed")
        .expect("a test_failed error");
    assert_eq!(failed["_meta"]["capfleet.session"], "cap://t/s");
}

#[test]
fn the_race_picker_sees_the_candidates_diffs() {
    let f = Fixture::git_repo(&[("index.txt", "none\n")]);
    let m = EnvMarker::new("art-race");
    f.write(
        "fast.toml",
        "[[turn]]\nsteps = [{ write = \"index.txt\", content = \"hash map\\n\" }, { say = \"fast answer\" }]\n",
    );
    f.write(
        "slow.toml",
        "[[turn]]\nsteps = [{ sleep_ms = 5000 }, { write = \"index.txt\", content = \"b-tree\\n\" }, { say = \"slow answer\" }]\n",
    );
    let body = fleet_session("fast", "fast.toml", &m, "")
        + fleet_session("slow", "slow.toml", &m, "").as_str()
        + fleet_session("judge", "judge.toml", &m, "").as_str()
        + "[[routes]]\nwhen = [\"fast\", \"slow\"]\ncollect = \"judge\"\nmode = \"first\"\n";
    f.write("judge.toml", "[[turn]]\nsteps = [{ echo = true }]\n");
    f.write(
        "fleet.toml",
        &format!("[fleet]\nname = \"race\"\nstart = [\"fast\", \"slow\"]\ntask = \"pick an index\"\n\n{body}"),
    );
    run_ok(&f, &["run", "fleet.toml"]);
    let journal = f.journal();
    let echoed: String = journal
        .iter()
        .filter(|r| r["urn"] == "cap://race/judge" && r["event"]["kind"] == "cap.text_chunk")
        .map(|r| r["event"]["text"].as_str().unwrap_or(""))
        .collect();
    assert!(echoed.contains("### Changes of fast"), "{echoed}");
    assert!(echoed.contains("-none\n+hash map"), "{echoed}");
    assert!(
        !echoed.contains("b-tree"),
        "the loser was cancelled before writing"
    );

    // A human picker gets each candidate's diff as an artifact record of the router.
    let human = std::fs::read_to_string(f.path().join("fleet.toml"))
        .unwrap()
        .replace("collect = \"judge\"", "collect = \"human\"");
    f.write("human.toml", &human);
    run_ok(&f, &["run", "human.toml"]);
    let journal = f.journal();
    let shown: Vec<&Value> = journal
        .iter()
        .filter(|r| r["urn"] == "cap://race/router" && r["event"]["kind"] == "cap.artifact")
        .map(|r| &r["event"])
        .collect();
    assert_eq!(shown.len(), 1, "{shown:#?}");
    assert_eq!(shown[0]["mime_type"], MIME_DIFF);
    assert_eq!(shown[0]["_meta"]["capfleet.session"], "cap://race/fast");
    assert!(shown[0]["content"].as_str().unwrap().contains("+hash map"));
}

#[test]
fn an_interrupted_run_leaves_every_worktree_in_place() {
    let f = Fixture::git_repo(&[("w.txt", "base\n")]);
    let m = EnvMarker::new("art-sigint");
    f.write(
        "s.toml",
        "[[turn]]\nsteps = [{ write = \"w.txt\", content = \"half done\\n\" }, { say = \"writing\" }, { sleep_ms = 20000 }]\n",
    );
    f.write(
        "fleet.toml",
        &fleet("int", "s", &fleet_session("s", "s.toml", &m, "")),
    );
    let child = f
        .command(&["run", "fleet.toml", "--commit"])
        .spawn()
        .unwrap();
    let written = || {
        let runs = f.path().join(".cap-worktrees");
        std::fs::read_dir(&runs)
            .ok()
            .and_then(|mut d| d.next())
            .is_some_and(|run| {
                let p = run.unwrap().path().join("s/w.txt");
                std::fs::read_to_string(p).is_ok_and(|t| t == "half done\n")
            })
    };
    assert!(common::wait_until(
        Duration::from_secs(10),
        Duration::from_millis(20),
        written
    ));
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let run = f.run_id();
    assert_eq!(
        std::fs::read_to_string(f.worktree("s").join("w.txt")).unwrap(),
        "half done\n"
    );
    let tip = f.git(&["rev-parse", &format!("capfleet/{run}/s")]);
    assert_eq!(tip, f.git(&["rev-parse", "HEAD"]), "nothing committed");
    assert!(f.artifact("s", "diff.patch").contains("+half done"));
    assert!(common::wait_until(
        Duration::from_secs(5),
        Duration::from_millis(50),
        || m.processes().is_empty()
    ));
}
