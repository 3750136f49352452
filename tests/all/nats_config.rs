//! `config/`'s deployment examples run for real: the three NATS nodes of
//! `config/nats/compose.yaml` (each service's own command, with the real
//! `nats-server`, on loopback: its ports remapped, its store a temp dir, its token
//! the compose default) form a JetStream cluster, and the worker that
//! `config/capfleet-worker.service` starts (its `ExecStart`, its hosts mapped to
//! those nodes) takes a run queued there with three replicas and completes it; the
//! unit passes `systemd-analyze verify`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use yaml_rust2::YamlLoader;

use crate::common::nats::{NatsCluster, Worker, free_port, submit_env};
use crate::common::serve::{chatty, sim_fleet};
use crate::common::{BIN, EnvMarker, repo_root, wait_until, wait_within};

/// The compose file's token default (`${CAPFLEET_NATS_TOKEN:-change-me}`).
const TOKEN: &str = "change-me";

/// Each compose service's command, by service name, its variables given their
/// defaults, split into words.
fn compose_commands(path: &Path) -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = &YamlLoader::load_from_str(&text).expect("compose.yaml is YAML")[0];
    let default = regex::Regex::new(r"\$\{[A-Z_]+:-([^}]*)\}").unwrap();
    doc["services"]
        .as_hash()
        .expect("services")
        .iter()
        .map(|(name, svc)| {
            let command = svc["command"].as_str().expect("a command");
            let command = default.replace_all(command, "$1");
            (
                name.as_str().unwrap().to_owned(),
                command.split_whitespace().map(str::to_owned).collect(),
            )
        })
        .collect()
}

/// The unit's `ExecStart`, its continuation lines joined, split into words.
fn exec_start(unit: &str) -> Vec<String> {
    let joined = unit.replace("\\\n", " ");
    let line = joined
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart");
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn the_compose_cluster_runs_and_the_worker_unit_takes_a_run_from_it() {
    let root = repo_root();
    let commands = compose_commands(&root.join("config/nats/compose.yaml"));
    assert_eq!(commands.len(), 3, "{commands:?}");
    let names: Vec<String> = commands.keys().cloned().collect();
    // Each service's client port, and its cluster port, on loopback.
    let client: BTreeMap<&str, u16> = names.iter().map(|n| (n.as_str(), free_port())).collect();
    let route: BTreeMap<&str, u16> = names.iter().map(|n| (n.as_str(), free_port())).collect();
    let remap = |word: &str| {
        let mut w = word.replace("0.0.0.0:6222", "HOST:6222");
        for n in &names {
            w = w.replace(
                &format!("{n}:6222"),
                &format!("127.0.0.1:{}", route[n.as_str()]),
            );
        }
        w
    };
    let mut ports = Vec::new();
    let mut args = Vec::new();
    for (name, words) in &commands {
        let mut out = Vec::new();
        let mut it = words.iter();
        while let Some(w) = it.next() {
            match w.as_str() {
                // The store is the harness's temp dir; JetStream it turns on itself.
                "--sd" => {
                    it.next();
                }
                "--js" => {}
                _ => out.push(
                    remap(w).replace("HOST:6222", &format!("127.0.0.1:{}", route[name.as_str()])),
                ),
            }
        }
        assert!(out.iter().any(|w| w == "--auth"), "{name}: {words:?}");
        ports.push(client[name.as_str()]);
        args.push(out);
    }
    let cluster = NatsCluster::of(ports, args);
    let urls = cluster.urls();

    // The worker unit's ExecStart, against that cluster.
    let unit_path = root.join("config/capfleet-worker.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    let words = exec_start(&unit);
    assert_eq!(words[0], "/usr/local/bin/capfleet");
    assert_eq!(words[1], "worker");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let repos = d.join("repos");
    std::fs::create_dir_all(&repos).unwrap();
    let mut worker_args: Vec<String> = Vec::new();
    let mut it = words[2..].iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            // Given by the harness: the cluster's URLs for the unit's hosts.
            "--nats" => {
                let hosts = it.next().unwrap();
                assert_eq!(hosts, "nats://n1:4222,nats://n2:4222,nats://n3:4222");
            }
            "--allow-root" => {
                it.next();
                worker_args.extend(["--allow-root".to_owned(), repos.display().to_string()]);
            }
            "--metrics-addr" => {
                it.next();
                worker_args.extend(["--metrics-addr".to_owned(), "127.0.0.1:0".to_owned()]);
            }
            _ => worker_args.push(w.clone()),
        }
    }
    assert!(
        worker_args
            .windows(2)
            .any(|w| w == ["--nats-replicas", "3"]),
        "{worker_args:?}"
    );
    // The worker reads the token from its environment (the unit's EnvironmentFile).
    let m = EnvMarker::new("nats-config");
    let w_dir = d.join("var-lib-capfleet");
    let rest: Vec<&str> = worker_args.iter().map(String::as_str).collect();
    let mut worker = Worker::start_env(&w_dir, &urls, &rest, &[("CAPFLEET_NATS_TOKEN", TOKEN)]);
    let work = d.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("fleet.toml"), sim_fleet("tiny", 1, m.pair())).unwrap();
    std::fs::write(work.join("script.toml"), chatty(2, 5)).unwrap();
    let id = submit_env(
        &work,
        &urls,
        &["--nats-replicas", "3"],
        &[("CAPFLEET_NATS_TOKEN", TOKEN)],
    );
    assert!(
        wait_until(Duration::from_secs(60), Duration::from_millis(100), || {
            worker
                .runs()
                .iter()
                .any(|(run, j)| *run == id && j.iter().any(|r| r["type"] == "run_ended"))
        }),
        "{}",
        worker.stderr()
    );
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(worker.child.id() as i32, libc::SIGTERM) };
    let status = wait_within(&mut worker.child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", worker.stderr());
    m.wait_gone(Duration::from_secs(10), "the sim agents");

    // systemd's own check of the unit, its binary the one under test.
    let copy = d.join("capfleet-worker.service");
    std::fs::write(&copy, unit.replace("/usr/local/bin/capfleet", BIN)).unwrap();
    match Command::new("systemd-analyze")
        .args(["verify"])
        .arg(&copy)
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "systemd-analyze verify: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => eprintln!("systemd-analyze is not installed ({e}): the unit is not verified"),
    }
}
