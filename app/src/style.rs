//! Terminal styling that honours `NO_COLOR` (<https://no-color.org>), `TERM=dumb`
//! and `--color`.

use std::io::IsTerminal;

/// When to colour output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when the stream is a terminal that is not `TERM=dumb` and `NO_COLOR` is
    /// unset or empty.
    #[default]
    Auto,
    Always,
    Never,
}

/// Resolved styling for one stream.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    enabled: bool,
}

impl Style {
    pub fn for_stdout(choice: ColorChoice) -> Self {
        Self::resolve(choice, std::io::stdout().is_terminal())
    }

    pub fn for_stderr(choice: ColorChoice) -> Self {
        Self::resolve(choice, std::io::stderr().is_terminal())
    }

    fn resolve(choice: ColorChoice, is_tty: bool) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self::decide(choice, is_tty && !dumb_terminal(), no_color)
    }

    /// Whether text written through this style carries escape sequences.
    pub(crate) fn enabled(self) -> bool {
        self.enabled
    }

    fn decide(choice: ColorChoice, is_tty: bool, no_color: bool) -> Self {
        let enabled = match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => is_tty && !no_color,
        };
        Style { enabled }
    }

    fn paint(self, sgr: &str, text: &str) -> String {
        if self.enabled {
            format!("\x1b[{sgr}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }

    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    pub fn ok(self, text: &str) -> String {
        self.paint("32", text)
    }

    pub fn warn(self, text: &str) -> String {
        self.paint("33", text)
    }

    pub fn err(self, text: &str) -> String {
        self.paint("31;1", text)
    }
}

/// `TERM=dumb`: a terminal that moves no cursor and shows no colour.
pub fn dumb_terminal() -> bool {
    std::env::var_os("TERM").is_some_and(|t| t == "dumb")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_and_always_win_over_tty() {
        assert!(!Style::decide(ColorChoice::Never, true, false).enabled);
        assert!(Style::decide(ColorChoice::Always, false, true).enabled);
        assert!(!Style::decide(ColorChoice::Auto, false, false).enabled);
        assert_eq!(
            Style::decide(ColorChoice::Never, true, false).bold("x"),
            "x"
        );
    }

    #[test]
    fn no_color_turns_auto_off_on_a_tty() {
        assert!(Style::decide(ColorChoice::Auto, true, false).enabled);
        assert!(!Style::decide(ColorChoice::Auto, true, true).enabled);
        assert_eq!(
            Style::decide(ColorChoice::Auto, true, false).bold("x"),
            "\x1b[1mx\x1b[0m"
        );
    }
}
