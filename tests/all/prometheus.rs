//! Prometheus (Debian's `prometheus`, started here on 127.0.0.1) scraping a running
//! `capfleet run --metrics-addr`: a query returns the restarts this test caused.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common;
use crate::common::chat::assert_no_survivor;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

/// A child in its own process group, killed with it on drop.
struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        common::kill_group(self.0.id() as i32);
        let _ = self.0.wait();
    }
}

/// The instant value of a PromQL query, once there is one.
fn query(port: u16, q: &str) -> Option<f64> {
    let (status, body) =
        common::http(port, "GET", &format!("/api/v1/query?query={q}"), None).ok()?;
    if status != 200 {
        return None;
    }
    let v: Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn prometheus_scrapes_a_running_fleet_and_counts_the_restarts_it_caused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = common::EnvMarker::new("prom-scrape");
    let (k, v) = m.pair();
    // Two crashes (each once: the run's sim state remembers), then the turn completes.
    // Two different signals: the same failure twice in a row would be a poison turn.
    write(
        d,
        "crashy.toml",
        "[[turn]]\nsteps = [{ say = \"a\" }, { crash = \"sigkill\", once = true }, \
         { crash = \"abort\", once = true }, { say = \"done\" }, \
         { usage = { input_tokens = 5, output_tokens = 5, cost_usd = 0.01 } }]\n",
    );
    // Keeps the run alive while Prometheus scrapes.
    write(d, "idle.toml", "[[turn]]\nsteps = [{ sleep_ms = 60000 }]\n");
    write(
        d,
        "fleet.toml",
        &format!(
            "[fleet]\nname = \"p\"\nstart = [\"crashy\", \"idle\"]\ntask = \"go\"\nbudget_usd = 1.0\n\n\
             [[sessions]]\nname = \"crashy\"\nagent = \"sim\"\nscript = \"crashy.toml\"\n\
             max_restarts = 5\nenv = {{ {k} = \"{v}\" }}\n\n\
             [[sessions]]\nname = \"idle\"\nagent = \"sim\"\nscript = \"idle.toml\"\nenv = {{ {k} = \"{v}\" }}\n"
        ),
    );
    let metrics_port = free_port();
    let capfleet = Command::new(common::BIN)
        .current_dir(d)
        .env("NO_COLOR", "1")
        .env("XDG_CONFIG_HOME", d.join("config"))
        .args(["run", "fleet.toml", "--metrics-addr"])
        .arg(format!("127.0.0.1:{metrics_port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let capfleet = Group(capfleet);

    // capfleet's own endpoint first.
    let mut scraped = String::new();
    assert!(
        common::wait_until(Duration::from_secs(15), Duration::from_millis(100), || {
            scraped = common::http(metrics_port, "GET", "/metrics", None)
                .map(|(_, b)| b)
                .unwrap_or_default();
            // Both restarts, crashy's turn done, idle's still running, two agents.
            [
                "capfleet_restarts_total{session=\"cap://p/crashy\",cause=\"signaled\"} 2",
                "capfleet_turns_total{session=\"cap://p/crashy\",agent=\"sim\",outcome=\"completed\"} 1",
                "capfleet_sessions{state=\"done\"} 1",
                "capfleet_sessions{state=\"working\"} 1",
                "capfleet_agent_processes 2",
            ]
            .iter()
            .all(|l| scraped.contains(l))
        }),
        "capfleet's /metrics counts both restarts:\n{scraped}"
    );
    assert!(scraped.ends_with("# EOF\n"));

    let prom_port = free_port();
    write(
        d,
        "prometheus.yml",
        &format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: capfleet\n    \
             static_configs:\n      - targets: [\"127.0.0.1:{metrics_port}\"]\n"
        ),
    );
    let log = std::fs::File::create(d.join("prometheus.log")).unwrap();
    let prometheus = Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            d.join("prometheus.yml").display()
        ))
        .arg(format!("--storage.tsdb.path={}", d.join("tsdb").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()
        .expect("prometheus (Debian: apt-get install prometheus; tests/run.sh installs it)");
    let _prometheus = Group(prometheus);

    let mut restarts = None;
    let scraped_by_prometheus =
        common::wait_until(Duration::from_secs(30), Duration::from_millis(250), || {
            restarts = query(prom_port, "sum(capfleet_restarts_total)");
            restarts == Some(2.0)
        });
    assert!(
        scraped_by_prometheus,
        "Prometheus sees the 2 restarts (last answer {restarts:?}); its log:\n{}",
        std::fs::read_to_string(d.join("prometheus.log")).unwrap_or_default()
    );
    assert_eq!(
        query(prom_port, "capfleet_budget_limit_usd{scope=\"fleet\"}"),
        Some(1.0)
    );

    // Ctrl-C ends the run; the endpoint goes with it.
    let mut capfleet = capfleet;
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(capfleet.0.id() as i32, libc::SIGINT) };
    let status = capfleet.0.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(common::http(metrics_port, "GET", "/metrics", None).is_err());
    assert_no_survivor(&m);
}
