//! The tail of a child's stderr, kept for the error message of an unexpected exit.
//!
//! [`StderrRing::spawn`] drains an `AsyncRead` on a tokio task into a ring of the last
//! `lines` lines (default 50), each cut at `max_line` bytes (default 4 KiB) with a
//! `… [N bytes truncated]` marker. Memory is O(`lines` * `max_line` + read buffer) however
//! much the child writes. The [`StderrRing`] handle is cheap to clone; its std `Mutex` is only
//! taken for a push or a copy, never across an await. Bytes are decoded lossily (UTF-8), a
//! trailing `\r` is dropped, and a last line without `\n` is kept at EOF.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::task::JoinHandle;

use crate::sync::lock;

/// Default number of lines kept.
pub(crate) const DEFAULT_LINES: usize = 50;
/// Default longest kept line, in bytes.
pub(crate) const DEFAULT_MAX_LINE: usize = 4 << 10;
const READ_BUF: usize = 4 << 10;

/// Sizes of a [`StderrRing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    /// Lines kept (at least 1).
    pub lines: usize,
    /// Bytes kept per line (at least 1); the rest is cut and marked.
    pub max_line: usize,
}

impl Default for RingConfig {
    fn default() -> Self {
        Self {
            lines: DEFAULT_LINES,
            max_line: DEFAULT_MAX_LINE,
        }
    }
}

/// Counters of a drained stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Lines seen, kept or since evicted.
    pub lines: u64,
    /// Lines cut at `max_line`.
    pub truncated: u64,
    /// Bytes read.
    pub bytes: u64,
    /// The stream reached EOF (or failed).
    pub finished: bool,
}

#[derive(Debug)]
struct Ring {
    lines: VecDeque<String>,
    stats: RingStats,
}

/// A shared handle on the last lines of a stream.
#[derive(Debug, Clone)]
pub struct StderrRing {
    ring: Arc<Mutex<Ring>>,
    config: RingConfig,
}

impl Default for StderrRing {
    fn default() -> Self {
        Self::new(RingConfig::default())
    }
}

impl StderrRing {
    /// An empty ring.
    pub fn new(config: RingConfig) -> Self {
        let config = RingConfig {
            lines: config.lines.max(1),
            max_line: config.max_line.max(1),
        };
        Self {
            ring: Arc::new(Mutex::new(Ring {
                lines: VecDeque::with_capacity(config.lines),
                stats: RingStats::default(),
            })),
            config,
        }
    }

    /// Starts draining `reader` on a tokio task; the task ends at EOF or on a read error.
    pub fn spawn<R>(reader: R, config: RingConfig) -> (Self, JoinHandle<io::Result<()>>)
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let ring = Self::new(config);
        let drainer = ring.clone();
        let task = tokio::spawn(async move { drainer.drain(reader).await });
        (ring, task)
    }

    /// Drains `reader` into this ring until EOF; marks the ring finished in every case.
    pub async fn drain<R: AsyncRead + Unpin>(&self, reader: R) -> io::Result<()> {
        let result = self.drain_inner(reader).await;
        self.lock().stats.finished = true;
        result
    }

    async fn drain_inner<R: AsyncRead + Unpin>(&self, reader: R) -> io::Result<()> {
        let mut reader = BufReader::with_capacity(READ_BUF, reader);
        let max = self.config.max_line;
        let mut current: Vec<u8> = Vec::new();
        let mut cut: u64 = 0;
        loop {
            let available = match reader.fill_buf().await {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.push_line(&mut current, &mut cut);
                    return Err(e);
                }
            };
            if available.is_empty() {
                self.push_line(&mut current, &mut cut);
                return Ok(());
            }
            let (chunk, newline) = match memchr::memchr(b'\n', available) {
                Some(pos) => (&available[..pos], true),
                None => (available, false),
            };
            let keep = chunk.len().min(max - current.len());
            current.extend_from_slice(&chunk[..keep]);
            cut += (chunk.len() - keep) as u64;
            let consumed = chunk.len() + usize::from(newline);
            reader.consume(consumed);
            self.lock().stats.bytes += consumed as u64;
            if newline {
                self.push_line(&mut current, &mut cut);
            }
        }
    }

    /// Moves the line being assembled into the ring (nothing if there is none).
    fn push_line(&self, current: &mut Vec<u8>, cut: &mut u64) {
        if current.is_empty() && *cut == 0 {
            return;
        }
        if *cut == 0 && current.last() == Some(&b'\r') {
            current.pop();
        }
        let mut line = String::from_utf8_lossy(current).into_owned();
        if *cut > 0 {
            line.push_str(&format!("… [{cut} bytes truncated]"));
        }
        let truncated = *cut > 0;
        current.clear();
        *cut = 0;
        let mut ring = self.lock();
        if ring.lines.len() == self.config.lines {
            ring.lines.pop_front();
        }
        ring.lines.push_back(line);
        ring.stats.lines += 1;
        if truncated {
            ring.stats.truncated += 1;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Ring> {
        // A poisoned ring still holds valid lines.
        lock(&self.ring)
    }

    /// The kept lines, oldest first.
    pub fn snapshot(&self) -> Vec<String> {
        self.lock().lines.iter().cloned().collect()
    }

    /// The counters so far.
    pub fn stats(&self) -> RingStats {
        self.lock().stats
    }

    /// The kept lines formatted for an error message: a header, then one `  | ` line each;
    /// empty if stderr said nothing.
    pub fn quote(&self) -> String {
        let ring = self.lock();
        if ring.lines.is_empty() {
            return String::new();
        }
        let mut out = format!(
            "stderr (last {} of {} lines):",
            ring.lines.len(),
            ring.stats.lines
        );
        for line in &ring.lines {
            out.push_str("\n  | ");
            out.push_str(line);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::lines::test_support::Pattern;
    use tokio::io::AsyncWriteExt;

    async fn drained(input: &[u8], config: RingConfig) -> StderrRing {
        let ring = StderrRing::new(config);
        ring.drain(input).await.unwrap();
        ring
    }

    #[tokio::test]
    async fn keeps_only_the_last_50_lines() {
        let input: String = (0..120).map(|i| format!("line {i}\r\n")).collect();
        let ring = drained(input.as_bytes(), RingConfig::default()).await;
        let lines = ring.snapshot();
        assert_eq!(lines.len(), 50);
        assert_eq!(lines[0], "line 70");
        assert_eq!(lines[49], "line 119");
        let stats = ring.stats();
        assert_eq!(stats.lines, 120);
        assert_eq!(stats.bytes, input.len() as u64);
        assert!(stats.finished);
        let quote = ring.quote();
        assert!(quote.starts_with("stderr (last 50 of 120 lines):\n  | line 70\n"));
        assert!(quote.ends_with("  | line 119"));
    }

    #[tokio::test]
    async fn truncates_long_lines_with_a_marker() {
        let config = RingConfig {
            lines: 5,
            max_line: 10,
        };
        let ring = drained(b"0123456789abcdef\nshort\n\xff\xfeok\n", config).await;
        assert_eq!(
            ring.snapshot(),
            vec![
                "0123456789… [6 bytes truncated]".to_string(),
                "short".to_string(),
                "\u{fffd}\u{fffd}ok".to_string(),
            ]
        );
        assert_eq!(ring.stats().truncated, 1);
    }

    #[tokio::test]
    async fn snapshot_after_eof_keeps_unterminated_last_line() {
        let (mut tx, rx) = tokio::io::duplex(64);
        let (ring, task) = StderrRing::spawn(rx, RingConfig::default());
        tx.write_all(b"error: config missing\npanicked at main.rs")
            .await
            .unwrap();
        drop(tx);
        task.await.unwrap().unwrap();
        assert_eq!(
            ring.snapshot(),
            vec!["error: config missing", "panicked at main.rs"]
        );
        assert!(ring.stats().finished);
        assert_eq!(StderrRing::default().quote(), "");
    }

    #[tokio::test]
    async fn survives_a_50_mb_flood_with_bounded_memory() {
        const TOTAL: u64 = 50 << 20;
        let config = RingConfig::default();
        // Short lines, then one endless line: neither grows the ring past its bounds.
        let (ring, task) = StderrRing::spawn(Pattern::new(b"warning: flood\n", TOTAL), config);
        task.await.unwrap().unwrap();
        assert_eq!(ring.snapshot().len(), 50);
        assert_eq!(ring.stats().bytes, TOTAL);
        let (ring, task) = StderrRing::spawn(Pattern::new(b"x", TOTAL), config);
        task.await.unwrap().unwrap();
        let lines = ring.snapshot();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].len() < DEFAULT_MAX_LINE + 64);
        assert!(lines[0].ends_with(&format!("[{} bytes truncated]", TOTAL - 4096)));
    }
}
