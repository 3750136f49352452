//! Unit tests of [`super::LineParser`].
use super::*;
use crate::manifest::patterns::compile;
use crate::protocol::PlanStatus;

fn parser() -> LineParser {
    let re = |p: &str| compile(p).ok();
    let patterns = Patterns {
        idle: vec![compile("^❯\\s*$").expect("idle")],
        tool_call_start: re("^◉ (?P<tool>\\w+)\\((?P<args>.*)\\)$"),
        tool_call_end: re("^◉ (?P<tool>\\w+) (?P<status>completed|failed)$"),
        plan_section: re("^## Plan$"),
        thought_section: re("^_thinking_ "),
        ask_yes_no: re("\\(y/n\\)$"),
        ask_options: re("^\\? Select: (?P<options>.+)$"),
        error_lines: vec![compile("rate_limit_error").expect("err")],
        ..Patterns::default()
    };
    LineParser::new(patterns)
}

fn feed(p: &mut LineParser, lines: &[&str]) -> Vec<CapEvent> {
    let mut out = Vec::new();
    for l in lines {
        p.on_line(l, &mut out);
    }
    p.end_turn(&mut out);
    out
}

fn kinds(events: &[CapEvent]) -> Vec<&'static str> {
    events.iter().map(CapEvent::kind).collect()
}

#[test]
fn echo_idle_and_chrome_are_not_text() {
    let mut p = parser();
    p.begin_turn("hello");
    let out = feed(
        &mut p,
        &[
            "❯ hello",
            " ▐▟███▟█   Claude Code v2.1.337",
            "▝▜██████▀  Opus 5.5 · API Usage Billing",
            " ▝▝   ▝▝   /tmp/work",
            "⠋ Working…",
            "Hi!",
            "",
            "· tokens in 1",
            "Bye",
            "❯",
        ],
    );
    let texts: Vec<_> = out
        .iter()
        .filter_map(|e| match e {
            CapEvent::TextChunk(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Hi!\n", "\nBye\n"]);
}

#[test]
fn tools_pair_and_collect_their_output() {
    let mut p = parser();
    p.begin_turn("x");
    let out = feed(
        &mut p,
        &[
            "◉ Bash(ls)",
            "  ⎿ a",
            "◉ Bash completed",
            "◉ Read(f)",
            "◉ Read failed",
        ],
    );
    assert_eq!(
        kinds(&out),
        [
            "cap.tool_call.start",
            "cap.tool_call.delta",
            "cap.tool_call.end",
            "cap.tool_call.start",
            "cap.tool_call.end"
        ]
    );
    let CapEvent::ToolCallEnd(end) = &out[4] else {
        panic!("end")
    };
    assert_eq!(end.is_error.get(), Some(&true));
}

#[test]
fn asks_errors_and_repeats() {
    let mut p = parser();
    p.begin_turn("x");
    let out = feed(
        &mut p,
        &[
            "Proceed? (y/n)",
            "Proceed? (y/n)",
            "Which DB?",
            "? Select: pg, sqlite",
            "rate_limit_error: slow",
        ],
    );
    assert_eq!(
        kinds(&out),
        [
            "cap.ask_user",
            "cap.text_chunk",
            "cap.ask_user",
            "cap.error"
        ]
    );
    let CapEvent::AskUser(ask) = &out[2] else {
        panic!("ask")
    };
    assert_eq!(ask.prompt, "Which DB?");
    assert!(p.saw_error());
}

#[test]
fn a_turn_forgets_the_asks_and_the_echo_of_the_last() {
    let mut p = parser();
    p.begin_turn("x");
    let out = feed(&mut p, &["Proceed? (y/n)"]);
    let CapEvent::AskUser(ask) = &out[0] else {
        panic!("ask")
    };
    p.expect_echo("maybe");
    p.begin_turn("y");
    assert_eq!(p.take_ask(&ask.ask_id), None, "an ask of the last turn");
    let out = feed(&mut p, &["maybe"]);
    assert_eq!(
        kinds(&out),
        ["cap.text_chunk"],
        "an old answer's echo is text now"
    );
}

#[test]
fn plan_and_thought_sections() {
    let mut p = parser();
    p.begin_turn("x");
    let out = feed(
        &mut p,
        &[
            "_thinking_ hmm",
            "  more",
            "## Plan",
            "  [x] p1 Design (high)",
            "  [ ] Build",
            "text",
        ],
    );
    assert_eq!(
        kinds(&out),
        ["cap.thought", "cap.thought", "cap.plan", "cap.text_chunk"]
    );
    let CapEvent::Plan(plan) = &out[2] else {
        panic!("plan")
    };
    assert_eq!(plan.entries[0].id, "p1");
    assert_eq!(plan.entries[0].status, PlanStatus::Completed);
    assert_eq!(plan.entries[1].id, "2");
}
