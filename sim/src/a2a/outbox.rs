//! A task's stream responses and the SSE responses reading them, one reader at a
//! time. A real A2A server gives each request its own stream; the sim's task keeps
//! one ordered outbox, so two rules keep a frame off a stream nobody reads and an
//! end marker off the wrong one:
//! - the newest reader (an answer's or a resubscribe's response) supersedes the
//!   older: an older reader ends at once, before it takes anything more;
//! - a drop marker is counted before the frames it closes (an `input-required`
//!   question) are queued, and a reader skips a drop counted before it attached:
//!   that marker closed a response the client had already left.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{Mutex, mpsc, watch};

use super::turn::Out;

/// Stream responses buffered per task before its turn waits for a reader.
const OUTBOX: usize = 256;

pub(super) struct Outbox {
    rx: Mutex<mpsc::Receiver<Out>>,
    /// The newest reader's number.
    newest: watch::Sender<u64>,
    /// Drop markers counted so far (the turn's [`Drops`]).
    drops: Drops,
}

/// The count of a task's drop markers, shared by its turn and its outbox.
#[derive(Clone, Default)]
pub(super) struct Drops(Arc<AtomicU64>);

impl Drops {
    /// The next drop marker's number, counted now.
    pub(super) fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn counted(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// One SSE response's hold on the outbox.
pub(super) struct Reader {
    outbox: Arc<Outbox>,
    me: u64,
    newest: watch::Receiver<u64>,
    /// Drops counted when it attached: markers for the responses before it.
    born: u64,
}

impl Outbox {
    /// A task's outbox, the sender its turn writes, and the turn's drop count.
    pub(super) fn new() -> (Arc<Self>, mpsc::Sender<Out>, Drops) {
        let (tx, rx) = mpsc::channel(OUTBOX);
        let drops = Drops::default();
        let outbox = Arc::new(Self {
            rx: Mutex::new(rx),
            newest: watch::Sender::new(0),
            drops: drops.clone(),
        });
        (outbox, tx, drops)
    }

    /// A new reader; every older one ends.
    pub(super) fn attach(self: &Arc<Self>) -> Reader {
        let mut me = 0;
        self.newest.send_modify(|n| {
            *n += 1;
            me = *n;
        });
        Reader {
            outbox: self.clone(),
            me,
            newest: self.newest.subscribe(),
            born: self.drops.counted(),
        }
    }
}

impl Reader {
    /// The next frame or raw line for this response; `None` ends it (its drop
    /// marker, the task's end, or a newer reader).
    pub(super) async fn next(&mut self) -> Option<Out> {
        loop {
            let me = self.me;
            let outbox = &self.outbox;
            let superseded = self.newest.wait_for(|n| *n != me);
            let item = async { outbox.rx.lock().await.recv().await };
            let out = tokio::select! {
                biased;
                _ = superseded => return None,
                out = item => out?,
            };
            match out {
                Out::Drop(n) if n <= self.born => {}
                Out::Drop(_) | Out::End => return None,
                out => return Some(out),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn frame(out: Option<Out>) -> Option<Value> {
        match out {
            Some(Out::Frame(v)) => Some(v),
            _ => None,
        }
    }

    /// The permission test's flake: the answer's response attached while the asking
    /// one had not yet taken its drop marker.
    #[tokio::test]
    async fn an_answer_skips_the_asking_response_s_drop_and_takes_what_follows() {
        let (outbox, tx, drops) = Outbox::new();
        let mut asking = outbox.attach();
        let drop = drops.next();
        tx.send(Out::Frame(json!("question"))).await.expect("send");
        tx.send(Out::Drop(drop)).await.expect("send");
        assert_eq!(frame(asking.next().await), Some(json!("question")));
        let mut answer = outbox.attach();
        tx.send(Out::Frame(json!("working"))).await.expect("send");
        assert!(asking.next().await.is_none());
        assert_eq!(frame(answer.next().await), Some(json!("working")));
    }

    /// A resubscribe ends a reader still waiting (its client gone) before it takes a
    /// frame; a drop queued after the newer reader attached still ends that one.
    #[tokio::test]
    async fn a_newer_reader_ends_a_waiting_one_and_a_later_drop_ends_it() {
        let (outbox, tx, drops) = Outbox::new();
        let old = outbox.attach();
        let waiting = tokio::spawn(async move {
            let mut old = old;
            old.next().await.is_none()
        });
        tokio::task::yield_now().await;
        let mut newer = outbox.attach();
        tx.send(Out::Frame(json!("after"))).await.expect("send");
        tx.send(Out::Drop(drops.next())).await.expect("send");
        assert!(waiting.await.expect("join"));
        assert_eq!(frame(newer.next().await), Some(json!("after")));
        assert!(newer.next().await.is_none());
    }
}
