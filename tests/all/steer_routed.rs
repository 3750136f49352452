//! A peer's message to a session mid-turn (issue 39, point 1: CAP queued input),
//! end to end through `capfleet run`: a Codex app-server session (the scripted server,
//! `tests/support/codex_app_scripted.py`) holds its turn open until it is steered; a
//! sim peer mentions it meanwhile.
//!
//! - Its manifest says `queued_input` over the binding: the router steers the mention
//!   into the running turn — a `turn/steer` of that turn in the server's request log,
//!   a `steered` record (not `routed`) on the router's stream, a
//!   `cap.user_input.inject` on the session's — and no second turn starts.
//! - Its manifest says `queued_input = false`: the mention waits for the turn's end
//!   and is a `turn/start` of its own (a `routed` record), never a `turn/steer`.

use serde_json::{Value, json};

use crate::codex_app_scripted::{argv, of_method, requests};
use crate::common::repo::Fixture;
use crate::common::sim::fleet_session;
use crate::common::{EnvMarker, support};

/// The peer mentions the Codex session this long after the run starts: the
/// scripted server's turn is open by then (it waits `HOLD_S` for a steer).
const PEER_DELAY_MS: u64 = 3000;
/// How long the scripted server's `wait-for-steer` turn waits for a steer.
const HOLD_S: u64 = 8;

/// Run a fleet of the scripted Codex session (its manifest `queued_input` as given)
/// and a sim peer that mentions it mid-turn; the journal and the server's requests.
fn run(queued_input: bool) -> (Vec<Value>, Vec<Value>) {
    let f = Fixture::plain();
    let m = EnvMarker::new("codex-steer-routed");
    let log = f.path().join("scripted.jsonl");
    let manifest = std::fs::read_to_string(support("codex-app-scripted.toml")).expect("manifest");
    let manifest = if queued_input {
        manifest
    } else {
        manifest.replace("queued_input = true", "queued_input = false")
    };
    f.write("codex-app.toml", &manifest);
    f.write(
        "peer.toml",
        &format!(
            "[[turn]]\nsteps = [{{ sleep_ms = {PEER_DELAY_MS} }}, \
             {{ say = \"@cap://codex use postcard\" }}]\n"
        ),
    );
    let (k, v) = m.pair();
    f.write(
        "fleet.toml",
        &format!(
            "[fleet]\nname = \"st\"\nstart = [\"codex\", \"peer\"]\ntask = \"wait-for-steer please\"\n\n\
             [[sessions]]\nname = \"codex\"\nagent = {agent}\nargv = {argv}\n\
             env = {{ {k} = \"{v}\", CODEX_SCRIPTED_LOG = {log}, CODEX_SCRIPTED_STEER_WAIT = \"{HOLD_S}\" }}\n\n{peer}",
            agent = json!(f.path().join("codex-app.toml")),
            argv = json!(argv()),
            log = json!(log),
            peer = fleet_session("peer", "peer.toml", &m, ""),
        ),
    );
    let out = f.capfleet(&["run", "fleet.toml"]);
    assert!(
        out.status.success(),
        "{}",
        crate::common::repo::stderr(&out)
    );
    (f.journal(), requests(&log))
}

/// The router's records of `kind`, as (from, to, key).
fn records<'a>(journal: &'a [Value], kind: &str) -> Vec<&'a Value> {
    journal
        .iter()
        .filter(|r| r["urn"] == "cap://st/router" && r["type"] == kind)
        .collect()
}

const MESSAGE: &str = "Message from cap://st/peer: use postcard";

#[test]
fn a_mention_mid_turn_is_a_turn_steer_where_the_manifest_says_queued_input() {
    let (journal, log) = run(true);
    let steers = of_method(&log, "turn/steer");
    assert_eq!(steers.len(), 1, "{log:#?}");
    assert_eq!(steers[0]["params"]["expectedTurnId"], "turn-1");
    assert_eq!(steers[0]["params"]["input"][0]["text"], MESSAGE);
    assert_eq!(
        of_method(&log, "turn/start").len(),
        1,
        "no turn of its own: {log:#?}"
    );
    // Journaled as a steer, distinct from a delivery that ran a turn.
    let steered = records(&journal, "steered");
    assert_eq!(steered.len(), 1, "{journal:#?}");
    assert_eq!(steered[0]["from"], json!(["peer"]));
    assert_eq!(steered[0]["to"], "codex");
    assert_eq!(steered[0]["via"], "mention");
    let key = steered[0]["key"].as_str().expect("key");
    assert!(
        records(&journal, "routed").iter().all(|r| r["key"] != key),
        "a steer taken has no routed record: {journal:#?}"
    );
    let injected: Vec<&Value> = journal
        .iter()
        .filter(|r| r["urn"] == "cap://st/codex" && r["event"]["kind"] == "cap.user_input.inject")
        .collect();
    assert_eq!(injected.len(), 1, "{journal:#?}");
    assert_eq!(injected[0]["event"]["content"][0]["text"], MESSAGE);
    // The steered turn answered with the peer's message.
    let text: String = journal
        .iter()
        .filter(|r| r["urn"] == "cap://st/codex" && r["event"]["kind"] == "cap.text_chunk")
        .filter_map(|r| r["event"]["text"].as_str())
        .collect();
    assert_eq!(text, format!("steered: {MESSAGE}"));
}

#[test]
fn a_mention_mid_turn_waits_for_the_turns_end_without_queued_input() {
    let (journal, log) = run(false);
    assert!(of_method(&log, "turn/steer").is_empty(), "{log:#?}");
    let starts = of_method(&log, "turn/start");
    assert_eq!(starts.len(), 2, "{log:#?}");
    assert_eq!(starts[1]["params"]["input"][0]["text"], MESSAGE);
    assert!(records(&journal, "steered").is_empty(), "{journal:#?}");
    let to_codex: Vec<&Value> = records(&journal, "routed")
        .into_iter()
        .filter(|r| r["to"] == "codex")
        .collect();
    assert_eq!(to_codex.len(), 2, "{journal:#?}");
    assert_eq!(to_codex[1]["via"], "mention");
    // The held turn gave up waiting for a steer; the message ran after it.
    let text: String = journal
        .iter()
        .filter(|r| r["urn"] == "cap://st/codex" && r["event"]["kind"] == "cap.text_chunk")
        .filter_map(|r| r["event"]["text"].as_str())
        .collect();
    assert_eq!(text, format!("steered: Noneecho: {MESSAGE}"));
}
