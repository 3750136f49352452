use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};

use super::*;

/// Yields `data` in reads of at most `chunk` bytes.
struct Chunks {
    data: Vec<u8>,
    at: usize,
    chunk: usize,
}

impl AsyncRead for Chunks {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let end = (self.at + self.chunk)
            .min(self.data.len())
            .min(self.at + buf.remaining());
        buf.put_slice(&self.data[self.at..end]);
        self.at = end;
        Poll::Ready(Ok(()))
    }
}

fn chunks(data: &[u8], chunk: usize) -> Chunks {
    Chunks {
        data: data.to_vec(),
        at: 0,
        chunk,
    }
}

async fn read_all<R: AsyncRead + Unpin>(mut r: Reader<R>) -> Vec<u8> {
    let mut out = Vec::new();
    r.read_to_end(&mut out).await.unwrap();
    out
}

/// An agent's output: its handshake (spared by every frame fault), then four frames.
const TEXT: &[u8] = b"{\"type\":\"init\"}\n{\"type\":\"one\"}\n{\"type\":\"two\"}\n\
{\"type\":\"three\"}\n{\"type\":\"four\"}\n";

fn lines_of(data: &[u8]) -> Vec<&[u8]> {
    data.split(|b| *b == b'\n').collect()
}

#[tokio::test]
async fn nothing_armed_passes_every_byte() {
    let faults = ByteFaults::new("cap://t/a", 1);
    let out = read_all(faults.reader(chunks(TEXT, 7), FrameMode::Lines)).await;
    assert_eq!(out, TEXT);
    assert_eq!(faults.stats(), ByteStats::default());
    let bare = read_all(reader(None, chunks(TEXT, 7), FrameMode::Lines)).await;
    assert_eq!(bare, TEXT);
}

#[tokio::test]
async fn garble_corrupts_the_next_frames_and_keeps_the_framing() {
    let faults = ByteFaults::new("cap://t/a", 7);
    faults.inject(ByteFault::Garble {
        fraction: 1.0,
        frames: 2,
    });
    let out = read_all(faults.reader(chunks(TEXT, 5), FrameMode::Lines)).await;
    let (got, want) = (lines_of(&out), lines_of(TEXT));
    assert_eq!(got.len(), want.len(), "no line feed added or lost");
    assert_eq!(got[0], want[0], "the handshake is spared");
    for i in 1..3 {
        assert_eq!(got[i].len(), want[i].len());
        assert!(
            got[i].iter().zip(want[i]).all(|(a, b)| a != b),
            "every byte changed"
        );
        assert!(serde_json::from_slice::<serde_json::Value>(got[i]).is_err());
    }
    assert_eq!(&got[3..], &want[3..], "the frames after are untouched");
    let stats = faults.stats();
    assert_eq!(stats.frames_garbled, 2);
    assert_eq!(stats.bytes_garbled, (want[1].len() + want[2].len()) as u64);
}

#[tokio::test]
async fn the_same_seed_gives_the_same_faults() {
    let run = |seed| async move {
        let faults = ByteFaults::new("cap://t/a", seed);
        faults.inject(ByteFault::Garble {
            fraction: 0.3,
            frames: 3,
        });
        faults.inject(ByteFault::Truncate { frames: 1 });
        read_all(faults.reader(chunks(TEXT, 3), FrameMode::Lines)).await
    };
    assert_eq!(run(42).await, run(42).await);
    assert_ne!(run(42).await, run(43).await);
}

#[tokio::test]
async fn truncate_cuts_a_frame_and_keeps_its_line_feed() {
    let faults = ByteFaults::new("cap://t/a", 3);
    faults.inject(ByteFault::Truncate { frames: 1 });
    // Across reads of 4 bytes: the cut is decided on the first read of the line.
    let out = read_all(faults.reader(chunks(TEXT, 4), FrameMode::Lines)).await;
    let (got, want) = (lines_of(&out), lines_of(TEXT));
    assert_eq!(got.len(), want.len());
    assert_eq!(got[0], want[0], "the handshake is spared");
    assert!(!got[1].is_empty() && got[1].len() < want[1].len());
    assert!(want[1].starts_with(got[1]));
    assert_eq!(&got[2..], &want[2..]);
    let stats = faults.stats();
    assert_eq!(stats.frames_truncated, 1);
    assert_eq!(stats.bytes_cut, (want[1].len() - got[1].len()) as u64);
}

#[tokio::test]
async fn each_agent_processs_handshake_is_spared() {
    let faults = ByteFaults::new("cap://t/a", 8);
    faults.inject(ByteFault::Truncate { frames: 2 });
    // The first process ends after its handshake; the next one's is spared too.
    let first = read_all(faults.reader(chunks(&TEXT[..16], 5), FrameMode::Lines)).await;
    assert_eq!(first, &TEXT[..16]);
    let out = read_all(faults.reader(chunks(TEXT, 5), FrameMode::Lines)).await;
    let (got, want) = (lines_of(&out), lines_of(TEXT));
    assert_eq!(got[0], want[0]);
    assert!(got[1].len() < want[1].len() && got[2].len() < want[2].len());
    assert_eq!(&got[3..], &want[3..]);
}

#[tokio::test]
async fn a_fault_armed_mid_line_starts_at_the_next_frame() {
    let faults = ByteFaults::new("cap://t/a", 5);
    let mut r = faults.reader(chunks(TEXT, 6), FrameMode::Lines);
    let mut first = [0u8; 6];
    r.read_exact(&mut first).await.unwrap();
    faults.inject(ByteFault::Truncate { frames: 1 });
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).await.unwrap();
    let out = [&first[..], &rest].concat();
    let (got, want) = (lines_of(&out), lines_of(TEXT));
    assert_eq!(got[0], want[0], "the line under way is left alone");
    assert!(got[1].len() < want[1].len());
    assert_eq!(&got[2..], &want[2..]);
}

#[tokio::test]
async fn a_terminal_read_is_one_frame() {
    let faults = ByteFaults::new("cap://t/a", 9);
    faults.inject(ByteFault::Truncate { frames: 1 });
    faults.inject(ByteFault::Garble {
        fraction: 1.0,
        frames: 1,
    });
    let data = vec![b'x'; 80];
    let out = read_all(faults.reader(chunks(&data, 16), FrameMode::Reads)).await;
    let stats = faults.stats();
    assert_eq!(stats.frames_truncated, 1);
    assert_eq!(stats.frames_garbled, 1);
    assert_eq!(out.len() as u64, 80 - stats.bytes_cut);
    // The first read (the terminal's first screen) spared, then the cut read, a
    // garbled one, and two clean ones.
    assert!(out.starts_with(&[b'x'; 16]));
    assert!(out.ends_with(&[b'x'; 32]));
    assert_eq!(stats.bytes_garbled, 16);
}

#[tokio::test]
async fn slow_throttles_the_output() {
    let faults = ByteFaults::new("cap://t/a", 1);
    faults.inject(ByteFault::Slow {
        bytes_per_sec: 20_000,
        for_ms: 10_000,
    });
    let data = vec![b'y'; 2_000];
    let t0 = Instant::now();
    let out = read_all(faults.reader(chunks(&data, 4096), FrameMode::Lines)).await;
    assert_eq!(out, data);
    // 2,000 bytes at 20,000 B/s: 100 ms, in reads of 1,000 bytes.
    assert!(
        t0.elapsed() >= Duration::from_millis(50),
        "{:?}",
        t0.elapsed()
    );
    assert!(faults.stats().slowed_reads >= 2);
}

#[tokio::test]
async fn stall_stdin_holds_writes_until_its_end() {
    let faults = ByteFaults::new("cap://t/a", 1);
    let (ours, mut theirs) = tokio::io::duplex(64);
    let mut w = faults.writer(ours);
    w.write_all(b"before\n").await.unwrap();
    faults.inject(ByteFault::StallStdin { for_ms: 150 });
    let t0 = Instant::now();
    w.write_all(b"after\n").await.unwrap();
    assert!(
        t0.elapsed() >= Duration::from_millis(100),
        "{:?}",
        t0.elapsed()
    );
    drop(w);
    let mut got = String::new();
    theirs.read_to_string(&mut got).await.unwrap();
    assert_eq!(got, "before\nafter\n");
    assert!(faults.stats().stalled_writes >= 1);
}
