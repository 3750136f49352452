//! A response's SSE stream as bounded events ([`crate::bindings::sse`]: whole lines,
//! linear, at most `max` bytes an event); an oversize event ends the stream as
//! [`Next::Oversize`] (a `parse_failed`), never an unbounded buffer.

use std::pin::Pin;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};

use crate::bindings::sse::{Cut, lines};

type EventItem = Result<eventsource_stream::Event, EventStreamError<Cut<reqwest::Error>>>;

/// The events of one SSE response.
pub(super) struct Events {
    inner: Pin<Box<dyn Stream<Item = EventItem> + Send>>,
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
        Events {
            inner: Box::pin(lines(res.bytes_stream(), max).eventsource()),
        }
    }

    pub(super) async fn next(&mut self) -> Next {
        loop {
            match self.inner.next().await {
                Some(Ok(event)) => {
                    if event.data.is_empty() {
                        continue; // a comment or keep-alive
                    }
                    return Next::Data(event.data);
                }
                Some(Err(EventStreamError::Transport(Cut::Oversize { .. }))) => {
                    return Next::Oversize;
                }
                Some(Err(e)) => return Next::Ended(Some(e.to_string())),
                None => return Next::Ended(None),
            }
        }
    }
}
