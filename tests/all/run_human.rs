//! `capfleet run` on a terminal: what the policy leaves open is asked of the human
//! (answered `y` here), unless the fleet says `auto_answer` (fail-safe deny).

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use common::EnvMarker;
use serde_json::Value;

use crate::common;

const SCRIPT: &str = "[[turn]]\nsteps = [{ permission = \"Bash\", input = { command = \"make\" }, output = \"built\", risk = \"medium\" }, { say = \"finished\" }]\n";

fn fleet(dir: &Path, auto_answer: bool, marker: &EnvMarker) {
    std::fs::write(dir.join("perm.toml"), SCRIPT).unwrap();
    let (k, v) = marker.pair();
    let fleet = format!(
        "[fleet]\nname = \"h\"\nstart = \"w\"\ntask = \"build\"\nauto_answer = {auto_answer}\n\n\
         [[sessions]]\nname = \"w\"\nagent = \"sim\"\nscript = \"perm.toml\"\nenv = {{ {k} = \"{v}\" }}\n"
    );
    std::fs::write(dir.join("fleet.toml"), fleet).unwrap();
}

/// Run the fleet on a terminal, answering `answer` when asked; the journal's records
/// and whether a question was shown.
async fn run_on_a_terminal(dir: &Path, answer: &[u8]) -> (Vec<Value>, bool) {
    let args = ["run", "fleet.toml"].map(OsString::from);
    let answers: [(&str, &[u8]); 1] = [("allow? [y]es", answer)];
    let run = common::terminal::on_a_terminal(
        dir,
        &args,
        &dir.join("stdout"),
        &answers,
        Duration::from_secs(30),
    )
    .await;
    assert!(run.status.success(), "exit {}\n{}", run.status, run.screen);
    (common::run_journal(dir), run.answered == 1)
}

fn decision(records: &[Value]) -> (String, String) {
    let r = records
        .iter()
        .find(|r| r["event"]["kind"] == "cap.permission.response")
        .expect("a permission response in the journal");
    (
        r["event"]["decision"].as_str().unwrap().to_owned(),
        r["event"]["_meta"]["capfleet.rule"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

#[tokio::test(flavor = "current_thread")]
async fn the_human_at_the_terminal_answers_what_the_policy_leaves_open() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("run-human");
    fleet(dir.path(), false, &m);
    let (records, asked) = run_on_a_terminal(dir.path(), b"y\r").await;
    assert!(asked, "the question was shown at the terminal");
    assert_eq!(decision(&records), ("allow_once".into(), "human".into()));
    assert!(common::wait_until(
        Duration::from_secs(5),
        Duration::from_millis(50),
        || m.processes().is_empty()
    ));
}

#[tokio::test(flavor = "current_thread")]
async fn auto_answer_never_asks_and_denies_fail_safe() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("run-auto");
    fleet(dir.path(), true, &m);
    let (records, asked) = run_on_a_terminal(dir.path(), b"y\r").await;
    assert!(!asked, "auto_answer: nobody is asked");
    assert_eq!(
        decision(&records),
        ("deny".into(), "no_human_fail_safe".into())
    );
    assert!(common::wait_until(
        Duration::from_secs(5),
        Duration::from_millis(50),
        || m.processes().is_empty()
    ));
}
