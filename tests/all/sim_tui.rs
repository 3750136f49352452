//! End-to-end tests of `capfleet sim --mode tui` on a real PTY, rendered
//! with vt100, and of the `config/agents/sim-tui.toml` parse patterns.

use std::num::NonZeroU16;
use std::path::PathBuf;
use std::time::Duration;

use regex::Regex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{Instant, timeout};

use crate::common;

const ROWS: u16 = 40;
const COLS: u16 = 120;
const TIMEOUT: Duration = Duration::from_secs(5);

struct Term {
    pty: pty_process::Pty,
    child: tokio::process::Child,
    parser: vt100::Parser,
    raw: Vec<u8>,
}

impl Term {
    async fn spawn(args: &[&str]) -> Term {
        let (pty, pts) = pty_process::open().expect("open pty");
        pty.resize(pty_process::Size::new(ROWS, COLS))
            .expect("resize");
        let child = pty_process::Command::new(common::BIN)
            .args(["sim", "--mode", "tui"])
            .args(args)
            .env_remove("CAPFLEET_SIM_SCRIPT")
            .env("TERM", "xterm-256color")
            .kill_on_drop(true)
            .spawn(pts)
            .expect("spawn sim on pty");
        let rows = NonZeroU16::new(ROWS).expect("rows");
        let cols = NonZeroU16::new(COLS).expect("cols");
        Term {
            pty,
            child,
            parser: vt100::Parser::new(rows, cols, 1000),
            raw: Vec::new(),
        }
    }

    async fn script(script: &str) -> Term {
        Term::spawn(&["--script-inline", script]).await
    }

    async fn type_text(&mut self, bytes: &[u8]) {
        self.pty.write_all(bytes).await.expect("write to pty");
        self.pty.flush().await.expect("flush pty");
    }

    /// Rendered rows, trailing blanks trimmed, trailing empty rows dropped.
    fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .parser
            .screen()
            .rows(0, COLS)
            .map(|r| r.trim_end().to_string())
            .collect();
        while lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        lines
    }

    /// Reads output until `done` holds for the rendered lines.
    async fn wait_for(&mut self, what: &str, done: impl Fn(&[String]) -> bool) {
        let deadline = Instant::now() + TIMEOUT;
        while !done(&self.lines()) {
            self.read_some(what, deadline).await;
        }
    }

    /// Reads output until the raw bytes contain `needle`.
    async fn wait_raw(&mut self, needle: &[u8]) {
        let deadline = Instant::now() + TIMEOUT;
        while !self.raw.windows(needle.len()).any(|w| w == needle) {
            self.read_some(&format!("{needle:?}"), deadline).await;
        }
    }

    async fn read_some(&mut self, what: &str, deadline: Instant) {
        let mut buf = [0u8; 8192];
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "timed out waiting for {what}; screen:\n{}",
            self.lines().join("\n")
        );
        match timeout(
            left.min(Duration::from_millis(100)),
            self.pty.read(&mut buf),
        )
        .await
        {
            Ok(Ok(n)) if n > 0 => {
                self.parser.process(&buf[..n]);
                self.raw.extend_from_slice(&buf[..n]);
            }
            Ok(_) => panic!(
                "pty closed waiting for {what}; screen:\n{}",
                self.lines().join("\n")
            ),
            Err(_) => {}
        }
    }

    /// Waits until the screen shows the idle prompt after `turns` turns.
    async fn wait_idle(&mut self, turns: usize) {
        self.wait_for(&format!("prompt after {turns} turns"), |lines| {
            lines.last().is_some_and(|l| l == "❯")
                && lines.iter().filter(|l| l.starts_with('❯')).count() == turns + 1
        })
        .await;
    }

    async fn ready(&mut self) {
        self.wait_for("ready line", |lines| {
            lines.iter().any(|l| l == "✓ capfleet sim ready")
        })
        .await;
        self.wait_idle(0).await;
    }

    /// Rendered lines after the last prompt line containing `prompt`.
    fn turn_lines(&self, prompt: &str) -> Vec<String> {
        let lines = self.lines();
        let start = lines
            .iter()
            .rposition(|l| l == &format!("❯ {prompt}"))
            .expect("the prompt line");
        lines[start + 1..].to_vec()
    }
}

/// The `[parse]` patterns of the shipped manifest.
struct Patterns {
    ready: Regex,
    idle: Regex,
    rules: Vec<(&'static str, Regex)>,
}

fn patterns() -> Patterns {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/agents/sim-tui.toml");
    let manifest: toml::Table = std::fs::read_to_string(path)
        .expect("manifest")
        .parse()
        .expect("manifest TOML");
    let parse = manifest["parse"].as_table().expect("[parse]");
    let regex =
        |v: &toml::Value| Regex::new(v.as_str().expect("pattern string")).expect("valid pattern");
    let mut rules = Vec::new();
    for key in [
        "tool_call_start",
        "tool_call_end",
        "plan_section",
        "thought_section",
        "ask_yes_no",
        "ask_options",
    ] {
        rules.push((key, regex(&parse[key])));
    }
    for pattern in parse["error_lines"].as_array().expect("error_lines") {
        rules.push(("error_lines", regex(pattern)));
    }
    let ready = regex(&manifest["startup"]["ready_when"]["pattern"]);
    Patterns {
        ready,
        idle: regex(&parse["idle"].as_array().expect("idle")[0]),
        rules,
    }
}

impl Patterns {
    /// The first rule matching each line (`text` when none).
    fn classify(&self, lines: &[String]) -> Vec<&'static str> {
        let rule = |line: &String| {
            self.rules
                .iter()
                .find(|(_, re)| re.is_match(line))
                .map_or("text", |(key, _)| *key)
        };
        lines.iter().map(rule).collect()
    }
}

fn fixture_path() -> String {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sim/coding_turn.toml");
    path.to_str().expect("utf-8 path").to_string()
}

#[tokio::test]
async fn scripted_turn_renders_and_matches_manifest_patterns() {
    let mut term = Term::spawn(&["--script", &fixture_path()]).await;
    term.ready().await;
    let patterns = patterns();
    assert!(term.lines().iter().any(|l| patterns.ready.is_match(l)));
    assert!(
        term.lines()
            .first()
            .is_some_and(|l| l.starts_with("✻ capfleet sim · sim-model · session sess-fixture"))
    );
    term.type_text(b"build it\r").await;
    term.wait_idle(1).await;
    let lines = term.turn_lines("build it");
    let expected = [
        "Hello world",
        "_thinking_ pondering the task",
        "◉ Bash(ls -la)",
        "  ⎿ a.txt",
        "  ⎿ b.txt",
        "◉ Bash completed",
        "## Plan",
        "  [x] p1 Design schema (high)",
        "  [~] p2 Write code",
        "· tokens in 120 · out 30 · cache read 50 · cache write 7 · $0.0125",
        "Done.",
        "❯",
    ];
    assert_eq!(lines, expected);
    assert!(
        !term.lines().iter().any(|l| l.contains("Working")),
        "spinner gone"
    );
    assert!(
        term.raw.windows(3).any(|w| w == b"\x1b[K"),
        "spinner redraws"
    );
    assert_eq!(
        patterns.classify(&lines),
        [
            "text",
            "thought_section",
            "tool_call_start",
            "text",
            "text",
            "tool_call_end",
            "plan_section",
            "text",
            "text",
            "text",
            "text",
            "text"
        ]
    );
    assert!(patterns.idle.is_match(lines.last().expect("prompt")));
    let start = patterns.rules[0].1.captures(&lines[2]).expect("tool start");
    assert_eq!((&start["tool"], &start["args"]), ("Bash", "ls -la"));
    let end = patterns.rules[1].1.captures(&lines[5]).expect("tool end");
    assert_eq!((&end["tool"], &end["status"]), ("Bash", "completed"));
}

#[tokio::test]
async fn asks_permission_and_errors() {
    let script = r#"turn = [{ steps = [
        { ask = "Do you want me to continue?" },
        { say = "continuing" },
        { ask = "Which DB?", options = ["pg", "sqlite"] },
        { permission = "Bash", input = { command = "rm -rf build" }, risk = "high", output = "removed" },
        { error = "rate_limit_error: slow down" },
    ] }]"#;
    let mut term = Term::script(script).await;
    term.ready().await;
    term.type_text(b"go\r").await;
    term.wait_for("y/n ask", |l| {
        l.last()
            .is_some_and(|l| l == "Do you want me to continue? (y/n)")
    })
    .await;
    term.type_text(b"y\r").await;
    term.wait_for("options ask", |l| {
        l.last().is_some_and(|l| l == "? Select: pg, sqlite")
    })
    .await;
    term.type_text(b"2\r").await;
    term.wait_for("permission ask", |l| {
        l.last()
            .is_some_and(|l| l == "Do you want to proceed? (y/n)")
    })
    .await;
    term.type_text(b"y\r").await;
    term.wait_idle(1).await;
    let lines = term.turn_lines("go");
    let expected = [
        "Do you want me to continue? (y/n)",
        "y",
        "continuing",
        "Which DB?",
        "? Select: pg, sqlite",
        "2",
        "◉ Bash(rm -rf build)",
        "⚠ Permission required: Bash (risk: high)",
        "Do you want to proceed? (y/n)",
        "y",
        "  ⎿ removed",
        "◉ Bash completed",
        "rate_limit_error: slow down",
        "❯",
    ];
    assert_eq!(lines, expected);
    let classes = patterns().classify(&lines);
    assert_eq!(
        (classes[0], classes[4], classes[8], classes[12]),
        ("ask_yes_no", "ask_options", "ask_yes_no", "error_lines")
    );
}

#[tokio::test]
async fn bracketed_paste_is_one_prompt() {
    let mut term = Term::spawn(&[]).await;
    term.ready().await;
    term.type_text(b"\x1b[200~first line\rsecond line\x1b[201~\r")
        .await;
    term.wait_idle(1).await;
    let lines = term.lines();
    let start = lines
        .iter()
        .position(|l| l == "❯ first line")
        .expect("pasted prompt");
    assert_eq!(
        lines[start..],
        [
            "❯ first line",
            "second line",
            "echo: first line",
            "second line",
            "❯"
        ]
    );
}

#[tokio::test]
async fn ctrl_c_cancels_the_turn() {
    let script = r#"turn = [{ steps = [{ say = "working on it" }, { sleep_ms = 10000 }, { say = "never" }] }]"#;
    let mut term = Term::script(script).await;
    term.ready().await;
    term.type_text(b"go\r").await;
    // The said line first, then the spinner under it: a Ctrl-C sent on the spinner
    // alone may land before the line is drawn (a loaded machine did so).
    term.wait_for("the said line and the spinner", |l| {
        l.iter().any(|l| l == "working on it") && l.last().is_some_and(|l| l.ends_with("Working…"))
    })
    .await;
    let sent = Instant::now();
    term.type_text(b"\x03").await;
    term.wait_idle(1).await;
    assert!(sent.elapsed() < Duration::from_secs(2));
    assert_eq!(
        term.turn_lines("go"),
        ["working on it", "⎿ Interrupted by user", "❯"]
    );
    term.type_text(b"again\r").await;
    term.wait_idle(2).await;
    assert_eq!(term.turn_lines("again"), ["echo: again", "❯"]);
    assert!(!term.lines().iter().any(|l| l.contains("never")));
}

#[tokio::test]
async fn ignore_sigint_keeps_running() {
    let script = r#"ignore_sigint = true
        turn = [{ steps = [{ sleep_ms = 600 }, { say = "finished" }] }]"#;
    let mut term = Term::script(script).await;
    term.ready().await;
    term.type_text(b"go\r").await;
    term.wait_for("spinner", |l| {
        l.last().is_some_and(|l| l.ends_with("Working…"))
    })
    .await;
    term.type_text(b"\x03").await;
    term.wait_idle(1).await;
    assert_eq!(term.turn_lines("go"), ["finished", "❯"]);
    assert!(term.child.try_wait().expect("try_wait").is_none());
}

#[tokio::test]
async fn cursor_query_is_answered() {
    let mut term = Term::spawn(&["--ask-cursor"]).await;
    term.wait_raw(b"\x1b[6n").await;
    term.type_text(b"\x1b[7;3R").await;
    term.ready().await;
    assert!(term.lines().iter().any(|l| l == "· cursor at 7;3"));
}

/// `--fullscreen`: no line feed ever; every frame clears the screen and draws each row
/// by position; the cursor stays in the input box (visible) while the agent works and
/// after; the dim hint `  ? for shortcuts` is the last row only while it waits.
#[tokio::test]
async fn fullscreen_redraws_the_whole_screen_around_its_input_box() {
    let script = r#"turn = [{ steps = [{ sleep_ms = 300 }, { say = "line one\nline two" }] }]"#;
    let mut term = Term::spawn(&["--fullscreen", "--script-inline", script]).await;
    let hint = "  ? for shortcuts";
    let input_row = ROWS - 3;
    term.wait_for("idle hint", |l| l.last().is_some_and(|l| l == hint))
        .await;
    let lines = term.lines();
    assert!(
        lines.iter().any(|l| l == "✓ capfleet sim ready"),
        "{lines:?}"
    );
    assert_eq!(lines.len(), usize::from(ROWS), "{lines:?}");
    term.type_text(b"go\r").await;
    term.wait_for("spinner", |l| {
        l.iter().any(|l| l.contains("Working… (esc to interrupt)"))
    })
    .await;
    let working = term.lines();
    assert_ne!(
        working.last().map(String::as_str),
        Some(hint),
        "{working:?}"
    );
    assert_eq!(term.parser.screen().cursor_position(), (input_row, 2));
    term.wait_for("answer and hint", |l| {
        l.last().is_some_and(|l| l == hint) && l.iter().any(|l| l == "line two")
    })
    .await;
    let lines = term.lines();
    let start = lines.iter().position(|l| l == "❯ go").expect("the prompt");
    assert_eq!(lines[start + 1..start + 3], ["line one", "line two"]);
    assert_eq!(lines[usize::from(input_row)], "❯", "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("Working")), "{lines:?}");
    assert_eq!(term.parser.screen().cursor_position(), (input_row, 2));
    assert!(!term.parser.screen().hide_cursor());
    assert!(!term.raw.contains(&b'\n'), "a line feed was written");
    let frames = term
        .raw
        .windows(7)
        .filter(|w| w == b"\x1b[H\x1b[2J")
        .count();
    assert!(frames > 5, "{frames} frames");
}
