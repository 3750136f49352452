//! Runs distributed over NATS JetStream (the real `nats-server`): runs submitted with
//! `capfleet submit --nats` are taken by `capfleet worker`s, each run exactly once,
//! runs that require a label only by a worker that has it; an invalid fleet is never
//! queued; SIGTERM drains a worker; a worker killed mid-run has its runs taken over
//! by another from the journal JetStream keeps, within the lease's TTL, with the
//! durable-runs invariants; a three-node cluster that loses a node loses no run.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::nats::{NatsCluster, NatsServer, Worker, submit};
use crate::common::serve::{chatty, sim_fleet};
use crate::common::{EnvMarker, capfleet, wait_until, wait_within};

#[test]
fn fifty_runs_on_three_workers_each_end_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let nats = NatsServer::start();
    let url = nats.url();
    let m = EnvMarker::new("nats-runs");
    let work = d.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("fleet.toml"), sim_fleet("tiny", 1, m.pair())).unwrap();
    std::fs::write(work.join("script.toml"), chatty(2, 5)).unwrap();
    let mut workers = vec![
        Worker::start(&d.join("w0"), &url, &["--max-runs", "4"]),
        Worker::start(&d.join("w1"), &url, &["--max-runs", "4"]),
        Worker::start(&d.join("w2"), &url, &["--max-runs", "4", "--label", "gpu"]),
    ];
    // An invalid fleet is refused by the submitter (line and key), never queued.
    std::fs::write(work.join("bad.toml"), "[fleet]\nname = \"x\"\n").unwrap();
    let out = capfleet(&work)
        .args(["submit", "bad.toml", "--nats", &url])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fleet.task"));
    let plain: Vec<String> = (0..45).map(|_| submit(&work, &url, &[])).collect();
    let gpu: Vec<String> = (0..5)
        .map(|_| submit(&work, &url, &["--label", "gpu"]))
        .collect();
    let all: Vec<&String> = plain.iter().chain(&gpu).collect();
    let ends = || {
        let mut ends: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
        for (w, worker) in workers.iter().enumerate() {
            for (id, records) in worker.runs() {
                for r in records.iter().filter(|r| r["type"] == "run_ended") {
                    let outcome = r["outcome"].as_str().unwrap_or("").to_owned();
                    ends.entry(id.clone()).or_default().push((w, outcome));
                }
            }
        }
        ends
    };
    let done = wait_until(Duration::from_secs(180), Duration::from_millis(200), || {
        ends().len() >= all.len()
    });
    let ends = ends();
    assert!(
        done,
        "{} of {} runs ended; worker 0 said: {}",
        ends.len(),
        all.len(),
        workers[0].stderr()
    );
    // Each run ended once, on one worker, completed; no other run appeared.
    assert_eq!(ends.len(), all.len(), "{ends:?}");
    for id in &all {
        let e = &ends[id.as_str()];
        assert_eq!(e.len(), 1, "run {id} ended {e:?}");
        assert_eq!(e[0].1, "completed", "run {id}");
    }
    // The runs that require `gpu` went to the one worker with the label; every
    // worker took a share of the others.
    for id in &gpu {
        assert_eq!(ends[id.as_str()][0].0, 2, "gpu run {id}");
    }
    for w in 0..3 {
        let n = plain
            .iter()
            .filter(|id| ends[id.as_str()][0].0 == w)
            .count();
        assert!(n > 0, "worker {w} took none of the 45 runs");
    }
    // `capfleet workers` lists the three, with their labels and heartbeats.
    let out = capfleet(&work)
        .args(["workers", "--nats", &url, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 3, "{listed:?}");
    let gpu_workers: Vec<_> = listed
        .iter()
        .filter(|w| w["labels"] == serde_json::json!(["gpu"]))
        .collect();
    assert_eq!(gpu_workers.len(), 1, "{listed:?}");
    assert!(listed.iter().all(|w| w["beat_ms"].as_u64().unwrap() > 0));
    // SIGTERM drains each worker: it exits 0, and no agent is left.
    for w in &mut workers {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(w.child.id() as i32, libc::SIGTERM) };
        let status = wait_within(&mut w.child, Duration::from_secs(30));
        assert_eq!(status.code(), Some(0), "{}", w.stderr());
        assert!(w.stderr().contains("drained"), "{}", w.stderr());
    }
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}

/// Run `id`'s journal as JetStream keeps it (`capfleet log --nats --json`; asked
/// again while JetStream does not answer, as on a loaded cluster electing leaders).
pub(crate) fn published(dir: &std::path::Path, url: &str, id: &str) -> String {
    let mut last = String::new();
    for _ in 0..20 {
        let out = capfleet(dir)
            .args(["log", "--nats", url, "--json", id])
            .output()
            .unwrap();
        // 2: no record yet.
        if out.status.code() != Some(1) {
            return String::from_utf8(out.stdout).unwrap();
        }
        last = String::from_utf8_lossy(&out.stderr).into_owned();
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("capfleet log --nats {id}: {last}")
}

/// A chain `a -> b -> c` of sim sessions, each turn `ms` long, carrying `marker`.
fn chain(marker: (&str, &str), ms: u64) -> (String, String) {
    let (k, v) = marker;
    let mut fleet = "[fleet]\nname = \"chain\"\nstart = [\"a\"]\ntask = \"go\"\n".to_owned();
    for s in ["a", "b", "c"] {
        fleet.push_str(&format!(
            "\n[[sessions]]\nname = \"{s}\"\nagent = \"sim\"\nscript = \"turn.toml\"\nenv = {{ {k} = \"{v}\" }}\n"
        ));
    }
    fleet.push_str("\n[[routes]]\nwhen = [\"a.done\"]\nroute_to = \"b\"\n");
    fleet.push_str("\n[[routes]]\nwhen = [\"b.done\"]\nroute_to = \"c\"\n");
    let turn = format!("[[turn]]\nsteps = [{{ sleep_ms = {ms} }}, {{ say = \"done\\n\" }}]\n");
    (fleet, turn)
}

/// A run of [`chain`] (1.5 s turns) on NATS, for workers with `--lease-ttl` [`TTL`].
pub(crate) struct Chain {
    _dir: tempfile::TempDir,
    d: std::path::PathBuf,
    _nats: NatsServer,
    pub url: String,
    pub m: EnvMarker,
    pub work: std::path::PathBuf,
    max_runs: String,
}

/// The lease TTL of the takeover tests' workers (seconds).
pub(crate) const TTL: u64 = 3;

impl Chain {
    pub(crate) fn new(label: &str, max_runs: usize) -> Chain {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_owned();
        let nats = NatsServer::start();
        let url = nats.url();
        let m = EnvMarker::new(label);
        let work = d.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let (fleet, turn) = chain(m.pair(), 1500);
        std::fs::write(work.join("fleet.toml"), fleet).unwrap();
        std::fs::write(work.join("turn.toml"), turn).unwrap();
        Chain {
            _dir: dir,
            d,
            _nats: nats,
            url,
            m,
            work,
            max_runs: max_runs.to_string(),
        }
    }

    pub(crate) fn worker(&self, name: &str) -> Worker {
        self.worker_with(name, &[])
    }

    /// A worker with `extra` arguments too.
    pub(crate) fn worker_with(&self, name: &str, extra: &[&str]) -> Worker {
        let ttl = TTL.to_string();
        let mut args = vec![
            "--max-runs",
            self.max_runs.as_str(),
            "--lease-ttl",
            ttl.as_str(),
        ];
        args.extend_from_slice(extra);
        Worker::start(&self.d.join(name), &self.url, &args)
    }

    pub(crate) fn submit(&self) -> String {
        submit(&self.work, &self.url, &[])
    }

    /// Wait until every run of `ids` is under way on `on`, as JetStream has it: a
    /// delivery routed and published.
    pub(crate) fn under_way(&self, ids: &[String], on: &Worker) {
        assert!(
            wait_until(Duration::from_secs(60), Duration::from_millis(100), || ids
                .iter()
                .all(
                    |id| published(&self.work, &self.url, id).contains("\"type\":\"routed\"")
                )),
            "the runs did not get under way: {}",
            on.stderr()
        );
    }
}

/// Whether `w`'s journal of run `id` has a record of type `kind` yet.
pub(crate) fn has(w: &Worker, id: &str, kind: &str) -> bool {
    w.runs()
        .iter()
        .any(|(run, j)| run == id && j.iter().any(|r| r["type"] == kind))
}

#[test]
fn a_killed_workers_runs_are_taken_over_within_the_lease_ttl_and_complete_once() {
    let c = Chain::new("nats-takeover", 2);
    let mut a = c.worker("a");
    let ids: Vec<String> = (0..2).map(|_| c.submit()).collect();
    c.under_way(&ids, &a);
    let b = c.worker("b");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(a.child.id() as i32, libc::SIGKILL) };
    let killed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    wait_within(&mut a.child, Duration::from_secs(5));
    assert!(
        wait_until(Duration::from_secs(90), Duration::from_millis(100), || ids
            .iter()
            .all(|id| has(&b, id, "run_ended"))),
        "the runs were not taken over and completed: {}",
        b.stderr()
    );
    for id in &ids {
        let (_, j) = b.runs().into_iter().find(|(run, _)| run == id).unwrap();
        // Taken over (the journal replayed from JetStream, `a`'s records first)
        // within the lease's TTL and a second of pulling.
        let taken = j
            .iter()
            .find(|r| r["type"] == "lease_taken")
            .unwrap_or_else(|| panic!("run {id} was not taken over: {j:?}"));
        let after = taken["ts_ms"].as_u64().unwrap().saturating_sub(killed);
        assert!(
            after <= (TTL + 2) * 1000,
            "run {id} taken over {after} ms after the kill"
        );
        assert!(j.iter().any(|r| r["type"] == "routed"), "run {id}: {j:?}");
        // The durable invariants: nothing routed or completed twice; ended once.
        crate::common::durable::exactly_once(&j);
        let ends: Vec<_> = j.iter().filter(|r| r["type"] == "run_ended").collect();
        assert_eq!(ends.len(), 1, "run {id}: {ends:?}");
        assert_eq!(ends[0]["outcome"], "completed", "run {id}");
        assert_eq!(
            j.iter()
                .filter(|r| r["type"] == "turn_ended" && r["outcome"] == "completed")
                .count(),
            3,
            "run {id}: one completed turn per session"
        );
    }
    drop(b);
    c.m.wait_gone(Duration::from_secs(10), "the sim agents");
}

#[test]
fn a_cluster_that_loses_one_of_three_nodes_loses_no_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut cluster = NatsCluster::start();
    let urls = cluster.urls();
    let m = EnvMarker::new("nats-cluster");
    let work = d.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("fleet.toml"), sim_fleet("tiny", 1, m.pair())).unwrap();
    std::fs::write(work.join("script.toml"), chatty(3, 100)).unwrap();
    let args = [
        "--max-runs",
        "3",
        "--nats-replicas",
        "3",
        "--lease-ttl",
        "5",
    ];
    let workers = [
        Worker::start(&d.join("w0"), &urls, &args),
        Worker::start(&d.join("w1"), &urls, &args),
    ];
    let replicated = ["--nats-replicas", "3"];
    let mut ids: Vec<String> = (0..6).map(|_| submit(&work, &urls, &replicated)).collect();
    // One node of three goes (SIGKILL) while runs are queued and running; the
    // submissions and the heartbeats go on through the other two.
    cluster.kill(0);
    ids.extend((0..6).map(|_| submit(&work, &urls, &replicated)));
    // Each run completed once (a worker that could not renew its lease while the
    // cluster elected new leaders stopped its run there, interrupted, and another
    // worker took it over), and the journal JetStream keeps ended once.
    let completed = || {
        let mut ends: BTreeMap<String, usize> = BTreeMap::new();
        for w in &workers {
            for (id, records) in w.runs() {
                let n = records
                    .iter()
                    .filter(|r| r["type"] == "run_ended" && r["outcome"] == "completed")
                    .count();
                *ends.entry(id).or_default() += n;
            }
        }
        ends
    };
    let done = wait_until(Duration::from_secs(120), Duration::from_millis(200), || {
        ids.iter()
            .all(|id| completed().get(id).copied().unwrap_or(0) >= 1)
    });
    assert!(
        done,
        "not every run completed: {:?}; {}",
        completed(),
        workers[0].stderr()
    );
    let completed = completed();
    for id in &ids {
        assert_eq!(
            completed[id.as_str()],
            1,
            "run {id} completed {} times; w0: {}\nw1: {}",
            completed[id.as_str()],
            workers[0].stderr(),
            workers[1].stderr()
        );
        let text = published(&work, &urls, id);
        let ends = text
            .lines()
            .filter(|l| l.contains("\"type\":\"run_ended\""))
            .count();
        assert_eq!(ends, 1, "run {id}'s published journal ends {ends} times");
    }
    drop(workers);
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}

#[test]
fn a_partitioned_worker_writes_nothing_more_to_a_run_taken_over() {
    let c = Chain::new("nats-partition", 1);
    let a = c.worker("a");
    let id = c.submit();
    c.under_way(std::slice::from_ref(&id), &a);
    let b = c.worker("b");
    // `a` cut off: stopped past its lease's TTL, while `b` takes the run over.
    let pid = a.child.id() as i32;
    // SAFETY: signals to our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let took = wait_until(Duration::from_secs(30), Duration::from_millis(50), || {
        has(&b, &id, "lease_taken")
    });
    // Let `a` go on (before any assertion, so that it is never left stopped).
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert!(took, "b did not take the run over: {}", b.stderr());
    assert!(
        wait_until(Duration::from_secs(60), Duration::from_millis(100), || {
            has(&b, &id, "run_ended")
        }),
        "b did not complete the run: {}",
        b.stderr()
    );
    // `a` noticed, stopped the run's agents, and published nothing more: the journal
    // JetStream keeps is `b`'s, record for record (`a`'s first, as `b` replayed them).
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(100), || a
            .stderr()
            .contains("fenced")),
        "{}",
        a.stderr()
    );
    // ... and set its copy of the run aside: not the run's any more, never resumed
    // from nor listed as the run here.
    assert!(
        wait_until(Duration::from_secs(10), Duration::from_millis(100), || {
            !a.dir.join(".capfleet/runs").join(&id).exists()
                && std::fs::read_dir(a.dir.join(".capfleet/fenced")).is_ok_and(|mut d| {
                    d.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with(&id)))
                })
        }),
        "a's copy of the run was not set aside: {}",
        a.stderr()
    );
    std::thread::sleep(Duration::from_millis(500));
    let published: Vec<String> = published(&c.work, &c.url, &id)
        .lines()
        .map(str::to_owned)
        .collect();
    let local =
        std::fs::read_to_string(b.dir.join(".capfleet/runs").join(&id).join("journal.jsonl"))
            .unwrap();
    let local: Vec<&str> = local.lines().collect();
    assert_eq!(published, local, "the published journal is b's");
    let ends = published
        .iter()
        .filter(|l| l.contains("\"type\":\"run_ended\""))
        .count();
    assert_eq!(ends, 1);
    crate::common::durable::exactly_once(
        &published
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect::<Vec<_>>(),
    );
    drop(a);
    drop(b);
    c.m.wait_gone(Duration::from_secs(10), "the sim agents");
}
