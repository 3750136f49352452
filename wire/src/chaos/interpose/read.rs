//! The agent's output through the interposer: frames garbled or cut, reads throttled.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::Sleep;

use super::state::{FramePlan, State};
use super::{ByteFaults, FrameMode};

/// An agent's output: the bare pipe (no chaos configured) or through the interposer.
pub enum Reader<R> {
    Direct(R),
    Interposed(Box<Faulty<R>>),
}

/// The interposer on one agent's output.
pub struct Faulty<R> {
    inner: R,
    faults: ByteFaults,
    mode: FrameMode,
    /// The next byte starts a frame.
    at_start: bool,
    /// The process's first frame (its handshake) is still to begin: it is spared.
    handshake: bool,
    /// What happens to the rest of the frame under way.
    frame: FramePlan,
    /// `slow`: the pause before the next read.
    delay: Option<Pin<Box<Sleep>>>,
    /// `slow`: the bounded read's buffer.
    scratch: Vec<u8>,
}

impl<R> Reader<R> {
    pub(super) fn interposed(inner: R, faults: ByteFaults, mode: FrameMode) -> Reader<R> {
        Reader::Interposed(Box::new(Faulty {
            inner,
            faults,
            mode,
            at_start: true,
            handshake: true,
            frame: FramePlan::Clean,
            delay: None,
            scratch: Vec::new(),
        }))
    }

    /// The pipe or terminal beneath.
    pub fn get_ref(&self) -> &R {
        match self {
            Reader::Direct(r) => r,
            Reader::Interposed(f) => &f.inner,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Reader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Reader::Direct(r) => Pin::new(r).poll_read(cx, buf),
            Reader::Interposed(f) => f.poll_read(cx, buf),
        }
    }
}

impl<R: AsyncRead + Unpin> Faulty<R> {
    fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            if let Some(delay) = &mut self.delay {
                ready!(delay.as_mut().poll(cx));
                self.delay = None;
            }
            let before = buf.filled().len();
            if self.frame == FramePlan::Clean && !self.faults.armed() {
                // Nothing armed: the bytes pass untouched; only where a line ends is
                // noted, so that a fault armed later starts at a frame.
                ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
                if let Some(last) = buf.filled()[before..].last() {
                    self.at_start = *last == b'\n' || self.mode == FrameMode::Reads;
                    self.handshake = false;
                }
                return Poll::Ready(Ok(()));
            }
            let slow = self.faults.with_state(|s| s.slow_budget());
            match slow {
                Some((limit, _)) => {
                    let limit = limit.min(buf.remaining());
                    self.scratch.resize(limit, 0);
                    let mut sub = ReadBuf::new(&mut self.scratch[..limit]);
                    ready!(Pin::new(&mut self.inner).poll_read(cx, &mut sub))?;
                    let n = sub.filled().len();
                    buf.put_slice(&self.scratch[..n]);
                }
                None => ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?,
            }
            let read = buf.filled().len() - before;
            if read == 0 {
                return Poll::Ready(Ok(())); // end of output
            }
            let Faulty {
                faults,
                mode,
                at_start,
                handshake,
                frame,
                ..
            } = self;
            let data = &mut buf.filled_mut()[before..];
            let kept = faults.with_state(|s| {
                if slow.is_some() {
                    s.stats.slowed_reads += 1;
                }
                let mut frames = Frames { s, handshake };
                match mode {
                    FrameMode::Lines => lines(&mut frames, data, at_start, frame),
                    FrameMode::Reads => one_read(&mut frames, data),
                }
            });
            buf.set_filled(before + kept);
            if let Some((_, rate)) = slow {
                let pause = Duration::from_secs_f64(read as f64 / rate as f64);
                self.delay = Some(Box::pin(tokio::time::sleep(pause)));
            }
            if kept > 0 {
                return Poll::Ready(Ok(()));
            }
            // Everything read was cut away: read on (an empty read would be the end).
        }
    }
}

/// The frames of one agent process as they begin: its first (its handshake) spared,
/// each other one planned by the session's faults.
struct Frames<'a> {
    s: &'a mut State,
    handshake: &'a mut bool,
}

impl Frames<'_> {
    /// A frame of `visible` bytes begins: what to do with it.
    fn begin(&mut self, visible: usize) -> FramePlan {
        if std::mem::take(self.handshake) {
            return FramePlan::Clean;
        }
        self.s.begin_frame(visible)
    }
}

/// One read of a terminal is one frame: garbled, or cut short.
fn one_read(f: &mut Frames<'_>, data: &mut [u8]) -> usize {
    let plan = f.begin(data.len());
    let s = &mut *f.s;
    match plan {
        FramePlan::Clean => data.len(),
        FramePlan::Garble(fraction) => {
            s.garble(data, fraction, false);
            data.len()
        }
        FramePlan::Cut(keep) => {
            s.stats.bytes_cut += (data.len() - keep) as u64;
            keep
        }
    }
}

/// `data` as lines: each line starting here gets its plan; the bytes kept are moved
/// to the front (a cut line keeps its line feed). Returns how many are kept.
fn lines(f: &mut Frames<'_>, data: &mut [u8], at_start: &mut bool, frame: &mut FramePlan) -> usize {
    let n = data.len();
    let (mut out, mut i) = (0, 0);
    while i < n {
        let newline = memchr::memchr(b'\n', &data[i..]).map(|p| i + p);
        let end = newline.unwrap_or(n);
        if *at_start {
            *frame = f.begin(end - i);
            *at_start = false;
        }
        let s = &mut *f.s;
        match frame {
            FramePlan::Clean => {
                data.copy_within(i..end, out);
                out += end - i;
            }
            FramePlan::Garble(fraction) => {
                let fraction = *fraction;
                s.garble(&mut data[i..end], fraction, true);
                data.copy_within(i..end, out);
                out += end - i;
            }
            FramePlan::Cut(keep) => {
                let k = (*keep).min(end - i);
                data.copy_within(i..i + k, out);
                out += k;
                *keep -= k;
                s.stats.bytes_cut += (end - i - k) as u64;
            }
        }
        match newline {
            Some(p) => {
                data[out] = b'\n';
                out += 1;
                *at_start = true;
                *frame = FramePlan::Clean;
                i = p + 1;
            }
            None => i = n,
        }
    }
    out
}
