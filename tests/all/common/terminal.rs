//! `capfleet` with a human at a terminal: stdin and stderr on a PTY (where the
//! human's questions are asked), stdout to a file (e.g. `--json` events). Answers
//! are typed in order, each once its cue has appeared after the previous answer.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the terminal showed, how many answers were typed, and the exit status.
pub(crate) struct Session {
    pub status: ExitStatus,
    pub screen: String,
    pub answered: usize,
}

/// Run `capfleet <args>` in `dir` (its user config there too, so none of the
/// machine's applies; stdout to `stdout`); type `reply` when `cue` shows, in order.
/// Panics (the child killed) past `limit`.
pub(crate) async fn on_a_terminal(
    dir: &Path,
    args: &[OsString],
    stdout: &Path,
    answers: &[(&str, &[u8])],
    limit: Duration,
) -> Session {
    let (mut pty, pts) = pty_process::open().expect("open pty");
    pty.resize(pty_process::Size::new(40, 160)).expect("resize");
    let out = std::fs::File::create(stdout).expect("stdout file");
    let mut child = pty_process::Command::new(super::BIN)
        .arg("--color")
        .arg("never")
        .args(args)
        .current_dir(dir)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .stdout(out)
        .kill_on_drop(true)
        .spawn(pts)
        .expect("spawn capfleet on a pty");
    let deadline = tokio::time::Instant::now() + limit;
    let (mut screen, mut seen, mut answered) = (Vec::new(), 0, 0);
    let mut buf = [0u8; 4096];
    let status = loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "capfleet did not finish within {limit:?}\n{}",
            String::from_utf8_lossy(&screen)
        );
        tokio::select! {
            status = child.wait() => break status.expect("wait"),
            read = tokio::time::timeout(Duration::from_millis(100), pty.read(&mut buf)) => {
                if let Ok(Ok(n)) = read {
                    screen.extend_from_slice(&buf[..n]);
                }
            }
        }
        if let Some((cue, reply)) = answers.get(answered) {
            let cue = cue.as_bytes();
            if let Some(at) = screen[seen..].windows(cue.len()).position(|w| w == cue) {
                seen += at + cue.len();
                pty.write_all(reply).await.expect("type the answer");
                pty.flush().await.expect("flush");
                answered += 1;
            }
        }
    };
    Session {
        status,
        screen: String::from_utf8_lossy(&screen).into_owned(),
        answered,
    }
}
