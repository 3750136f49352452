//! Events lost: what the agents say they emitted against what the journal holds.
//!
//! A simulator records each turn result it writes (`--emitted`; a run's sims write to
//! `<run>/sim/<session>/emitted.jsonl`) in two lines: `frame` (its pid, process group
//! and time) *before* writing it, `written` once it is written and flushed. Each
//! result the journal has is one `cap.usage` record, matched to its frame by time: a
//! session's results come one turn after another, each journaled before the next
//! turn's prompt, so a record belongs to the last frame recorded before it (its own
//! is recorded before it is even written). A frame no record matches is lost, and
//! explained only thus:
//!
//! - a frame marked `written`: by a `garble` or `truncate` of that session's frames
//!   (reported as a parse failure), or a `self_kill` of capfleet before it journaled
//!   what it read — at most one lost frame per such fault;
//! - a frame *in flight* (recorded, never marked written: its process died between
//!   the two lines, the frame written whole, in part or not at all): only by a fault
//!   that ends a process wherever it is, inside that frame's window — a `kill`,
//!   `term` or `hang` (stopped, then killed by the turn timeout) of that very process
//!   (the fault's `group` is the frame's process group), journaled after the
//!   process's previous frame and before the session's next frame; or a `self_kill`
//!   of the same run (no `resumed` between the fault and the frame). An `exit` never
//!   explains one: the agent ends itself reading its input, never between the lines.
//!
//! A frame in flight the journal has is no loss (the reader got it before the kill).
//! A journal record no frame accounts for is `unrecorded` (a result journaled twice).

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::faults::Fault;

/// The file a run's simulator session appends its results to, under the run's directory.
pub const EMITTED: &str = "emitted.jsonl";

/// The fault kinds that can cut a frame in flight: each ends the agent's process
/// wherever it is.
const CUTS_IN_FLIGHT: [&str; 3] = ["kill", "term", "hang"];

/// Turn results emitted by the agents and journaled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Events {
    /// Sessions whose agent counted what it emitted (the others are not compared).
    pub measured_sessions: usize,
    /// Results the agents recorded (each just before writing it).
    pub emitted: u64,
    /// `cap.usage` records of those sessions.
    pub journaled: u64,
    /// Emitted, not journaled.
    pub lost: u64,
    /// Of those, explained by a fault (`garble`, `truncate`, `self_kill`; a frame in
    /// flight, by the signal fault that cut it).
    pub lost_to_faults: u64,
    /// Lost with no fault to explain it: the figure that must be 0.
    pub unexplained: u64,
    /// Results in flight when their process died (recorded, never marked written).
    pub in_flight: u64,
    /// Of those, the ones the journal has all the same.
    pub in_flight_journaled: u64,
    /// Journal records no recorded result accounts for (none expected).
    pub unrecorded: u64,
    /// Each result in flight, and the fault that cut it.
    pub in_flight_frames: Vec<InFlight>,
}

/// A result in flight when its process died.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InFlight {
    /// The session's name.
    pub session: String,
    pub pid: u32,
    /// When it was recorded, just before its write.
    pub ts_ms: u64,
    /// The journal has it (the reader got the frame before the process died).
    pub journaled: bool,
    /// The fault inside its window that ended its process, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_by: Option<CutBy>,
}

/// The fault that cut a frame in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CutBy {
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed_pos: Option<u64>,
    pub ts_ms: u64,
}

impl std::ops::AddAssign<&Events> for Events {
    /// The figures of several runs together.
    fn add_assign(&mut self, e: &Events) {
        self.measured_sessions += e.measured_sessions;
        self.emitted += e.emitted;
        self.journaled += e.journaled;
        self.lost += e.lost;
        self.lost_to_faults += e.lost_to_faults;
        self.unexplained += e.unexplained;
        self.in_flight += e.in_flight;
        self.in_flight_journaled += e.in_flight_journaled;
        self.unrecorded += e.unrecorded;
        self.in_flight_frames
            .extend(e.in_flight_frames.iter().cloned());
    }
}

/// A line of `emitted.jsonl`: a `frame` recorded, or its `written` mark. A line of
/// the older one-line format (neither) is a result written, recorded after.
#[derive(Debug, Default, Deserialize)]
struct Row {
    #[serde(default)]
    frame: Option<u64>,
    #[serde(default)]
    written: Option<u64>,
    #[serde(default)]
    pid: Option<u32>,
    #[serde(default)]
    pgid: Option<i32>,
    #[serde(default)]
    ts_ms: Option<u64>,
}

/// A result an agent recorded.
#[derive(Debug, Clone, Copy)]
struct Frame {
    pid: u32,
    pgid: i32,
    ts: Option<u64>,
    written: bool,
    /// When its process recorded the result before it (0: none).
    prev_ts: u64,
}

/// The results recorded in `text`, in time order.
fn frames(text: &str) -> Vec<Frame> {
    let mut out: Vec<Frame> = Vec::new();
    let mut open: HashMap<(u32, u64), usize> = HashMap::new();
    let mut last: HashMap<u32, u64> = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let row: Row = serde_json::from_str(line).unwrap_or_default();
        let pid = row.pid.unwrap_or(0);
        if let Some(n) = row.written {
            if let Some(&i) = open.get(&(pid, n)) {
                out[i].written = true;
            }
            continue;
        }
        let prev_ts = row.ts_ms.and_then(|ts| last.insert(pid, ts)).unwrap_or(0);
        if let Some(n) = row.frame {
            open.insert((pid, n), out.len());
        }
        out.push(Frame {
            pid,
            pgid: row.pgid.unwrap_or_else(|| i32::try_from(pid).unwrap_or(0)),
            ts: row.ts_ms,
            written: row.frame.is_none(),
            prev_ts,
        });
    }
    out.sort_by_key(|f| f.ts);
    out
}

/// Which of `frames` the journal has, given its `cap.usage` records' times: each
/// record is the last frame recorded at or before it (untimed frames, matched in
/// order); and the records no frame accounts for.
fn matched(frames: &[Frame], usage: &[u64]) -> (Vec<bool>, u64) {
    let mut hit = vec![false; frames.len()];
    if frames.iter().any(|f| f.ts.is_none()) {
        let n = usage.len().min(frames.len());
        hit[..n].fill(true);
        return (hit, (usage.len() - n) as u64);
    }
    let mut unrecorded = 0;
    for &u in usage {
        let at = frames.partition_point(|f| f.ts.is_some_and(|t| t <= u));
        match at.checked_sub(1) {
            Some(i) if !hit[i] => hit[i] = true,
            _ => unrecorded += 1,
        }
    }
    (hit, unrecorded)
}

/// The fault that cut frame `f` of session `urn` in flight, `next` the time of the
/// session's next frame: see the module's doc.
fn cut_in_flight<'a>(
    f: &Frame,
    next: Option<u64>,
    urn: &str,
    faults: &'a [Fault],
    resumed: &[u64],
) -> Option<&'a Fault> {
    let ts = f.ts?;
    let run = |t: u64| resumed.iter().filter(|&&r| r <= t).count();
    faults.iter().rev().find(|x| {
        let signal = x.urn == urn
            && CUTS_IN_FLIGHT.contains(&x.kind.as_str())
            && x.group == Some(f.pgid)
            && x.ts_ms >= f.prev_ts
            && next.is_none_or(|n| x.ts_ms <= n);
        signal || (x.kind == "self_kill" && run(x.ts_ms) == run(ts))
    })
}

/// Compare what each session of `sessions` (name, URN) emitted, under `run_dir`,
/// with `usage` (the times of its `cap.usage` records by URN), explained by `faults`
/// and the runs `resumed` at those times.
pub(super) fn compare(
    run_dir: &Path,
    sessions: &[(String, String)],
    usage: &HashMap<String, Vec<u64>>,
    faults: &[Fault],
    resumed: &[u64],
) -> Events {
    let crashes = faults.iter().filter(|f| f.kind == "self_kill").count() as u64;
    let mut e = Events::default();
    for (name, urn) in sessions {
        let path = run_dir.join("sim").join(name).join(EMITTED);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let frames = frames(&text);
        let journal = usage.get(urn).map_or(&[][..], Vec::as_slice);
        let (hit, unrecorded) = matched(&frames, journal);
        // Written frames lost: each `garble`, `truncate` of the session or
        // `self_kill` explains one.
        let mut cuts = crashes
            + faults
                .iter()
                .filter(|f| &f.urn == urn && matches!(f.kind.as_str(), "garble" | "truncate"))
                .count() as u64;
        e.measured_sessions += 1;
        e.emitted += frames.len() as u64;
        e.journaled += journal.len() as u64;
        e.unrecorded += unrecorded;
        for (i, (f, &journaled)) in frames.iter().zip(&hit).enumerate() {
            let cut = if f.written {
                None
            } else {
                let next = frames.get(i + 1).and_then(|n| n.ts);
                let cut = cut_in_flight(f, next, urn, faults, resumed);
                e.in_flight += 1;
                e.in_flight_journaled += u64::from(journaled);
                e.in_flight_frames.push(InFlight {
                    session: name.clone(),
                    pid: f.pid,
                    ts_ms: f.ts.unwrap_or(0),
                    journaled,
                    cut_by: cut.map(|x| CutBy {
                        kind: x.kind.clone(),
                        seed_pos: x.seed_pos,
                        ts_ms: x.ts_ms,
                    }),
                });
                cut
            };
            if journaled {
                continue;
            }
            e.lost += 1;
            let explained = if f.written {
                let spare = cuts > 0;
                cuts = cuts.saturating_sub(1);
                spare
            } else {
                cut.is_some()
            };
            if explained {
                e.lost_to_faults += 1;
            } else {
                e.unexplained += 1;
            }
        }
    }
    e
}
