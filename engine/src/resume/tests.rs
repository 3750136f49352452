//! Recovery of a cut turn from a journal written by hand: its partial text and the
//! tool calls it had started, carried on through a resumed run's turn cut again.

use super::recover;

/// A journal of session `cap://f/a`'s records `lines` (each `{…}` without its
/// `urn`), recovered.
fn recovered(lines: &[&str]) -> super::SessionRecovery {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let text: String = lines
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{{\"seq\":{},\"urn\":\"cap://f/a\",{l}\n", i + 1))
        .collect();
    std::fs::write(&path, text).unwrap();
    let r = recover(&path, "f").unwrap();
    r.sessions["cap://f/a"].clone()
}

const WRITE: &str = r#""turn":1,"type":"cap","event":{"kind":"cap.tool_call.start","call_id":"c1","name":"Write","input":{"file_path":"notes.md","content":"x"}}}"#;
const BASH: &str = r#""turn":1,"type":"cap","event":{"kind":"cap.tool_call.start","call_id":"c2","name":"Bash","input":{"command":"ls"}}}"#;
const TEXT: &str =
    r#""turn":1,"type":"cap","event":{"kind":"cap.text_chunk","message_id":"m","text":"half"}}"#;

#[test]
fn a_cut_turn_carries_its_text_and_the_tool_calls_it_started() {
    let s = recovered(&[
        r#""turn":1,"type":"turn_started","attempt":1,"prompt":"go"}"#,
        WRITE,
        TEXT,
        BASH,
    ]);
    assert_eq!(s.interrupted.as_deref(), Some("half"));
    assert_eq!(s.interrupted_tools.describe(), "Write notes.md, Bash ls");

    // The calls of a turn before the cut one are not the cut one's.
    let s = recovered(&[
        r#""turn":1,"type":"turn_started","attempt":1,"prompt":"go"}"#,
        WRITE,
        r#""turn":1,"type":"turn_ended","outcome":"completed","stop_reason":"end_turn"}"#,
        r#""turn":2,"type":"turn_started","attempt":1,"prompt":"again"}"#,
    ]);
    assert_eq!(s.interrupted.as_deref(), Some(""));
    assert!(s.interrupted_tools.is_empty());

    // Re-issued with them (its text went out inside the prompt) and cut again: the
    // first cut's calls go on with the second's.
    let s = recovered(&[
        r#""turn":1,"type":"turn_started","attempt":1,"prompt":"go"}"#,
        WRITE,
        r#""turn":2,"type":"turn_started","attempt":1,"prompt":"go…","text_from":{"carried":"half"}}"#,
        &BASH.replace("\"turn\":1", "\"turn\":2"),
    ]);
    assert_eq!(s.interrupted.as_deref(), Some("half"));
    assert_eq!(s.interrupted_tools.describe(), "Write notes.md, Bash ls");
}
