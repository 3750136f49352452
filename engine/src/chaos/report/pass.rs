//! One pass over a journal, in its order: every record fed to the fault tracker, the
//! turn book, the per-stream sequence check and the route counts the report is made of.

use std::collections::{BTreeMap, HashMap};

use super::faults::{Fault, Tracker};
use super::line::{self, Line};
use super::{SessionFailure, TurnFailure};

/// A turn of a session, as its records told it.
#[derive(Debug, Default)]
pub(super) struct TurnBook {
    /// The record index of its first `turn_started`.
    pub start: usize,
    pub attempts: u32,
    /// `turn_ended`'s outcome.
    pub outcome: Option<String>,
    /// The last error or restart cause seen in it: why it failed, if it did.
    pub why: Option<String>,
    /// The usage cost reported in each attempt.
    pub cost: Vec<f64>,
}

/// What the pass found.
#[derive(Debug, Default)]
pub(super) struct Pass {
    /// Records read.
    pub index: usize,
    pub tracker: Tracker,
    /// Each stream's last sequence number.
    pub seqs: HashMap<String, u64>,
    /// Sequence gaps and repeats, as `urn: seq a then b`.
    pub seq_issues: Vec<String>,
    /// Turns by (URN, turn).
    pub turns: BTreeMap<(String, u32), TurnBook>,
    /// Each stream's turn in flight (its last `turn_started`).
    current: HashMap<String, u32>,
    /// Route keys routed, deliveries completed, turns completed: how often each.
    pub routed: HashMap<String, u32>,
    pub delivered: HashMap<String, u32>,
    pub completed: HashMap<(String, u32), u32>,
    pub failures: Vec<SessionFailure>,
    /// The time of each `cap.usage` record per stream, in journal order: the turn
    /// results the journal holds.
    pub usage: HashMap<String, Vec<u64>>,
    /// The run's sessions, by name.
    pub sessions: Vec<String>,
    /// The record index of the last `resumed`, the time of each, and torn lines
    /// those reported.
    pub last_resumed: Option<usize>,
    pub resumed_ts: Vec<u64>,
    pub torn_reported: u64,
    pub outcome: Option<String>,
    pub stop_reason: Option<String>,
    pub overshoot_usd: f64,
}

impl Pass {
    /// Check `seq` of stream `urn` follows the last one (a joined text run or a cut
    /// covers `seq..=last_seq`).
    fn sequence(&mut self, urn: &str, seq: Option<u64>, last_seq: Option<u64>) {
        let Some(seq) = seq.filter(|_| !urn.is_empty()) else {
            return;
        };
        let last = self.seqs.entry(urn.to_owned()).or_insert(0);
        if seq != *last + 1 {
            self.seq_issues
                .push(format!("{urn}: seq {} then {seq}", *last));
        }
        *last = (*last).max(seq).max(last_seq.unwrap_or(0));
    }

    /// A record [`Line`] cannot read (`budget_exceeded`, whose body repeats `urn`;
    /// a shape of a later version): its place in its stream, and an overshoot.
    pub(super) fn unread(&mut self, head: line::Head, v: &serde_json::Value) {
        self.index += 1;
        self.sequence(
            head.urn.as_deref().unwrap_or_default(),
            head.seq,
            head.last_seq,
        );
        if v["type"] == "budget_exceeded" {
            self.overshoot_usd += v["overshoot_usd"].as_f64().unwrap_or(0.0);
        }
    }

    /// Take one record.
    pub(super) fn record(&mut self, l: Line<'_>) {
        let i = self.index;
        self.index += 1;
        let urn = l.urn.as_deref().unwrap_or_default().to_owned();
        self.sequence(&urn, l.seq, l.last_seq);
        let ts = l.ts_ms.unwrap_or(0);
        match &*l.kind {
            "chaos" => self.tracker.injected(Fault {
                kind: l.fault.as_deref().unwrap_or("unknown").to_owned(),
                target: l.target.as_deref().unwrap_or_default().to_owned(),
                urn,
                turn: l.turn,
                seed_pos: l.seed_pos,
                ts_ms: ts,
                detail: l.detail,
                group: l.group,
                detected_by: None,
                ready_ms: None,
                turn_ms: None,
                recovered: false,
            }),
            "turn_started" => {
                let turn = l.turn.unwrap_or(0);
                self.tracker.turn_started(&urn);
                self.current.insert(urn.clone(), turn);
                let book = self.turns.entry((urn, turn)).or_insert_with(|| TurnBook {
                    start: i,
                    ..TurnBook::default()
                });
                book.attempts = book.attempts.max(l.attempt.unwrap_or(1));
                book.cost.push(0.0);
            }
            "turn_ended" => {
                let outcome = l.outcome.as_deref().unwrap_or("unknown").to_owned();
                let completed = outcome == "completed";
                if !completed {
                    self.tracker
                        .noticed(&urn, &format!("turn_ended {outcome}"), false);
                }
                self.tracker.turn_ended(&urn, l.turn, completed, ts);
                if let Some(turn) = l.turn {
                    if completed {
                        *self.completed.entry((urn.clone(), turn)).or_insert(0) += 1;
                    }
                    self.turns.entry((urn, turn)).or_default().outcome = Some(outcome);
                }
            }
            "restart" => {
                let what = match &l.cause {
                    Some(c) => format!("restart ({c})"),
                    None => "restart".to_owned(),
                };
                self.why(&urn, l.turn, &what);
                self.tracker.noticed(&urn, &what, true);
            }
            "paused" => self.tracker.noticed(&urn, "paused", false),
            "failed" => {
                let reason = l.reason.unwrap_or_default();
                self.tracker.failed(&urn, &reason);
                self.why(&urn, l.turn, &reason);
                self.failures.push(SessionFailure {
                    session: urn,
                    reason,
                });
            }
            "cap" => self.cap(&urn, l, ts),
            "routed" => {
                *self
                    .routed
                    .entry(l.key.unwrap_or_default().into())
                    .or_insert(0) += 1;
            }
            "delivered" if l.outcome.as_deref() == Some("completed") => {
                *self
                    .delivered
                    .entry(l.key.unwrap_or_default().into())
                    .or_insert(0) += 1;
            }
            "resumed" => {
                self.last_resumed = Some(i);
                self.resumed_ts.push(ts);
                self.torn_reported += u64::from(l.torn_bytes.is_some());
                self.tracker.resumed();
            }
            "session" => self.sessions.extend(l.name),
            // A single `urn` (a record written by hand): the usual one repeats it.
            "budget_exceeded" => self.overshoot_usd += l.overshoot_usd.unwrap_or(0.0),
            "stopping" => {
                self.outcome = l.outcome.map(Into::into);
                self.stop_reason = l.reason;
            }
            "run_ended" => {
                if let Some(o) = l.outcome {
                    self.outcome = Some(o.into());
                }
            }
            _ => {}
        }
    }

    fn cap(&mut self, urn: &str, l: Line<'_>, ts: u64) {
        let Some(ev) = l.event else { return };
        match &*ev.kind {
            line::READY => self.tracker.ready(urn, ts),
            line::ERROR => {
                let code = ev.code.as_deref().unwrap_or("error");
                let what = format!("cap.error {code}");
                let why = match &ev.message {
                    Some(m) => format!("{code}: {m}"),
                    None => code.to_owned(),
                };
                self.why(urn, l.turn, &why);
                self.tracker.noticed(urn, &what, false);
            }
            line::USAGE => {
                self.usage.entry(urn.to_owned()).or_default().push(ts);
                let turn = l.turn.or_else(|| self.current.get(urn).copied());
                if let Some(book) = turn.and_then(|t| self.turns.get_mut(&(urn.to_owned(), t)))
                    && let Some(c) = book.cost.last_mut()
                {
                    *c += ev.cost_usd_estimate.unwrap_or(0.0);
                }
            }
            _ => {}
        }
    }

    /// Note `why` as the latest trouble of `urn`'s turn (or its turn in flight).
    fn why(&mut self, urn: &str, turn: Option<u32>, why: &str) {
        let turn = turn.or_else(|| self.current.get(urn).copied());
        if let Some(book) = turn.and_then(|t| self.turns.get_mut(&(urn.to_owned(), t)))
            && book.outcome.is_none()
        {
            book.why = Some(why.to_owned());
        }
    }

    /// The turns that did not complete, and why.
    pub(super) fn turn_failures(&self) -> Vec<TurnFailure> {
        self.turns
            .iter()
            .filter(|(_, b)| b.outcome.as_deref() != Some("completed"))
            .map(|((urn, turn), b)| TurnFailure {
                session: urn.clone(),
                turn: *turn,
                outcome: b
                    .outcome
                    .clone()
                    .unwrap_or_else(|| self.unended(urn, b).to_owned()),
                why: b.why.clone(),
            })
            .collect()
    }

    /// What became of a turn of `urn` with no `turn_ended`: cut by a crash of capfleet
    /// (a resume followed it), or ended by its session's failure, or nothing said.
    pub(super) fn unended(&self, urn: &str, b: &TurnBook) -> &'static str {
        if self.last_resumed.is_some_and(|r| r > b.start) {
            "cut_by_crash"
        } else if self.failures.iter().any(|f| f.session == urn) {
            "session_failed"
        } else {
            "unended"
        }
    }
}
