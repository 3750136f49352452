//! Issue 18's first "must hold": a seeded chaos run of 20 sim sessions with every agent
//! fault kind at a high rate. The report's invariants all hold (no lost journal
//! record, no orphan process, no duplicate route, every turn completed or failed
//! explicitly) and the run's outcome is `completed` or a failure naming the meltdown.
//! The report is checked against the journal itself (every `chaos` record counted
//! once, by kind) and printed at the end of the run.

use std::time::Duration;

use capfleet_wire::chaos::{FaultKind, Reach};

use crate::common::chaos_run::{
    assert_completed_or_meltdown, assert_invariants_hold, fixture, journaled_faults, report, run,
};

/// The agent fault kinds: signals and the byte interposer's (the A2A connection
/// faults and `self_kill` have tests of their own).
fn agent_faults() -> impl Iterator<Item = &'static str> {
    let agent = |k: &FaultKind| matches!(k.reach(), Reach::Signal | Reach::Bytes);
    FaultKind::ALL
        .into_iter()
        .filter(agent)
        .map(FaultKind::as_str)
}

/// The kinds this build injects: the signal faults. The byte interposer's (`slow`,
/// `garble`, `truncate`, `stall_stdin`) are configured and counted when journaled.
const INJECTED: [&str; 4] = ["kill", "term", "hang", "exit"];

const SESSIONS: usize = 20;

/// 20 sessions of the soak agent, 3 turns each (a self-route), every agent fault at
/// 0.1 per turn attempt: about 60 turns, 50 faults. Default restart budget (3 within
/// 60 s, permanent): a session hit four times melts down, and says so.
fn fleet() -> String {
    let names: Vec<String> = (1..=SESSIONS).map(|i| format!("w{i:02}")).collect();
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    let mut f = format!(
        "[fleet]\nname = \"chaos20\"\nstart = [{}]\ntask = \"one small step\"\n\
         max_concurrent = {SESSIONS}\non_error = \"continue\"\nauto_answer = true\n\
         allow_tools = [\"Read\"]\nturn_timeout_s = 1.5\n\n[chaos]\nseed = 1818\n\
         hang_for = \"never\"\nslow_for = \"200ms\"\nstall_for = \"200ms\"\n",
        quoted.join(", ")
    );
    for k in agent_faults() {
        f.push_str(&format!("{k} = \"0.1/turn\"\n"));
    }
    for n in &names {
        f.push_str(&format!(
            "\n[[sessions]]\nname = \"{n}\"\nagent = \"sim\"\nscript = \"../sim/soak.toml\"\n\
             env = {{ CAPFLEET_SIM_TIME_SCALE = \"1000\" }}\nmax_turns = 3\nrestart = \"permanent\"\n"
        ));
    }
    for n in &names {
        f.push_str(&format!(
            "\n[[routes]]\nwhen = [\"{n}.done\"]\nroute_to = \"{n}\"\n"
        ));
    }
    f
}

#[test]
fn twenty_sessions_under_every_agent_fault_keep_every_invariant() {
    let f = fixture("chaos20", &fleet());
    let out = run(&f, "chaos20", Duration::from_secs(90));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (report, holds) = report(&f);
    assert_invariants_hold(&report);
    assert!(holds, "chaos report exits 0 when every invariant holds");
    assert_completed_or_meltdown(&report, &out);

    // The report counts the journal's faults, once each, by kind.
    let journaled = journaled_faults(&f);
    assert!(journaled.len() >= 20, "a high rate: {journaled:?}");
    assert_eq!(report["faults"]["total"], journaled.len());
    for kind in agent_faults() {
        let n = journaled.iter().filter(|k| *k == kind).count();
        assert!(
            n > 0 || !INJECTED.contains(&kind),
            "no {kind} fault in {journaled:?}"
        );
        if n > 0 {
            assert_eq!(
                report["faults"]["by_kind"][kind]["injected"], n,
                "{kind}: {report}"
            );
        }
    }
    // A signal that takes the agent down is noticed, every time.
    for kind in ["kill", "term"] {
        let k = &report["faults"]["by_kind"][kind];
        assert_eq!(k["detected"], k["injected"], "{kind}: {k}");
        assert!(
            k["mttr_ready"]["count"].as_u64().unwrap() > 0,
            "{kind} came back up: {k}"
        );
    }
    // Every turn is accounted for.
    let t = &report["turns"];
    let sum = ["completed", "failed", "cancelled", "cut_by_crash"]
        .iter()
        .map(|k| t[k].as_u64().unwrap())
        .sum::<u64>();
    assert_eq!(sum, t["started"].as_u64().unwrap(), "{t}");
    // Results the sims wrote are all journaled but those a garble or truncate cut.
    let e = &report["events"];
    assert_eq!(e["measured_sessions"], SESSIONS, "{e}");
    assert_eq!(e["unexplained"], 0, "{e}");

    // The run printed its report at its end.
    assert!(stdout.contains("chaos report:"), "{stdout}");
    assert!(
        stdout.contains("verdict: every invariant checked holds"),
        "{stdout}"
    );
}
