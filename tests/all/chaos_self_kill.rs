//! `self_kill` with `--resume-on-crash`: capfleet `SIGKILL`s itself at seeded moments
//! (each journaled and synced before), its supervisor resumes the run each time
//! (`run --resume`), and the run completes: no delivery routed or completed twice,
//! no agent (nor supervised capfleet) left behind.

use std::time::Duration;

use crate::common::EnvMarker;
use crate::common::chaos_run::{fleet, records};
use crate::common::durable::{completed, exactly_once};
use crate::common::procs::{all_processes, wait_until};
use crate::common::repo::stderr;
use crate::common::run_ended;

#[test]
fn self_kill_with_resume_on_crash_completes_the_run_once() {
    let marker = EnvMarker::new("chaos-self-kill");
    let dir = fleet(&["a", "b", "c"], &marker, 3, 700, 10);
    let out = dir.capfleet(&[
        "run",
        "fleet.toml",
        "--chaos",
        "seed=9,self_kill=@300ms;900ms;1s,max_self_kills=2",
        "--resume-on-crash",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let journal = dir.journal();
    let kills = records(&journal);
    assert_eq!(
        kills.len(),
        2,
        "max_self_kills bounds them: {kills:?}\n{err}"
    );
    for (k, pos) in kills.iter().zip([0, 1]) {
        assert_eq!(k["fault"], "self_kill");
        assert_eq!(k["target"], "capfleet");
        assert_eq!(k["urn"], "cap://chaos/router");
        assert_eq!(
            k["seed_pos"], pos,
            "the schedule went on after each: {kills:?}"
        );
    }
    let resumed = journal.iter().filter(|r| r["type"] == "resumed").count();
    assert_eq!(resumed, 2, "one resume per kill:\n{err}");
    assert_eq!(
        err.matches("the supervised capfleet died by signal 9")
            .count(),
        2,
        "{err}"
    );
    assert_eq!(run_ended(&journal).as_deref(), Some("completed"), "{err}");
    exactly_once(&journal);
    assert_eq!(completed(&journal).len(), 3, "every session's task, once");
    marker.wait_gone(Duration::from_secs(2), "agents after the run");
    // No supervised capfleet of this run left: none runs in its directory.
    let dir_path = dir.path().canonicalize().unwrap();
    assert!(
        wait_until(Duration::from_secs(2), Duration::from_millis(20), || {
            !all_processes().iter().any(|p| {
                std::fs::read_link(format!("/proc/{}/cwd", p.pid)).is_ok_and(|c| c == dir_path)
            })
        }),
        "a process still runs in the run's directory"
    );
}
