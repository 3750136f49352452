//! `capfleet submit`: the CI client submits a fleet with the files it names, follows
//! the run's events (the journal, record for record) and exits with the run's exit
//! code; invalid fleets and refused tokens are usage errors; `capfleet runs --server`
//! lists the server's runs; the stock demo, whose scripts lie outside its directory,
//! is submitted as the README says.

use serde_json::Value;

use crate::common::repo::Fixture;
use crate::common::serve::{Server, add_token, chatty, sim_fleet};
use crate::common::{EnvMarker, capfleet, repo_root};

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

/// The README's serve section, as written: from the repository's root, `capfleet
/// submit config/fleets/demo.toml --server URL --wait` (the demo's scripts are
/// `../sim/…`) to a server in a git checkout. It runs the demo's story to the end.
#[test]
fn the_stock_demo_is_submitted_as_the_readme_says() {
    let repo = Fixture::git_repo(&[("README.md", "a service\n")]);
    let d = repo.path();
    let secret = add_token(d, "ci", "run");
    let server = Server::start(d, &["--token-file", "tokens.txt"]);
    let url = format!("http://127.0.0.1:{}", server.port);
    let out = capfleet(d)
        .current_dir(repo_root())
        .args([
            "submit",
            "config/fleets/demo.toml",
            "--server",
            &url,
            "--wait",
        ])
        .env("CAPFLEET_TOKEN", &secret)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{}", server.stderr());
    let id = stderr
        .split("capfleet: run ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the run's id");
    // The scripts went under their normalised names, as they are here.
    let input = d.join(".capfleet/runs").join(id).join("input");
    for script in ["planner", "worker-a", "worker-b", "reviewer"] {
        let name = format!("sim/fleet-{script}.toml");
        let sent = std::fs::read_to_string(input.join("_up").join(&name)).unwrap();
        let here = std::fs::read_to_string(repo_root().join("config").join(&name)).unwrap();
        assert_eq!(sent, here, "{name}");
    }
    // The demo's story: every session ended its turns, worker-a after its restart.
    let journal = std::fs::read_to_string(server.journal(id)).unwrap();
    let records: Vec<Value> = journal
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |session: &str, kind: &str| {
        let urn = format!("cap://demo/{session}");
        records
            .iter()
            .filter(|r| r["urn"] == urn.as_str() && r["type"] == kind)
            .count()
    };
    for session in ["planner", "worker-a", "worker-b", "reviewer"] {
        assert!(of(session, "turn_ended") > 0, "{session}: {journal}");
    }
    assert!(of("worker-a", "restart") > 0, "{journal}");
}
