//! The report's verdicts (Jepsen's way: invariants checked after the faults, not just
//! "it did not crash"), one per invariant:
//!
//! - `no_lost_record`: every stream's sequence runs from 1 without a gap or a repeat,
//!   and no line of the journal is broken — a torn last line only where a resume
//!   reported it (`resumed.torn_bytes`) and cut it;
//! - `no_orphan_process`: no live process carries the marker of one of the run's
//!   sessions (`CAPFLEET_AGENT=<urn>#<capfleet pid>.<n>`) for a capfleet of the run
//!   that has ended, or that is gone (checked on this machine, when asked);
//! - `no_duplicate_route`: every delivery key routed once, completed at most once, and
//!   no turn completed twice;
//! - `every_turn_explicit`: every turn started ended (`turn_ended`), or its session
//!   failed saying why, or a crash of capfleet cut it and a resume took it over.

use serde::Serialize;

use super::pass::Pass;
use crate::journal::replay::Tail;
use capfleet_wire::process::sweep;

/// One invariant's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// `no_lost_record`, `no_orphan_process`, `no_duplicate_route`,
    /// `every_turn_explicit`.
    pub name: &'static str,
    /// `None`: not checked (the orphan check, off this machine or mid-run).
    pub holds: Option<bool>,
    /// What was checked, or what broke it (the first few cases).
    pub detail: String,
}

/// Cases listed in a verdict's detail, at most.
const SHOWN: usize = 5;

fn listed(what: &str, cases: &[String]) -> String {
    let shown: Vec<&str> = cases.iter().take(SHOWN).map(String::as_str).collect();
    let more = cases.len().saturating_sub(SHOWN);
    let tail = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!("{} {what}: {}{tail}", cases.len(), shown.join("; "))
}

fn verdict(name: &'static str, cases: Vec<String>, what: &str, fine: String) -> Verdict {
    Verdict {
        name,
        holds: Some(cases.is_empty()),
        detail: if cases.is_empty() {
            fine
        } else {
            listed(what, &cases)
        },
    }
}

pub(super) fn no_lost_record(pass: &Pass, tail: &Tail) -> Verdict {
    let mut cases = pass.seq_issues.clone();
    if tail.corrupt > 0 {
        cases.push(format!(
            "{} broken line(s) inside the journal",
            tail.corrupt
        ));
    }
    if let Some(t) = tail.torn {
        cases.push(format!(
            "a torn last line ({} bytes at offset {}) no resume reported",
            t.bytes, t.offset
        ));
    }
    let records: u64 = pass.seqs.values().sum();
    let fine = format!(
        "{} streams, {records} events in sequence without a gap{}",
        pass.seqs.len(),
        match pass.torn_reported {
            0 => String::new(),
            n => format!("; {n} torn line(s) reported and cut by a resume"),
        }
    );
    verdict("no_lost_record", cases, "sequence breaks", fine)
}

pub(super) fn no_duplicate_route(pass: &Pass) -> Verdict {
    let twice = |what: &str, m: &std::collections::HashMap<String, u32>| {
        let mut v: Vec<String> = m
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(k, n)| format!("{k} {what} {n} times"))
            .collect();
        v.sort();
        v
    };
    let mut cases = twice("routed", &pass.routed);
    cases.extend(twice("completed", &pass.delivered));
    let mut turns: Vec<String> = pass
        .completed
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|((urn, t), n)| format!("{urn} turn {t} completed {n} times"))
        .collect();
    turns.sort();
    cases.extend(turns);
    let fine = format!(
        "{} delivery keys routed once, {} completed once",
        pass.routed.len(),
        pass.delivered.len()
    );
    verdict("no_duplicate_route", cases, "duplicates", fine)
}

pub(super) fn every_turn_explicit(pass: &Pass) -> Verdict {
    let cases: Vec<String> = pass
        .turns
        .iter()
        .filter(|((urn, _), b)| b.outcome.is_none() && pass.unended(urn, b) == "unended")
        .map(|((urn, t), _)| format!("{urn} turn {t} never ended"))
        .collect();
    let fine = format!(
        "{} turns, each completed, failed or cut and taken over explicitly",
        pass.turns.len()
    );
    verdict("every_turn_explicit", cases, "turns without an end", fine)
}

/// Whether a process `pid` exists.
fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 only checks for existence.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The live processes marked for one of `urns` by a capfleet in `ended` (whose run
/// is over) or one no longer alive: the run's orphans, as `pid (marker)`.
pub(crate) fn orphans(urns: &[String], ended: &[u32]) -> Vec<String> {
    sweep::scan(sweep::MARKER_KEY, |v| {
        let Some(at) = v.iter().rposition(|b| *b == b'#') else {
            return false;
        };
        let ours = urns.iter().any(|u| u.as_bytes() == &v[..at]);
        ours && sweep::marker_owner(v).is_some_and(|o| ended.contains(&o) || !alive(o))
    })
    .into_iter()
    .map(|(pid, v)| format!("{pid} ({})", String::from_utf8_lossy(&v)))
    .collect()
}

pub(super) fn no_orphan_process(found: Option<Vec<String>>) -> Verdict {
    match found {
        None => Verdict {
            name: "no_orphan_process",
            holds: None,
            detail: "not checked (the run is still going, or its processes are not on this \
                     machine)"
                .to_owned(),
        },
        Some(cases) => verdict(
            "no_orphan_process",
            cases,
            "processes of the run still alive",
            "no process of the run's agents is alive".to_owned(),
        ),
    }
}
