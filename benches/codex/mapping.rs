//! Part 3: the mapping alone, no process: the lines each binding reads for one agent
//! message, as Codex 0.171.0 writes them (the app-server's recorded in
//! `tests/fixtures/codex_app_server/`, exec's as in `benches/session/codex.rs`),
//! through the binding's mapper to CAP
//! events. The app-server says an agent message in three lines (`item/started`, a
//! delta, `item/completed`), exec in one (`item.completed`): this is capfleet's own
//! cost per message on each path, what the flood's events/s cannot show apart from
//! Codex's.

use std::time::Duration;

use capfleet_wire::bindings::codex_app::AppMapper;
use capfleet_wire::bindings::codex_exec::{CodexExecMapper, Totals};

use crate::figures::best_of;

const THREAD: &str = "01a2514a-6f99-7592-a392-e2810600d160";
const TURN: &str = "01a2514a-6ffc-7510-8651-14e91d6c9b41";

/// The app-server's lines for `n` agent messages of `text`.
pub(crate) fn app_lines(n: u64, text: &str) -> Vec<String> {
    let mut lines = vec![format!(
        r#"{{"method":"turn/started","params":{{"threadId":"{THREAD}","turn":{{"id":"{TURN}","items":[],"status":"inProgress"}}}}}}"#
    )];
    for i in 0..n {
        let item = |text: &str, done: &str| {
            format!(
                r#"{{"type":"agentMessage","moderation":null,"id":"msg_fake{i:04}","text":"{text}","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":1796660163287,"completedAtMs":{done}}}"#
            )
        };
        lines.push(format!(
            r#"{{"method":"item/started","params":{{"item":{},"threadId":"{THREAD}","turnId":"{TURN}","startedAtMs":1796660163287}},"emittedAtMs":1796660163287}}"#,
            item("", "null")
        ));
        lines.push(format!(
            r#"{{"method":"item/agentMessage/delta","params":{{"threadId":"{THREAD}","turnId":"{TURN}","itemId":"msg_fake{i:04}","delta":"{text}"}},"emittedAtMs":1796660163288}}"#
        ));
        lines.push(format!(
            r#"{{"method":"item/completed","params":{{"item":{},"threadId":"{THREAD}","turnId":"{TURN}","contentTokenCount":null,"completedAtMs":1796660163288}},"emittedAtMs":1796660163291}}"#,
            item(text, "1796660163288")
        ));
    }
    lines
}

/// `codex exec --json`'s lines for `n` agent messages of `text`.
pub(crate) fn exec_lines(n: u64, text: &str) -> Vec<String> {
    let mut lines = vec![
        format!(r#"{{"type":"thread.started","thread_id":"{THREAD}"}}"#),
        r#"{"type":"turn.started"}"#.to_owned(),
    ];
    for i in 0..n {
        lines.push(format!(
            r#"{{"type":"item.completed","item":{{"id":"item_{i}","type":"agent_message","text":"{text}"}}}}"#
        ));
    }
    lines
}

/// The fastest of 5 passes of `lines` through a fresh mapper, and the events made.
fn timed<M>(
    lines: &[String],
    new: impl Fn() -> M,
    map: impl Fn(&mut M, &[u8]) -> usize,
) -> (Duration, usize) {
    let mut events = 0;
    let took = best_of(5, || {
        let mut m = new();
        events = lines.iter().map(|l| map(&mut m, l.as_bytes())).sum();
    });
    (took, events)
}

/// Per agent message: (app-server, exec) mapping time, and the events each made.
pub(crate) fn per_message(n: u64) -> ((Duration, usize), (Duration, usize)) {
    let text = "xxxxxxxx";
    let app = timed(
        &app_lines(n, text),
        || AppMapper::new(0, None),
        |m, line| {
            let mut out = Vec::new();
            m.on_line(line, &mut out);
            out.len()
        },
    );
    let exec = timed(
        &exec_lines(n, text),
        || CodexExecMapper::new(0, None, Totals::default()),
        |m, line| {
            let mut out = Vec::new();
            m.on_line(line, &mut out);
            out.len()
        },
    );
    (app, exec)
}
