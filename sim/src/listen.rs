//! `--listen ADDR`: the sim as a peer reached over a connection instead of stdio.
//!
//! It binds a TCP listener, prints the bound address on its first stdout line (so
//! `127.0.0.1:0` works), and serves each connection with a sim of its own: this
//! executable again, with the same arguments but `--listen`, its stdin and stdout
//! the connection. A `crash` step so ends that connection's sim and with it the
//! connection, while the listener keeps accepting: the peer's loss, not its
//! listener's.

use std::ffi::OsString;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};

/// The flag this module serves (its value follows it, or `=`).
pub(super) const FLAG: &str = "--listen";

/// Accepts connections until killed; an error only when the listener cannot be had.
pub(super) fn serve(addr: SocketAddr) -> io::Result<()> {
    let listener = TcpListener::bind(addr)?;
    let mut out = io::stdout().lock();
    writeln!(out, "{}", listener.local_addr()?)?;
    out.flush()?;
    drop(out);
    let program = std::env::current_exe()?;
    let args = without_listen(std::env::args_os().skip(1));
    for stream in listener.incoming() {
        let stream = match stream {
            Ok(stream) => stream,
            Err(e) => {
                eprintln!("capfleet sim: accept failed: {e}");
                continue;
            }
        };
        let input = stream.try_clone()?;
        let spawned = Command::new(&program)
            .args(&args)
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(input)))
            .stdout(Stdio::from(std::os::fd::OwnedFd::from(stream)))
            .spawn();
        match spawned {
            // Reaped on its own thread: connections are served side by side.
            Ok(mut child) => {
                std::thread::spawn(move || child.wait());
            }
            Err(e) => eprintln!("capfleet sim: cannot serve a connection: {e}"),
        }
    }
    Ok(())
}

/// `args` without `--listen ADDR` / `--listen=ADDR`.
fn without_listen(args: impl Iterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for arg in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        if arg == FLAG {
            skip_value = true;
        } else if !arg
            .to_str()
            .is_some_and(|a| a.starts_with(&format!("{FLAG}=")))
        {
            out.push(arg);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_only_the_listen_flag() {
        let args = [
            "sim",
            "--listen",
            "127.0.0.1:0",
            "--one-turn",
            "--listen=x",
            "-p",
        ];
        let kept = without_listen(args.iter().map(OsString::from));
        assert_eq!(kept, ["sim", "--one-turn", "-p"].map(OsString::from));
    }
}
