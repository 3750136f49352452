//! Each injected fault followed through the records after it: what noticed it, when
//! its session was up again (`cap.session.ready`), whether the turn it hit completed.
//!
//! A fault is on its target's stream (`self_kill` on the fleet's router stream). After
//! it, on that stream:
//! - *detected* by the first record that shows the driver or session noticed: a
//!   `restart` (death, hang past the turn timeout), `failed`, a `cap.error`
//!   (`parse_failed` of a garbled frame, `agent_exited`, a connection's error), a
//!   `paused`, or a turn ended other than completed; `self_kill` by the `resumed` of
//!   the run that took over;
//! - *ready* (MTTR to ready) at the first `cap.session.ready` after a restart it caused
//!   (a fault that took nothing down has no time to ready); `self_kill`: the first
//!   ready of any session after the resume;
//! - *recovered* (MTTR to the turn) when the turn it hit completed (`turn_ended`
//!   `completed`); a fault between turns, when the session's next turn completed, or
//!   when the session was still serving at the end; never once the session `failed`.
//!
//! A fault decided by its turn's end is still heard until the stream's next turn
//! starts: an `exit` (the agent's input closed) on an agent that finishes the turn in
//! flight first (Claude Code) lets the turn complete, and the agent's exit, its restart
//! and the ready after come between the turns; one that exits at once (the sim with
//! `exit_at_eof`) is a restart mid-turn, the turn retried.

use std::collections::HashMap;

use serde::Serialize;

/// One injected fault and what followed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fault {
    /// The fault's kind (`kill`, `garble`, `self_kill`, …).
    pub kind: String,
    /// The target as journaled (a session's name, `capfleet`).
    pub target: String,
    /// The stream it is journaled on.
    pub urn: String,
    /// The turn in flight when it was injected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Its position in the seeded sequence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed_pos: Option<u64>,
    pub ts_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// A signal fault's target: the agent's process group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<i32>,
    /// The record that showed it was noticed (`restart (signaled 9)`,
    /// `cap.error parse_failed`, `resumed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detected_by: Option<String>,
    /// Fault to the next `cap.session.ready`, when it took the agent down.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_ms: Option<u64>,
    /// Fault to the completion of the turn it hit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_ms: Option<u64>,
    pub recovered: bool,
}

/// Where a fault is in its follow-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for what noticed it, the ready, the turn's end.
    Open,
    /// Its agent was restarted (or the run resumed): the next ready is its recovery.
    Down,
    /// Decided.
    Closed,
}

/// The faults of a journal, followed as its records are read.
#[derive(Debug, Default)]
pub(super) struct Tracker {
    pub faults: Vec<Fault>,
    phase: Vec<Phase>,
    /// Its turn ended (recovered or not): closed when the stream's next turn starts.
    decided: Vec<bool>,
    /// Open faults by stream.
    open: HashMap<String, Vec<usize>>,
    /// `self_kill`s waiting for the resume, then for the first ready and turn.
    crashes: Vec<usize>,
}

impl Tracker {
    /// A `chaos` record.
    pub(super) fn injected(&mut self, fault: Fault) {
        let i = self.faults.len();
        if fault.kind == "self_kill" {
            self.crashes.push(i);
        } else {
            self.open.entry(fault.urn.clone()).or_default().push(i);
        }
        self.faults.push(fault);
        self.phase.push(Phase::Open);
        self.decided.push(false);
    }

    fn each_open(&mut self, urn: &str, mut f: impl FnMut(&mut Fault, &mut Phase, &mut bool)) {
        if let Some(list) = self.open.get_mut(urn) {
            for &i in list.iter() {
                f(
                    &mut self.faults[i],
                    &mut self.phase[i],
                    &mut self.decided[i],
                );
            }
            list.retain(|&i| self.phase[i] != Phase::Closed);
        }
    }

    /// A turn of `urn` started: the faults its last turn decided are closed.
    pub(super) fn turn_started(&mut self, urn: &str) {
        self.each_open(urn, |_, p, decided| {
            if *decided {
                *p = Phase::Closed;
            }
        });
    }

    /// A record that shows `urn`'s driver or session noticed something (`what`);
    /// `down` when its agent is being restarted.
    pub(super) fn noticed(&mut self, urn: &str, what: &str, down: bool) {
        self.each_open(urn, |f, p, _| {
            if f.detected_by.is_none() {
                f.detected_by = Some(what.to_owned());
            }
            if down {
                *p = Phase::Down;
            }
        });
    }

    /// `cap.session.ready` on `urn` at `ts`.
    pub(super) fn ready(&mut self, urn: &str, ts: u64) {
        self.each_open(urn, |f, p, _| {
            if *p == Phase::Down && f.ready_ms.is_none() {
                f.ready_ms = Some(ts.saturating_sub(f.ts_ms));
                *p = Phase::Open;
            }
        });
        for &i in &self.crashes {
            let f = &mut self.faults[i];
            if self.phase[i] == Phase::Down && f.ready_ms.is_none() {
                f.ready_ms = Some(ts.saturating_sub(f.ts_ms));
            }
        }
    }

    /// Turn `turn` of `urn` ended at `ts`, `completed` or not.
    pub(super) fn turn_ended(&mut self, urn: &str, turn: Option<u32>, completed: bool, ts: u64) {
        self.each_open(urn, |f, _, decided| {
            // A fault between turns is decided by the next turn that ends.
            if *decided || (f.turn.is_some() && f.turn != turn) {
                return;
            }
            if completed {
                f.recovered = true;
                f.turn_ms = Some(ts.saturating_sub(f.ts_ms));
            }
            *decided = true;
        });
        if completed {
            for &i in &self.crashes {
                let f = &mut self.faults[i];
                if self.phase[i] == Phase::Down && f.turn_ms.is_none() {
                    f.turn_ms = Some(ts.saturating_sub(f.ts_ms));
                }
            }
        }
    }

    /// The session of `urn` failed for good: its open faults are not recovered.
    pub(super) fn failed(&mut self, urn: &str, reason: &str) {
        self.each_open(urn, |f, p, _| {
            if f.detected_by.is_none() {
                f.detected_by = Some(format!("failed: {reason}"));
            }
            *p = Phase::Closed;
        });
    }

    /// A resumed run took over: every `self_kill` before it was noticed and recovered.
    pub(super) fn resumed(&mut self) {
        for &i in &self.crashes {
            if self.phase[i] == Phase::Open {
                let f = &mut self.faults[i];
                f.detected_by = Some("resumed".to_owned());
                f.recovered = true;
                self.phase[i] = Phase::Down;
            }
        }
    }

    /// The journal ended: a fault between turns whose session never failed is
    /// recovered (it kept serving); one whose turn never ended is not.
    pub(super) fn finish(&mut self) {
        for list in self.open.values() {
            for &i in list {
                let f = &mut self.faults[i];
                if f.turn.is_none() && !self.decided[i] && self.phase[i] == Phase::Open {
                    f.recovered = true;
                }
            }
        }
        self.open.clear();
    }
}
