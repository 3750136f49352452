//! Codex over `codex app-server` against Codex over `codex exec --json` (issue 39's
//! bench): the real Codex CLI (the suite's pinned version, `tests/support/
//! install_peers.sh`) offline against the fake LLM, both bindings in the same run,
//! interleaved pass by pass, figures the median of the passes:
//!
//! 1. the second turn's start: from the session's `turn_started` to the turn's first
//!    agent event, and to its first text (exec starts a process per turn; the
//!    app-server's thread is already open). Goal: the app-server's >= 5x sooner;
//! 2. a flood turn of [`ITEMS`] agent messages (one response of that many `message`
//!    items from the fake LLM, its `items` key): CAP events per second from
//!    `turn_started` to `turn_ended`, with capfleet's own CPU per 1,000 events (this
//!    process: the session, the driver, the mapping) and Codex's CPU over the
//!    session (its processes, reaped). Goal: the app-server's events/s >= exec's;
//! 3. the mapping alone ([`mapping`]): the lines of one agent message through each
//!    binding's mapper, in this process, per message;
//! 4. Codex alone ([`alone`]): the same flood with no capfleet, each path driven by
//!    the least there is, in the same passes: the baseline of part 2's ratio.
//!
//! Each pass is one fresh session per binding: a first turn, the second (timed), the
//! flood. Run: `cargo bench --bench codex` (`CAPFLEET_BENCH_PASSES`, default 3;
//! `CAPFLEET_BENCH_ITEMS`). Prints figures; asserts nothing about time.
// A bench's figures are its output.
#![allow(clippy::print_stdout)]

mod alone;
mod mapping;
mod peer;
mod session;

#[allow(dead_code)]
#[path = "../support/figures.rs"]
mod figures;

use figures::ms;
use session::{Pass, Via};

/// Agent messages in the flood turn.
const ITEMS: u64 = 10_000;
/// Passes (one session per binding each).
const PASSES: usize = 3;

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let passes = env_or("CAPFLEET_BENCH_PASSES", PASSES).max(1);
    let items = env_or("CAPFLEET_BENCH_ITEMS", ITEMS).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let fake = peer::FakeLlm::start();
    let codex = peer::peer("codex");
    println!(
        "capfleet codex bench: {} against the fake LLM, {passes} interleaved passes, \
         a flood of {items} agent messages (2 tokio workers, as `capfleet chat`)",
        codex.display()
    );
    let (mut app, mut exec) = (Vec::new(), Vec::new());
    let (mut app_alone, mut exec_alone) = (Vec::new(), Vec::new());
    for pass in 0..passes {
        // Who goes first alternates: neither binding always runs on a warmer machine.
        let order = if pass % 2 == 0 {
            [Via::AppServer, Via::Exec]
        } else {
            [Via::Exec, Via::AppServer]
        };
        for via in order {
            let p = rt.block_on(session::pass(via, &fake, &codex, items));
            println!("   pass {} {:<10} {p}", pass + 1, via.name());
            match via {
                Via::AppServer => app.push(p),
                Via::Exec => exec.push(p),
            }
        }
        for via in order {
            let a = alone::flood(via, &fake, &codex, items);
            println!(
                "   pass {} {:<10} Codex alone: the flood in {:.2} s ({:.0}/s), {} lines, {} bytes, Codex CPU {:.2} s",
                pass + 1,
                via.name(),
                a.took.as_secs_f64(),
                items as f64 / a.took.as_secs_f64(),
                a.lines,
                a.bytes,
                a.cpu.as_secs_f64()
            );
            match via {
                Via::AppServer => app_alone.push(a),
                Via::Exec => exec_alone.push(a),
            }
        }
    }
    report(&app, &exec, items);
    let ((app_t, app_ev), (exec_t, exec_ev)) = mapping::per_message(items);
    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / items as f64;
    println!(
        "\n3. the mapping alone, {items} agent messages through each binding's mapper (fastest of 5):"
    );
    println!(
        "   app-server (3 lines a message) {:>7.2} us a message, {app_ev} outputs",
        per(app_t)
    );
    println!(
        "   exec       (1 line a message)  {:>7.2} us a message, {exec_ev} outputs   app-server {:.2}x exec's",
        per(exec_t),
        app_t.as_secs_f64() / exec_t.as_secs_f64()
    );
    alone_report(&app_alone, &exec_alone, items);
}

/// Part 4's figures: Codex's own rate, what it writes per message and its CPU.
fn alone_report(app: &[alone::Alone], exec: &[alone::Alone], items: u64) {
    let med = |v: &[alone::Alone], f: fn(&alone::Alone) -> f64| median(v.iter().map(f).collect());
    let n = items as f64;
    println!(
        "\n4. Codex alone (no capfleet, its output read by a counting reader), the same flood, median of {}:",
        app.len()
    );
    type Figure = fn(&alone::Alone) -> f64;
    let rows: [(&str, Figure, &str); 4] = [
        (
            "messages/s",
            |a| 1.0 / a.took.as_secs_f64(),
            "Codex's own ratio",
        ),
        ("lines a message", |a| a.lines as f64, ""),
        ("bytes a message", |a| a.bytes as f64, ""),
        ("Codex CPU a message", |a| a.cpu.as_secs_f64() * 1e6, "(us)"),
    ];
    for (what, f, note) in rows {
        let (a, e) = (med(app, f), med(exec, f));
        // Per message: the rate's `1 / took` times the items, the others over them.
        let (a, e) = if what == "messages/s" {
            (a * n, e * n)
        } else {
            (a / n, e / n)
        };
        println!(
            "   {what:<20} app-server {a:>10.2}   exec {e:>10.2}   app-server {:.2}x exec's {note}",
            a / e
        );
    }
}

fn report(app: &[Pass], exec: &[Pass], items: u64) {
    let med = |ps: &[Pass], f: fn(&Pass) -> f64| median(ps.iter().map(f).collect());
    let first_event = |p: &Pass| ms(p.second_first_event);
    let first_text = |p: &Pass| ms(p.second_first_text);
    let per_s = |p: &Pass| p.events_per_s();
    let ours = |p: &Pass| p.our_cpu_per_k_events();
    let codex_cpu = |p: &Pass| p.codex_cpu.as_secs_f64();
    let wall = |p: &Pass| p.flood_wall.as_secs_f64();
    println!(
        "\n1. the second turn's start (turn_started to ...), median of {}:",
        app.len()
    );
    for (what, f) in [
        ("first agent event", first_event as fn(&Pass) -> f64),
        ("first text", first_text),
    ] {
        let (a, e) = (med(app, f), med(exec, f));
        println!(
            "   {what:<18} app-server {a:>9.2} ms   exec {e:>9.2} ms   app-server {:.1}x sooner (goal >= 5x)",
            e / a
        );
    }
    println!(
        "\n2. a turn of {items} agent messages, median of {}:",
        app.len()
    );
    let (a, e) = (med(app, per_s), med(exec, per_s));
    println!(
        "   events/s           app-server {a:>9.0}      exec {e:>9.0}      {:.2}x exec's (goal >= 1x)",
        a / e
    );
    println!(
        "   turn wall          app-server {:>9.2} s    exec {:>9.2} s",
        med(app, wall),
        med(exec, wall)
    );
    println!(
        "   capfleet CPU       app-server {:>9.2} ms   exec {:>9.2} ms   per 1,000 events",
        med(app, ours),
        med(exec, ours)
    );
    println!(
        "   Codex CPU          app-server {:>9.2} s    exec {:>9.2} s    the session's three turns",
        med(app, codex_cpu),
        med(exec, codex_cpu)
    );
}
