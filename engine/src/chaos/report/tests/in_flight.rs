//! Events lost, against what the sims recorded around each result's write: a result
//! in flight when its process died is explained only by a fault that ended that very
//! process inside its window; a result written and not journaled stays a loss.

use serde_json::json;

use super::{J, Report};

/// Session `w1`'s turn `turn` by sim `pid`: its result recorded, written, journaled.
fn turn_ok(j: &mut J, turn: u32, pid: u32) {
    j.started("w1", turn, 1)
        .frame("w1", pid, false)
        .usage("w1", turn, 0.0)
        .ended("w1", turn, "completed");
}

/// `w1`'s agent restarted after a kill, its turn `turn` done again by sim `pid`.
fn retried(j: &mut J, turn: u32, pid: u32) {
    j.rec("w1", Some(turn), json!({"type": "restart", "cause": {"kind": "signaled", "signal": 9}, "attempt": 1, "delay_ms": 0}));
    j.ready("w1")
        .started("w1", turn, 2)
        .frame("w1", pid, false)
        .usage("w1", turn, 0.0)
        .ended("w1", turn, "completed");
}

/// Sim 42 does turn 1, then is hit by `fault` (a signal fault on `group`, seed
/// position 7) with turn 2's result recorded and not marked written; the journal has
/// that result when `journaled`; sim 43 does turn 2 again.
fn in_flight_at(fault: &str, group: i32, journaled: bool) -> Report {
    let mut j = J::new(&["w1"]);
    j.ready("w1");
    turn_ok(&mut j, 1, 42);
    j.started("w1", 2, 1)
        .signal("w1", 2, fault, 7, group)
        .frame("w1", 42, true);
    if journaled {
        j.usage("w1", 2, 0.0).ended("w1", 2, "completed");
        j.ready("w1");
        turn_ok(&mut j, 3, 43);
    } else {
        retried(&mut j, 2, 43);
    }
    j.report()
}

#[test]
fn a_result_in_flight_at_a_kill_of_its_process_is_lost_to_that_fault_and_shown() {
    let r = in_flight_at("kill", 42, false);
    let e = &r.events;
    assert_eq!(
        (
            e.emitted,
            e.journaled,
            e.lost,
            e.lost_to_faults,
            e.unexplained
        ),
        (3, 2, 1, 1, 0),
        "{e:?}"
    );
    assert_eq!(
        (e.in_flight, e.in_flight_journaled, e.unrecorded),
        (1, 0, 0)
    );
    let x = &e.in_flight_frames[0];
    assert_eq!((x.session.as_str(), x.pid, x.journaled), ("w1", 42, false));
    let cut = x.cut_by.as_ref().expect("the kill cut it");
    assert_eq!((cut.kind.as_str(), cut.seed_pos), ("kill", Some(7)));
    let text = r.to_string();
    assert!(
        text.contains(
            "1 frame in flight at a kill (seed_pos 7): w1 pid 42, not journaled, lost to the fault"
        ),
        "{text}"
    );
    assert!(
        r.openmetrics()
            .contains("capfleet_chaos_events_in_flight_total{fate=\"lost_to_fault\"} 1"),
        "{}",
        r.openmetrics()
    );
    // A term, and a hang (stopped there, killed by the turn timeout), the same.
    for kind in ["term", "hang"] {
        let e = in_flight_at(kind, 42, false).events;
        assert_eq!(
            (e.lost, e.lost_to_faults, e.unexplained),
            (1, 1, 0),
            "{kind}"
        );
    }
}

#[test]
fn a_result_in_flight_the_reader_got_is_no_loss() {
    let r = in_flight_at("kill", 42, true);
    let e = &r.events;
    assert_eq!(
        (
            e.emitted,
            e.journaled,
            e.lost,
            e.in_flight,
            e.in_flight_journaled
        ),
        (3, 3, 0, 1, 1),
        "{e:?}"
    );
    assert!(
        r.to_string().contains(
            "1 frame in flight at a kill (seed_pos 7): w1 pid 42, journaled all the same"
        ),
        "{r}"
    );
}

#[test]
fn a_result_in_flight_with_no_fault_on_its_process_in_its_window_is_unexplained() {
    // A kill of another process; an exit of this one (it ends itself reading its
    // input, never between the result's two lines).
    for (fault, group) in [("kill", 99), ("exit", 42)] {
        let e = in_flight_at(fault, group, false).events;
        assert_eq!(
            (e.lost, e.lost_to_faults, e.unexplained),
            (1, 0, 1),
            "{fault} on {group}"
        );
        assert_eq!(e.in_flight_frames[0].cut_by, None);
    }
    // A kill of this process's group before its previous result (that one was
    // written after it: the kill is no part of this window), or after the session's
    // next result (the group's number used again by a later process).
    for before in [true, false] {
        let mut j = J::new(&["w1"]);
        j.ready("w1").started("w1", 1, 1);
        if before {
            j.signal("w1", 1, "hang", 3, 42);
        }
        j.frame("w1", 42, false)
            .usage("w1", 1, 0.0)
            .ended("w1", 1, "completed");
        j.started("w1", 2, 1).frame("w1", 42, true);
        retried(&mut j, 2, 43);
        if !before {
            j.started("w1", 3, 1).signal("w1", 3, "kill", 9, 42);
        }
        let r = j.report();
        let e = &r.events;
        assert_eq!((e.lost, e.unexplained), (1, 1), "before: {before}: {e:?}");
        assert!(r.to_string().contains("with no fault in its window"), "{r}");
    }
}

#[test]
fn a_written_result_not_journaled_is_a_loss_even_beside_one_in_flight_that_was() {
    // Sim 42's turn-1 result is written and never journaled; its turn-2 result is in
    // flight at a kill and journaled: two recorded, two journaled would count even —
    // matched by time, the first is lost and nothing explains it.
    let mut j = J::new(&["w1"]);
    j.ready("w1").started("w1", 1, 1).frame("w1", 42, false);
    j.ended("w1", 1, "completed");
    j.started("w1", 2, 1)
        .signal("w1", 2, "kill", 7, 42)
        .frame("w1", 42, true)
        .usage("w1", 2, 0.0)
        .ended("w1", 2, "completed");
    j.started("w1", 3, 1)
        .frame("w1", 43, false)
        .usage("w1", 3, 0.0);
    let e = j.report().events;
    assert_eq!(
        (
            e.emitted,
            e.journaled,
            e.lost,
            e.lost_to_faults,
            e.unexplained
        ),
        (3, 2, 1, 0, 1),
        "{e:?}"
    );
    assert_eq!((e.in_flight, e.in_flight_journaled), (1, 1));
}

#[test]
fn a_self_kill_explains_a_result_in_flight_of_its_own_run_only() {
    let resumed = json!({"type": "resumed", "records": 9, "replayed": 0, "reissued": []});
    for after_resume in [false, true] {
        let mut j = J::new(&["w1"]);
        j.ready("w1");
        turn_ok(&mut j, 1, 42);
        j.started("w1", 2, 1).fault("router", None, "self_kill", 5);
        if after_resume {
            j.rec("router", None, resumed.clone());
        }
        j.frame("w1", 42, true);
        if !after_resume {
            j.rec("router", None, resumed.clone());
        }
        j.ready("w1");
        turn_ok(&mut j, 2, 43);
        let e = j.report().events;
        let cut = e.in_flight_frames[0]
            .cut_by
            .as_ref()
            .map(|c| c.kind.clone());
        if after_resume {
            assert_eq!((e.lost, e.unexplained, cut), (1, 1, None), "{e:?}");
        } else {
            assert_eq!(
                (e.lost, e.lost_to_faults, cut.as_deref()),
                (1, 1, Some("self_kill")),
                "{e:?}"
            );
        }
    }
}
