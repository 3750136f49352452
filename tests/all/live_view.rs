//! `capfleet run`'s live view in a real terminal (tmux, `capture-pane` snapshots) at
//! 80 and 160 columns: no row longer than the width (none wraps: no piece of a row
//! goes on in a line of its own between the rows; at 80 columns the columns shrink
//! to their values and the rows keep their restarts), each session's row
//! once, in fleet order (not alphabetical), a tracing warning above the rows and not
//! inside them, the rows gone at the end where the summary lists each session once;
//! `NO_COLOR` and `TERM=dumb` (plain lines). Line mode (stdout not a terminal) prints
//! streamed text by the line, not by the chunk.

use common::EnvMarker;
use common::repo::{Fixture, stdout};
use common::tmux::{EXITED, Tmux};

use crate::common;

/// Fleet order; alphabetically they would be alpha, mike, zulu.
const SESSIONS: [&str; 3] = ["zulu", "alpha", "mike"];

/// What the start session says, streamed in 5-byte chunks (mid-word).
const SENTENCE: &str = "Handler done: GET /health returns 200, or 503 while the database is down.";

/// zulu crashes once (the restart is a tracing WARN on stderr), then works on long
/// enough for the screen to be read with the warning and the rows on it.
fn script() -> String {
    format!(
        "chunk = 5\nchunk_delay_ms = 20\n\n[[turn]]\nsteps = [\n  {{ say = \"Starting.\\n\" }},\n  \
         {{ crash = \"sigkill\", once = true }},\n  {{ say = \"{SENTENCE}\\n\" }},\n  \
         {{ sleep_ms = 8000 }},\n  {{ usage = {{ input_tokens = 1200, output_tokens = 300, cost_usd = 0.006 }} }},\n]\n"
    )
}

fn fleet(m: &EnvMarker) -> Fixture {
    let f = Fixture::git_repo(&[("README", "a repository to run in\n")]);
    f.write("zulu.toml", &script());
    f.write("idle.toml", "[[turn]]\nsteps = [{ say = \"idle\" }]\n");
    let mut fleet = String::from(
        "[fleet]\nname = \"view\"\nstart = \"zulu\"\ntask = \"add a health endpoint\"\nbudget_usd = 1.0\n\n",
    );
    for name in SESSIONS {
        let script = if name == "zulu" {
            "zulu.toml"
        } else {
            "idle.toml"
        };
        fleet.push_str(&common::sim::fleet_session(
            name,
            script,
            m,
            "restart = \"transient\"\n",
        ));
    }
    f.write("fleet.toml", &fleet);
    f
}

/// `capfleet run fleet.toml` in the fixture, `env` (e.g. `NO_COLOR=1`) set and any
/// `NO_COLOR` of the test's own environment unset first.
fn run_line(f: &Fixture, env: &str) -> String {
    format!(
        "env -u NO_COLOR XDG_CONFIG_HOME={config} {env} {bin} run fleet.toml",
        config = f.path().join(".config-test").display(),
        bin = common::BIN,
    )
}

/// The live rows on a screen: (line index, session) of each line that starts with a
/// session's name (the summary's rows are indented).
fn rows(screen: &str) -> Vec<(usize, &str)> {
    screen
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let first = l.split_whitespace().next()?;
            (l.starts_with(first) && (SESSIONS.contains(&first) || first == "fleet"))
                .then_some((i, first))
        })
        .collect()
}

fn shows_the_board_and_the_warning(screen: &str) -> bool {
    screen.contains("WARN")
        && rows(screen).len() == SESSIONS.len() + 1
        && screen.contains("budget [")
}

/// The board at `width` columns: rows fit, once each, in fleet order, below the
/// warning; at the end the board is gone and the summary lists each session once.
fn board_at(width: usize) {
    let m = EnvMarker::new("live-view");
    let f = fleet(&m);
    let tmux = Tmux::start("view", width as u16, f.path(), &run_line(&f, ""));
    let screen = tmux.wait_for(
        "the rows and the restart's warning",
        shows_the_board_and_the_warning,
    );
    let shown = rows(&screen);
    let names: Vec<&str> = shown.iter().map(|(_, n)| *n).collect();
    assert_eq!(
        names,
        ["zulu", "alpha", "mike", "fleet"],
        "rows once each, in fleet order:\n{screen}"
    );
    let lines: Vec<&str> = screen.lines().collect();
    let (first, last) = (shown[0].0, shown[shown.len() - 1].0);
    // A row the terminal wrapped would go on in a line between the rows.
    assert_eq!(
        last - first,
        SESSIONS.len(),
        "the rows stand together:\n{screen}"
    );
    assert!(
        lines[last + 1].starts_with("budget ["),
        "the budget bar follows:\n{screen}"
    );
    let warn = lines.iter().position(|l| l.contains("WARN")).unwrap();
    assert!(warn < first, "the warning is above the rows:\n{screen}");
    assert!(lines[warn].contains("restarting the agent"), "{screen}");
    for line in &lines[first..=last + 1] {
        let cols = line.trim_end().chars().count();
        assert!(
            cols <= width,
            "a row of {cols} columns at {width}: {line:?}\n{screen}"
        );
    }
    for &(i, name) in &shown {
        assert!(
            lines[i].contains("restarts "),
            "{name}'s row whole at {width} columns: {:?}\n{screen}",
            lines[i]
        );
    }
    let colored = tmux.screen(true);
    let fleet_row = colored
        .lines()
        .find(|l| l.contains("fleet ") && l.contains("tokens"))
        .unwrap();
    assert!(
        fleet_row.contains("\x1b[1m"),
        "the fleet row is bold: {fleet_row:?}"
    );

    let end = tmux.wait_for("the run's end", |s| s.contains(EXITED));
    assert!(end.contains(&format!("{EXITED} 0]")), "{end}");
    assert!(
        rows(&end).is_empty(),
        "no live row is left at the end:\n{end}"
    );
    for name in SESSIONS {
        let listed = end
            .lines()
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .filter(|l| l.split_whitespace().next() == Some(name))
            .count();
        assert_eq!(listed, 1, "{name} once in the summary:\n{end}");
    }
}

#[test]
fn the_board_fits_80_columns() {
    board_at(80);
}

#[test]
fn the_board_fits_160_columns() {
    board_at(160);
}

#[test]
fn a_narrower_terminal_gets_the_rows_redrawn_cut_and_no_stale_piece() {
    let m = EnvMarker::new("live-view-resize");
    let f = fleet(&m);
    let tmux = Tmux::start("resize", 160, f.path(), &run_line(&f, ""));
    tmux.wait_for("whole rows, the restart counted", |s| {
        shows_the_board_and_the_warning(s) && s.contains("restarts 1")
    });
    tmux.resize(80);
    // Redrawn at 80 columns, a row's columns are as wide as their values (`turns 1`,
    // not `turns   1`) and it fits with its restarts; a piece of a row drawn at 160
    // that the terminal broke into a line of its own would show restarts outside the
    // rows, or the padding of 160 columns.
    let narrow = tmux.wait_for("the rows redrawn at 80 columns", |s| {
        let with_restarts: Vec<&str> = s.lines().filter(|l| l.contains("restarts ")).collect();
        shows_the_board_and_the_warning(s)
            && !s.contains("turns   ")
            && with_restarts.len() == SESSIONS.len() + 1
            && with_restarts.iter().all(|l| !rows(l).is_empty())
    });
    let shown = rows(&narrow);
    let names: Vec<&str> = shown.iter().map(|(_, n)| *n).collect();
    assert_eq!(names, ["zulu", "alpha", "mike", "fleet"], "{narrow}");
    assert_eq!(shown[3].0 - shown[0].0, SESSIONS.len(), "{narrow}");
    tmux.wait_for("the run's end", |s| s.contains(&format!("{EXITED} 0]")));
}

#[test]
fn no_color_draws_the_board_without_escapes() {
    let m = EnvMarker::new("live-view-nc");
    let f = fleet(&m);
    let tmux = Tmux::start("nocolor", 120, f.path(), &run_line(&f, "NO_COLOR=1"));
    tmux.wait_for("the rows", shows_the_board_and_the_warning);
    let colored = tmux.screen(true);
    assert!(
        !colored.contains('\x1b'),
        "no escape sequence under NO_COLOR:\n{colored:?}"
    );
    tmux.wait_for("the run's end", |s| s.contains(&format!("{EXITED} 0]")));
}

#[test]
fn a_dumb_terminal_gets_plain_lines() {
    let m = EnvMarker::new("live-view-dumb");
    let f = fleet(&m);
    let tmux = Tmux::start("dumb", 250, f.path(), &run_line(&f, "TERM=dumb"));
    let end = tmux.wait_for("the run's end", |s| s.contains(EXITED));
    assert!(end.contains(&format!("{EXITED} 0]")), "{end}");
    assert!(rows(&end).is_empty(), "no board on a dumb terminal:\n{end}");
    assert!(
        end.lines().any(|l| l.contains("turn_ended")),
        "one line per event:\n{end}"
    );
    assert!(
        end.lines().any(|l| l.ends_with(SENTENCE)),
        "text by the line:\n{end}"
    );
    let colored = tmux.screen(true);
    assert!(
        !colored.contains('\x1b'),
        "no escape sequence on a dumb terminal:\n{colored:?}"
    );
}

#[test]
fn line_mode_prints_streamed_text_by_the_line() {
    let m = EnvMarker::new("live-view-lines");
    let f = fleet(&m);
    let out = f.capfleet(&["run", "fleet.toml"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    let chunks: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("cap.text_chunk"))
        .collect();
    assert!(
        chunks.iter().any(|l| l.ends_with(SENTENCE)),
        "the sentence on one line:\n{text}"
    );
    assert!(chunks.iter().any(|l| l.ends_with("Starting.")), "{text}");
    assert!(
        chunks
            .iter()
            .all(|l| !l.ends_with("Handl") && !l.ends_with("GET /")),
        "no line ends mid-word:\n{text}"
    );
}
