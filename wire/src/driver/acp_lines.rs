//! The ACP connection's line transport (the SDK's `Lines`, instead of its unbounded
//! `ByteStreams`): the agent's output is read through the one bounded
//! [`LineReader`], so a line over `LaunchSpec::max_line` is dropped as it streams
//! past and reported as `cap.error` `parse_failed` (as is a line that is not UTF-8),
//! never assembled for the JSON-RPC layer; our messages go to the agent's input one
//! line each.
//!
//! The SDK parses each line we hand it into an unbounded channel in front of its
//! dispatch loop (where our handlers run, in order). The reader here keeps that
//! channel short: lines go out in windows ([`WINDOW_LINES`] lines or
//! [`WINDOW_BYTES`] bytes), each window closed by a marker notification of our own
//! ([`MARKER_METHOD`], with a per-connection token the agent never sees). The
//! notification handler hands each marker to [`Drained`]; the reader does not read
//! past a window until the marker of the window before it has come through the
//! dispatch loop. So at most two windows are queued, whatever the agent sends and
//! whatever becomes of each line in the SDK (answered, rejected, dropped), and a slow
//! session (credit-bounded sink) stops the reading, then the agent's pipe.
//!
//! A bad line's report goes straight to the session's sink (credit-bounded) and may
//! overtake updates read before it that the dispatch loop has not handed over yet.

use std::hash::{BuildHasher, Hasher};
use std::io;

use futures::{Sink, Stream};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::{DriverOutput, OutputSink, oversize_line};
use crate::process::lines::{LineConfig, LineItem, LineReader};
use crate::protocol::{CapEvent, ErrorKind};

/// The notification that closes a window of lines (never sent to the agent).
pub(super) const MARKER_METHOD: &str = "_capfleet/lines_drained";
/// Most lines in one window.
pub(super) const WINDOW_LINES: usize = 256;
/// Most bytes in one window (a window holds at least one line).
pub(super) const WINDOW_BYTES: usize = 1 << 20;

/// The handler's end of the gate: the markers that came through the dispatch loop.
pub(super) struct Drained {
    token: String,
    acked: watch::Sender<u64>,
}

impl Drained {
    /// Whether `method` is the marker's (the notification is then consumed here); a
    /// marker with our token lets the reader go on.
    pub(super) fn is_marker(&self, method: &str, params: &Value) -> bool {
        if method != MARKER_METHOD {
            return false;
        }
        match params["window"].as_u64() {
            Some(window) if params["token"] == self.token.as_str() => {
                self.acked.send_if_modified(|acked| {
                    let newer = window > *acked;
                    *acked = (*acked).max(window);
                    newer
                });
            }
            _ => tracing::warn!("ACP notification {MARKER_METHOD} without our token ignored"),
        }
        true
    }
}

/// The reader's end of the gate: counts the lines of the open window.
struct Gate {
    token: String,
    acked: watch::Receiver<u64>,
    /// Windows closed (markers sent).
    closed: u64,
    lines: usize,
    bytes: usize,
}

impl Gate {
    /// Counts a line handed to the SDK; the marker to send when it closes the window.
    fn pass(&mut self, len: usize) -> Option<String> {
        self.lines += 1;
        self.bytes += len;
        if self.lines < WINDOW_LINES && self.bytes < WINDOW_BYTES {
            return None;
        }
        self.closed += 1;
        (self.lines, self.bytes) = (0, 0);
        let params = serde_json::json!({ "token": self.token, "window": self.closed });
        let marker =
            serde_json::json!({ "jsonrpc": "2.0", "method": MARKER_METHOD, "params": params });
        Some(marker.to_string())
    }

    /// Waits until every window but the last closed one has been dispatched; false
    /// when the dispatch loop is gone.
    async fn ready(&mut self) -> bool {
        let before_last = self.closed.saturating_sub(1);
        self.acked
            .wait_for(|acked| *acked >= before_last)
            .await
            .is_ok()
    }
}

/// A token the agent cannot guess: the process's random hash keys, fresh per call.
fn token() -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(u64::from(std::process::id()));
    format!("{:016x}", h.finish())
}

/// The agent's output as lines for the SDK, gated by windows (module doc); bad lines
/// are reported on `sink`, skipped. The [`Drained`] goes to the notification handler.
pub(super) fn incoming<R: AsyncRead + Unpin + Send + 'static>(
    out: R,
    max_line: usize,
    sink: OutputSink,
) -> (
    Drained,
    impl Stream<Item = io::Result<String>> + Send + 'static,
) {
    let config = LineConfig {
        max_line,
        ..LineConfig::default()
    };
    let reader = LineReader::with_config(out, config);
    let (acked_tx, acked) = watch::channel(0);
    let token = token();
    let drained = Drained {
        token: token.clone(),
        acked: acked_tx,
    };
    let gate = Gate {
        token,
        acked,
        closed: 0,
        lines: 0,
        bytes: 0,
    };
    let state = (reader, sink, gate, None::<String>);
    let lines = futures::stream::unfold(
        state,
        move |(mut reader, sink, mut gate, marker)| async move {
            if let Some(m) = marker {
                return Some((Ok(m), (reader, sink, gate, None)));
            }
            if !gate.ready().await {
                return None; // the dispatch loop is gone: so is the connection
            }
            loop {
                let event = match reader.next().await {
                    Ok(None) => return None,
                    Err(e) => return Some((Err(e), (reader, sink, gate, None))),
                    Ok(Some(LineItem::Line(l) | LineItem::Unterminated(l))) => {
                        match String::from_utf8(l) {
                            Ok(line) => {
                                let marker = gate.pass(line.len());
                                return Some((Ok(line), (reader, sink, gate, marker)));
                            }
                            Err(e) => CapEvent::error(
                                ErrorKind::ParseFailed,
                                format!("ACP line is not UTF-8 ({e}); dropped"),
                                false,
                            ),
                        }
                    }
                    Ok(Some(LineItem::Oversize { len, terminated })) => {
                        oversize_line(len, max_line, terminated)
                    }
                };
                if !sink.send_one(DriverOutput::Event(event)).await {
                    return None; // the session is gone: so is the connection
                }
            }
        },
    );
    (drained, lines)
}

/// Our side of the connection: each message one line on the agent's input, flushed.
pub(super) fn outgoing<W: AsyncWrite + Unpin + Send + 'static>(
    input: W,
) -> impl Sink<String, Error = io::Error> + Send + 'static {
    futures::sink::unfold(input, |mut input, line: String| async move {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        input.write_all(&bytes).await?;
        input.flush().await?;
        Ok(input)
    })
}
