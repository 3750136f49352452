//! Terminal plumbing of the TUI mode: raw input mode, SIGINT and SIGWINCH
//! handling and the stdin reader thread.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs the SIGINT disposition: ignored, or recorded for
/// [`take_interrupt`].
pub(super) fn install_sigint(ignore: bool) {
    // SAFETY: a zeroed sigaction is a valid value; the handler only stores to
    // an atomic, which is async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = if ignore {
            libc::SIG_IGN
        } else {
            on_sigint as *const () as libc::sighandler_t
        };
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
    }
}

static RESIZED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigwinch(_signal: libc::c_int) {
    RESIZED.store(true, Ordering::SeqCst);
}

/// Records SIGWINCH for [`take_resize`].
pub(super) fn install_sigwinch() {
    // SAFETY: as in `install_sigint`: the handler only stores to an atomic.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigwinch as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGWINCH, &action, std::ptr::null_mut());
    }
}

/// The terminal's new rows and columns, once per SIGWINCH since the last call.
pub(super) fn take_resize() -> Option<(u16, u16)> {
    if !RESIZED.swap(false, Ordering::SeqCst) {
        return None;
    }
    size()
}

/// The terminal's rows and columns (`None`: stdout is no terminal).
pub(super) fn size() -> Option<(u16, u16)> {
    // SAFETY: a zeroed winsize is valid; TIOCGWINSZ fills it.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes only the winsize we own.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0).then_some((ws.ws_row, ws.ws_col))
}

/// True once per SIGINT received since the last call.
pub(super) fn take_interrupt() -> bool {
    INTERRUPTED.swap(false, Ordering::SeqCst)
}

/// Non-canonical, no-echo input on a terminal stdin (signals and output
/// processing stay on); restores the saved mode on drop. No-op when stdin
/// is not a terminal.
pub(super) struct RawMode {
    saved: Option<libc::termios>,
}

impl RawMode {
    pub(super) fn enable() -> RawMode {
        // SAFETY: tcgetattr/tcsetattr on fd 0 with a valid termios buffer.
        unsafe {
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::isatty(0) != 1 || libc::tcgetattr(0, &mut saved) != 0 {
                return RawMode { saved: None };
            }
            let mut raw = saved;
            raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::IEXTEN);
            raw.c_cc[libc::VMIN] = 1;
            raw.c_cc[libc::VTIME] = 0;
            libc::tcsetattr(0, libc::TCSANOW, &raw);
            RawMode { saved: Some(saved) }
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            // SAFETY: restores the termios read in `enable`.
            unsafe {
                libc::tcsetattr(0, libc::TCSANOW, saved);
            }
        }
    }
}

/// Raw input from the terminal.
#[derive(Debug)]
pub(super) enum Input {
    Bytes(Vec<u8>),
    Eof,
}

/// Starts the stdin reader thread.
pub(super) fn spawn_reader() -> Receiver<Input> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = [0u8; 4096];
        loop {
            match stdin.read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(Input::Bytes(buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = tx.send(Input::Eof);
    });
    rx
}
