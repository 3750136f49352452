//! The harness catches what it claims to: a panic deep in a decoder, a heap that
//! grows faster than the input, each found from the seeds, shrunk and kept.

use capfleet_fuzz::check::{replay, search};
use capfleet_fuzz::targets::{Framing, Memory, Target};

/// Panics on a line that has both `"kind"` and a `7` — a needle mutations must find.
fn brittle(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    if text
        .lines()
        .any(|l| l.contains("\"kind\"") && l.contains('7'))
    {
        panic!("found the needle");
    }
}

/// Holds 64 bytes of heap per input byte, four times its bound.
fn greedy(input: &[u8]) {
    let held = vec![0u8; input.len() * 64];
    std::hint::black_box(&held);
}

fn target(name: &'static str, run: fn(&[u8])) -> Target {
    Target {
        name,
        reads: "a test of the harness",
        framing: Framing::JsonLines,
        seeds: &["fuzz/seeds/acp_update"],
        dict: &["kind", "text"],
        run,
        memory: Memory {
            fixed: 4096,
            per_byte: 16,
        },
    }
}

fn caught(t: &Target) -> String {
    let keep = tempfile::tempdir().expect("temp dir");
    let found = std::panic::catch_unwind(|| search(t, 2000, 7, keep.path()))
        .expect_err("the search finds a breaking input");
    let message = found.downcast_ref::<String>().cloned().expect("a message");
    let kept: Vec<_> = std::fs::read_dir(keep.path().join(t.name))
        .expect("the input is kept")
        .collect();
    assert_eq!(kept.len(), 1, "{message}");
    // The kept input fails the replay too.
    let replayed = std::panic::catch_unwind(|| replay(t, keep.path()));
    assert!(replayed.is_err(), "the kept input breaks the replay");
    message
}

#[test]
fn a_panic_is_found_shrunk_and_kept() {
    let message = caught(&target("brittle", brittle));
    assert!(message.contains("panicked: found the needle"), "{message}");
}

#[test]
fn a_heap_past_the_bound_is_found() {
    let message = caught(&target("greedy", greedy));
    assert!(message.contains("bytes of heap at once"), "{message}");
}
