//! Test helpers shared by the stream readers' tests.

use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// A generated stream: `pattern` repeated until `total` bytes were produced.
pub(crate) struct Pattern {
    block: Vec<u8>,
    offset: usize,
    remaining: u64,
}

impl Pattern {
    pub(crate) fn new(pattern: &[u8], total: u64) -> Self {
        // Whole copies of the pattern in a 64 KiB block, so the source is not the bottleneck.
        let copies = (64 << 10) / pattern.len().max(1) + 1;
        Self {
            block: pattern.repeat(copies),
            offset: 0,
            remaining: total,
        }
    }
}

impl AsyncRead for Pattern {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        while buf.remaining() > 0 && self.remaining > 0 {
            let start = self.offset;
            let n = (self.block.len() - start)
                .min(buf.remaining())
                .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
            buf.put_slice(&self.block[start..start + n]);
            self.offset = (start + n) % self.block.len();
            self.remaining -= n as u64;
        }
        Poll::Ready(Ok(()))
    }
}
