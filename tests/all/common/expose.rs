//! `capfleet serve --expose` under test (`tests/all/serve_a2a*.rs`): a server exposing
//! the sim (playing [`SCRIPT`]) with tokens, an exposed fleet of two sims, JSON-RPC
//! streams read by curl, the decisions the exposed tree journaled, and the drain that
//! must leave no agent behind.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::chat::assert_no_survivor;
use super::serve::{Server, add_token};
use super::{EnvMarker, journal_records};

pub(crate) const SCRIPT: &str = r##"
[[turn]]
match = "permission"
steps = [{ say = "checking " }, { permission = "Bash", input = { command = "echo hi" }, risk = "high" }, { say = "after the tool" }, { usage = { input_tokens = 7, output_tokens = 3 } }]

[[turn]]
match = "ask"
steps = [{ ask = "Which colour?", options = ["red", "blue"] }]

[[turn]]
match = "flood"
steps = [{ flood = 2000000, chunk = 16384 }, { say = "the end" }]

[[turn]]
match = "slow"
steps = [{ say = "started" }, { sleep_ms = 30000 }, { say = "never" }]

[[turn]]
steps = [{ say = "hello from the sim", chunk = 5 }, { tool = "Bash", input = { command = "ls" }, output = "a" }, { artifact = "notes.md", mime_type = "text/markdown", content = "# Notes" }, { usage = { input_tokens = 5, output_tokens = 2 } }]

[[turn]]
steps = [{ say = "second turn" }]
"##;

/// A server exposing the sim (playing [`SCRIPT`]) with tokens; its approver's token.
pub(crate) fn exposing_sim(d: &Path, marker: &EnvMarker) -> (Server, String) {
    exposing_sim_with(d, marker, &[])
}

/// [`exposing_sim`] with `extra` flags.
pub(crate) fn exposing_sim_with(d: &Path, marker: &EnvMarker, extra: &[&str]) -> (Server, String) {
    std::fs::write(d.join("script.toml"), SCRIPT).unwrap();
    let token = add_token(d, "alice", "approve");
    let script = d.join("script.toml");
    let script = script.to_str().unwrap();
    let mut args = vec!["--token-file", "tokens.txt", "--expose", "sim"];
    args.extend_from_slice(extra);
    let server = Server::start_env(d, &args, &[("CAPFLEET_SIM_SCRIPT", script), marker.pair()]);
    (server, token)
}

pub(crate) fn url(server: &Server, name: &str) -> String {
    format!("http://127.0.0.1:{}/a2a/{name}", server.port)
}

/// The exposed tree's journal: the permission decisions (decision, rule).
pub(crate) fn decisions(d: &Path) -> Vec<(String, String)> {
    let dir = d.join(".capfleet/a2a");
    let mut out = Vec::new();
    for f in std::fs::read_dir(&dir).expect("the a2a journals") {
        for r in journal_records(&f.unwrap().path()) {
            let e = &r["event"];
            if e["kind"] == "cap.permission.response" {
                out.push((
                    e["decision"].as_str().unwrap_or("").to_owned(),
                    e["_meta"]["capfleet.rule"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                ));
            }
        }
    }
    out
}

/// SIGTERM: the server drains, exits 0, and no agent it started is left.
pub(crate) fn drain(mut server: Server, marker: &EnvMarker) {
    server.signal(libc::SIGTERM);
    let status = server.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
    assert_no_survivor(marker);
}

/// A JSON-RPC streaming request read by curl (a real SSE client): each event's data,
/// until one contains `cut_at` (then the connection is cut) or the stream's end.
pub(crate) fn rpc_stream(port: u16, token: &str, body: &Value, cut_at: Option<&str>) -> Vec<Value> {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new("curl")
        .args(["-sN", "--max-time", "60", "-X", "POST"])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args([
            "-H",
            "Content-Type: application/json",
            "-H",
            "A2A-Extensions: cap-protocol/v1",
            "-d",
            &body.to_string(),
        ])
        .arg(format!("http://127.0.0.1:{port}/a2a/sim/"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("curl");
    let mut events = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
    {
        if let Some(data) = line.strip_prefix("data:") {
            events.push(serde_json::from_str(data.trim()).expect("an event is JSON"));
            if cut_at.is_some_and(|c| data.contains(c)) {
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    events
}

/// A fleet of two sim sessions: `lead` (started) answers, then the route hands its
/// answer to `helper`.
pub(crate) fn fleet(d: &Path, marker: &EnvMarker) {
    std::fs::write(
        d.join("lead.toml"),
        "[[turn]]\nsteps = [{ say = \"the fleet's answer\" }, { usage = { input_tokens = 4, output_tokens = 1 } }]\n",
    )
    .unwrap();
    std::fs::write(
        d.join("helper.toml"),
        "[[turn]]\nsteps = [{ tool = \"Read\", input = { path = \"x\" }, output = \"y\" }, { permission = \"Bash\", input = { command = \"rm -rf build\" }, risk = \"high\" }, { say = \"helper done\" }, { usage = { input_tokens = 6, output_tokens = 2 } }]\n",
    )
    .unwrap();
    let (k, v) = marker.pair();
    std::fs::write(
        d.join("fleet.toml"),
        format!(
            "[fleet]\nname = \"pair\"\nstart = [\"lead\"]\ntask = \"unused\"\n\n\
             [[sessions]]\nname = \"lead\"\nagent = \"sim\"\nscript = \"lead.toml\"\nenv = {{ {k} = \"{v}\" }}\n\n\
             [[sessions]]\nname = \"helper\"\nagent = \"sim\"\nscript = \"helper.toml\"\nenv = {{ {k} = \"{v}\" }}\n\n\
             [[routes]]\nwhen = \"lead.done\"\nroute_to = \"helper\"\n"
        ),
    )
    .unwrap();
}
