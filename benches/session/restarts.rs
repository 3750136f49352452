//! Part 3: crash-to-ready restart latency, against the sim's own boot.

use crate::measure::{median, ms, ratio};
use crate::tree::{Kind, sim_spec, start_tree, wait_mark, watch_thread};
use crate::{EXE, RESTARTS};
use capfleet_engine::session::SessionMsg;
use capfleet_wire::events::{Published, SUBSCRIBER_CAPACITY};
use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub(crate) fn restarts(rt: &tokio::runtime::Runtime, dir: &Path) {
    let script = dir.join("crash-once.toml");
    std::fs::write(
        &script,
        "[[turn]]\nsteps = [ { crash = \"sigkill\", once = true }, { say = \"recovered\" } ]\n",
    )
    .expect("crash script");
    let mut boots = Vec::new();
    let mut to_ready = Vec::new();
    let mut to_text = Vec::new();
    let mut stamped = Vec::new();
    let mut deaths = Vec::new();
    let mut echoes = Vec::new();
    for i in 0..RESTARTS {
        // Interleaved with the restarts, so both see the same load.
        boots.push(sim_boot());
        let state = dir.join(format!("crash-state-{i}"));
        let _ = std::fs::remove_dir_all(&state);
        let r = rt.block_on(restart_run(&script, &state));
        to_ready.push(r.ready);
        to_text.push(r.text);
        stamped.push(r.stamped_ms);
        deaths.push(r.death);
        echoes.push(r.echo);
    }
    let boot = median(&mut boots);
    let ready = median(&mut to_ready);
    let text = median(&mut to_text);
    let death = median(&mut deaths);
    let echo = median(&mut echoes);
    println!(
        "\n3. crash-to-ready restart latency (SIGKILL mid-turn, median of {RESTARTS} sessions)"
    );
    println!(
        "   baseline sim boot (spawn -> system/init line)        {:>8.2} ms",
        ms(boot)
    );
    println!(
        "   cap.error -> cap.session.ready (new driver)          {:>8.2} ms   (max {:.2} ms)  goal <= 50 ms + boot",
        ms(ready),
        ms(*to_ready.iter().max().expect("runs"))
    );
    stamped.sort();
    println!(
        "   (cross-check, the events' own ts_ms: median {} ms, max {} ms)",
        stamped[stamped.len() / 2],
        stamped[stamped.len() - 1]
    );
    println!(
        "   cap.error -> first text of the retried turn          {:>8.2} ms   ({:.2}x boot; includes the new sim's boot)",
        ms(text),
        ratio(text, boot)
    );
    println!(
        "   baseline ask -> first text of a normal turn          {:>8.2} ms",
        ms(echo)
    );
    println!(
        "   ask -> cap.error of the death (prompt, crash, reap)  {:>8.2} ms   ({:.2}x the normal turn)",
        ms(death),
        ratio(death, echo)
    );
}

/// One session whose first turn crashes once: error→ready, error→first text (stamped
/// on arrival) and error→ready by the events' own millisecond stamps.
/// Also ask→cap.error (prompt out, sim dies, EOF, reap) and, as its baseline, a
/// second, normal turn's ask→first text.
pub(crate) async fn restart_run(script: &Path, state: &Path) -> RestartRun {
    let orchestrator = start_tree().await;
    let (tx, rx) = mpsc::channel::<Published>(SUBSCRIBER_CAPACITY);
    let (marks_tx, mut marks) = mpsc::unbounded_channel();
    let counter = watch_thread(rx, marks_tx);
    let spec = sim_spec("crash", script, Some(state));
    let session = orchestrator
        .spawn_session(spec, vec![tx])
        .await
        .expect("session spawns");
    wait_mark(&mut marks, |m| m.kind == Kind::Ready).await;
    let asked = Instant::now();
    let result = ractor::call!(session, |reply| SessionMsg::Ask {
        prompt: "go".into(),
        traceparent: None,
        reply
    })
    .expect("ask call")
    .expect("turn completes after the restart");
    assert_eq!(result.restarts, 1, "the turn restarted once");
    wait_mark(&mut marks, |m| m.kind == Kind::TurnEnded).await;
    let asked_again = Instant::now();
    ractor::call!(session, |reply| SessionMsg::Ask {
        prompt: "again".into(),
        traceparent: None,
        reply
    })
    .expect("ask call")
    .expect("echo turn completes");
    wait_mark(&mut marks, |m| m.kind == Kind::TurnEnded).await;
    let _closed = session.cast(SessionMsg::Close);
    orchestrator.shutdown().await;
    drop(marks);
    let all = counter.join().expect("watcher");
    let error = all
        .iter()
        .find(|m| m.kind == Kind::Error)
        .expect("cap.error of the death");
    let ready = all
        .iter()
        .find(|m| m.kind == Kind::Ready && m.at > error.at)
        .expect("ready after the restart");
    let text = all
        .iter()
        .find(|m| m.kind == Kind::FirstText && m.at > error.at)
        .expect("text after the restart");
    let echo = all
        .iter()
        .find(|m| m.kind == Kind::FirstText && m.at > asked_again)
        .expect("text of the second turn");
    RestartRun {
        ready: ready.at - error.at,
        text: text.at - error.at,
        stamped_ms: ready.ts_ms - error.ts_ms,
        death: error.at - asked,
        echo: echo.at - asked_again,
    }
}

pub(crate) struct RestartRun {
    ready: Duration,
    text: Duration,
    stamped_ms: u64,
    /// Ask → the death's cap.error.
    death: Duration,
    /// Ask → first text of a normal turn.
    echo: Duration,
}

/// Spawn the sim with piped stdio; time until its first line (`system/init`).
pub(crate) fn sim_boot() -> Duration {
    let t0 = Instant::now();
    let mut child = Command::new(EXE)
        .args(["sim", "--mode", "stream-json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sim");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("init line");
    let boot = t0.elapsed();
    assert!(line.contains("\"init\""), "first line is init: {line}");
    drop(child.stdin.take());
    let _ = child.wait();
    boot
}
