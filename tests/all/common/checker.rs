//! The stop-anywhere checker (issue 36, point 6), shared by the suite
//! (`durable_checker`: a seed or two per series) and the bench
//! (`cargo bench --bench durable`: `CAPFLEET_CHECKER_SEEDS` seeds per series, 30 by
//! default). A [`Series`] stops a fleet at seeded moments — a time into its agents'
//! work, a count of journal lines, right after a chosen record or text — by a
//! signal (or two, the second while the first one's stop is under way), then each
//! resume too when it stops more than once, resumes it to the end and compares it
//! with an uninterrupted run of the same fleet: every delivery and turn once, the
//! same deliveries and their outcomes, the same completed turns per session, plan,
//! joins fired and usage and cost of the completed turns, all the usage journaled
//! being what the agents billed, the same work in every worktree as
//! `docs/guide/durability.md` promises it ([`same_work`]), the same commits with `--commit`, and `capfleet
//! runs` listing it `completed` at the journal's cost. A merge series kills
//! `capfleet merge` of a finished run's branches instead ([`checker_merge`]). A
//! failing seed panics with the series, the seed and every stop's moment, so that it
//! replays.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::EnvMarker;
use super::capfleet::journal_so_far;
use super::checker_merge::{self, Merged, wide};
use super::durable::{
    Moments, as_uninterrupted, diffs, emitted, journaled, mentioning, same_work, send, six, stop,
    usage_as_billed, waited_out,
};
use super::repo::Fixture;

/// Where a stop lands.
#[derive(Debug, Clone, Copy)]
pub(crate) enum At {
    /// A seeded time into the agents' work (from the start's first turn).
    Time,
    /// Once the journal holds a seeded number of lines more than at the start.
    Lines,
    /// Right after the start journals a record of this type (the seeded one of them).
    Record(&'static str),
    /// Right after the journal holds this text (the first start only; a later stop
    /// is timed).
    Text(&'static str),
    /// During `capfleet merge` of the finished run's session branches, one after
    /// another: a seeded session, a seeded time after its intent is journaled (or
    /// after its start, for one finishing a cut merge), or between sessions.
    Merge,
}

/// The fleet a series runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Fleet {
    /// `durable_kills`' six sessions: a plan, a mention, a join, a restart, routes.
    Six,
    /// `a` mentions `b` and keeps working 700 ms after its mention.
    Mention,
    /// Three sessions whose branches merge with checkouts of a few hundred files.
    Wide,
}

/// A series of the checker: a fleet, how it is stopped and where.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Series {
    pub name: &'static str,
    pub fleet: Fleet,
    pub signal: libc::c_int,
    pub at: At,
    /// Stops in a row: the first during the run, each other during the resume before.
    pub stops: usize,
    /// `run --commit`: the end-of-run pass commits each worktree.
    pub commit: bool,
    /// A second signal, a seeded time after the first (within 25 ms), if the stop
    /// it began is still under way.
    pub then: Option<libc::c_int>,
}

/// Every series the checker runs.
pub(crate) const SERIES: &[Series] = &[
    series("sigkill-time", Fleet::Six, libc::SIGKILL, At::Time, 1),
    series("sigint-time", Fleet::Six, libc::SIGINT, At::Time, 1),
    series("sigterm-time", Fleet::Six, libc::SIGTERM, At::Time, 1),
    series("sigkill-lines", Fleet::Six, libc::SIGKILL, At::Lines, 1),
    series(
        "sigkill-after-routed",
        Fleet::Six,
        libc::SIGKILL,
        At::Record("routed"),
        1,
    ),
    series(
        "sigkill-after-turn-ended",
        Fleet::Six,
        libc::SIGKILL,
        At::Record("turn_ended"),
        1,
    ),
    series("sigkill-resumes", Fleet::Six, libc::SIGKILL, At::Time, 3),
    series("sigterm-resumes", Fleet::Six, libc::SIGTERM, At::Time, 2),
    twice("sigint-sigint", libc::SIGINT, libc::SIGINT),
    twice("sigint-sigkill", libc::SIGINT, libc::SIGKILL),
    in_commit("sigkill-in-commit", At::Record("commit_started")),
    in_commit("sigkill-in-merge", At::Merge),
    Series {
        stops: 2,
        ..in_commit("sigkill-in-merges", At::Merge)
    },
    series(
        "sigkill-after-mention",
        Fleet::Mention,
        libc::SIGKILL,
        At::Text("@cap://b"),
        1,
    ),
    series(
        "sigterm-after-mention",
        Fleet::Mention,
        libc::SIGTERM,
        At::Text("@cap://b"),
        1,
    ),
];

const fn series(
    name: &'static str,
    fleet: Fleet,
    signal: libc::c_int,
    at: At,
    stops: usize,
) -> Series {
    Series {
        name,
        fleet,
        signal,
        at,
        stops,
        commit: false,
        then: None,
    }
}

/// `first`, then `second` during the stop, at a time, on the six sessions.
const fn twice(name: &'static str, first: libc::c_int, second: libc::c_int) -> Series {
    Series {
        then: Some(second),
        ..series(name, Fleet::Six, first, At::Time, 1)
    }
}

/// A `SIGKILL` `at` a moment of a run with `--commit`: its end-of-run pass, or a
/// merge of its branches after it (on the wide fleet).
const fn in_commit(name: &'static str, at: At) -> Series {
    let fleet = match at {
        At::Merge => Fleet::Wide,
        _ => Fleet::Six,
    };
    Series {
        commit: true,
        ..series(name, fleet, libc::SIGKILL, at, 1)
    }
}

/// A fleet in a fresh checkout, and the arguments that run it.
fn fixture(fleet: Fleet, m: &EnvMarker, emitted: &Path) -> (Fixture, &'static str) {
    match fleet {
        Fleet::Six => (six(m, emitted), "fleets/six.toml"),
        Fleet::Wide => (wide(m, emitted), "fleet.toml"),
        Fleet::Mention => (mentioning(m, emitted), "fleet.toml"),
    }
}

/// What a finished run is compared on.
#[derive(Debug, PartialEq)]
struct Outcome {
    deliveries: BTreeMap<String, String>,
    turns: BTreeMap<String, usize>,
    plan: BTreeMap<String, String>,
    joins: Vec<(u64, Vec<String>)>,
    /// Tokens in and out and cost (in nano-dollars: sums exact) per session.
    usage: BTreeMap<String, (u64, u64, i64)>,
    commits: BTreeMap<String, usize>,
}

fn outcome(j: &[Value]) -> Outcome {
    let str_of = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let mut o = Outcome {
        deliveries: BTreeMap::new(),
        turns: BTreeMap::new(),
        plan: BTreeMap::new(),
        joins: Vec::new(),
        usage: BTreeMap::new(),
        commits: BTreeMap::new(),
    };
    let mut completed = std::collections::HashSet::new();
    for r in j {
        match r["type"].as_str().unwrap_or_default() {
            "delivered" => {
                o.deliveries
                    .insert(str_of(&r["key"]), str_of(&r["outcome"]));
            }
            "turn_ended" if r["outcome"] == "completed" => {
                *o.turns.entry(str_of(&r["urn"])).or_default() += 1;
                completed.insert((str_of(&r["urn"]), r["turn"].as_u64()));
            }
            "plan_entry" => {
                o.plan.insert(str_of(&r["id"]), r["status"].to_string());
            }
            "join" if r["fired"] == true => {
                let mut arrived: Vec<String> = r["arrived"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(str_of)
                    .collect();
                arrived.sort();
                o.joins.push((r["route"].as_u64().unwrap_or(0), arrived));
            }
            "committed" => *o.commits.entry(str_of(&r["session"])).or_default() += 1,
            _ => {}
        }
    }
    // The usage of the turns that completed: what their agents billed for the work
    // that counts (a cut attempt's is billed too, and the budget counts it).
    for r in j
        .iter()
        .filter(|r| r["type"] == "cap" && r["event"]["kind"] == "cap.usage")
    {
        if completed.contains(&(str_of(&r["urn"]), r["turn"].as_u64())) {
            let u = o.usage.entry(str_of(&r["urn"])).or_default();
            u.0 += r["event"]["input_tokens"].as_u64().unwrap_or(0);
            u.1 += r["event"]["output_tokens"].as_u64().unwrap_or(0);
            u.2 += (r["event"]["cost_usd_estimate"].as_f64().unwrap_or(0.0) * 1e9).round() as i64;
        }
    }
    o.joins.sort();
    o
}

/// An uninterrupted run of a series' fleet: what a stopped one is compared with.
pub(crate) struct Whole {
    outcome: Outcome,
    diffs: BTreeMap<String, String>,
    lines: usize,
    records: BTreeMap<String, usize>,
    /// Its agents' work: from its first turn to its end.
    work: Duration,
    /// Its branches merged (a merge series).
    merged: Option<Merged>,
}

/// Run `s`'s fleet once without a stop.
pub(crate) fn whole(s: &Series) -> Whole {
    let m = EnvMarker::new(&format!("checker-{}", s.name));
    let usage = tempfile::tempdir().unwrap();
    let billed = usage.path().join("whole.jsonl");
    let (f, fleet) = fixture(s.fleet, &m, &billed);
    let t = Instant::now();
    let mut args = vec!["run", fleet];
    if s.commit {
        args.push("--commit");
    }
    let child = f.command(&args).stdout(Stdio::null()).spawn().unwrap();
    wait_for(&f, |j| j.iter().any(|r| r["type"] == "turn_started"));
    let starting = t.elapsed();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let work = t.elapsed().saturating_sub(starting);
    let j = f.journal();
    let (all, kept) = (emitted(&billed).0, journaled(&j));
    assert!(
        kept.within(all) && all.within(kept),
        "uninterrupted, all usage journaled: {kept:?} of {all:?}"
    );
    let mut records = BTreeMap::new();
    for r in &j {
        *records
            .entry(r["type"].as_str().unwrap_or_default().to_owned())
            .or_default() += 1;
    }
    Whole {
        outcome: outcome(&j),
        diffs: diffs(&f),
        lines: j.len(),
        records,
        work,
        merged: matches!(s.at, At::Merge).then(|| checker_merge::whole(&f)),
    }
}

/// Poll `f`'s journal (every 2 ms, at most 60 s) until `done` holds of it.
fn wait_for(f: &Fixture, mut done: impl FnMut(&[Value]) -> bool) {
    let t = Instant::now();
    while !done(&journal_so_far(f.path())) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the journal did not get there in 60 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Run seed `seed` of series `s` against `whole`: its stops' moments; panics, naming
/// the series, the seed and the moments, if the run stopped and resumed differs.
pub(crate) fn check(s: &Series, whole: &Whole, seed: u64) -> String {
    let mut moments = Vec::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        stopped_and_resumed(s, whole, seed, &mut moments)
    }));
    if let Err(e) = r {
        let why = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default();
        panic!(
            "checker: series {} seed {seed:#x} failed (stops: {}): {why}",
            s.name,
            moments.join("; ")
        );
    }
    moments.join("; ")
}

fn stopped_and_resumed(s: &Series, whole: &Whole, seed: u64, moments: &mut Vec<String>) {
    let m = EnvMarker::new(&format!("checker-{}-{seed}", s.name));
    let usage = tempfile::tempdir().unwrap();
    let billed = usage.path().join("cut.jsonl");
    let (f, fleet) = fixture(s.fleet, &m, &billed);
    let mut at = Moments(seed | 1);
    let mut args: Vec<String> = vec!["run".into(), fleet.into()];
    if s.commit {
        args.push("--commit".into());
    }
    if let Some(merged) = &whole.merged {
        // The run to its end, then its merges stopped.
        finished(&f, &args);
        checker_merge::cut(&f, merged, &mut at, s.stops, moments);
    } else {
        for i in 0..s.stops {
            if !stopped(s, whole, &f, &args, &mut at, i, moments) {
                break;
            }
            assert!(m.processes().is_empty(), "agents left: {:?}", m.processes());
            // A resume takes `--commit` from the run's journal.
            args = vec!["run".into(), "--resume".into(), f.run_id()];
        }
        finished(&f, &args);
    }
    let j = f.journal();
    let expected = whole
        .outcome
        .deliveries
        .iter()
        .filter(|(_, o)| *o == "completed")
        .map(|(k, _)| k.clone())
        .collect();
    as_uninterrupted(&j, &expected);
    let o = outcome(&j);
    assert_eq!(
        o, whole.outcome,
        "the run stopped and resumed against the uninterrupted one"
    );
    if let Err(e) = usage_as_billed(&j, &billed) {
        panic!("{e}");
    }
    if let Err(e) = same_work(&diffs(&f), &whole.diffs) {
        panic!("{e}");
    }
    let runs = f.capfleet(&["runs", "--json"]);
    let listed: Vec<Value> = String::from_utf8_lossy(&runs.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["state"], "completed", "capfleet runs: {listed:?}");
    let cost = listed[0]["cost_usd"].as_f64().unwrap_or(-1.0);
    assert!(
        (cost - journaled(&j).cost).abs() < 1e-9,
        "capfleet runs' cost {cost} against the journal's {:?}",
        journaled(&j)
    );
    assert!(m.processes().is_empty());
}

/// `capfleet <args>` in `f` to its end: exit 0.
fn finished(f: &Fixture, args: &[String]) {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let last = f.capfleet(&argv);
    assert_eq!(
        last.status.code(),
        Some(0),
        "the last start {args:?}: {}",
        String::from_utf8_lossy(&last.stderr)
    );
}

/// Start `i` of series `s` (`args`) in `f`, stopped at its seeded moment (said in
/// `moments`): false if the run ended first.
fn stopped(
    s: &Series,
    whole: &Whole,
    f: &Fixture,
    args: &[String],
    at: &mut Moments,
    i: usize,
    moments: &mut Vec<String>,
) -> bool {
    let before = journal_so_far(f.path());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = f
        .command(&argv)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let n = before.len();
    let work = whole.work.as_millis() as u64;
    let moment = match (s.at, i) {
        (At::Text(text), 0) => {
            wait_for(f, |j| {
                j[n.min(j.len())..]
                    .iter()
                    .any(|r| r.to_string().contains(text))
            });
            format!("right after the journal held {text:?}")
        }
        (At::Lines, _) => {
            let more = at.next(1, (whole.lines as u64 * 3 / 4).max(2)).as_millis() as usize;
            wait_for(f, |j| j.len() >= n + more || ended(j, n));
            format!("at {} journal lines (+{more})", n + more)
        }
        (At::Record(kind), _) => {
            let of = whole.records.get(kind).copied().unwrap_or(1).max(1) as u64;
            let k = at.next(1, of + 1).as_millis() as usize;
            let before_k = before.iter().filter(|r| r["type"] == kind).count();
            wait_for(f, |j| {
                j.iter().filter(|r| r["type"] == kind).count() >= before_k + k || ended(j, n)
            });
            format!("right after {kind} #{k} of this start")
        }
        (At::Time | At::Text(_) | At::Merge, _) => {
            wait_for(f, |j| {
                j[n.min(j.len())..]
                    .iter()
                    .any(|r| r["type"] == "turn_started")
                    || ended(j, n)
            });
            let d = at.next(work / 20, (work / 3).max(work / 20 + 1));
            std::thread::sleep(d);
            format!("{} ms into the agents' work", d.as_millis())
        }
    };
    if child.try_wait().unwrap().is_some() {
        moments.push(format!("stop {}: {moment}, after the run ended", i + 1));
        return false;
    }
    moments.push(format!("stop {} by signal {}: {moment}", i + 1, s.signal));
    let Some(second) = s.then else {
        stop(&mut child, s.signal, &moments.join("; "));
        return true;
    };
    // A clean stop takes some milliseconds: the second signal within 25 ms of the
    // first, unless capfleet ended before.
    send(&child, s.signal);
    let first = Instant::now();
    let d = Duration::from_micros(at.below(25_000));
    while first.elapsed() < d && child.try_wait().unwrap().is_none() {
        std::thread::sleep(Duration::from_micros(100));
    }
    let then = if child.try_wait().unwrap().is_none() {
        send(&child, second);
        format!("signal {second}")
    } else {
        "no signal (the stop had ended)".to_owned()
    };
    if let Some(last) = moments.last_mut() {
        last.push_str(&format!(", then {then} {} µs after it", d.as_micros()));
    }
    waited_out(&mut child, &moments.join("; "));
    true
}

/// The start past record `n` has ended its run.
fn ended(j: &[Value], n: usize) -> bool {
    j[n.min(j.len())..].iter().any(|r| r["type"] == "run_ended")
}

/// Seeds `0..n` of series `s`, each from `base`: per seed, its stops' moments or its
/// failure, naming its seed and moments (the bench goes on past one; the suite's
/// test panics).
pub(crate) fn seeds(s: &Series, base: u64, n: usize) -> Vec<Result<String, String>> {
    let whole = whole(s);
    (0..n as u64)
        .map(|i| {
            let seed = base.wrapping_add(i.wrapping_mul(0x9e37_79b9));
            std::panic::catch_unwind(|| check(s, &whole, seed))
                .map_err(|e| e.downcast_ref::<String>().cloned().unwrap_or_default())
        })
        .collect()
}
