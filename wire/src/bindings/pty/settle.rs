//! When the agent is ready, and when its turn is over (spec A3), from evidence only:
//!
//! - boot: `startup.ready_when.pattern` on screen plus [`QUIET`] of silence (or the
//!   manifest's `silence_ms` alone);
//! - turn end: `parse.idle` matches the cursor's logical line (the prompt with its
//!   input area empty) or the last non-empty row (spec A3) when that row is not one
//!   the cursor has left (an idle glyph alone on a row above the cursor is answer
//!   text, not a prompt), output has been silent for [`QUIET`], and the turn has
//!   passed the prompt gate (at least one line of content — text, a tool call, an
//!   error; not chrome, not the echo of the prompt — completed since the submit, so the
//!   prompt that was on screen before cannot end it). The cursor's line may be an
//!   input box above status rows, and the last row below it a TUI's idle hint (`?
//!   for shortcuts` under the box of a full-screen agent). A TUI that hides the
//!   terminal cursor (it draws its own) leaves the real one anywhere: then the last
//!   non-empty row counts wherever it is. The check runs the moment the silence is
//!   long enough: no fixed settle.
//! - submit verification: when the agent went silent with our text still sitting on
//!   its input line, Enter is sent again, at most [`RESUBMITS_MAX`] times.
//!
//! The caller owns the clock: it reports output and asks for a verdict at
//! [`Settle::deadline`] (a timer, never a poll).

use std::time::{Duration, Instant};

use regex::Regex;

/// Silence that, with the idle prompt on screen, ends a turn (spec A3).
pub(crate) const QUIET: Duration = Duration::from_millis(200);
/// Re-sent Enters at most, per prompt.
pub(crate) const RESUBMITS_MAX: u8 = 3;

/// What the evidence says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The agent finished booting.
    Ready,
    /// The current turn is over.
    TurnEnd,
    /// The prompt still sits on the input line: press Enter again.
    Resubmit,
    /// Nothing yet; wait for more output.
    Wait,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Booting,
    Idle,
    Busy {
        /// Lines completed since the submit (the prompt gate).
        lines: u64,
        resubmits: u8,
        /// The start of the prompt, to recognise it still sitting in the input box.
        probe: String,
    },
}

/// The settle state machine.
#[derive(Debug)]
pub(crate) struct Settle {
    phase: Phase,
    idle: Vec<Regex>,
    ready_when: Option<Regex>,
    boot_quiet: Duration,
    last_output: Instant,
    /// A verdict is due at `last_output + quiet` (set by output, cleared by a `Wait`).
    armed: bool,
}

/// What the screen shows, for a verdict.
pub(crate) trait View {
    fn last_line(&self) -> String;
    /// The line being edited (a TUI's input box may sit above its status rows).
    fn cursor_line(&self) -> String;
    fn shows(&self, re: &Regex) -> bool;
    /// The terminal cursor is hidden: its position says nothing.
    fn cursor_hidden(&self) -> bool {
        false
    }
    /// The last non-empty row lies below the cursor's line (a row drawn under the
    /// input box, not one the cursor has left).
    fn last_line_below_cursor(&self) -> bool {
        false
    }
}

impl View for super::Screen {
    fn last_line(&self) -> String {
        self.last_nonempty_line()
    }
    fn cursor_line(&self) -> String {
        super::Screen::cursor_line(self)
    }
    fn shows(&self, re: &Regex) -> bool {
        super::Screen::shows(self, re)
    }
    fn cursor_hidden(&self) -> bool {
        super::Screen::cursor_hidden(self)
    }
    fn last_line_below_cursor(&self) -> bool {
        self.last_row_below_cursor()
    }
}

impl Settle {
    /// `ready_when` and `silence_ms` from `startup.ready_when`; `now` is the spawn.
    pub(crate) fn new(
        idle: Vec<Regex>,
        ready_when: Option<Regex>,
        silence_ms: Option<u64>,
        now: Instant,
    ) -> Self {
        let boot_quiet = silence_ms.map_or(QUIET, |ms| Duration::from_millis(ms).max(QUIET));
        Settle {
            phase: Phase::Booting,
            idle,
            ready_when,
            boot_quiet,
            last_output: now,
            armed: true,
        }
    }

    pub(crate) fn is_busy(&self) -> bool {
        matches!(self.phase, Phase::Busy { .. })
    }

    pub(crate) fn is_booting(&self) -> bool {
        self.phase == Phase::Booting
    }

    /// Output arrived.
    pub(crate) fn on_output(&mut self, now: Instant) {
        self.last_output = now;
        self.armed = true;
    }

    /// A logical line was completed.
    pub(crate) fn on_line(&mut self) {
        if let Phase::Busy { lines, .. } = &mut self.phase {
            *lines += 1;
        }
    }

    /// A prompt was written.
    pub(crate) fn submitted(&mut self, prompt: &str, now: Instant) {
        let probe: String = prompt
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .chars()
            .take(40)
            .collect();
        self.phase = Phase::Busy {
            lines: 0,
            resubmits: 0,
            probe,
        };
        self.on_output(now);
    }

    /// When to ask for a verdict; `None`: only new output can change anything.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        if !self.armed || self.phase == Phase::Idle {
            return None;
        }
        let quiet = if self.is_booting() {
            self.boot_quiet
        } else {
            QUIET
        };
        Some(self.last_output + quiet)
    }

    /// The verdict at `now`, given what the screen shows.
    pub(crate) fn evaluate(&mut self, now: Instant, view: &impl View) -> Verdict {
        let Some(due) = self.deadline() else {
            return Verdict::Wait;
        };
        if now < due {
            return Verdict::Wait;
        }
        self.armed = false;
        match &mut self.phase {
            Phase::Idle => Verdict::Wait,
            Phase::Booting => {
                let ready = self.ready_when.as_ref().is_none_or(|re| view.shows(re));
                if ready {
                    self.phase = Phase::Idle;
                    Verdict::Ready
                } else {
                    Verdict::Wait
                }
            }
            Phase::Busy {
                lines,
                resubmits,
                probe,
            } => {
                let last = view.last_line();
                let idle = |l: &str| self.idle.iter().any(|re| re.is_match(l));
                let last_counts = view.cursor_hidden() || view.last_line_below_cursor();
                let at_prompt = idle(&view.cursor_line()) || (last_counts && idle(&last));
                if *lines > 0 && at_prompt {
                    self.phase = Phase::Idle;
                    return Verdict::TurnEnd;
                }
                if *lines == 0
                    && *resubmits < RESUBMITS_MAX
                    && !probe.is_empty()
                    && last.trim_end().ends_with(probe.as_str())
                {
                    *resubmits += 1;
                    self.armed = true;
                    self.last_output = now;
                    return Verdict::Resubmit;
                }
                Verdict::Wait
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake(&'static str);
    impl View for Fake {
        fn last_line(&self) -> String {
            self.0.to_owned()
        }
        fn cursor_line(&self) -> String {
            self.0.to_owned()
        }
        fn shows(&self, re: &Regex) -> bool {
            re.is_match(self.0)
        }
    }

    fn settle(t0: Instant) -> Settle {
        let idle = vec![Regex::new("^❯\\s*$").expect("re")];
        let ready = Regex::new("ready").expect("re");
        Settle::new(idle, Some(ready), None, t0)
    }

    #[test]
    fn boot_needs_the_marker_and_silence() {
        let t0 = Instant::now();
        let mut s = settle(t0);
        assert_eq!(s.deadline(), Some(t0 + QUIET));
        assert_eq!(s.evaluate(t0 + QUIET, &Fake("booting")), Verdict::Wait);
        assert_eq!(s.deadline(), None, "no timer until new output");
        s.on_output(t0 + QUIET);
        assert_eq!(s.evaluate(t0 + QUIET, &Fake("ready")), Verdict::Wait);
        assert_eq!(s.evaluate(t0 + QUIET * 2, &Fake("ready")), Verdict::Ready);
    }

    #[test]
    fn the_old_prompt_cannot_end_a_turn() {
        let t0 = Instant::now();
        let mut s = settle(t0);
        s.evaluate(t0 + QUIET, &Fake("ready"));
        s.submitted("hi", t0);
        // Silent, prompt on screen, but nothing happened since the submit.
        assert_eq!(s.evaluate(t0 + QUIET, &Fake("❯")), Verdict::Wait);
        s.on_line();
        s.on_output(t0 + QUIET);
        assert_eq!(s.evaluate(t0 + QUIET * 3 / 2, &Fake("❯")), Verdict::Wait);
        assert_eq!(s.evaluate(t0 + QUIET * 2, &Fake("❯")), Verdict::TurnEnd);
        assert!(!s.is_busy());
    }

    /// A screen whose cursor sits on its own line, below the last non-empty row.
    struct Below(&'static str, bool);
    impl View for Below {
        fn last_line(&self) -> String {
            self.0.to_owned()
        }
        fn cursor_line(&self) -> String {
            String::new()
        }
        fn shows(&self, re: &Regex) -> bool {
            re.is_match(self.0)
        }
        fn cursor_hidden(&self) -> bool {
            self.1
        }
    }

    #[test]
    fn a_prompt_glyph_the_cursor_left_is_text() {
        let t0 = Instant::now();
        let mut s = settle(t0);
        s.evaluate(t0 + QUIET, &Fake("ready"));
        s.submitted("hi", t0);
        s.on_line();
        assert_eq!(s.evaluate(t0 + QUIET, &Below("❯", false)), Verdict::Wait);
        assert!(s.is_busy());
        // A hidden cursor says nothing: the last row decides.
        s.on_output(t0 + QUIET);
        assert_eq!(
            s.evaluate(t0 + QUIET * 2, &Below("❯", true)),
            Verdict::TurnEnd
        );
    }

    /// A full-screen TUI: the cursor in its input box, its idle hint the last row.
    struct Boxed(&'static str);
    impl View for Boxed {
        fn last_line(&self) -> String {
            self.0.to_owned()
        }
        fn cursor_line(&self) -> String {
            "❯".to_owned()
        }
        fn shows(&self, re: &Regex) -> bool {
            re.is_match(self.0)
        }
        fn last_line_below_cursor(&self) -> bool {
            true
        }
    }

    #[test]
    fn an_idle_hint_under_the_input_box_ends_the_turn() {
        let t0 = Instant::now();
        let hint = vec![Regex::new(r"^\s*\? for shortcuts\s*$").expect("re")];
        let mut s = Settle::new(hint, None, None, t0);
        assert_eq!(s.evaluate(t0 + QUIET, &Boxed("")), Verdict::Ready);
        s.submitted("hi", t0 + QUIET);
        s.on_line();
        // Working: the last row under the box is no idle hint.
        let t = t0 + QUIET * 2;
        assert_eq!(s.evaluate(t, &Boxed("esc to interrupt")), Verdict::Wait);
        s.on_output(t);
        assert_eq!(
            s.evaluate(t + QUIET, &Boxed("  ? for shortcuts")),
            Verdict::TurnEnd
        );
    }

    #[test]
    fn a_spinner_is_not_idle() {
        let t0 = Instant::now();
        let mut s = settle(t0);
        s.evaluate(t0 + QUIET, &Fake("ready"));
        s.submitted("hi", t0);
        s.on_line();
        assert_eq!(s.evaluate(t0 + QUIET, &Fake("⠋ Working…")), Verdict::Wait);
    }

    #[test]
    fn a_swallowed_enter_is_resent_three_times_at_most() {
        let t0 = Instant::now();
        let mut s = settle(t0);
        s.evaluate(t0 + QUIET, &Fake("ready"));
        s.submitted("hello there", t0);
        let mut t = t0;
        for _ in 0..RESUBMITS_MAX {
            t += QUIET;
            assert_eq!(s.evaluate(t, &Fake("❯ hello there")), Verdict::Resubmit);
        }
        t += QUIET;
        assert_eq!(s.evaluate(t, &Fake("❯ hello there")), Verdict::Wait);
    }
}
