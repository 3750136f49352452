//! What the durable-run tests check on a journal: the deliveries completed, that no
//! delivery is routed or completed twice and no turn completed twice; the seeded
//! kill moments they use; a stop of capfleet by a signal, waited out until none of
//! its agents lives; the demo fleet in a git checkout; each worktree's diff, and the
//! same work as `docs/guide/durability.md` promises it across cuts ([`same_work`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::time::Duration;

use serde_json::Value;

use super::EnvMarker;
use super::procs::processes_marked_by;
use super::repo::Fixture;
use super::wait_until;

/// The deliveries that completed, by key.
pub(crate) fn completed(j: &[Value]) -> BTreeSet<String> {
    j.iter()
        .filter(|r| r["type"] == "delivered" && r["outcome"] == "completed")
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect()
}

/// No key routed twice, no delivery nor session turn completed twice.
pub(crate) fn exactly_once(j: &[Value]) {
    let mut routed = HashMap::new();
    for r in j.iter().filter(|r| r["type"] == "routed") {
        let key = r["key"].as_str().unwrap();
        *routed.entry(key).or_insert(0) += 1;
    }
    assert!(routed.values().all(|&n| n == 1), "routed twice: {routed:?}");
    let mut done = HashMap::new();
    for r in j
        .iter()
        .filter(|r| r["type"] == "delivered" && r["outcome"] == "completed")
    {
        *done.entry(r["key"].as_str().unwrap()).or_insert(0) += 1;
    }
    assert!(
        done.values().all(|&n| n == 1),
        "a delivery completed twice: {done:?}"
    );
    let mut turns = HashMap::new();
    for r in j
        .iter()
        .filter(|r| r["type"] == "turn_ended" && r["outcome"] == "completed")
    {
        *turns
            .entry((r["urn"].to_string(), r["turn"].to_string()))
            .or_insert(0) += 1;
    }
    assert!(
        turns.values().all(|&n| n == 1),
        "a turn completed twice: {turns:?}"
    );
}

/// A run resumed after kills did what an uninterrupted one did: every delivery and
/// turn once, the `expected` deliveries completed, and the run ended `completed`.
pub(crate) fn as_uninterrupted(j: &[Value], expected: &BTreeSet<String>) {
    exactly_once(j);
    assert_eq!(
        completed(j),
        *expected,
        "the same deliveries completed as uninterrupted"
    );
    let ends: Vec<&Value> = j.iter().filter(|r| r["type"] == "run_ended").collect();
    assert_eq!(ends.last().expect("a run_ended")["outcome"], "completed");
}

/// A seeded generator of moments (xorshift), reproducible.
pub(crate) struct Moments(pub u64);

impl Moments {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A moment in `lo..hi` milliseconds.
    pub(crate) fn next(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next_u64() % (hi - lo))
    }
}

/// `n` kill moments within `span` (from 5% to 65% of it).
pub(crate) fn moments(seed: u64, n: usize, span: Duration) -> Vec<Duration> {
    let mut m = Moments(seed);
    (0..n)
        .map(|_| span.mul_f64(0.05 + (m.next_u64() % 600) as f64 / 1000.0))
        .collect()
}

/// Send `signal` to capfleet `child` and wait for it; then no agent it started may
/// outlive it by 1 s (asserted, `what` naming the stop).
pub(crate) fn stop(child: &mut Child, signal: libc::c_int, what: &str) -> ExitStatus {
    send(child, signal);
    waited_out(child, what)
}

/// Send `signal` to capfleet `child` (started by this test, not yet reaped).
pub(crate) fn send(child: &Child, signal: libc::c_int) {
    // SAFETY: kill(2) on the child this test started (not yet reaped).
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
}

/// Wait for capfleet `child` to end; then no agent it started may outlive it by 1 s
/// (asserted, `what` naming the stop).
pub(crate) fn waited_out(child: &mut Child, what: &str) -> ExitStatus {
    let status = child.wait().unwrap();
    assert!(
        wait_until(Duration::from_secs(1), Duration::from_millis(10), || {
            processes_marked_by(child.id()).is_empty()
        }),
        "{what}: agents outlive capfleet by 1 s: {:?}",
        processes_marked_by(child.id())
    );
    status
}

/// Tokens in and out and cost, summed.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Spend {
    pub input: u64,
    pub output: u64,
    pub cost: f64,
}

impl Spend {
    /// `v`'s tokens and its cost (`cost`: the field that holds it).
    fn add(&mut self, v: &Value, cost: &str) {
        self.input += v["input_tokens"].as_u64().unwrap_or(0);
        self.output += v["output_tokens"].as_u64().unwrap_or(0);
        self.cost += v[cost].as_f64().unwrap_or(0.0);
    }

    pub(crate) fn minus(self, o: Spend) -> Spend {
        Spend {
            input: self.input - o.input,
            output: self.output - o.output,
            cost: self.cost - o.cost,
        }
    }

    pub(crate) fn within(self, o: Spend) -> bool {
        self.input <= o.input && self.output <= o.output && self.cost <= o.cost + 1e-9
    }
}

/// What the journal's `cap.usage` events add up to.
pub(crate) fn journaled(j: &[Value]) -> Spend {
    let mut s = Spend::default();
    for r in j
        .iter()
        .filter(|r| r["type"] == "cap" && r["event"]["kind"] == "cap.usage")
    {
        s.add(&r["event"], "cost_usd_estimate");
    }
    s
}

/// What the sims recorded at `path` (`CAPFLEET_SIM_EMITTED`), in all (each result
/// is recorded before it is written, its `written` line after); and each agent
/// process's last result, in all.
pub(crate) fn emitted(path: &Path) -> (Spend, Spend) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut all = Spend::default();
    let mut last: BTreeMap<u64, Value> = BTreeMap::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v.get("written").is_some() {
            continue;
        }
        all.add(&v, "cost_usd");
        last.insert(v["pid"].as_u64().unwrap(), v);
    }
    let mut lasts = Spend::default();
    for v in last.values() {
        lasts.add(v, "cost_usd");
    }
    (all, lasts)
}

/// The usage journal `j` holds is what the sims billed (recorded at `emitted`): all
/// of it is in the journal but, at most, the last result of an agent killed with
/// capfleet before capfleet could journal it (or before the agent wrote it).
pub(crate) fn usage_as_billed(j: &[Value], emitted_at: &Path) -> Result<(), String> {
    let (all, lasts) = emitted(emitted_at);
    let kept = journaled(j);
    if kept.within(all) && all.minus(kept).within(lasts) {
        Ok(())
    } else {
        Err(format!(
            "journaled {kept:?}, emitted {all:?} (last results {lasts:?})"
        ))
    }
}

/// A git checkout with the demo fleet and its scripts in it (`fleets/demo.toml`).
pub(crate) fn demo() -> Fixture {
    let repo = Fixture::git_repo(&[("README.md", "a service\n")]);
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    std::fs::create_dir_all(repo.path().join("fleets")).unwrap();
    std::fs::create_dir_all(repo.path().join("sim")).unwrap();
    std::fs::copy(
        config.join("fleets/demo.toml"),
        repo.path().join("fleets/demo.toml"),
    )
    .unwrap();
    for s in [
        "fleet-planner",
        "fleet-worker-a",
        "fleet-worker-b",
        "fleet-reviewer",
    ] {
        let f = format!("{s}.toml");
        std::fs::copy(
            config.join("sim").join(&f),
            repo.path().join("sim").join(&f),
        )
        .unwrap();
    }
    repo
}

/// The demo fleet's four sessions, two more (`scout` from the start, routed to
/// `docs`; `docs` again after the reviewer), the marker and the usage file in each
/// session's environment.
pub(crate) fn six(m: &EnvMarker, emitted: &Path) -> Fixture {
    let repo = demo();
    // Each turn picked by its prompt: an agent restarted after a kill starts its
    // script again.
    let slow = |when: &str, say: &str, usd: &str| {
        format!(
            "[[turn]]\nmatch = \"{when}\"\nsteps = [{{ say = \"{say}\" }}, {{ sleep_ms = 150 }}, \
             {{ write = \"{say}.md\", content = \"{say}\\n\" }}, \
             {{ usage = {{ input_tokens = 300, output_tokens = 30, cost_usd = {usd} }} }}]\n"
        )
    };
    repo.write("sim/scout.toml", &slow("health", "scouted", "0.002"));
    repo.write(
        "sim/docs.toml",
        &(slow("scouted", "documented", "0.001") + slow("approved", "reviewed", "0.001").as_str()),
    );
    let (k, v) = m.pair();
    let env = format!(
        "env = {{ {k} = \"{v}\", CAPFLEET_SIM_EMITTED = \"{}\" }}\n",
        emitted.display()
    );
    let demo = repo.read("fleets/demo.toml");
    let mut fleet = demo
        .replace("name = \"demo\"", "name = \"six\"")
        .replace("start = \"planner\"", "start = [\"planner\", \"scout\"]")
        .replace("max_concurrent = 4", "max_concurrent = 6")
        .replace("cap://demo/", "cap://six/");
    // Every session with the marker and the usage file.
    fleet = fleet.replace("agent = \"sim\"\n", &format!("agent = \"sim\"\n{env}"));
    fleet.push_str(&format!(
        "\n[[sessions]]\nname = \"scout\"\nagent = \"sim\"\n{env}script = \"../sim/scout.toml\"\n\
         \n[[sessions]]\nname = \"docs\"\nagent = \"sim\"\n{env}script = \"../sim/docs.toml\"\n\
         \n[[routes]]\nwhen = [\"scout.done\"]\nroute_to = \"docs\"\n\
         \n[[routes]]\nwhen = [\"reviewer.done\"]\nroute_to = \"docs\"\n"
    ));
    repo.write("fleets/six.toml", &fleet);
    // Every turn takes a while: kills land mid-turn, and a turn completes only when
    // its process lives long enough.
    for s in [
        "fleet-planner",
        "fleet-worker-a",
        "fleet-worker-b",
        "fleet-reviewer",
        "scout",
        "docs",
    ] {
        let path = format!("sim/{s}.toml");
        let script = repo.read(&path);
        repo.write(
            &path,
            &script.replace("steps = [", "steps = [{ sleep_ms = 400 }, "),
        );
    }
    // The planner's plan names sessions by URN: of this fleet now.
    let planner = repo.read("sim/fleet-planner.toml");
    repo.write(
        "sim/fleet-planner.toml",
        &planner.replace("cap://demo/", "cap://six/"),
    );
    let worker = repo.read("sim/fleet-worker-a.toml");
    assert!(worker.contains("@cap://worker-b"), "the mention");
    repo
}

/// A git checkout with two sessions: `a` mentions `b` and keeps working 700 ms after
/// its mention; the marker and the usage file in each session's environment.
pub(crate) fn mentioning(m: &EnvMarker, emitted: &Path) -> Fixture {
    let f = Fixture::git_repo(&[("README.md", "x\n")]);
    let (k, v) = m.pair();
    f.write(
        "a.toml",
        "[[turn]]\nsteps = [{ say = \"@cap://b check the frame format\" }, \
         { sleep_ms = 700 }, { write = \"a.md\", content = \"a\\n\" }, { say = \"\\ndone\" }]\n",
    );
    f.write(
        "b.toml",
        "[[turn]]\nsteps = [{ sleep_ms = 100 }, { write = \"b.md\", content = \"b\\n\" }, \
         { say = \"checked\" }]\n",
    );
    let session = |n: &str| {
        format!(
            "[[sessions]]\nname = \"{n}\"\nagent = \"sim\"\nscript = \"{n}.toml\"\n\
             env = {{ {k} = \"{v}\", CAPFLEET_SIM_EMITTED = \"{}\" }}\n\n",
            emitted.display()
        )
    };
    f.write(
        "fleet.toml",
        &format!(
            "[fleet]\nname = \"f\"\nstart = \"a\"\ntask = \"go\"\n\n{}{}",
            session("a"),
            session("b")
        ),
    );
    f
}

/// The diff of each session's worktree in `f`'s last run, by session.
pub(crate) fn diffs(f: &Fixture) -> BTreeMap<String, String> {
    let dir = f.run_dir().join("artifacts");
    std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let d = std::fs::read_to_string(e.path().join("diff.patch")).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), d))
        })
        .collect()
}

/// A diff's changed lines per file: the distinct lines added, the distinct removed.
type Changes = BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)>;

fn changes(diff: &str) -> Changes {
    let mut c = Changes::new();
    let mut file = String::new();
    for line in diff.lines() {
        if let Some(f) = line.strip_prefix("+++ ") {
            file = f.trim_start_matches("b/").to_owned();
            c.entry(file.clone()).or_default();
        } else if line.starts_with("--- ") || line.starts_with("diff --git") {
            continue;
        } else if let Some(l) = line.strip_prefix('+') {
            c.entry(file.clone()).or_default().0.insert(l.to_owned());
        } else if let Some(l) = line.strip_prefix('-') {
            c.entry(file.clone()).or_default().1.insert(l.to_owned());
        }
    }
    c
}

/// The worktrees of a run cut and resumed hold the work of the uninterrupted one
/// (`whole`) as `docs/guide/durability.md` promises it: what a cut turn did stays in
/// its worktree and its re-issue may apply a non-idempotent edit again, so each session changed the
/// same files with the same lines, a line the uninterrupted run added maybe more
/// than once (an edit repeated), and nothing else. An error names the first session
/// whose work differs.
pub(crate) fn same_work(
    cut: &BTreeMap<String, String>,
    whole: &BTreeMap<String, String>,
) -> Result<(), String> {
    let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
    if names(cut) != names(whole) {
        return Err(format!(
            "sessions with a diff: {:?} against {:?}",
            names(cut),
            names(whole)
        ));
    }
    for (session, d) in cut {
        if d == &whole[session] {
            continue;
        }
        let (c, w) = (changes(d), changes(&whole[session]));
        if c != w {
            return Err(format!(
                "{session}'s work differs:\n--- cut and resumed\n{d}\n--- uninterrupted\n{}",
                whole[session]
            ));
        }
    }
    Ok(())
}

#[test]
fn an_edit_repeated_is_the_same_work_a_missing_or_foreign_one_is_not() {
    let diff = |added: &[&str]| {
        let mut d =
            "diff --git a/t.rs b/t.rs\n--- a/t.rs\n+++ b/t.rs\n@@ -1,2 +1,9 @@\n fn a() {}\n"
                .to_owned();
        for l in added {
            d.push_str(&format!("+{l}\n"));
        }
        BTreeMap::from([("worker-b".to_owned(), d)])
    };
    let whole = diff(&["#[test]", "fn test_503() {}"]);
    assert!(same_work(&whole, &whole).is_ok());
    let twice = diff(&["#[test]", "fn test_503() {}", "#[test]", "fn test_503() {}"]);
    assert!(same_work(&twice, &whole).is_ok(), "an edit applied again");
    assert!(
        same_work(&diff(&["#[test]"]), &whole).is_err(),
        "one missing"
    );
    let foreign = diff(&["#[test]", "fn test_503() {}", "fn other() {}"]);
    assert!(same_work(&foreign, &whole).is_err(), "one no run made");
    assert!(
        same_work(&BTreeMap::new(), &whole).is_err(),
        "a session's work lost"
    );
}
