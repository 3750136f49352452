//! Server-sent events from a byte stream, in linear time and bounded memory: whole
//! lines cut here, then parsed by eventsource-stream.
//!
//! eventsource-stream (0.2.3) keeps what it has not parsed in one buffer and parses
//! it from its start at every chunk: a line that arrives in `k` reads is scanned `k`
//! times, so an event trickled in small reads costs its length squared (the fuzz
//! suite found it: an 84 KB event in 37-byte reads took seconds). [`lines`] hands it
//! one whole line at a time instead, which it parses once, and bounds the bytes one
//! event may take: past `max`, the stream ends with [`Cut::Oversize`].
//!
//! ```text
//! bytes ─▶ lines(bytes, max) ─▶ .eventsource() ─▶ Event { event, data, id, retry }
//!          (memchr to \r / \n,   (fields, comments,
//!           the event's budget)   multi-line data)
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

/// Why a line stream stopped short.
#[derive(Debug)]
pub enum Cut<E> {
    /// One event took more than the bound's bytes: the stream is given up.
    Oversize { max: usize },
    /// The byte stream failed.
    Transport(E),
}

impl<E: fmt::Display> fmt::Display for Cut<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cut::Oversize { max } => write!(f, "an event over the bound of {max} bytes"),
            Cut::Transport(e) => write!(f, "{e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for Cut<E> {}

/// `bytes` as whole lines, each with its line end (`\n`, `\r` or the two halves of
/// `\r\n`), and what follows the last line end at the end of the stream. At most `max`
/// bytes between two events (a blank line ends one).
pub fn lines<S>(bytes: S, max: usize) -> Lines<S> {
    Lines {
        inner: Box::pin(bytes),
        max,
        partial: Vec::new(),
        ready: VecDeque::new(),
        since_event: 0,
        after_cr: false,
        oversize: None,
        ended: false,
    }
}

/// See [`lines`].
pub struct Lines<S> {
    inner: Pin<Box<S>>,
    max: usize,
    /// The line begun and not yet ended.
    partial: Vec<u8>,
    /// Lines cut from the last read, not yet taken.
    ready: VecDeque<Vec<u8>>,
    /// Bytes since the last blank line.
    since_event: usize,
    /// The last line ended in `\r` (a `\n` now is the rest of its line end).
    after_cr: bool,
    /// An event went over the bound: said once the lines before it are taken.
    oversize: Option<usize>,
    ended: bool,
}

impl<S> Lines<S> {
    /// Cuts `chunk` at its line ends; `Err` when the event grows past the bound.
    fn cut(&mut self, chunk: &[u8]) -> Result<(), usize> {
        let mut rest = chunk;
        while let Some(i) = memchr::memchr2(b'\r', b'\n', rest) {
            let (line, tail) = rest.split_at(i + 1);
            let blank = self.partial.is_empty()
                && match line {
                    b"\r" => true,
                    b"\n" => !self.after_cr,
                    _ => false,
                };
            self.since_event += line.len();
            if blank {
                self.since_event = 0;
            } else if self.since_event > self.max {
                return Err(self.max);
            }
            self.after_cr = line.ends_with(b"\r");
            let mut whole = std::mem::take(&mut self.partial);
            whole.extend_from_slice(line);
            self.ready.push_back(whole);
            rest = tail;
        }
        if !rest.is_empty() {
            self.since_event += rest.len();
            if self.since_event > self.max {
                return Err(self.max);
            }
            self.after_cr = false;
            self.partial.extend_from_slice(rest);
        }
        Ok(())
    }
}

impl<S, B, E> Stream for Lines<S>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
{
    type Item = Result<Vec<u8>, Cut<E>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(line) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(line)));
            }
            if let Some(max) = this.oversize.take() {
                return Poll::Ready(Some(Err(Cut::Oversize { max })));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match this.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    if let Err(max) = this.cut(chunk.as_ref()) {
                        // The lines before the oversize one go out first.
                        this.ended = true;
                        this.partial = Vec::new();
                        this.oversize = Some(max);
                    }
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(Cut::Transport(e)))),
                Poll::Ready(None) => {
                    this.ended = true;
                    if !this.partial.is_empty() {
                        return Poll::Ready(Some(Ok(std::mem::take(&mut this.partial))));
                    }
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use eventsource_stream::Eventsource;
    use futures::StreamExt;
    use futures::executor::block_on;

    use super::*;

    fn reads(text: &str, size: usize) -> impl Stream<Item = Result<Vec<u8>, Infallible>> {
        let pieces: Vec<_> = text
            .as_bytes()
            .chunks(size)
            .map(|c| Ok(c.to_vec()))
            .collect();
        futures::stream::iter(pieces)
    }

    /// The events' data, or the error that ended the stream.
    fn events(text: &str, size: usize, max: usize) -> Vec<Result<String, String>> {
        block_on(
            lines(reads(text, size), max)
                .eventsource()
                .map(|e| e.map(|e| e.data).map_err(|e| e.to_string()))
                .collect(),
        )
    }

    #[test]
    fn every_line_end_and_every_cut_of_the_reads_give_the_same_events() {
        let text =
            "data: a\n\n: note\r\ndata: b\r\ndata: c\r\n\r\nevent: x\rdata: d\r\rdata: e\n\n";
        let want: Vec<Result<String, String>> =
            ["a", "b\nc", "d", "e"].map(|d| Ok(d.to_owned())).into();
        for size in 1..=text.len() {
            assert_eq!(events(text, size, 64), want, "reads of {size} bytes");
        }
    }

    #[test]
    fn lines_come_out_whole_with_their_line_ends() {
        let got: Vec<Vec<u8>> = block_on(
            lines(reads("ab\r\ncd\ref\n\ngh", 3), 64)
                .map(|l| l.expect("a line"))
                .collect(),
        );
        let want: Vec<&[u8]> = vec![b"ab\r", b"\n", b"cd\r", b"ef\n", b"\n", b"gh"];
        assert_eq!(got, want);
    }

    #[test]
    fn an_event_over_the_bound_ends_the_stream_and_the_ones_before_it_pass() {
        let long = "x".repeat(100);
        let text = format!("data: ok\n\ndata: {long}\n\ndata: never\n\n");
        for size in [1, 7, text.len()] {
            let got = events(&text, size, 64);
            assert_eq!(got.len(), 2, "reads of {size}: {got:?}");
            assert_eq!(got[0], Ok("ok".to_owned()));
            let err = got[1].as_ref().expect_err("oversize");
            assert!(err.contains("over the bound of 64 bytes"), "{err}");
        }
        // A long event split over many lines is one event: its lines add up.
        let many = "data: 0123456789\n".repeat(10);
        assert!(events(&format!("{many}\n"), 5, 64)[0].is_err());
        // The bound is per event: many events of 60 bytes each pass.
        let small = format!("data: {}\n\n", "y".repeat(52)).repeat(50);
        assert_eq!(events(&small, 9, 64).len(), 50);
    }

    #[test]
    fn a_transport_error_passes_through() {
        let pieces: Vec<Result<&[u8], &str>> = vec![Ok(b"data: a\n\n"), Err("reset")];
        let got: Vec<String> = block_on(
            lines(futures::stream::iter(pieces), 64)
                .eventsource()
                .map(|e| match e {
                    Ok(e) => e.data,
                    Err(e) => e.to_string(),
                })
                .collect(),
        );
        assert_eq!(got, ["a", "Transport error: reset"]);
    }
}
