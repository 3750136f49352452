//! `capfleet submit`: the CI client submits a fleet with the files it names, follows
//! the run's events (the journal, record for record) and exits with the run's exit
//! code; invalid fleets and refused tokens are usage errors; `capfleet runs --server`
//! lists the server's runs.

use serde_json::Value;

use crate::common::serve::{Server, add_token, chatty, sim_fleet};
use crate::common::{EnvMarker, capfleet};

#[test]
fn submit_follows_the_run_and_exits_with_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let runner = add_token(d, "ci", "run");
    let m = EnvMarker::new("serve-submit");
    let server = Server::start(d, &["--token-file", "tokens.txt"]);
    let url = format!("http://127.0.0.1:{}", server.port);
    let work = d.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("fleet.toml"), sim_fleet("quick", 2, m.pair())).unwrap();
    std::fs::write(work.join("script.toml"), chatty(20, 10)).unwrap();
    let submit = |extra: &[&str], token: Option<&str>| {
        let mut c = capfleet(&work);
        c.args([
            "submit",
            "fleet.toml",
            "--server",
            &url,
            "--token-env",
            "TEST_TOKEN",
        ])
        .args(extra);
        match token {
            Some(t) => c.env("TEST_TOKEN", t),
            None => c.env_remove("TEST_TOKEN"),
        };
        c.output().unwrap()
    };
    let out = submit(&["--wait", "--json"], Some(&runner));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let created: Value = serde_json::from_str(&lines[0]).unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let last: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(
        (last["id"].as_str(), last["state"].as_str()),
        (Some(id.as_str()), Some("completed"))
    );
    // Between them: the journal, record for record.
    let journal = std::fs::read_to_string(server.journal(&id)).unwrap();
    let records: Vec<&str> = journal.lines().collect();
    assert_eq!(&lines[1..lines.len() - 1], &records[..]);
    // A session that fails for good: the run's exit code 1.
    std::fs::write(
        work.join("script.toml"),
        "[[turn]]\nsteps = [{ crash = 3 }]\n",
    )
    .unwrap();
    let failing =
        sim_fleet("quick", 1, m.pair()).replace("env =", "restart = \"temporary\"\nenv =");
    std::fs::write(work.join("fleet.toml"), failing).unwrap();
    let out = submit(&["--wait"], Some(&runner));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // An invalid fleet and a missing token: usage errors, exit 2.
    std::fs::write(work.join("fleet.toml"), "[fleet]\nname = \"x\"\n").unwrap();
    let out = submit(&[], Some(&runner));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fleet.task"));
    let out = submit(&[], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unauthorized"));
    // `capfleet runs --server` lists the server's runs.
    let out = crate::common::succeeded(
        capfleet(&work)
            .args([
                "runs",
                "--server",
                &url,
                "--token-env",
                "TEST_TOKEN",
                "--json",
            ])
            .env("TEST_TOKEN", &runner)
            .output()
            .unwrap(),
    );
    let listed = String::from_utf8(out.stdout).unwrap();
    assert!(listed.lines().any(|l| l.contains(&id)), "{listed}");
    assert!(m.processes().is_empty());
}
