//! A terminal agent's output as the PTY driver reads it: bytes rendered by the
//! screen (vt100), its logical lines parsed by the manifest's patterns.

use std::cell::RefCell;

use capfleet_engine::manifest::Manifest;
use capfleet_wire::bindings::pty::{Fed, LineParser, RowScan, Screen};

use super::{Framing, Memory, Target, workspace};

/// The line cap here: small, so that oversize lines are common.
const MAX_LINE: usize = 4096;

pub(super) const PTY: Target = Target {
    name: "pty",
    reads: "a terminal agent's output: text, escape sequences (cursor moves, erases, scroll regions, OSC, DCS), replies it asks for, and the lines the manifest's patterns read (tools, plans, asks, errors)",
    framing: Framing::Terminal,
    seeds: &["benches/fixtures/sim-tui-session.bin"],
    dict: &[
        "\x1b[2J",
        "\x1b[H",
        "\x1b[K",
        "\x1b[1;24r",
        "\x1b[?1049h",
        "\x1b[?1049l",
        "\x1b[?25l",
        "\x1b[6n",
        "\x1b[c",
        "\x1b]0;title\x07",
        "\x1bP+q544e\x1b\\",
        "\x1b[38;5;196m",
        "\x1b[0m",
        "\x1b[3A",
        "\x1b[200~",
        "\x1b[201~",
        "\x1bM",
        "\r",
        "\n",
        "\t",
        "\x08",
        "❯ ",
        "◉ Bash(ls)",
        "◉ Bash completed",
        "## Plan",
        "- [ ] step",
        "_thinking_ hm",
        "Proceed? (y/n)",
        "? Select: a, b, c",
        "Error: boom",
        "rate_limit_error",
        "✓ capfleet sim ready",
    ],
    run: pty,
    memory: Memory {
        // The screen's grid (40 x 120 cells here, and its scrollback) and the
        // patterns' match caches: a fixed cost, whatever the input.
        fixed: 8 << 20,
        per_byte: 16,
    },
};

/// The line parser of the shipped terminal simulator's manifest: one per thread, as the
/// engine keeps one per session, each input a turn of that session. Building one
/// compiles its patterns, and each copy of a compiled pattern warms its own match
/// cache: the engine does both once per session, not per turn. What a turn leaves
/// behind is what a session carries into the next (its counters; `begin_turn` resets
/// the rest), so an input decodes the same after any other.
fn with_parser(f: impl FnOnce(&mut LineParser)) {
    thread_local! {
        static PARSER: RefCell<LineParser> = RefCell::new({
            let path = workspace().join("config/agents/sim-tui.toml");
            let patterns = Manifest::load(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .manifest
                .patterns;
            LineParser::new(patterns)
        });
    }
    PARSER.with(|p| f(&mut p.borrow_mut()));
}

/// The bytes in reads of 1 to 256 (the first byte picks), each line fed to the
/// parser as the engine does, then what the engine reads off the screen when the
/// agent goes quiet.
fn pty(input: &[u8]) {
    with_parser(|parser| turn(parser, input));
}

fn turn(parser: &mut LineParser, input: &[u8]) {
    let mut screen = Screen::new(40, 120, MAX_LINE);
    let mut rows = RowScan::default();
    parser.begin_turn("fix the bug");
    let chunk = 1 + input.first().map_or(0, |b| usize::from(*b));
    let (mut fed, mut events) = (Vec::new(), Vec::new());
    for bytes in input.chunks(chunk) {
        screen.feed(bytes, &mut fed);
        for line in fed.drain(..) {
            match line {
                Fed::Line(l) => parser.on_line(&l, &mut events),
                Fed::Oversize(len, _shown) => {
                    assert!(len > MAX_LINE as u64, "oversize at {len} bytes");
                }
            }
        }
        drop(screen.take_replies());
        events.clear();
    }
    for line in rows.fresh(&screen.logical_lines()) {
        parser.on_line(&line, &mut events);
    }
    parser.on_partial(&screen.cursor_line(), &mut events);
    drop(screen.last_nonempty_line());
    drop(screen.contents());
    parser.end_turn(&mut events);
}
