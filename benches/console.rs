//! The web console's figures in a real browser (Debian's chromium, headless, over
//! WebDriver), against `capfleet serve` (the bench's build of the binary) on loopback:
//!
//! 1. event -> page: one run whose sim session makes [`EVENTS`] events at [`RATE`] a
//!    second (numbered tool calls `Read ev N`, each two records, its call and its
//!    result: text would be batched by the journal into few records), the console
//!    open on that session's event list. Each event row the page adds is stamped
//!    when it enters the DOM (a MutationObserver: the console renders in an
//!    animation frame, so that is the frame that paints it); the delay is from the
//!    call's record in the journal (its `ts_ms`, when the engine published it; the
//!    page's clock is the machine's) to that row: p50, p99, max, and how many calls
//!    got a row (a windowed list following the tail skips most at this rate). The
//!    baseline, measured in the same run: a bare SSE client (reqwest, in this
//!    process) on the same run's event stream, the same delay for the same records;
//!    the ratios page / client.
//! 2. memory: the page's JS heap (CDP `Performance.getMetrics` `JSHeapUsedSize`, after
//!    a forced GC) and its DOM nodes once the client has seen the first [`PAUSE_AT`]
//!    events (the run pauses there) and after all [`EVENTS`]: bounded if the ratio
//!    stays near 1. Long tasks (>50 ms, `PerformanceObserver`) while the events
//!    streamed: how responsive the page stayed.
//!
//! Run: `cargo bench --bench console`. `CAPFLEET_BENCH_EVENTS`, `CAPFLEET_BENCH_RATE`
//! change the sizes. Prints figures (and the rate the sim reached); asserts only that
//! the run completed and that the client saw every record.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

mod support;

#[allow(dead_code)]
#[path = "../tests/all/common/procs.rs"]
mod procs;

#[allow(dead_code)]
#[path = "../tests/all/common/browser.rs"]
mod browser;

#[allow(dead_code)]
#[path = "../tests/all/common/console.rs"]
mod console;

use browser::{Browser, DESKTOP};
use console::{logged_in, route, sel};
use support::env_or;
use support::serve::{Serve, epoch_ms, fleet, number_after, pct, ts_ms};

const EVENTS: usize = 100_000;
const RATE: usize = 10_000;
/// The run pauses after this many lines (the first memory figure).
const PAUSE_AT: usize = 1_000;
/// The run's first line comes this long after its start: the page is open by then.
const LEAD_MS: u64 = 6_000;
/// The pause after [`PAUSE_AT`] lines.
const PAUSE_MS: u64 = 5_000;

/// The number `N` of the first JSON string `"ev N` in `text`.
fn line_number(text: &[u8]) -> Option<usize> {
    number_after(text, b"\"ev ").map(|n| n as usize)
}

/// The sim's script: a lead, then `events` events at `rate` a second: tool calls
/// `Read` of path `ev 0`, `ev 1`… (two records each, its call and its result; text
/// would be batched into few records by the journal), a batch of them then a
/// `pace_ms` of 1 ms or more (paced from the last pace point, so the time the sim
/// takes to write a batch does not lower the rate); a pause after [`PAUSE_AT`] events.
fn script(events: usize, rate: usize) -> String {
    let (calls, per_s) = (events / 2, (rate / 2).max(1));
    let batch = (per_s / 500).max(1);
    let pace = (batch * 1000 / per_s).max(1);
    let mut s = format!("[[turn]]\nsteps = [\n{{ sleep_ms = {LEAD_MS} }},\n");
    for i in 0..calls {
        if i > 0 && i % batch == 0 {
            s.push_str(&format!("{{ pace_ms = {pace} }},\n"));
        }
        s.push_str(&format!(
            "{{ tool = \"Read\", input = {{ path = \"ev {i}\" }} }},\n"
        ));
        if 2 * (i + 1) == PAUSE_AT {
            s.push_str(&format!("{{ sleep_ms = {PAUSE_MS} }},\n"));
        }
    }
    s.push_str("]\n");
    s
}

/// Stamps each event row the page adds (or rewrites) with when it entered the DOM,
/// by its line number; counts long tasks.
const STAMP: &str = r#"
window.__shown = new Map();
window.__long = {n: 0, ms: 0, max: 0};
const ROW = '[data-testid="event-row"]';
const note = (row, at) => {
  const m = /ev (\d+)/.exec(row.textContent);
  if (m && !window.__shown.has(+m[1])) window.__shown.set(+m[1], at);
};
new MutationObserver(records => {
  const at = performance.timeOrigin + performance.now();
  for (const r of records) {
    const host = r.target.nodeType === 1 ? r.target : r.target.parentElement;
    const row = host && host.closest(ROW);
    if (row) note(row, at);
    for (const n of r.addedNodes) {
      if (n.nodeType !== 1) continue;
      if (n.matches(ROW)) note(n, at);
      n.querySelectorAll(ROW).forEach(e => note(e, at));
    }
  }
}).observe(document.body, {subtree: true, childList: true, characterData: true});
new PerformanceObserver(l => l.getEntries().forEach(e => {
  window.__long.n++; window.__long.ms += e.duration; window.__long.max = Math.max(window.__long.max, e.duration);
})).observe({type: 'longtask'});
return true;
"#;

/// The page's JS heap in MiB (after a forced GC) and its DOM nodes.
async fn memory(b: &Browser) -> (f64, f64) {
    b.cdp("HeapProfiler.collectGarbage", json!({})).await;
    let m = b.cdp("Performance.getMetrics", json!({})).await;
    let metric = |name: &str| {
        m["metrics"]
            .as_array()
            .and_then(|all| all.iter().find(|x| x["name"] == name))
            .and_then(|x| x["value"].as_f64())
            .unwrap_or(f64::NAN)
    };
    (metric("JSHeapUsedSize") / (1 << 20) as f64, metric("Nodes"))
}

/// The page's stamps so far: line -> ms since the epoch.
async fn shown(b: &Browser) -> HashMap<usize, f64> {
    let v = b.js("return [...window.__shown.entries()]", vec![]).await;
    serde_json::from_value::<Vec<(usize, f64)>>(v)
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// Each line's `ts_ms` in the journal (its first record that says it).
fn published(journal: &std::path::Path) -> HashMap<usize, f64> {
    let text = std::fs::read(journal).expect("the journal");
    let mut at = HashMap::new();
    for line in text.split(|b| *b == b'\n') {
        if let (Some(n), Some(ts)) = (line_number(line), ts_ms(line)) {
            at.entry(n).or_insert(ts as f64);
        }
    }
    at
}

/// Delays (ms) from publication to `seen`, sorted.
fn delays(seen: &HashMap<usize, f64>, published: &HashMap<usize, f64>) -> Vec<f64> {
    let mut d: Vec<f64> = seen
        .iter()
        .filter_map(|(n, t)| published.get(n).map(|p| t - p))
        .collect();
    d.sort_by(f64::total_cmp);
    d
}

fn summary(d: &[f64]) -> String {
    format!(
        "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        pct(d, 0.5),
        pct(d, 0.99),
        d.last().copied().unwrap_or(f64::NAN)
    )
}

async fn bench(http: &reqwest::Client) {
    let (events, rate) = (
        env_or("CAPFLEET_BENCH_EVENTS", EVENTS),
        env_or("CAPFLEET_BENCH_RATE", RATE),
    );
    println!(
        "event -> page: one sim session with {events} events at {rate}/s (a pause after {PAUSE_AT})"
    );
    let serve = Serve::start_with_token(&[]);
    let token = serve.api.token.clone().expect("a token");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("script.toml");
    std::fs::write(&path, script(events, rate)).expect("script");
    let b = Browser::start("bench", DESKTOP).await;
    logged_in(&b, &serve.api.base, &token).await;
    let (status, body) = serve.api.submit(http, &fleet("bench", &path)).await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("id").to_owned();
    let t0 = Instant::now();
    route(&b, &format!("#/runs/{id}/sessions/s0")).await;
    b.element(&sel("event-list")).await;
    b.js(STAMP, vec![]).await;
    b.cdp("Performance.enable", json!({})).await;

    // The baseline client, on the same stream from the start.
    let calls_seen = Arc::new(AtomicUsize::new(0));
    let client = {
        let (http, api, id) = (http.clone(), serve.api.clone(), id.clone());
        let calls = calls_seen.clone();
        tokio::spawn(async move {
            let mut seen: HashMap<usize, f64> = HashMap::new();
            api.records(&http, &id, |data, _| {
                if let Some(n) = line_number(data) {
                    seen.entry(n).or_insert_with(epoch_ms);
                    calls.store(seen.len(), Ordering::Relaxed);
                }
                true
            })
            .await;
            seen
        })
    };
    assert!(
        t0.elapsed() < Duration::from_millis(LEAD_MS),
        "the page took {:?} to open: the first lines came before it",
        t0.elapsed()
    );

    // Memory once the first lines are in (the run pauses for PAUSE_MS after them),
    // then after them all.
    let until = Instant::now() + Duration::from_millis(LEAD_MS + PAUSE_MS);
    while calls_seen.load(Ordering::Relaxed) < PAUSE_AT / 2 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The page's turn (the stream is polled every 50 ms, a frame is 16 ms).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let early = (shown(&b).await.len(), memory(&b).await);
    let seen = client.await.expect("the client");
    let state = serve.api.ended(http, &id).await;
    assert_eq!(state, "completed");
    // The page has a few seconds more to catch up.
    let until = Instant::now() + Duration::from_secs(10);
    let mut last = 0;
    loop {
        let now = shown(&b).await.len();
        if now >= events || (now == last && now > 0) || Instant::now() > until {
            break;
        }
        last = now;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let page = shown(&b).await;
    let late = memory(&b).await;
    let long = b.js("return window.__long", vec![]).await;
    b.shot("bench-events").await;
    b.quit().await;

    let published = published(&serve.journal(&id));
    let mut missed: Vec<&usize> = published.keys().filter(|n| !seen.contains_key(n)).collect();
    missed.sort();
    assert!(
        missed.is_empty(),
        "the SSE client missed records: {missed:?}"
    );
    let records = published.len();
    let mut times: Vec<f64> = published
        .iter()
        .filter(|(n, _)| **n >= PAUSE_AT)
        .map(|(_, t)| *t)
        .collect();
    times.sort_by(f64::total_cmp);
    if let (Some(a), Some(z)) = (times.first(), times.last())
        && z > a
    {
        println!(
            "   the sim's rate after the pause: {:.0} events/s ({} tool calls, each a call and a result record; journal ts_ms)",
            2.0 * (times.len() - 1) as f64 / (z - a) * 1e3,
            records
        );
    }
    let (p, c) = (delays(&page, &published), delays(&seen, &published));
    println!(
        "   page:       {} of {records} tool calls got a row; delay publication -> row {}",
        page.len(),
        summary(&p)
    );
    println!(
        "   SSE client: {} of {records} tool calls; delay publication -> arrival {}",
        seen.len(),
        summary(&c)
    );
    println!(
        "   ratio page / client: p50 {:.2}x, p99 {:.2}x",
        pct(&p, 0.5) / pct(&c, 0.5),
        pct(&p, 0.99) / pct(&c, 0.99)
    );
    println!(
        "   long tasks while streaming: {} ({:.0} ms in all, longest {:.0} ms)",
        long["n"],
        long["ms"].as_f64().unwrap_or(0.0),
        long["max"].as_f64().unwrap_or(0.0)
    );
    println!(
        "memory: JS heap {:.1} MiB, {:.0} DOM nodes with {} rows shown after {PAUSE_AT} events; {:.1} MiB, {:.0} nodes after {events}: ratio {:.2}x heap, {:.2}x nodes",
        early.1.0,
        early.1.1,
        early.0,
        late.0,
        late.1,
        late.0 / early.1.0,
        late.1 / early.1.1
    );
}

fn main() {
    let runtime = support::runtime();
    let http = reqwest::Client::new();
    let build = if cfg!(debug_assertions) {
        "dev build"
    } else {
        "release build"
    };
    println!("capfleet web console bench ({build}; headless chromium; loopback)");
    runtime.block_on(bench(&http));
}
