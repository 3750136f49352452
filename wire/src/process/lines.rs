//! Bounded line reader for an agent's stdout (NDJSON and plain lines).
//!
//! [`LineReader`] reads any `AsyncRead + Unpin` through one large `BufReader` and yields
//! [`LineItem`]s. Memory stays at O(`max_line` + `read_buf`) whatever the agent writes:
//!
//! - A complete line (up to `\n`) is [`LineItem::Line`], terminator stripped (`\n`, and a `\r`
//!   before it). Its length before the `\n` may be at most `max_line` bytes.
//! - A longer line is dropped as it streams past, never buffered: once it ends (at `\n` or EOF)
//!   one [`LineItem::Oversize`] reports its total length, and reading resumes with the next line.
//! - A last line without `\n` at EOF is [`LineItem::Unterminated`] (an agent that died
//!   mid-write: the caller decides whether to parse it).
//! - Bytes are yielded raw, not decoded: NDJSON parsing (`serde_json::from_slice`) validates
//!   UTF-8 itself, and a pty/text caller can use [`String::from_utf8_lossy`].
//!
//! [`LineReader::next`] is cancel-safe (usable in `tokio::select!`): bytes are consumed from the
//! `BufReader` only after they were copied into the reader's own state, without an await between.
//! Counters of lines, oversize lines and bytes are in [`LineStats`].

use std::io;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Default longest line: 1 MiB (the manifest's default `limits.max_line_bytes`).
pub const DEFAULT_MAX_LINE: usize = crate::manifest::DEFAULT_MAX_LINE_BYTES as usize;
/// Default read buffer: 16 KiB. A session's resident memory is dominated by its
/// buffers (the fleet bench's per-session goal is 64 KiB), and longer lines are
/// assembled across reads anyway; the session bench shows no throughput loss.
pub(crate) const DEFAULT_READ_BUF: usize = 16 << 10;

/// Sizes of a [`LineReader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineConfig {
    /// Longest accepted line, terminator excluded (at least 1).
    pub max_line: usize,
    /// Capacity of the read buffer (at least 1).
    pub read_buf: usize,
}

impl Default for LineConfig {
    fn default() -> Self {
        Self {
            max_line: DEFAULT_MAX_LINE,
            read_buf: DEFAULT_READ_BUF,
        }
    }
}

/// One item read from the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineItem {
    /// A complete line, without its `\n` / `\r\n`.
    Line(Vec<u8>),
    /// The last bytes of the stream, not terminated by `\n`.
    Unterminated(Vec<u8>),
    /// A line longer than `max_line` was dropped; `len` is its full length (terminator
    /// excluded), `terminated` false if it ran into EOF.
    Oversize { len: u64, terminated: bool },
}

/// Counters of a [`LineReader`] so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineStats {
    /// Lines yielded (complete and unterminated).
    pub lines: u64,
    /// Oversize lines dropped.
    pub oversize: u64,
    /// Bytes consumed from the stream, terminators and dropped lines included.
    pub bytes: u64,
}

/// Reads bounded lines; see the module doc.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: BufReader<R>,
    read_buf: usize,
    line: Assembler,
}

/// The line being assembled, apart from the reader so both can be borrowed at once.
#[derive(Debug)]
struct Assembler {
    max_line: usize,
    /// The line so far, across reads; capacity never exceeds `max_line`.
    partial: Vec<u8>,
    /// `Some(len)` while dropping an oversize line: its length so far.
    dropping: Option<u64>,
    stats: LineStats,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader with the default 1 MiB line cap.
    pub fn new(reader: R) -> Self {
        Self::with_config(reader, LineConfig::default())
    }

    /// A reader with the given sizes (zeros are read as 1).
    pub fn with_config(reader: R, config: LineConfig) -> Self {
        let read_buf = config.read_buf.max(1);
        Self {
            inner: BufReader::with_capacity(read_buf, reader),
            read_buf,
            line: Assembler {
                max_line: config.max_line.max(1),
                partial: Vec::new(),
                dropping: None,
                stats: LineStats::default(),
            },
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> LineStats {
        self.line.stats
    }

    /// Bytes of buffer held by the reader: read buffer plus partial line. Bounded by
    /// `read_buf + max_line`.
    pub fn buffered_capacity(&self) -> usize {
        self.read_buf + self.line.partial.capacity()
    }

    /// True when bytes are buffered already, so [`LineReader::next`] may return without
    /// reading (a caller batching lines keeps going while this holds).
    pub fn has_buffered(&self) -> bool {
        !self.inner.buffer().is_empty()
    }

    /// The next item, or `None` at EOF. An I/O error is returned as is; the reader stays usable.
    pub async fn next(&mut self) -> io::Result<Option<LineItem>> {
        loop {
            let available = match self.inner.fill_buf().await {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok(self.line.at_eof());
            }
            let (item, consumed) = match memchr::memchr(b'\n', available) {
                Some(pos) => {
                    let item = self.line.end_line(&available[..pos]);
                    (Some(item), pos + 1)
                }
                None => {
                    self.line.extend(available);
                    (None, available.len())
                }
            };
            self.inner.consume(consumed);
            self.line.stats.bytes += consumed as u64;
            if let Some(item) = item {
                return Ok(Some(item));
            }
        }
    }
}

impl Assembler {
    /// Adds bytes of a line not yet terminated; starts dropping it past `max_line`.
    fn extend(&mut self, data: &[u8]) {
        let len = data.len();
        match &mut self.dropping {
            Some(dropped) => *dropped += len as u64,
            None if self.partial.len() + len > self.max_line => {
                self.dropping = Some((self.partial.len() + len) as u64);
                self.partial.clear();
            }
            None => push_bounded(&mut self.partial, data, self.max_line),
        }
    }

    /// Completes the current line with `tail` (the bytes before its `\n`).
    fn end_line(&mut self, tail: &[u8]) -> LineItem {
        if let Some(dropped) = self.dropping.take() {
            self.stats.oversize += 1;
            return LineItem::Oversize {
                len: dropped + tail.len() as u64,
                terminated: true,
            };
        }
        let len = self.partial.len() + tail.len();
        if len > self.max_line {
            self.partial.clear();
            self.stats.oversize += 1;
            return LineItem::Oversize {
                len: len as u64,
                terminated: true,
            };
        }
        let mut line = if self.partial.is_empty() {
            tail.to_vec()
        } else {
            push_bounded(&mut self.partial, tail, self.max_line);
            std::mem::take(&mut self.partial)
        };
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        self.stats.lines += 1;
        LineItem::Line(line)
    }

    fn at_eof(&mut self) -> Option<LineItem> {
        if let Some(len) = self.dropping.take() {
            self.stats.oversize += 1;
            return Some(LineItem::Oversize {
                len,
                terminated: false,
            });
        }
        if self.partial.is_empty() {
            return None;
        }
        self.stats.lines += 1;
        Some(LineItem::Unterminated(std::mem::take(&mut self.partial)))
    }
}

/// Appends `data` to `buf` (whose length plus `data` is at most `max`), growing the capacity by
/// doubling but never past `max`.
fn push_bounded(buf: &mut Vec<u8>, data: &[u8], max: usize) {
    let needed = buf.len() + data.len();
    if needed > buf.capacity() {
        let target = needed
            .max(buf.capacity().saturating_mul(2))
            .min(max)
            .max(needed);
        buf.reserve_exact(target - buf.len());
    }
    buf.extend_from_slice(data);
}

#[cfg(test)]
pub(crate) mod test_support;

#[cfg(test)]
mod tests {
    use super::test_support::Pattern;
    use super::*;

    async fn collect(input: &[u8], config: LineConfig) -> (Vec<LineItem>, LineStats) {
        let mut reader = LineReader::with_config(input, config);
        let mut items = Vec::new();
        while let Some(item) = reader.next().await.unwrap() {
            items.push(item);
        }
        (items, reader.stats())
    }

    fn line(s: &str) -> LineItem {
        LineItem::Line(s.as_bytes().to_vec())
    }

    #[tokio::test]
    async fn normal_and_crlf_lines() {
        let (items, stats) =
            collect(b"{\"a\":1}\nsecond\r\n\n\r\nlast\n", LineConfig::default()).await;
        assert_eq!(
            items,
            vec![
                line("{\"a\":1}"),
                line("second"),
                line(""),
                line(""),
                line("last")
            ]
        );
        assert_eq!(stats.lines, 5);
        assert_eq!(stats.oversize, 0);
        assert_eq!(stats.bytes, 24);
    }

    #[tokio::test]
    async fn lines_spanning_many_reads() {
        // A tiny read buffer forces every line to be assembled across reads.
        let config = LineConfig {
            max_line: 64,
            read_buf: 3,
        };
        let (items, _) = collect(b"hello world\nab\xffcd\nx", config).await;
        assert_eq!(
            items,
            vec![
                line("hello world"),
                LineItem::Line(b"ab\xffcd".to_vec()),
                LineItem::Unterminated(b"x".to_vec()),
            ]
        );
    }

    #[tokio::test]
    async fn eof_without_newline_and_empty_input() {
        let (items, stats) = collect(b"one\ntwo", LineConfig::default()).await;
        assert_eq!(
            items,
            vec![line("one"), LineItem::Unterminated(b"two".to_vec())]
        );
        assert_eq!(stats.lines, 2);
        let (items, stats) = collect(b"", LineConfig::default()).await;
        assert!(items.is_empty());
        assert_eq!(stats, LineStats::default());
    }

    #[tokio::test]
    async fn exact_cap_is_accepted_one_more_is_oversize() {
        let config = LineConfig {
            max_line: 8,
            read_buf: 4,
        };
        let (items, stats) = collect(b"12345678\n123456789\nok\n", config).await;
        assert_eq!(
            items,
            vec![
                line("12345678"),
                LineItem::Oversize {
                    len: 9,
                    terminated: true
                },
                line("ok"),
            ]
        );
        assert_eq!((stats.lines, stats.oversize), (2, 1));
    }

    #[tokio::test]
    async fn five_mib_line_is_oversize_and_next_line_reads() {
        let mut input = vec![b'x'; 5 << 20];
        input.extend_from_slice(b"\n{\"next\":true}\n");
        input.extend_from_slice(&vec![b'y'; 2 << 20]);
        let mut reader = LineReader::new(&input[..]);
        let mut max_capacity = 0;
        let mut items = Vec::new();
        while let Some(item) = reader.next().await.unwrap() {
            max_capacity = max_capacity.max(reader.buffered_capacity());
            items.push(item);
        }
        assert_eq!(
            items,
            vec![
                LineItem::Oversize {
                    len: 5 << 20,
                    terminated: true
                },
                line("{\"next\":true}"),
                LineItem::Oversize {
                    len: 2 << 20,
                    terminated: false
                },
            ]
        );
        assert!(max_capacity <= DEFAULT_MAX_LINE + DEFAULT_READ_BUF);
        let stats = reader.stats();
        assert_eq!((stats.lines, stats.oversize), (1, 2));
        assert_eq!(stats.bytes, input.len() as u64);
    }

    #[tokio::test]
    async fn flood_of_200_mb_keeps_buffers_bounded() {
        const TOTAL: u64 = 200 << 20;
        let pattern = b"{\"type\":\"assistant\",\"text\":\"lorem ipsum dolor sit amet\"}\n";
        let mut reader = LineReader::new(Pattern::new(pattern, TOTAL));
        let bound = DEFAULT_MAX_LINE + DEFAULT_READ_BUF;
        let started = std::time::Instant::now();
        let mut count = 0u64;
        while let Some(item) = reader.next().await.unwrap() {
            if let LineItem::Line(l) = &item {
                assert_eq!(l.len(), pattern.len() - 1);
            }
            count += 1;
            assert!(reader.buffered_capacity() <= bound);
        }
        let stats = reader.stats();
        assert_eq!(stats.bytes, TOTAL);
        assert_eq!(stats.lines, count);
        assert_eq!(stats.oversize, 0);
        let secs = started.elapsed().as_secs_f64();
        eprintln!("200 MiB in {secs:.2} s ({:.0} MiB/s)", 200.0 / secs);
    }

    #[tokio::test]
    async fn flood_in_one_endless_line_keeps_buffers_bounded() {
        const TOTAL: u64 = 64 << 20;
        let mut reader = LineReader::new(Pattern::new(b"z", TOTAL));
        let item = reader.next().await.unwrap();
        assert_eq!(
            item,
            Some(LineItem::Oversize {
                len: TOTAL,
                terminated: false
            })
        );
        assert!(reader.buffered_capacity() <= DEFAULT_MAX_LINE + DEFAULT_READ_BUF);
        assert_eq!(reader.next().await.unwrap(), None);
    }
}
