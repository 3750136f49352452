//! The stream-json mapper's stray frames: where none may come, never part of a turn.

use super::mapper::StreamJsonMapper;
use super::output::Output;
use crate::bindings::STRAY_FRAME;
use crate::protocol::CapEvent;

const INIT: &str = r#"{"type":"system","subtype":"init","session_id":"s1"}"#;
const RESULT: &str = r#"{"type":"result","subtype":"success","result":"hi","total_cost_usd":0.5}"#;

fn feed(m: &mut StreamJsonMapper, lines: &[&str]) -> Vec<Output> {
    let mut out = Vec::new();
    for l in lines {
        m.on_line(l.as_bytes(), &mut out);
    }
    out
}

fn stray_errors(out: &[Output]) -> Vec<String> {
    out.iter()
        .filter_map(|o| match o {
            Output::Event(CapEvent::Error(e)) if e.code.as_str() == STRAY_FRAME => {
                Some(e.message.clone())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn results_before_init_or_outside_a_turn_are_stray() {
    let mut m = StreamJsonMapper::new().with_turns();
    let out = feed(&mut m, &[RESULT, INIT, RESULT]);
    let strays = stray_errors(&out);
    assert_eq!(strays.len(), 2, "{out:?}");
    assert!(strays[0].contains("before the agent's init"), "{strays:?}");
    assert!(strays[1].contains("outside any turn"), "{strays:?}");
    assert!(!out.iter().any(|o| matches!(o, Output::TurnEnd(_))));
    assert!(
        !out.iter()
            .any(|o| matches!(o, Output::Event(CapEvent::Usage(_))))
    );
    assert_eq!(m.stats().stray_frames, 2);
    // A turn's own result is its end, with its cost; the next one is stray again.
    m.begin_turn();
    let out = feed(&mut m, &[RESULT, RESULT]);
    assert!(matches!(out.get(1), Some(Output::TurnEnd(_))), "{out:?}");
    assert_eq!(stray_errors(&out).len(), 1);
    assert_eq!(m.stats().stray_frames, 3);
    assert_eq!(m.stats().malformed_frames, 0);
}

#[test]
fn a_turns_frames_before_init_or_before_any_prompt_are_stray() {
    const TEXT: &str =
        r#"{"type":"assistant","message":{"id":"m0","content":[{"type":"text","text":"stray"}]}}"#;
    let mut m = StreamJsonMapper::new().with_turns();
    m.begin_turn();
    let out = feed(&mut m, &[TEXT, RESULT, INIT]);
    let strays = stray_errors(&out);
    assert_eq!(strays.len(), 2, "{out:?}");
    assert!(strays[0].starts_with("stray `assistant` frame before the agent's init"));
    assert!(!out.iter().any(|o| matches!(
        o,
        Output::Event(CapEvent::TextChunk(_)) | Output::TurnEnd(_)
    )));
    // After the init and a prompt, the turn's own text.
    let out = feed(&mut m, &[TEXT]);
    assert!(matches!(&out[..], [Output::Event(CapEvent::TextChunk(t))] if t.text == "stray"));
    // A process that says something after its init, before any prompt.
    let mut m = StreamJsonMapper::new().with_turns();
    let out = feed(&mut m, &[INIT, TEXT]);
    assert!(
        stray_errors(&out)[0].contains("before any prompt"),
        "{out:?}"
    );
    assert_eq!(m.stats().stray_frames, 1);
}

#[test]
fn without_turns_every_result_ends_a_turn() {
    let mut m = StreamJsonMapper::new();
    let out = feed(&mut m, &[RESULT, RESULT]);
    let ends = out
        .iter()
        .filter(|o| matches!(o, Output::TurnEnd(_)))
        .count();
    assert_eq!(ends, 2);
    assert_eq!(m.stats().stray_frames, 0);
}
