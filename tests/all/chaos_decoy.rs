//! A chaos run signals only its own agents' process groups: a decoy started by the
//! test with an agent's very command line (`capfleet sim --mode stream-json --script
//! …`) lives through a run whose kill, term and hang faults hit nearly every attempt.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::chaos_run::{fleet, sequence};
use crate::common::procs::stat;
use crate::common::repo::stderr;
use crate::common::{BIN, EnvMarker};

#[test]
fn a_decoy_with_an_agents_command_line_survives_a_chaos_run() {
    let marker = EnvMarker::new("chaos-decoy");
    let dir = fleet(&["a", "b", "c"], &marker, 20, 100, 1);
    let script = dir.path().join("turn.toml");
    // The agent's argv as the sim manifest starts it, the same script; its stdin a
    // pipe the test holds, so it waits for a prompt as an agent does.
    let mut decoy = Command::new(BIN)
        .arg0("capfleet")
        .args(["sim", "--mode", "stream-json", "--script"])
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the decoy starts");
    let out = dir.capfleet(&[
        "run",
        "fleet.toml",
        "--chaos",
        "seed=5,kill=0.3/turn,term=0.3/turn,hang=0.3/turn,hang_for=never",
    ]);
    let faults = sequence(&dir.journal());
    let kinds = |k: &str| faults.iter().filter(|(f, _, _, _)| f == k).count();
    assert!(
        kinds("kill") + kinds("term") + kinds("hang") >= 3,
        "the run was hit: {faults:?}\n{}",
        stderr(&out)
    );
    assert!(
        decoy.try_wait().expect("try_wait").is_none(),
        "the decoy was signalled: {faults:?}"
    );
    // A hang that stopped it would show as state T.
    let state = stat(decoy.id() as i32).map(|s| s.state);
    assert_ne!(state, Some('T'), "the decoy was stopped");
    marker.wait_gone(Duration::from_secs(2), "agents after the run");
    decoy.kill().expect("kill the decoy");
    decoy.wait().expect("reap the decoy");
}
