//! The audit of the reverse RPC and risk from content, through `capfleet run` with the
//! simulator as an ACP agent: every terminal spawn, kill and file write or delete is
//! journaled with the rule that allowed or refused it (unattended runs say so at the
//! start and in the summary), and a permission request is rated by what it contains,
//! not only by the agent's label.

use std::path::Path;

use common::{EnvMarker, capfleet, run_journal};
use serde_json::Value;

use crate::common;

/// The ACP simulator's manifest with `coding` lines replaced.
fn manifest(dir: &Path, tool_permission: &str, tools_allowed: &str) -> &'static str {
    let src = std::fs::read_to_string(common::support("sim-acp.toml")).unwrap();
    let src = src
        .replace(
            "tool_permission = \"interactive\"",
            &format!("tool_permission = \"{tool_permission}\""),
        )
        .replace(
            "tools_allowed = []",
            &format!("tools_allowed = {tools_allowed}"),
        );
    std::fs::write(dir.join("agent.toml"), src).unwrap();
    "agent.toml"
}

/// Runs a one-session fleet of the ACP simulator playing `steps` in `dir` (with
/// `fleet_extra` lines under `[fleet]`); its exit code, stderr and journal.
fn run(dir: &Path, agent: &str, steps: &str, fleet_extra: &str) -> (i32, String, Vec<Value>) {
    let m = EnvMarker::new("audit");
    std::fs::write(
        dir.join("script.toml"),
        format!("[[turn]]\nsteps = [\n{steps}\n]\n"),
    )
    .unwrap();
    let (k, v) = m.pair();
    let fleet = format!(
        "[fleet]\nname = \"au\"\nstart = \"a\"\ntask = \"go\"\n{fleet_extra}\n\n[[sessions]]\nname = \"a\"\n\
         agent = \"{agent}\"\nscript = \"script.toml\"\nargv = [\"capfleet\", \"sim\", \"--mode\", \"acp\"]\n\
         env = {{ {k} = \"{v}\" }}\n"
    );
    std::fs::write(dir.join("fleet.toml"), fleet).unwrap();
    let out = capfleet(dir).args(["run", "fleet.toml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(m.processes().is_empty(), "no agent left: {stderr}");
    (out.status.code().unwrap_or(-1), stderr, run_journal(dir))
}

fn audits(records: &[Value]) -> Vec<&Value> {
    records.iter().filter(|r| r["type"] == "audit").collect()
}

#[test]
fn unattended_spawns_and_file_changes_are_journaled_and_announced() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let agent = manifest(&ws, "none", "[]");
    // Paths relative to the session's workspace (its plain worktree of `ws`).
    let steps = "{ rpc = \"fs/write_text_file\", params = { path = \"./new.txt\", content = \"from sim\" } },\n\
         { run = \"echo\", args = [\"hi-term\"] },\n\
         { rpc = \"_cap/fs.delete\", params = { path = \"./new.txt\" } },\n\
         { rpc = \"fs/write_text_file\", params = { path = \"/etc/capfleet-audit\", content = \"x\" } },";
    let (code, stderr, records) = run(&ws, agent, steps, "");
    assert_eq!(code, 0, "{stderr}");
    let warning = stderr.find("UNATTENDED: session a (agent sim-acp)");
    let started = stderr.find("capfleet: run ");
    assert!(
        warning.is_some() && started < warning,
        "warned at the start: {stderr}"
    );
    assert!(
        stderr.contains("UNATTENDED: a ran unattended (tool_permission = \"none\"): 1 actions"),
        "the summary repeats it: {stderr}"
    );
    assert!(
        !records
            .iter()
            .any(|r| r["event"]["kind"] == "cap.permission.request"),
        "nothing asked"
    );
    let a = audits(&records);
    let by = |action: &str| -> Vec<&Value> {
        a.iter()
            .copied()
            .filter(|r| r["action"] == action)
            .collect()
    };
    let writes = by("fs_write");
    assert_eq!(writes.len(), 2, "{a:#?}");
    let cwd = writes[0]["path"]
        .as_str()
        .unwrap()
        .strip_suffix("/new.txt")
        .unwrap();
    assert!(
        cwd.contains(".cap-worktrees/") && cwd.ends_with("/a"),
        "{cwd}"
    );
    assert_eq!(writes[0]["bytes"], 8);
    assert_eq!(writes[0]["outcome"], "done");
    assert_eq!(writes[0]["rule"], "fs.write (fs.scope = workspace_only)");
    assert_eq!(
        writes[1]["outcome"], "refused",
        "outside the scope: {:#?}",
        writes[1]
    );
    assert!(writes[1]["error"].as_str().unwrap().contains("fs.scope"));
    let spawn = by("terminal_create");
    assert_eq!(spawn.len(), 1, "{a:#?}");
    assert_eq!(spawn[0]["command"], "echo hi-term");
    assert_eq!(spawn[0]["cwd"], cwd);
    assert_eq!(spawn[0]["rule"], "tool_permission = \"none\"");
    assert!(spawn[0]["terminal_id"].is_string(), "{:#?}", spawn[0]);
    let delete = by("fs_delete");
    assert_eq!(
        (delete.len(), &delete[0]["outcome"]),
        (1, &Value::from("done"))
    );
    assert!(!Path::new(cwd).join("new.txt").exists());
    assert_eq!(writes[1]["path"], "/etc/capfleet-audit");
    let log = capfleet(&ws).args(["log", "latest"]).output().unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(
        log.contains("done run \"echo hi-term\"") && log.contains("by tool_permission = \"none\""),
        "{log}"
    );
}

#[test]
fn allow_listed_and_refused_spawns_name_their_rule() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let agent = manifest(&ws, "confirm", "[\"echo *\"]");
    let steps =
        "{ run = \"echo\", args = [\"listed\"] },\n{ run = \"touch\", args = [\"never\"] },";
    let (code, stderr, records) = run(&ws, agent, steps, "");
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("UNATTENDED"), "{stderr}");
    let spawns: Vec<&Value> = audits(&records)
        .into_iter()
        .filter(|r| r["action"] == "terminal_create")
        .collect();
    assert_eq!(spawns.len(), 2, "{spawns:#?}");
    assert_eq!(spawns[0]["rule"], "tools_allowed entry \"echo *\"");
    assert_eq!(spawns[0]["outcome"], "done");
    assert_eq!(spawns[1]["command"], "touch never");
    assert_eq!(spawns[1]["outcome"], "refused");
    assert_eq!(
        spawns[1]["rule"],
        "denied on request (tool_permission = \"confirm\")"
    );
    assert!(!ws.join("never").exists());
}

#[test]
fn a_request_labelled_read_that_deletes_home_is_high_risk() {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let steps = "{ permission = \"Read\", input = { argument = \"rm -rf ~\" }, risk = \"low\", output = \"gone\" },\n\
                 { permission = \"Read\", input = { path = \"src/main.rs\" }, risk = \"low\", output = \"read\" },";
    let (code, stderr, records) = run(
        &ws,
        common::support("sim-acp.toml").to_str().unwrap(),
        steps,
        "max_risk = \"low\"",
    );
    assert_eq!(code, 0, "{stderr}");
    let reqs: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"]["kind"] == "cap.permission.request")
        .collect();
    let resps: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"]["kind"] == "cap.permission.response")
        .collect();
    assert_eq!((reqs.len(), resps.len()), (2, 2), "{records:#?}");
    let hostile = &reqs[0]["event"];
    assert_eq!(hostile["risk_level"], "high", "{hostile:#}");
    let why = &hostile["_meta"]["capfleet.risk"];
    assert_eq!(
        (&why["agent"], &why["content"]),
        (&Value::from("low"), &Value::from("high"))
    );
    assert!(
        why["why"][0].as_str().unwrap().contains("rm -rf ~"),
        "{why}"
    );
    assert_eq!(
        resps[0]["event"]["decision"], "deny",
        "max_risk = low never approves it"
    );
    assert_eq!(reqs[1]["event"]["risk_level"], "low", "{:#}", reqs[1]);
    assert_eq!(resps[1]["event"]["decision"], "allow_once");
    let text: String = records
        .iter()
        .filter(|r| r["event"]["kind"] == "cap.tool_call.end")
        .map(|r| r["event"]["output"].to_string())
        .collect();
    assert!(text.contains("read") && !text.contains("gone"), "{text}");
}
