//! A real terminal: a command run in a detached tmux session of a given size, on a
//! tmux server of its own (`tmux -L <unique socket>`), its screen read with
//! `capture-pane`. The server is killed when the handle drops, a failed test's
//! included. Without tmux installed the test fails saying so (`.ci/run` installs it).

use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a screen may take to reach the state a test waits for (a loaded machine).
pub(crate) const PATIENCE: Duration = Duration::from_secs(90);

/// The line the pane's shell prints once the command has exited.
pub(crate) const EXITED: &str = "[command exited";

pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    /// Run `command` (a shell command line) in `dir`, in a `width` x 50 terminal; its
    /// exit status is printed after it ([`EXITED`]) and the pane stays.
    pub(crate) fn start(label: &str, width: u16, dir: &Path, command: &str) -> Tmux {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let socket = format!(
            "capfleet-{label}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let tmux = Tmux { socket };
        let line = format!("{command}; echo \"{EXITED} $?]\"; sleep 3600");
        let width = width.to_string();
        let started = tmux.run(&[
            "new-session",
            "-d",
            "-x",
            &width,
            "-y",
            "50",
            "-c",
            &dir.display().to_string(),
            "sh",
            "-c",
            &line,
        ]);
        assert!(
            started.status.success(),
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&started.stderr)
        );
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output();
        match out {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "tmux is not installed: these tests need a real terminal (`.ci/run` installs tmux; apt-get install tmux)"
            ),
            Err(e) => panic!("cannot run tmux: {e}"),
        }
    }

    /// The whole pane, history included, line by line of the terminal: a text the
    /// terminal wrapped goes on in a line of its own (not joined with `-J`: a row
    /// drawn to the last column, as indicatif pads its rows, also counts as wrapped);
    /// `escapes` keeps the text attributes as escape sequences.
    pub(crate) fn screen(&self, escapes: bool) -> String {
        let mut args = vec!["capture-pane", "-p", "-S", "-"];
        if escapes {
            args.push("-e");
        }
        let out = self.run(&args);
        assert!(
            out.status.success(),
            "tmux capture-pane failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The whole pane, history included, with each line the terminal wrapped joined
    /// again with the next (`capture-pane -J`): a line wider than the terminal here
    /// is one the terminal had to wrap.
    pub(crate) fn joined(&self) -> String {
        let out = self.run(&["capture-pane", "-p", "-J", "-S", "-"]);
        assert!(
            out.status.success(),
            "tmux capture-pane -J failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Poll the screen until `ready` holds (at most [`PATIENCE`]); that screen.
    pub(crate) fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.screen(false);
            if ready(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the terminal never showed {what} within {PATIENCE:?}; it shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Make the terminal `width` columns wide (the command gets `SIGWINCH`).
    pub(crate) fn resize(&self, width: u16) {
        let width = width.to_string();
        let out = self.run(&["resize-window", "-t", "0", "-x", &width]);
        assert!(
            out.status.success(),
            "tmux resize-window: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Type `keys` (tmux key names, e.g. `Enter`, `C-d`).
    pub(crate) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success(), "tmux send-keys {keys:?}");
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // Not `run`: a panic here, while a failed test unwinds, would abort.
        let _gone = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}
