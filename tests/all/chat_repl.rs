//! `capfleet chat` as a REPL in a real terminal (tmux): it says once how to leave,
//! the prompt stands on a line of its own after an answer that ends mid-line, and
//! `/quit` ends the chat.

use common::tmux::{EXITED, Tmux};

use crate::common;

/// An answer whose last line has no newline (as agents' answers mostly end).
const ANSWER: &str = "Done: all 12 tests pass.";

const HINT: &str = "Ctrl-D or /quit ends the chat";

#[test]
fn the_prompt_stands_on_its_own_line_and_quit_ends_the_chat() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("answer.toml");
    std::fs::write(
        &script,
        format!("[[turn]]\nsteps = [{{ say = \"{ANSWER}\" }}]\n"),
    )
    .unwrap();
    let line = format!(
        "env -u NO_COLOR XDG_CONFIG_HOME={config} {bin} chat sim --script {script}",
        config = dir.path().join("config").display(),
        bin = common::BIN,
        script = script.display(),
    );
    let tmux = Tmux::start("repl", 100, dir.path(), &line);
    tmux.wait_for("the first prompt", |s| {
        s.lines().any(|l| l.trim_end() == "›")
    });
    tmux.keys(&["hello", "Enter"]);
    let answered = tmux.wait_for("the answer and the next prompt", |s| {
        let lines: Vec<&str> = s.lines().map(str::trim_end).collect();
        lines
            .iter()
            .position(|l| l.contains(ANSWER))
            .is_some_and(|i| lines[i + 1..].contains(&"›"))
    });
    let answer = answered.lines().find(|l| l.contains(ANSWER)).unwrap();
    assert_eq!(
        answer.trim_end(),
        ANSWER,
        "the prompt is not glued to the answer:\n{answered}"
    );
    assert_eq!(answered.matches(HINT).count(), 1, "said once:\n{answered}");
    tmux.keys(&["/quit", "Enter"]);
    let end = tmux.wait_for("the chat's end", |s| s.contains(EXITED));
    assert!(
        end.contains(&format!("{EXITED} 0]")),
        "/quit ends the chat:\n{end}"
    );
}
