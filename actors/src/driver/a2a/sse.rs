//! A response's SSE stream as bounded events: eventsource-stream parses the frames;
//! a byte budget in front of it bounds what it may buffer for one event, so an
//! oversize event ends the stream as [`Next::Oversize`] (a `parse_failed`), never an
//! unbounded buffer.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};

/// Why the byte stream stopped.
#[derive(Debug)]
enum Fail {
    Oversize,
    Transport(reqwest::Error),
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fail::Oversize => f.write_str("event over the size bound"),
            Fail::Transport(e) => write!(f, "{e}"),
        }
    }
}

type EventItem = Result<eventsource_stream::Event, EventStreamError<Fail>>;

/// The events of one SSE response.
pub(super) struct Events {
    inner: Pin<Box<dyn Stream<Item = EventItem> + Send>>,
    /// Bytes received since the last event came out.
    since_event: Arc<AtomicUsize>,
}

/// The next thing a stream gives.
#[derive(Debug)]
pub(super) enum Next {
    /// One event's data.
    Data(String),
    /// An event over the bound: the stream is given up.
    Oversize,
    /// The stream ended (closed, or failed: the peer's loss or a drop).
    Ended(Option<String>),
}

impl Events {
    /// `max`: the most bytes one event may take.
    pub(super) fn new(res: reqwest::Response, max: usize) -> Events {
        let since_event = Arc::new(AtomicUsize::new(0));
        let budget = since_event.clone();
        let bytes = res.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(Fail::Transport)?;
            let held = budget.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len();
            if held > max {
                Err(Fail::Oversize)
            } else {
                Ok(chunk)
            }
        });
        Events {
            inner: Box::pin(bytes.eventsource()),
            since_event,
        }
    }

    pub(super) async fn next(&mut self) -> Next {
        loop {
            match self.inner.next().await {
                Some(Ok(event)) => {
                    self.since_event.store(0, Ordering::Relaxed);
                    if event.data.is_empty() {
                        continue; // a comment or keep-alive
                    }
                    return Next::Data(event.data);
                }
                Some(Err(EventStreamError::Transport(Fail::Oversize))) => return Next::Oversize,
                Some(Err(e)) => return Next::Ended(Some(e.to_string())),
                None => return Next::Ended(None),
            }
        }
    }
}
