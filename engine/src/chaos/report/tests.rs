//! The report on journals written here per the `chaos` record contract (a fault is a
//! record on its target's stream, journaled before it is applied).

use serde_json::{Value, json};

use super::*;

mod in_flight;

/// A journal under construction: each stream numbered from 1, time in steps of 10 ms;
/// and what its sims recorded (`emitted.jsonl` by session, [`J::frame`]).
struct J {
    dir: tempfile::TempDir,
    lines: Vec<String>,
    seqs: std::collections::HashMap<String, u64>,
    ts: u64,
    sims: std::collections::BTreeMap<String, Vec<String>>,
    /// Results recorded by each sim process (pid).
    frames: std::collections::HashMap<u32, u64>,
}

impl J {
    fn new(sessions: &[&str]) -> J {
        let mut j = J {
            dir: tempfile::tempdir().unwrap(),
            lines: Vec::new(),
            seqs: Default::default(),
            ts: 1_000,
            sims: Default::default(),
            frames: Default::default(),
        };
        for s in sessions {
            j.rec(
                "router",
                None,
                json!({"type": "session", "name": s, "agent": "sim", "binding": "stream_json"}),
            );
        }
        j
    }

    /// A record on `cap://f/<stream>`.
    fn rec(&mut self, stream: &str, turn: Option<u32>, body: Value) -> &mut J {
        let urn = format!("cap://f/{stream}");
        let seq = self.seqs.entry(urn.clone()).or_insert(0);
        *seq += 1;
        self.ts += 10;
        let mut v = json!({"seq": *seq, "urn": urn, "ts_ms": self.ts});
        if let Some(t) = turn {
            v["turn"] = json!(t);
        }
        for (k, x) in body.as_object().unwrap() {
            v[k] = x.clone();
        }
        self.lines.push(v.to_string());
        self
    }

    fn ready(&mut self, s: &str) -> &mut J {
        self.rec(s, None, json!({"type": "cap", "event": {"kind": "cap.session.ready", "version": "cap-protocol/v1"}}))
    }

    fn started(&mut self, s: &str, turn: u32, attempt: u32) -> &mut J {
        self.rec(
            s,
            Some(turn),
            json!({"type": "turn_started", "prompt_bytes": 2, "attempt": attempt, "prompt": "go"}),
        )
    }

    fn usage(&mut self, s: &str, turn: u32, usd: f64) -> &mut J {
        self.rec(
            s,
            Some(turn),
            json!({"type": "cap", "event": {"kind": "cap.usage", "cost_usd_estimate": usd}}),
        )
    }

    fn ended(&mut self, s: &str, turn: u32, outcome: &str) -> &mut J {
        self.rec(s, Some(turn), json!({"type": "turn_ended", "stop_reason": "end_turn", "outcome": outcome, "duration_ms": 5}))
    }

    fn fault(&mut self, s: &str, turn: Option<u32>, kind: &str, pos: u64) -> &mut J {
        let target = if kind == "self_kill" { "capfleet" } else { s };
        self.rec(s, turn, json!({"type": "chaos", "fault": kind, "target": target, "seed_pos": pos, "detail": "d"}))
    }

    /// A signal fault `kind` on process group `group`.
    fn signal(&mut self, s: &str, turn: u32, kind: &str, pos: u64, group: i32) -> &mut J {
        let detail = format!("signal to group {group}");
        self.rec(s, Some(turn), json!({"type": "chaos", "fault": kind, "target": s, "seed_pos": pos, "detail": detail, "group": group}))
    }

    /// Sim `pid` of session `s` records a result now (1 ms after the last record),
    /// and marks it written unless `in_flight`.
    fn frame(&mut self, s: &str, pid: u32, in_flight: bool) -> &mut J {
        let n = self.frames.entry(pid).or_insert(0);
        *n += 1;
        let ts = self.ts + 1;
        let lines = self.sims.entry(s.to_owned()).or_default();
        lines.push(json!({"frame": *n, "pid": pid, "pgid": pid, "ts_ms": ts, "input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0}).to_string());
        if !in_flight {
            lines.push(json!({"written": *n, "pid": pid, "ts_ms": ts}).to_string());
        }
        self
    }

    fn raw(&mut self, line: &str) -> &mut J {
        self.lines.push(line.to_owned());
        self
    }

    fn report(&self) -> Report {
        let path = self.dir.path().join("journal.jsonl");
        let mut text = self.lines.join("\n");
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        for (s, lines) in &self.sims {
            let dir = self.dir.path().join("sim").join(s);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(events::EMITTED), lines.join("\n") + "\n").unwrap();
        }
        Report::from_journal(&path).unwrap()
    }

    fn emitted(&self, session: &str, results: usize) {
        let dir = self.dir.path().join("sim").join(session);
        std::fs::create_dir_all(&dir).unwrap();
        let line = "{\"pid\":1,\"input_tokens\":0,\"output_tokens\":0,\"cost_usd\":0.0}\n";
        std::fs::write(dir.join(events::EMITTED), line.repeat(results)).unwrap();
    }
}

fn verdict<'a>(r: &'a Report, name: &str) -> &'a Verdict {
    r.invariants.iter().find(|v| v.name == name).unwrap()
}

fn ended_run(j: &mut J, outcome: &str) {
    j.rec(
        "router",
        None,
        json!({"type": "run_ended", "outcome": outcome}),
    );
}

#[test]
fn a_kill_mid_turn_is_detected_by_its_restart_and_recovered_when_the_turn_completes() {
    let mut j = J::new(&["w1"]);
    j.rec("router", None, json!({"type": "routed", "from": ["fleet"], "to": "w1", "via": "task", "bytes": 2, "key": "w1#1"}));
    j.ready("w1")
        .started("w1", 1, 1)
        .fault("w1", Some(1), "kill", 0);
    let fault_ts = j.ts;
    j.rec("w1", Some(1), json!({"type": "cap", "event": {"kind": "cap.error", "code": "agent_exited", "message": "killed by signal 9"}}))
        .rec("w1", Some(1), json!({"type": "restart", "cause": {"kind": "signaled", "signal": 9}, "attempt": 1, "delay_ms": 0}))
        .ready("w1");
    let ready_ts = j.ts;
    j.started("w1", 1, 2)
        .usage("w1", 1, 0.01)
        .ended("w1", 1, "completed");
    let end_ts = j.ts;
    j.rec(
        "router",
        None,
        json!({"type": "delivered", "key": "w1#1", "to": "w1", "turn": 1, "outcome": "completed"}),
    );
    ended_run(&mut j, "completed");
    let r = j.report();
    let k = &r.faults.by_kind["kill"];
    assert_eq!((k.injected, k.detected, k.recovered), (1, 1, 1));
    let f = &r.faults.list[0];
    assert_eq!(f.detected_by.as_deref(), Some("cap.error agent_exited"));
    assert_eq!(f.ready_ms, Some(ready_ts - fault_ts));
    assert_eq!(f.turn_ms, Some(end_ts - fault_ts));
    assert_eq!(f.seed_pos, Some(0));
    assert_eq!(k.mttr_ready.p95_ms, Some(ready_ts - fault_ts));
    assert_eq!(
        (r.turns.started, r.turns.completed, r.turns.retried),
        (1, 1, 1)
    );
    assert_eq!(r.outcome.as_deref(), Some("completed"));
    assert!(r.holds, "{r}");
    assert_eq!(verdict(&r, "no_orphan_process").holds, None);
}

#[test]
fn a_garbled_frame_is_detected_as_a_parse_failure_and_takes_nothing_down() {
    let mut j = J::new(&["w1"]);
    j.ready("w1")
        .started("w1", 1, 1)
        .fault("w1", Some(1), "garble", 3);
    j.rec("w1", Some(1), json!({"type": "cap", "event": {"kind": "cap.error", "code": "parse_failed", "message": "invalid stream-json frame"}}));
    j.ended("w1", 1, "completed");
    let r = j.report();
    let f = &r.faults.list[0];
    assert_eq!(f.detected_by.as_deref(), Some("cap.error parse_failed"));
    assert_eq!(f.ready_ms, None, "nothing restarted");
    assert!(f.recovered && f.turn_ms.is_some());
}

#[test]
fn a_hang_that_melts_the_session_down_is_a_failed_turn_with_its_reason() {
    let mut j = J::new(&["w1"]);
    j.ready("w1")
        .started("w1", 1, 1)
        .fault("w1", Some(1), "hang", 1);
    j.rec("w1", Some(1), json!({"type": "restart", "cause": {"kind": "hung", "timeout_ms": 500}, "attempt": 1, "delay_ms": 0}));
    j.ready("w1")
        .started("w1", 1, 2)
        .fault("w1", Some(1), "hang", 2);
    j.rec(
        "w1",
        Some(1),
        json!({"type": "failed", "reason": "meltdown: 2 restarts within 30 s"}),
    );
    ended_run(&mut j, "session_failed");
    let r = j.report();
    let h = &r.faults.by_kind["hang"];
    assert_eq!((h.injected, h.detected, h.recovered), (2, 2, 0));
    assert_eq!(h.mttr_ready.count, 1, "the first came back up");
    assert_eq!(r.turns.failed, 1);
    let t = &r.turns.not_completed[0];
    assert_eq!(t.outcome, "session_failed");
    assert_eq!(t.why.as_deref(), Some("meltdown: 2 restarts within 30 s"));
    assert_eq!(r.sessions_failed.len(), 1);
    assert!(
        verdict(&r, "every_turn_explicit").holds == Some(true),
        "{r}"
    );
    assert!(r.to_string().contains("meltdown"), "{r}");
}

#[test]
fn a_gap_a_duplicate_route_and_a_silent_turn_each_break_their_invariant() {
    let mut j = J::new(&["w1"]);
    let routed = json!({"type": "routed", "from": ["fleet"], "to": "w1", "via": "task", "bytes": 2, "key": "w1#1"});
    j.rec("router", None, routed.clone())
        .rec("router", None, routed);
    j.ready("w1").started("w1", 1, 1);
    // seq 3 of w1 never written.
    *j.seqs.get_mut("cap://f/w1").unwrap() += 1;
    j.ended("w1", 1, "completed").started("w1", 2, 1);
    let r = j.report();
    let lost = verdict(&r, "no_lost_record");
    assert_eq!(lost.holds, Some(false));
    assert!(
        lost.detail.contains("cap://f/w1: seq 2 then 4"),
        "{}",
        lost.detail
    );
    let dup = verdict(&r, "no_duplicate_route");
    assert_eq!(dup.holds, Some(false));
    assert!(dup.detail.contains("w1#1 routed 2 times"), "{}", dup.detail);
    let explicit = verdict(&r, "every_turn_explicit");
    assert_eq!(explicit.holds, Some(false));
    assert!(explicit.detail.contains("cap://f/w1 turn 2 never ended"));
    assert!(!r.holds);
    let text = r.to_string();
    assert!(text.contains("BROKEN  no_lost_record"), "{text}");
    assert!(text.ends_with("verdict: 3 invariant(s) broken"), "{text}");
}

#[test]
fn a_torn_last_line_breaks_no_lost_record_unless_a_resume_reported_it() {
    let mut j = J::new(&["w1"]);
    j.ready("w1");
    let mut torn = j.lines.join("\n");
    torn.push_str("\n{\"seq\":2,\"urn\":\"cap");
    std::fs::write(j.dir.path().join("journal.jsonl"), torn).unwrap();
    let r = Report::from_journal(&j.dir.path().join("journal.jsonl")).unwrap();
    let v = verdict(&r, "no_lost_record");
    assert_eq!(v.holds, Some(false));
    assert!(v.detail.contains("torn last line"), "{}", v.detail);
    // A resume found it, cut it and said so: the journal is whole.
    j.rec(
        "router",
        None,
        json!({"type": "resumed", "records": 2, "torn_bytes": 19, "replayed": 0, "reissued": []}),
    );
    let r = j.report();
    let v = verdict(&r, "no_lost_record");
    assert_eq!(v.holds, Some(true), "{}", v.detail);
    assert!(v.detail.contains("1 torn line(s) reported"), "{}", v.detail);
    // A line that is no record inside the journal is a loss too.
    j.raw("{\"seq\": broken");
    j.ready("w1");
    assert_eq!(verdict(&j.report(), "no_lost_record").holds, Some(false));
}

#[test]
fn a_self_kill_is_detected_by_the_resume_and_its_cut_turn_taken_over() {
    let mut j = J::new(&["w1"]);
    j.ready("w1")
        .started("w1", 3, 1)
        .fault("router", None, "self_kill", 7);
    let fault_ts = j.ts;
    j.rec(
        "router",
        None,
        json!({"type": "resumed", "records": 9, "replayed": 0, "reissued": ["w1#3"]}),
    );
    j.ready("w1");
    let ready_ts = j.ts;
    j.started("w1", 4, 1).ended("w1", 4, "completed");
    ended_run(&mut j, "completed");
    let r = j.report();
    let f = &r.faults.list[0];
    assert_eq!(
        (f.kind.as_str(), f.target.as_str()),
        ("self_kill", "capfleet")
    );
    assert_eq!(f.detected_by.as_deref(), Some("resumed"));
    assert!(f.recovered);
    assert_eq!(f.ready_ms, Some(ready_ts - fault_ts));
    assert_eq!(r.turns.cut_by_crash, 1);
    assert!(r.holds, "{r}");
}

#[test]
fn results_emitted_and_not_journaled_are_lost_unless_a_fault_explains_them() {
    let mut j = J::new(&["w1", "w2"]);
    j.ready("w1")
        .started("w1", 1, 1)
        .usage("w1", 1, 0.0)
        .ended("w1", 1, "completed");
    j.ready("w2")
        .started("w2", 1, 1)
        .fault("w2", Some(1), "truncate", 0);
    j.usage("w2", 1, 0.0).ended("w2", 1, "completed");
    j.emitted("w1", 2);
    j.emitted("w2", 2);
    let e = j.report().events;
    assert_eq!(
        (e.measured_sessions, e.emitted, e.journaled, e.lost),
        (2, 4, 2, 2)
    );
    assert_eq!((e.lost_to_faults, e.unexplained), (1, 1));
}

#[test]
fn retries_spend_is_what_the_attempts_before_the_last_cost() {
    let mut j = J::new(&["w1"]);
    j.ready("w1").started("w1", 1, 1).usage("w1", 1, 0.25);
    j.started("w1", 1, 2)
        .usage("w1", 1, 0.5)
        .ended("w1", 1, "completed");
    // As the journal writes it: the stream's `urn`, then the body's (the session's).
    let seq = j.seqs.get("cap://f/router").copied().unwrap_or(0) + 1;
    j.seqs.insert("cap://f/router".into(), seq);
    j.raw(&format!(
        "{{\"seq\":{seq},\"urn\":\"cap://f/router\",\"ts_ms\":9,\"type\":\"budget_exceeded\",\
         \"scope\":\"fleet\",\"limit_usd\":0.6,\"spent_usd\":0.75,\"overshoot_usd\":0.15,\
         \"urn\":\"cap://f/w1\",\"turn\":1}}"
    ));
    j.rec(
        "router",
        None,
        json!({"type": "run_ended", "outcome": "budget_exceeded"}),
    );
    let r = j.report();
    assert_eq!(verdict(&r, "no_lost_record").holds, Some(true), "{r}");
    let b = r.budget;
    assert_eq!(b.retry_spend_usd, 0.25);
    assert_eq!(
        (b.overshoot_usd, b.overshoot_from_retries_usd),
        (0.15, 0.15)
    );
}

#[test]
fn the_json_has_its_documented_shape_and_the_metrics_their_names() {
    let mut j = J::new(&["w1"]);
    j.ready("w1")
        .started("w1", 1, 1)
        .fault("w1", Some(1), "kill", 0);
    j.rec("w1", Some(1), json!({"type": "restart", "cause": {"kind": "signaled", "signal": 9}, "attempt": 1, "delay_ms": 0}));
    j.ready("w1").ended("w1", 1, "completed");
    let r = j.report();
    let v = serde_json::to_value(&r).unwrap();
    for key in [
        "schema",
        "journal",
        "outcome",
        "stop_reason",
        "faults",
        "turns",
        "sessions_failed",
        "events",
        "budget",
        "invariants",
        "holds",
    ] {
        assert!(v.get(key).is_some(), "{key} in {v}");
    }
    assert_eq!(v["schema"], SCHEMA);
    assert_eq!(v["faults"]["by_kind"]["kill"]["injected"], 1);
    assert_eq!(
        v["faults"]["list"][0]["detected_by"],
        "restart (signaled 9)"
    );
    assert_eq!(v["invariants"].as_array().unwrap().len(), 4);
    let text = r.openmetrics();
    for name in metrics::SERIES {
        assert!(text.contains(name), "{name} in {text}");
    }
    assert!(
        text.contains("capfleet_chaos_faults_injected_total{kind=\"kill\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("capfleet_chaos_invariant_holds{invariant=\"no_lost_record\"} 1"),
        "{text}"
    );
}

#[test]
fn the_orphan_check_finds_a_live_process_of_the_run_and_nothing_else() {
    let mut j = J::new(&["w1"]);
    j.ready("w1");
    let mut r = j.report();
    let me = std::process::id();
    let spawn = |marker: String| {
        use capfleet_wire::process::sweep::{MARKER_KEY, processes_with_marker};
        let child = std::process::Command::new("sleep")
            .arg("30")
            .env(MARKER_KEY, &marker)
            .spawn()
            .unwrap();
        // `spawn` returns once the exec began; the kernel shows the new environment
        // only when the exec is done (a busy machine has seen the check run first).
        let shown = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while processes_with_marker(MARKER_KEY, &marker).is_empty() {
            assert!(std::time::Instant::now() < shown, "{marker} never shown");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        child
    };
    // One of the run's session, marked by this (ended) capfleet; one of another fleet.
    let mut ours = spawn(format!("cap://f/w1#{me}.1"));
    let mut other = spawn(format!("cap://g/w1#{me}.2"));
    r.check_orphans(&[me]);
    let v = verdict(&r, "no_orphan_process").clone();
    ours.kill().unwrap();
    ours.wait().unwrap();
    assert_eq!(v.holds, Some(false), "{}", v.detail);
    assert!(v.detail.contains(&format!("{}", ours.id())), "{}", v.detail);
    assert!(!v.detail.contains("cap://g/"), "{}", v.detail);
    assert!(!r.holds);
    r.check_orphans(&[me]);
    other.kill().unwrap();
    other.wait().unwrap();
    assert_eq!(verdict(&r, "no_orphan_process").holds, Some(true));
    assert!(r.holds);
}

#[test]
fn a_joined_text_run_covers_the_sequence_numbers_it_joined() {
    let mut j = J::new(&["w1"]);
    j.ready("w1").started("w1", 1, 1);
    // seq 3 joins chunks 3..=5, as the journal's writer joins a text run.
    j.rec("w1", Some(1), json!({"type": "cap", "event": {"kind": "cap.text_chunk", "text": "abc"}, "chunks": 3, "last_seq": 5}));
    *j.seqs.get_mut("cap://f/w1").unwrap() = 5;
    j.ended("w1", 1, "completed");
    let r = j.report();
    let v = verdict(&r, "no_lost_record");
    assert_eq!(v.holds, Some(true), "{}", v.detail);
    assert!(v.detail.contains("7 events in sequence"), "{}", v.detail);
}

#[test]
fn an_exit_is_heard_between_its_turn_and_the_next() {
    let mut j = J::new(&["w1"]);
    j.ready("w1")
        .started("w1", 1, 1)
        .fault("w1", Some(1), "exit", 0);
    let fault_ts = j.ts;
    // The agent's input closed: it finishes the turn, then exits and is restarted.
    j.ended("w1", 1, "completed");
    j.rec(
        "w1",
        None,
        json!({"type": "restart", "cause": {"kind": "normal"}, "attempt": 1, "delay_ms": 0}),
    );
    j.ready("w1");
    let ready_ts = j.ts;
    j.started("w1", 2, 1);
    // A restart in the next turn is no longer the exit's.
    j.rec("w1", Some(2), json!({"type": "restart", "cause": {"kind": "signaled", "signal": 9}, "attempt": 1, "delay_ms": 0}));
    j.ready("w1").ended("w1", 2, "completed");
    let r = j.report();
    let f = &r.faults.list[0];
    assert_eq!(f.detected_by.as_deref(), Some("restart (normal)"));
    assert_eq!(f.ready_ms, Some(ready_ts - fault_ts));
    assert!(f.recovered);
}
