//! The ACP connection's line transport (the SDK's `Lines`, instead of its unbounded
//! `ByteStreams`): the agent's output is read through the one bounded
//! [`LineReader`], so a line over `LaunchSpec::max_line` is dropped as it streams
//! past and reported as `cap.error` `parse_failed` (as is a line that is not UTF-8),
//! never assembled for the JSON-RPC layer; our messages go to the agent's input one
//! line each.
//!
//! The report goes straight to the session's sink (credit-bounded: a slow session
//! stops the reading) and may overtake updates read before it that the SDK's
//! dispatch loop has not handed over yet.

use std::io;

use futures::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::{DriverOutput, OutputSink, oversize_line};
use crate::process::lines::{LineConfig, LineItem, LineReader};
use crate::protocol::{CapEvent, ErrorKind};

/// The agent's output as lines for the SDK; bad lines are reported on `sink`, skipped.
pub(super) fn incoming<R: AsyncRead + Unpin + Send + 'static>(
    out: R,
    max_line: usize,
    sink: OutputSink,
) -> impl Stream<Item = io::Result<String>> + Send + 'static {
    let config = LineConfig {
        max_line,
        ..LineConfig::default()
    };
    let reader = LineReader::with_config(out, config);
    futures::stream::unfold((reader, sink), move |(mut reader, sink)| async move {
        loop {
            let event = match reader.next().await {
                Ok(None) => return None,
                Err(e) => return Some((Err(e), (reader, sink))),
                Ok(Some(LineItem::Line(l) | LineItem::Unterminated(l))) => {
                    match String::from_utf8(l) {
                        Ok(line) => return Some((Ok(line), (reader, sink))),
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
    })
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
