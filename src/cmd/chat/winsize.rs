//! The viewer's terminal size: when stdout is a terminal, each SIGWINCH forwards its
//! new size to the session, whose PTY agent's terminal follows.

use std::io::IsTerminal;

use capfleet_engine::session::SessionMsg;
use ractor::ActorRef;
use tokio::task::JoinHandle;

/// Forwards size changes of stdout's terminal until aborted; `None` when stdout is
/// not a terminal (or SIGWINCH cannot be watched).
pub(super) fn forward(session: ActorRef<SessionMsg>) -> Option<JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let mut changes = signal(SignalKind::window_change()).ok()?;
    Some(tokio::spawn(async move {
        while changes.recv().await.is_some() {
            if let Some((rows, cols)) = stdout_size() {
                let _gone = session.cast(SessionMsg::Resize { rows, cols });
            }
        }
    }))
}

/// Rows and columns of stdout's terminal.
fn stdout_size() -> Option<(u16, u16)> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ fills the winsize we own; fd 1 stays open for the process.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_row > 0 && ws.ws_col > 0).then_some((ws.ws_row, ws.ws_col))
}
