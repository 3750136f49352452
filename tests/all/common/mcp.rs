//! The official MCP Python SDK's client (`tests/support/mcp_client.py`, peer
//! `mcp-py`) run against `capfleet mcp` or `serve`'s `/mcp`, its lines read back;
//! the fleets it starts: the demo (by path, or inline with its scripts as files) and
//! one session asking leave for a tool.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::serve::{PERMISSION, sim_fleet};
use super::{EnvMarker, output_within, peer, repo_root, support};

/// What the client may take, at most, for a whole scenario.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(300);

/// Run the client in `dir` with `args`; its JSON lines (the test fails on a crash).
pub(crate) fn client(dir: &Path, args: &[&str]) -> Vec<Value> {
    let mut c = Command::new(peer("mcp-py"));
    c.arg(support("mcp_client.py"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null());
    let out = output_within(c, CLIENT_TIMEOUT);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "the client failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The line of step `name` (the test fails, showing every line, without one).
pub(crate) fn step<'a>(lines: &'a [Value], name: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["step"] == name)
        .unwrap_or_else(|| panic!("no step `{name}` in {lines:#?}"))
}

/// The shipped demo fleet's file.
pub(crate) fn demo_path() -> String {
    repo_root()
        .join("config/fleets/demo.toml")
        .display()
        .to_string()
}

/// The demo fleet inline: its text with each script a file beside it.
pub(crate) fn demo_inline() -> Value {
    let text = std::fs::read_to_string(demo_path()).expect("the demo fleet");
    let mut files = serde_json::Map::new();
    let mut fleet = String::new();
    for line in text.lines() {
        match line.strip_prefix("script = \"../sim/") {
            Some(rest) => {
                let name = rest.trim_end_matches('"');
                let script = repo_root().join("config/sim").join(name);
                let body = std::fs::read_to_string(&script).expect("a demo script");
                files.insert(format!("sim/{name}"), json!(body));
                fleet.push_str(&format!("script = \"sim/{name}\"\n"));
            }
            None => {
                fleet.push_str(line);
                fleet.push('\n');
            }
        }
    }
    assert_eq!(files.len(), 4, "the demo's four scripts");
    json!({ "fleet_toml": fleet, "files": files })
}

/// A fleet of one sim session asking leave for a high-risk `Bash` (its agent marked
/// with `marker`), inline.
pub(crate) fn asking(marker: &EnvMarker) -> Value {
    json!({
        "fleet_toml": sim_fleet("ask", 1, marker.pair()),
        "files": { "script.toml": PERMISSION },
    })
}

/// `value` written to `dir/name`; its path.
pub(crate) fn write_json(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, value.to_string()).expect("writing the client's input");
    path.display().to_string()
}

/// The tools every MCP surface of capfleet lists.
pub(crate) const TOOLS: [&str; 8] = [
    "answer_ask",
    "cancel_run",
    "list_asks",
    "list_runs",
    "run_status",
    "session_diff",
    "start_run",
    "wait_run",
];
