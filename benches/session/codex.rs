//! Part 5: the `codex exec --json` shape (issue 20's bench), with a stand-in Codex —
//! a script that prints recorded `codex exec` JSONL, whatever it is asked — so the
//! figures are capfleet's, not a model's:
//!
//! - a turn of [`ITEMS`] `agent_message` items through driver + session (events/s,
//!   ask to the subscriber seeing the turn's end), against a raw `serde_json` parse
//!   of the same lines in this process (the baseline, same run);
//! - per-turn overhead: ask to the turn's first text event, one process per turn
//!   (the codex shape: spawn, read, exit) against the long-lived stream-json sim,
//!   median of [`TURNS`] turns each, same run.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use capfleet_engine::session::{SessionMsg, SessionSpec};
use capfleet_wire::driver::natural_shape;
use capfleet_wire::events::{Published, SUBSCRIBER_CAPACITY};
use capfleet_wire::registry::Binding;
use tokio::sync::mpsc;

use crate::measure::{best_of, median, ms, ratio, raw_parse};
use crate::tree::{Kind, launch, sim_spec, start_tree, wait_mark, watch};

const CODEX_MANIFEST: &str = include_str!("../../config/agents/codex.toml");
/// Agent messages in the flood turn.
pub(crate) const ITEMS: u64 = 100_000;
/// Turns timed per shape.
pub(crate) const TURNS: usize = 15;

/// One `codex exec --json` turn of `items` agent messages, as Codex CLI writes it.
fn turn_jsonl(items: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut line = |l: &str| {
        out.extend_from_slice(l.as_bytes());
        out.push(b'\n');
    };
    line(r#"{"type":"thread.started","thread_id":"01a232c9-4370-7e10-aede-aec44ce15a2b"}"#);
    line(r#"{"type":"turn.started"}"#);
    for i in 0..items {
        line(&format!(
            r#"{{"type":"item.completed","item":{{"id":"item_{i}","type":"agent_message","text":"xxxxxxxx"}}}}"#
        ));
    }
    line(
        r#"{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":20,"reasoning_output_tokens":0}}"#,
    );
    out
}

/// An executable standing in for `codex`: it reads the prompt to its end (as Codex
/// does), prints `data` and exits.
fn stand_in(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let jsonl = dir.join(format!("{name}.jsonl"));
    std::fs::write(&jsonl, data).expect("jsonl");
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path).expect("stand-in");
    writeln!(
        f,
        "#!/bin/sh\ncat >/dev/null\nexec cat '{}'",
        jsonl.display()
    )
    .expect("write stand-in");
    drop(f);
    let mut perms = std::fs::metadata(&path).expect("stand-in").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).expect("chmod");
    path
}

fn codex_spec(name: &str, program: &Path) -> SessionSpec {
    let mut launch = launch(name, CODEX_MANIFEST, "config/agents/codex.toml");
    launch.program = Some(program.to_path_buf());
    launch.shape = natural_shape(Binding::CodexExec, &launch.manifest);
    SessionSpec::new(name, launch, Binding::CodexExec)
}

/// `turns` turns of `spec`'s session: the flood's wall (ask to the turn's end seen)
/// and events, and each turn's ask-to-first-text.
async fn turns(spec: SessionSpec, turns: usize) -> (Duration, u64, Vec<Duration>) {
    let tree = start_tree().await;
    let (tx, rx) = mpsc::channel::<Published>(SUBSCRIBER_CAPACITY);
    let (marks_tx, mut marks) = mpsc::unbounded_channel();
    let watcher = tokio::spawn(watch(rx, marks_tx));
    let session = tree
        .spawn_session(spec, vec![tx])
        .await
        .expect("session spawns");
    let (mut wall, mut events, mut first) = (Duration::ZERO, 0, Vec::new());
    let mut seen = 0;
    for _ in 0..turns {
        let t0 = Instant::now();
        let s = session.clone();
        let ask = tokio::spawn(async move {
            ractor::call!(s, |reply| SessionMsg::Ask {
                prompt: "x".into(),
                traceparent: None,
                reply
            })
        });
        let text = wait_mark(&mut marks, |m| m.kind == Kind::FirstText).await;
        first.push(text.at - t0);
        let end = wait_mark(&mut marks, |m| m.kind == Kind::TurnEnded).await;
        wall += end.at - t0;
        events += end.seen - seen;
        seen = end.seen;
        let result = ask.await.expect("ask task").expect("ask call");
        result.expect("turn completes");
    }
    let _closed = session.cast(SessionMsg::Close);
    tree.shutdown().await;
    let _ = watcher.await;
    (wall, events, first)
}

pub(crate) fn codex(rt: &tokio::runtime::Runtime, dir: &Path) {
    let data = turn_jsonl(ITEMS);
    let lines = ITEMS + 3;
    let raw = best_of(3, || raw_parse(&data));
    let flood = stand_in(dir, "codex-flood", &data);
    let (wall, events, _) = rt.block_on(turns(codex_spec("codex-flood", &flood), 1));
    let per_s = |n: u64, d: Duration| n as f64 / d.as_secs_f64();
    println!("\n5. codex exec --json: one turn of {ITEMS} agent messages ({lines} JSONL lines)");
    println!(
        "   baseline raw serde_json parse         {:>8.1} ms  {:>10.0} lines/s",
        ms(raw),
        per_s(lines, raw)
    );
    println!(
        "   driver + session (stand-in codex)     {:>8.1} ms  {:>10.0} events/s  {:.2}x the raw parse's time",
        ms(wall),
        per_s(events, wall),
        ratio(wall, raw)
    );
    let short = stand_in(dir, "codex-short", &turn_jsonl(1));
    let (_, _, mut per_turn) = rt.block_on(turns(codex_spec("codex-short", &short), TURNS));
    let script = dir.join("codex-baseline.toml");
    std::fs::write(
        &script,
        "[[turn]]\nsteps = [{ say = \"xxxxxxxx\" }]\n".repeat(TURNS),
    )
    .expect("script");
    let (_, _, mut long_lived) = rt.block_on(turns(sim_spec("sim-turns", &script, None), TURNS));
    let (per_turn, long_lived) = (median(&mut per_turn), median(&mut long_lived));
    println!("   ask to first text, median of {TURNS} turns:");
    println!(
        "     stream-json sim, long-lived          {:>8.2} ms\n     codex shape, a process per turn      {:>8.2} ms  (+{:.2} ms per turn, {:.2}x)",
        ms(long_lived),
        ms(per_turn),
        ms(per_turn.saturating_sub(long_lived)),
        ratio(per_turn, long_lived)
    );
}
