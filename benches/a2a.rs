//! A2A figures, each against a baseline measured in the same run, on loopback against
//! `capfleet sim --mode a2a` (spelling 1.0):
//!
//! 1. round trips per second: sequential one-line turns (prompt -> echo -> completed)
//!    through the real A2A driver and session actors (`Orchestrator::start` +
//!    `spawn_session`, `SessionMsg::Ask`); against a bare HTTP client (reqwest, one
//!    connection) sending the same `SendStreamingMessage` and reading its SSE answer to
//!    the end — the sim's and HTTP's own cost. Reported with the ratio.
//! 2. SSE events per second: one streaming turn of [`PARTS`] text parts (a `flood`
//!    step, one part per SSE event) through driver and session; against the bare
//!    client reading the same stream and counting its events.
//!
//! Run: `cargo bench --bench a2a`. Prints figures; asserts nothing about time.
//! `CAPFLEET_BENCH_PARTS=1` or `=2` runs one part; `CAPFLEET_BENCH_TURNS` changes the
//! turn count of part 1, `CAPFLEET_BENCH_SSE_PARTS` the text parts of part 2.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use capfleet_engine::manifest::Manifest;
use capfleet_engine::protocol::SessionConfig;
use capfleet_engine::root::{Orchestrator, RootArgs};
use capfleet_engine::session::{SessionMsg, SessionSpec};
use capfleet_wire::driver::{LaunchSpec, Shape};
use capfleet_wire::registry::Binding;
use futures::StreamExt;
use serde_json::json;

mod support;

use support::a2a_peer::A2aPeer;
use support::env_or;

const EXE: &str = env!("CARGO_BIN_EXE_capfleet");
const MANIFEST: &str = include_str!("../tests/support/sim-acp.toml");
const TURNS: usize = 1000;
/// Text parts of the streaming turn (each its own SSE event).
const PARTS: u64 = 100_000;
/// Bytes per text part.
const PART_BYTES: u64 = 16;

fn main() {
    let parts = std::env::var("CAPFLEET_BENCH_PARTS").unwrap_or_else(|_| "1,2".into());
    let runtime = support::runtime();
    println!("capfleet A2A bench (2 tokio workers, as `capfleet chat`; loopback, spelling 1.0)");
    if parts.contains('1') {
        let turns = env_or("CAPFLEET_BENCH_TURNS", TURNS);
        runtime.block_on(round_trips(turns));
    }
    if parts.contains('2') {
        let n = env_or("CAPFLEET_BENCH_SSE_PARTS", PARTS);
        runtime.block_on(sse_events(n));
    }
}

/// The sim serving A2A on a free loopback port, killed on drop.
fn sim(script: &str) -> A2aPeer {
    let dir = std::env::temp_dir().join(format!("capfleet-a2a-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join("script.toml");
    std::fs::write(&path, script).expect("script");
    support::a2a_peer::sim_at(EXE, &path, None, &[])
}

/// What a bare client counts of one streaming send: SSE events, and bytes.
async fn bare_send(client: &reqwest::Client, url: &str, id: usize) -> (usize, usize) {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "SendStreamingMessage",
        "params": {"message": {"messageId": format!("b{id}"), "role": "ROLE_USER", "parts": [{"text": "hi"}]}}});
    let res = client
        .post(url)
        .header("a2a-version", "1.0")
        .header("accept", "text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("send");
    let mut stream = res.bytes_stream();
    let (mut events, mut bytes, mut last) = (0, 0, 0u8);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("chunk");
        bytes += chunk.len();
        // An SSE event ends at a blank line: "\n\n", possibly across chunks.
        for &b in chunk.iter() {
            if b == b'\n' && last == b'\n' {
                events += 1;
            }
            last = b;
        }
    }
    (events, bytes)
}

/// A session of the A2A binding to `url`, in a fresh supervision tree.
async fn session(url: &str) -> (Orchestrator, ractor::ActorRef<SessionMsg>) {
    let orchestrator = Orchestrator::start(RootArgs::new("bench"))
        .await
        .expect("tree starts");
    let text = MANIFEST
        .replace("acp_stdio = true", "acp_stdio = false")
        .replace("a2a_serve_at = false", &format!("a2a_serve_at = \"{url}\""));
    let mut manifest = Manifest::parse(&text, "bench a2a manifest")
        .expect("manifest")
        .manifest;
    // The flood's one turn is over 1 MB of text.
    manifest.a2a.first_byte_timeout_ms = 60_000;
    let cwd = std::env::current_dir().expect("cwd").display().to_string();
    let mut launch = LaunchSpec::new(
        "cap://bench/a2a",
        Arc::new(manifest),
        SessionConfig::new(cwd),
    );
    launch.shape =
        Shape::Connect(capfleet_wire::driver::connect_addr(url).expect("a loopback address"));
    let spec = SessionSpec::new("a2a", launch, Binding::A2a);
    let session = orchestrator
        .spawn_session(spec, vec![])
        .await
        .expect("session spawns");
    (orchestrator, session)
}

async fn ask(session: &ractor::ActorRef<SessionMsg>, prompt: &str) {
    let turn = ractor::call!(session, |reply| SessionMsg::Ask {
        prompt: prompt.into(),
        traceparent: None,
        reply
    })
    .expect("ask call")
    .expect("turn completes");
    std::hint::black_box(turn);
}

// ---- 1. round trips ----------------------------------------------------------------

async fn round_trips(turns: usize) {
    // No turns in the script: every prompt gets the sim's echo turn.
    let peer = sim("");
    let client = reqwest::Client::new();
    bare_send(&client, &peer.url, 0).await; // warm: the connection is open
    let t0 = Instant::now();
    for i in 0..turns {
        std::hint::black_box(bare_send(&client, &peer.url, i + 1).await);
    }
    let bare = t0.elapsed();
    let (orchestrator, s) = session(&peer.url).await;
    ask(&s, "hi").await; // warm: the card read, the connection open
    let t0 = Instant::now();
    for _ in 0..turns {
        ask(&s, "hi").await;
    }
    let driven = t0.elapsed();
    let _closed = s.cast(SessionMsg::Close);
    orchestrator.shutdown().await;
    let rate = |d: Duration| turns as f64 / d.as_secs_f64();
    println!(
        "\n1. A2A round trips (SendStreamingMessage -> echo -> completed), {turns} sequential turns"
    );
    println!(
        "   baseline bare HTTP client -> sim        {:>8.0} round trips/s ({:.3} s, {:.0} us each)",
        rate(bare),
        bare.as_secs_f64(),
        bare.as_secs_f64() * 1e6 / turns as f64
    );
    println!(
        "   A2A driver + session actors -> sim      {:>8.0} round trips/s ({:.3} s, {:.0} us each)  ratio {:.2} of bare",
        rate(driven),
        driven.as_secs_f64(),
        driven.as_secs_f64() * 1e6 / turns as f64,
        bare.as_secs_f64() / driven.as_secs_f64()
    );
}

// ---- 2. SSE events -------------------------------------------------------------------

async fn sse_events(parts: u64) {
    let script = format!(
        "[[turn]]\nsteps = [{{ flood = {}, chunk = {PART_BYTES} }}]\n",
        parts * PART_BYTES
    );
    // Two turns: one for the bare client, one for the session.
    let peer = sim(&format!("{script}{script}"));
    let client = reqwest::Client::new();
    let t0 = Instant::now();
    let (events, bytes) = bare_send(&client, &peer.url, 1).await;
    let bare = t0.elapsed();
    assert!(events as u64 >= parts, "{events} events for {parts} parts");
    let (orchestrator, s) = session(&peer.url).await;
    let t0 = Instant::now();
    ask(&s, "flood").await;
    let driven = t0.elapsed();
    let _closed = s.cast(SessionMsg::Close);
    orchestrator.shutdown().await;
    let rate = |d: Duration| events as f64 / d.as_secs_f64();
    println!(
        "\n2. SSE events of one streaming turn: {parts} text parts of {PART_BYTES} B ({events} events, {:.1} MB on the wire)",
        bytes as f64 / 1e6
    );
    println!(
        "   baseline bare HTTP client reading them  {:>8.0} events/s ({:.3} s)",
        rate(bare),
        bare.as_secs_f64()
    );
    println!(
        "   A2A driver + session actors             {:>8.0} events/s ({:.3} s)  ratio {:.2} of bare",
        rate(driven),
        driven.as_secs_f64(),
        bare.as_secs_f64() / driven.as_secs_f64()
    );
}
