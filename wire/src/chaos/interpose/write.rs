//! The agent's input through the interposer: `stall_stdin` holds the driver's writes
//! as a pipe the agent stopped reading would.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::AsyncWrite;
use tokio::time::Sleep;

use super::ByteFaults;

/// An agent's input: the bare pipe (no chaos configured) or through the interposer.
pub enum Writer<W> {
    Direct(W),
    Interposed(Box<Gate<W>>),
}

/// The interposer on one agent's input.
pub struct Gate<W> {
    inner: W,
    faults: ByteFaults,
    /// The write under way waits for the stall's end.
    held: Option<Pin<Box<Sleep>>>,
}

impl<W> Writer<W> {
    pub(super) fn interposed(inner: W, faults: ByteFaults) -> Writer<W> {
        Writer::Interposed(Box::new(Gate {
            inner,
            faults,
            held: None,
        }))
    }

    /// The pipe or terminal beneath (a terminal is resized through it).
    pub fn get_ref(&self) -> &W {
        match self {
            Writer::Direct(w) => w,
            Writer::Interposed(g) => &g.inner,
        }
    }
}

impl<W: AsyncWrite + Unpin> Gate<W> {
    /// Ready once no stall holds the input.
    fn poll_open(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if let Some(held) = &mut self.held {
                ready!(held.as_mut().poll(cx));
                self.held = None;
            }
            if !self.faults.armed() {
                return Poll::Ready(());
            }
            let until = self.faults.with_state(|s| {
                let until = s.stalled_until();
                if until.is_some() {
                    s.stats.stalled_writes += 1;
                }
                until
            });
            match until {
                Some(until) => self.held = Some(Box::pin(tokio::time::sleep_until(until))),
                None => return Poll::Ready(()),
            }
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Writer<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Writer::Direct(w) => Pin::new(w).poll_write(cx, data),
            Writer::Interposed(g) => {
                ready!(g.poll_open(cx));
                Pin::new(&mut g.inner).poll_write(cx, data)
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Writer::Direct(w) => Pin::new(w).poll_flush(cx),
            Writer::Interposed(g) => Pin::new(&mut g.inner).poll_flush(cx),
        }
    }

    /// The end of input is never held: closing is the driver's deliberate end.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Writer::Direct(w) => Pin::new(w).poll_shutdown(cx),
            Writer::Interposed(g) => Pin::new(&mut g.inner).poll_shutdown(cx),
        }
    }
}
