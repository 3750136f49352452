//! Draining a `capfleet worker` (the real `nats-server`): on SIGTERM it takes no
//! more runs; a run that does not finish within `--drain-grace` is stopped, handed
//! back to the queue (a nak with a delay, its lease given up) and gone on with by
//! another worker from the journal JetStream keeps — before the lease's TTL, since
//! nothing waits for the lease to lapse — and completes once. Across the two
//! workers the run stays one trace (the submitter's), and each worker's
//! `--metrics-addr` says what it held, took over and let go of.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::fake_llm::http_with;
use crate::common::nats::{Worker, submit_env};
use crate::common::{wait_until, wait_within};
use crate::nats_runs::{Chain, TTL, published};
use crate::observability::WORKER_SERIES;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// The worker's `/metrics`, each sample `name{labels}` with its value.
fn scrape(w: &Worker) -> Vec<(String, f64)> {
    let text = w.stderr();
    let port: u16 = text
        .split("metrics on http://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no metrics address in: {text}"));
    let r = http_with(port, "GET", "/metrics", &[], b"").unwrap();
    assert_eq!(r.status, 200);
    r.body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

fn sample(samples: &[(String, f64)], name: &str) -> f64 {
    samples
        .iter()
        .find(|(n, _)| n == name)
        .map_or_else(|| panic!("no {name} in {samples:?}"), |(_, v)| *v)
}

/// The spans of a trace file.
fn spans(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_drained_workers_unfinished_run_is_handed_back_and_completed_by_another() {
    let c = Chain::new("nats-drain", 1);
    let (a_spans, b_spans) = (c.work.join("a-spans.jsonl"), c.work.join("b-spans.jsonl"));
    let observed = |spans: &Path| {
        vec![
            "--metrics-addr".to_owned(),
            "127.0.0.1:0".to_owned(),
            "--trace-file".to_owned(),
            spans.display().to_string(),
        ]
    };
    let a_args = [observed(&a_spans), vec!["--drain-grace".into(), "1".into()]].concat();
    let mut a = c.worker_with("a", &a_args.iter().map(String::as_str).collect::<Vec<_>>());
    // Submitted inside a trace.
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    let id = submit_env(&c.work, &c.url, &[], &[("TRACEPARENT", &traceparent)]);
    c.under_way(std::slice::from_ref(&id), &a);
    let held = scrape(&a);
    assert_eq!(sample(&held, "capfleet_worker_runs_held"), 1.0);
    assert_eq!(sample(&held, "capfleet_worker_leases_held"), 1.0);
    let b_args = observed(&b_spans);
    let b = c.worker_with("b", &b_args.iter().map(String::as_str).collect::<Vec<_>>());
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(a.child.id() as i32, libc::SIGTERM) };
    let status = wait_within(&mut a.child, Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", a.stderr());
    assert!(a.stderr().contains("handed back"), "{}", a.stderr());
    assert!(
        wait_until(Duration::from_secs(60), Duration::from_millis(100), || {
            b.runs().iter().any(|(r, j)| {
                *r == id
                    && j.iter()
                        .any(|x| x["type"] == "run_ended" && x["outcome"] == "completed")
            })
        }),
        "b did not complete the run: {}",
        b.stderr()
    );
    let (_, j) = b.runs().into_iter().find(|(run, _)| *run == id).unwrap();
    // a's records (its run stopped, then handed back), then b's: taken without
    // waiting for a's lease to lapse.
    let at = |kind: &str| {
        j.iter()
            .position(|r| r["type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in {j:?}"))
    };
    let (back, taken) = (at("handed_back"), at("lease_taken"));
    assert!(back < taken, "{j:?}");
    let stopped = j[..back]
        .iter()
        .rfind(|r| r["type"] == "run_ended")
        .unwrap_or_else(|| panic!("no run_ended before handed_back: {j:?}"));
    assert_eq!(stopped["outcome"], "interrupted");
    let ms = |i: usize| j[i]["ts_ms"].as_u64().unwrap();
    let waited = ms(taken).saturating_sub(ms(back));
    assert!(
        waited < TTL * 1000,
        "taken over {waited} ms after it was handed back"
    );
    let ends: Vec<&Value> = j.iter().filter(|r| r["type"] == "run_ended").collect();
    assert_eq!(ends.len(), 2, "a's interrupted end, b's: {ends:?}");
    assert_eq!(ends[1]["outcome"], "completed", "{j:?}");
    crate::common::durable::exactly_once(&j);
    // The journal JetStream keeps is b's, record for record.
    let kept: Vec<serde_json::Value> = published(&c.work, &c.url, &id)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(kept, j);
    // b's metrics: one run taken over and acked, none held now; every series the
    // dashboard's workers row queries is exported.
    let m = scrape(&b);
    assert_eq!(sample(&m, "capfleet_worker_takeovers_total"), 1.0);
    assert_eq!(
        sample(&m, "capfleet_worker_runs_total{result=\"acked\"}"),
        1.0
    );
    assert_eq!(sample(&m, "capfleet_worker_runs_held"), 0.0);
    assert_eq!(sample(&m, "capfleet_worker_leases_held"), 0.0);
    assert!(sample(&m, "capfleet_worker_lease_renewals_total{result=\"ok\"}") >= 1.0);
    let names: BTreeSet<&str> = m
        .iter()
        .map(|(n, _)| n.split('{').next().unwrap())
        .collect();
    for series in WORKER_SERIES {
        assert!(names.contains(series), "{series} not in {names:?}");
    }
    // One trace across both workers: the submitter's (b drained first: its spans
    // are flushed as it exits).
    let mut b = b;
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(b.child.id() as i32, libc::SIGTERM) };
    assert_eq!(
        wait_within(&mut b.child, Duration::from_secs(30)).code(),
        Some(0)
    );
    for (who, path) in [("a", &a_spans), ("b", &b_spans)] {
        let spans = spans(path);
        let run = spans
            .iter()
            .find(|s| s["name"] == "worker.run")
            .unwrap_or_else(|| panic!("{who} exported no worker.run span: {spans:?}"));
        assert_eq!(run["parent_span_id"], PARENT, "{who}");
        let traces: BTreeSet<&str> = spans
            .iter()
            .filter_map(|s| s["trace_id"].as_str())
            .collect();
        assert_eq!(traces, BTreeSet::from([TRACE]), "{who}'s spans");
    }
    drop(b);
    c.m.wait_gone(Duration::from_secs(10), "the sim agents");
}
