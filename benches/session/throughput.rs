//! Part 1: driver + session throughput — a flood turn through the real stream-json
//! driver and session actors, against a raw parse of the same lines and the sim alone.

use crate::CHUNK;
use crate::measure::{
    best_of, best_of_cpu, count_lines, flood_script, mb, raw_parse, run_sim, self_cpu,
};
use crate::tree::{Kind, sim_spec, start_tree, wait_mark, watch};
use capfleet_engine::session::SessionMsg;
use capfleet_wire::chaos::ByteFaults;
use capfleet_wire::events::{Published, SUBSCRIBER_CAPACITY};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub(crate) fn throughput(rt: &tokio::runtime::Runtime, dir: &Path, user_frame: &Path, frames: u64) {
    let script = flood_script(dir, "throughput", frames);
    let capture = dir.join("throughput.ndjson");
    let sim = run_sim(&script, user_frame, Some(&capture));
    let data = std::fs::read(&capture).expect("captured frames");
    let lines = count_lines(&data);
    // Warm once, then the better of two passes.
    let raw = best_of(2, || raw_parse(&data));
    let raw_cpu = best_of_cpu(1, || raw_parse(&data));

    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(rt.block_on(pipeline_run(&script, false)));
    }
    let expected_text = frames;
    for r in &runs {
        assert_eq!(
            r.texts, expected_text,
            "every flood frame reaches the subscriber as one cap.text_chunk"
        );
    }
    runs.sort_by_key(|r| r.wall);
    let best = &runs[0];
    let median = &runs[runs.len() / 2];
    let mut cpus: Vec<Duration> = runs.iter().map(|r| r.cpu).collect();
    cpus.sort();
    let cpu = cpus[cpus.len() / 2];

    let n = lines as f64;
    let rate = |d: Duration| n / d.as_secs_f64();
    println!(
        "\n1. driver + session throughput ({} frames, {:.1} MB, {} text bytes per frame)",
        lines,
        mb(data.len()),
        CHUNK
    );
    println!(
        "   baseline raw serde_json::from_slice::<Value>  {:>10.0} lines/s  ({:.3} s wall, {:.3} s CPU)",
        rate(raw),
        raw.as_secs_f64(),
        raw_cpu.as_secs_f64()
    );
    println!(
        "   baseline sim alone -> file                    {:>10.0} lines/s  ({:.3} s wall, {:.3} s CPU)",
        rate(sim.wall),
        sim.wall.as_secs_f64(),
        sim.cpu.as_secs_f64()
    );
    println!(
        "   driver+session, best of {} (wall)              {:>10.0} events/s ({:.3} s)  {:>5.1}% of raw",
        runs.len(),
        best.events as f64 / best.wall.as_secs_f64(),
        best.wall.as_secs_f64(),
        100.0 * raw.as_secs_f64() / best.wall.as_secs_f64() * best.events as f64 / n
    );
    println!(
        "   driver+session, median (wall)                 {:>10.0} events/s ({:.3} s)  {:>5.1}% of raw",
        median.events as f64 / median.wall.as_secs_f64(),
        median.wall.as_secs_f64(),
        100.0 * raw.as_secs_f64() / median.wall.as_secs_f64() * median.events as f64 / n
    );
    println!(
        "   driver+session, median CPU of this process    {:>10.0} events/CPU-s ({:.3} s)  {:>5.1}% of raw CPU",
        median.events as f64 / cpu.as_secs_f64(),
        cpu.as_secs_f64(),
        100.0 * raw_cpu.as_secs_f64() / cpu.as_secs_f64() * median.events as f64 / n
    );
    println!(
        "   (events = {} published, {} of them cap.text_chunk; the sim runs concurrently on the same cores)",
        median.events, median.texts
    );
}

pub(crate) struct PipelineRun {
    wall: Duration,
    cpu: Duration,
    events: u64,
    texts: u64,
}

/// Part 6: the chaos interposer's cost with no fault armed — the same flood turn with
/// the interposer installed (a chaos run whose faults are elsewhere) and without it
/// (any other run), interleaved, medians compared. Goal: at most 5% more.
pub(crate) fn interposer_overhead(rt: &tokio::runtime::Runtime, dir: &Path, frames: u64) {
    const PAIRS: usize = 7;
    let script = flood_script(dir, "interposer", frames);
    let (mut bare, mut idle) = (Vec::new(), Vec::new());
    for _ in 0..PAIRS {
        bare.push(rt.block_on(pipeline_run(&script, false)));
        idle.push(rt.block_on(pipeline_run(&script, true)));
    }
    for r in bare.iter().chain(&idle) {
        assert_eq!(r.texts, frames, "every flood frame arrives");
    }
    let median = |runs: &[PipelineRun], f: fn(&PipelineRun) -> Duration| {
        let mut v: Vec<Duration> = runs.iter().map(f).collect();
        v.sort();
        v[v.len() / 2]
    };
    let (bw, iw) = (median(&bare, |r| r.wall), median(&idle, |r| r.wall));
    let (bc, ic) = (median(&bare, |r| r.cpu), median(&idle, |r| r.cpu));
    let rate = |d: Duration| frames as f64 / d.as_secs_f64();
    println!(
        "\n6. chaos interposer, installed with no fault armed ({frames} frames, median of {PAIRS} interleaved pairs)"
    );
    println!(
        "   baseline no interposer   {:>10.0} events/s ({:.3} s wall, {:.3} s CPU)",
        rate(bw),
        bw.as_secs_f64(),
        bc.as_secs_f64()
    );
    println!(
        "   interposer installed     {:>10.0} events/s ({:.3} s wall, {:.3} s CPU)",
        rate(iw),
        iw.as_secs_f64(),
        ic.as_secs_f64()
    );
    println!(
        "   ratio installed/bare     wall {:.3}x   CPU {:.3}x   (goal <= 1.05x)",
        iw.as_secs_f64() / bw.as_secs_f64(),
        ic.as_secs_f64() / bc.as_secs_f64()
    );
}

/// One turn of the flood script through the real tree; timed from the ask to the
/// subscriber seeing the turn's end (every event delivered). `interposed`: the
/// session's agent reads through the chaos interposer, no fault armed.
pub(crate) async fn pipeline_run(script: &Path, interposed: bool) -> PipelineRun {
    let orchestrator = start_tree().await;
    let (tx, rx) = mpsc::channel::<Published>(SUBSCRIBER_CAPACITY);
    let (marks_tx, mut marks) = mpsc::unbounded_channel();
    let counter = tokio::spawn(watch(rx, marks_tx));
    let mut spec = sim_spec("throughput", script, None);
    if interposed {
        spec.launch.byte_faults = Some(ByteFaults::new(spec.launch.urn.clone(), 1));
    }
    let session = orchestrator
        .spawn_session(spec, vec![tx])
        .await
        .expect("session spawns");
    let ready = wait_mark(&mut marks, |m| m.kind == Kind::Ready).await;
    let cpu0 = self_cpu();
    let t0 = Instant::now();
    let seen0 = ready.seen;
    let ask = {
        let session = session.clone();
        tokio::spawn(async move {
            ractor::call!(session, |reply| SessionMsg::Ask {
                prompt: "flood".into(),
                traceparent: None,
                reply
            })
        })
    };
    let end = wait_mark(&mut marks, |m| m.kind == Kind::TurnEnded).await;
    let wall = end.at - t0;
    let cpu = self_cpu() - cpu0;
    let result = ask.await.expect("ask task").expect("ask call");
    let result = result.expect("turn completes");
    std::hint::black_box(&result);
    let _closed = session.cast(SessionMsg::Close);
    orchestrator.shutdown().await;
    let _ = counter.await;
    PipelineRun {
        wall,
        cpu,
        events: end.seen - seen0,
        texts: end.texts,
    }
}
