//! Running `capfleet chat --json` to the end (bounded) and reading its NDJSON.

use std::io::{Read, Write};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Run `cmd` (a `capfleet chat --json ...` with piped stdout) to the end, at most
/// `limit`; SIGINT it after `signal_after` if given. Returns the NDJSON events
/// and the exit code. Panics (after killing it) when it outlives `limit`.
pub(crate) fn run_chat(
    cmd: Command,
    signal_after: Option<Duration>,
    limit: Duration,
) -> (Vec<Value>, Option<i32>) {
    let (events, status) = run_chat_with(cmd, signal_after, None, limit);
    (events, status.code())
}

/// [`run_chat`] with `stdin` written to the child (give `cmd` a piped stdin), and
/// the whole exit status.
pub(crate) fn run_chat_with(
    mut cmd: Command,
    signal_after: Option<Duration>,
    stdin: Option<String>,
    limit: Duration,
) -> (Vec<Value>, ExitStatus) {
    // SAFETY: restores the default SIGINT disposition in the child before exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn capfleet");
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        std::thread::spawn(move || {
            let _ = pipe.write_all(text.as_bytes());
        });
    }
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let start = Instant::now();
    let mut signalled = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if let Some(after) = signal_after
            && !signalled
            && start.elapsed() >= after
        {
            // SAFETY: signalling our own child by pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            signalled = true;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let out = reader.join().unwrap_or_default();
            panic!("capfleet chat did not finish within {limit:?}; stdout:\n{out}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = reader.join().expect("stdout reader");
    let events = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    (events, status)
}

/// The assistant's text, concatenated.
pub(crate) fn texts(events: &[Value]) -> String {
    events
        .iter()
        .filter(|e| e["event"]["kind"] == "cap.text_chunk" && e["event"]["channel"] == "assistant")
        .map(|e| e["event"]["text"].as_str().unwrap_or_default())
        .collect()
}

/// Session events of one `type`.
pub(crate) fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

/// CAP events of one `kind`.
pub(crate) fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["event"]["kind"] == kind)
        .collect()
}
