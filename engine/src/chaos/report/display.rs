//! The report for people: a block of aligned lines, a verdict line per invariant and a
//! last line saying whether they all hold.

use std::fmt::{self, Display, Formatter};

use super::{InFlight, KindSummary, Mttr, Report};

/// At most this many turns that did not complete (frames in flight) are listed.
const TURNS_SHOWN: usize = 10;

fn ms(m: &Mttr) -> String {
    match (m.p50_ms, m.p95_ms, m.max_ms) {
        (Some(a), Some(b), Some(c)) => format!("{a}/{b}/{c} ms"),
        _ => "-".to_owned(),
    }
}

fn row(f: &mut Formatter<'_>, kind: &str, k: &KindSummary) -> fmt::Result {
    writeln!(
        f,
        "  {kind:<12} {:>8} {:>8} {:>9}   {:<20} {}",
        k.injected,
        k.detected,
        k.recovered,
        ms(&k.mttr_ready),
        ms(&k.mttr_turn)
    )
}

impl Display for Report {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let outcome = self.outcome.as_deref().unwrap_or("not ended");
        writeln!(f, "chaos report: {} ({outcome})", self.journal.display())?;
        if let Some(r) = &self.stop_reason {
            writeln!(f, "stopped: {r}")?;
        }
        writeln!(f, "faults: {} injected", self.faults.total)?;
        if self.faults.total > 0 {
            writeln!(
                f,
                "  kind         injected detected recovered   to ready p50/p95/max to turn end"
            )?;
            for (kind, k) in &self.faults.by_kind {
                row(f, kind, k)?;
            }
            writeln!(
                f,
                "  MTTR, all kinds: to ready {}; to the turn's end {}",
                self.faults.mttr_ready, self.faults.mttr_turn
            )?;
        }
        let t = &self.turns;
        writeln!(
            f,
            "turns: {} started, {} completed, {} failed, {} cancelled, {} cut by a crash; {} retried",
            t.started, t.completed, t.failed, t.cancelled, t.cut_by_crash, t.retried
        )?;
        for x in t.not_completed.iter().take(TURNS_SHOWN) {
            let why = x.why.as_deref().unwrap_or("no reason recorded");
            writeln!(f, "  {} turn {}: {} ({why})", x.session, x.turn, x.outcome)?;
        }
        if t.not_completed.len() > TURNS_SHOWN {
            writeln!(f, "  … and {} more", t.not_completed.len() - TURNS_SHOWN)?;
        }
        for s in &self.sessions_failed {
            writeln!(f, "session failed: {}: {}", s.session, s.reason)?;
        }
        let e = &self.events;
        if e.measured_sessions == 0 {
            writeln!(f, "events: not measured (no agent counted what it emitted)")?;
        } else {
            writeln!(
                f,
                "events: {} results emitted by {} sessions, {} journaled; {} lost ({} to faults, {} unexplained)",
                e.emitted,
                e.measured_sessions,
                e.journaled,
                e.lost,
                e.lost_to_faults,
                e.unexplained
            )?;
            if e.unrecorded > 0 {
                writeln!(f, "  {} journaled results no agent recorded", e.unrecorded)?;
            }
            for x in e.in_flight_frames.iter().take(TURNS_SHOWN) {
                writeln!(f, "  {}", in_flight(x))?;
            }
            if e.in_flight_frames.len() > TURNS_SHOWN {
                let more = e.in_flight_frames.len() - TURNS_SHOWN;
                writeln!(f, "  … and {more} more frames in flight")?;
            }
        }
        let b = &self.budget;
        writeln!(
            f,
            "budget: retries spent ${:.4}; over budget by ${:.4}, ${:.4} of it from retries",
            b.retry_spend_usd, b.overshoot_usd, b.overshoot_from_retries_usd
        )?;
        for v in &self.invariants {
            let mark = match v.holds {
                Some(true) => "holds  ",
                Some(false) => "BROKEN ",
                None => "unknown",
            };
            writeln!(f, "invariant {mark} {}: {}", v.name, v.detail)?;
        }
        let broken = self
            .invariants
            .iter()
            .filter(|v| v.holds == Some(false))
            .count();
        if broken == 0 {
            write!(f, "verdict: every invariant checked holds")
        } else {
            write!(f, "verdict: {broken} invariant(s) broken")
        }
    }
}

/// `1 frame in flight at a kill (seed_pos 12): s03 pid 4242, not journaled`.
fn in_flight(x: &InFlight) -> String {
    let at = match &x.cut_by {
        Some(c) => match c.seed_pos {
            Some(p) => format!("at a {} (seed_pos {p})", c.kind),
            None => format!("at a {}", c.kind),
        },
        None => "with no fault in its window".to_owned(),
    };
    let fate = if x.journaled {
        "journaled all the same"
    } else if x.cut_by.is_some() {
        "not journaled, lost to the fault"
    } else {
        "not journaled: unexplained"
    };
    format!(
        "1 frame in flight {at}: {} pid {}, {fate}",
        x.session, x.pid
    )
}
