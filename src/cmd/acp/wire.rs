//! stdio for the ACP connection, bounded both ways. In: the client's lines, each at
//! most [`LINE_MAX`] (a longer one is skipped and said). Out: the SDK queues what
//! handlers send without a bound, so what the inner agent says is held back instead —
//! [`Backlog`] counts the updates queued and the lines written, and a forwarder waits
//! while more than [`BACKLOG_MAX`] updates are queued but unwritten (a client that
//! stops reading stalls the inner agent's output, never capfleet's memory).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use capfleet_wire::process::{LineConfig, LineItem, LineReader};
use futures::{Sink, Stream};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;

/// Longest client line read.
pub(super) const LINE_MAX: usize = 16 << 20;
/// Updates queued in the SDK, not yet written, before forwarders wait.
pub(super) const BACKLOG_MAX: u64 = 64;

/// Updates queued against lines written.
#[derive(Debug, Default)]
pub(super) struct Backlog {
    queued: AtomicU64,
    written: AtomicU64,
    progress: Notify,
}

impl Backlog {
    /// Wait for room, then count one update as queued.
    pub(super) async fn reserve(&self) {
        loop {
            let notified = self.progress.notified();
            let queued = self.queued.load(Ordering::Acquire);
            // Responses are written too, so `written` may run ahead of `queued`.
            if queued.saturating_sub(self.written.load(Ordering::Acquire)) < BACKLOG_MAX {
                self.queued.fetch_add(1, Ordering::AcqRel);
                return;
            }
            notified.await;
        }
    }

    fn wrote(&self) {
        self.written.fetch_add(1, Ordering::AcqRel);
        self.progress.notify_waiters();
    }
}

/// The SDK's outgoing lines, written and flushed one by one and counted.
pub(super) fn outgoing<W: AsyncWrite + Unpin + Send + 'static>(
    out: W,
    backlog: Arc<Backlog>,
) -> impl Sink<String, Error = io::Error> + Send + 'static {
    futures::sink::unfold(
        (out, backlog),
        |(mut out, backlog), line: String| async move {
            let mut bytes = line.into_bytes();
            bytes.push(b'\n');
            out.write_all(&bytes).await?;
            out.flush().await?;
            backlog.wrote();
            Ok((out, backlog))
        },
    )
}

/// The client's lines; an oversize or non-UTF-8 line is skipped and said on stderr.
pub(super) fn incoming<R: AsyncRead + Unpin + Send + 'static>(
    input: R,
) -> impl Stream<Item = io::Result<String>> + Send + 'static {
    let config = LineConfig {
        max_line: LINE_MAX,
        ..LineConfig::default()
    };
    let reader = LineReader::with_config(input, config);
    futures::stream::unfold(reader, |mut reader| async move {
        loop {
            match reader.next().await {
                Ok(Some(LineItem::Line(l) | LineItem::Unterminated(l))) => {
                    match String::from_utf8(l) {
                        Ok(line) => return Some((Ok(line), reader)),
                        Err(_) => tracing::warn!("a client line that is not UTF-8 skipped"),
                    }
                }
                Ok(Some(LineItem::Oversize { len, .. })) => {
                    tracing::warn!(len, "a client line over {LINE_MAX} bytes skipped");
                }
                Ok(None) => return None,
                Err(e) => return Some((Err(e), reader)),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn forwarders_wait_past_the_backlog_until_lines_are_written() {
        let backlog = Arc::new(Backlog::default());
        for _ in 0..BACKLOG_MAX {
            backlog.reserve().await;
        }
        let b = backlog.clone();
        let waiting = tokio::spawn(async move { b.reserve().await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "reserved past the bound");
        backlog.wrote();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("room after a write")
            .expect("task");
    }
}
