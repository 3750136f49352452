//! A fleet run with its `/metrics` served, scraped while it runs.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use super::nats::free_port;
use super::repo::Fixture;
use super::{http, wait_until, wait_within};

/// `capfleet run fleet.toml --metrics-addr` in `f`, its `/metrics` scraped until it
/// holds `line` (30 s at most), then waited for (60 s): whether the line was seen,
/// the run's exit status and the last page scraped.
pub(crate) fn run_scraped_until(f: &Fixture, line: &str) -> (bool, ExitStatus, String) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = f
        .command(&["run", "fleet.toml", "--metrics-addr", &addr])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("capfleet run");
    let mut scraped = String::new();
    let seen = wait_until(Duration::from_secs(30), Duration::from_millis(100), || {
        scraped = http(port, "GET", "/metrics", None)
            .map(|(_, b)| b)
            .unwrap_or_default();
        scraped.contains(line)
    });
    let status = wait_within(&mut child, Duration::from_secs(60));
    (seen, status, scraped)
}
