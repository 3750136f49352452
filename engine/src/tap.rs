//! A tap: an actor that sees every event every session publishes, through its own
//! bounded channel (a slow tap slows the sessions; it never queues without bound).
//! The budget and telemetry actors are taps; each supplies a [`TapHandler`].
//!
//! A snapshot is settled: it is taken after every event already in the tap's channel
//! has been applied, so whoever has seen a publisher's `publish` return (a session's
//! turn result, the run's end) reads a snapshot that includes that event.

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use capfleet_wire::events::{Published, SUBSCRIBER_CAPACITY, SessionEvent};

/// Snapshot requests waiting for the drain at most (callers wait, never queue more).
const SNAPSHOT_REQUESTS: usize = 16;

/// What a tap does with events, and what it reports.
pub trait TapHandler: Send + 'static {
    type Snapshot: Send + 'static;

    fn on_event(&mut self, event: &SessionEvent);
    fn snapshot(&self) -> Self::Snapshot;
}

pub enum TapMsg<S> {
    /// A sender for a new publisher (a session, the router, the workspace stream).
    Subscribe(RpcReplyPort<mpsc::Sender<Published>>),
    /// What the tap has gathered, including every event queued before the request.
    Snapshot(RpcReplyPort<S>),
}

/// The tap actor over handler `H`.
pub struct Tap<H>(std::marker::PhantomData<fn() -> H>);

impl<H> Default for Tap<H> {
    fn default() -> Self {
        Tap(std::marker::PhantomData)
    }
}

pub struct TapState<H: TapHandler> {
    tx: mpsc::Sender<Published>,
    snapshots: mpsc::Sender<RpcReplyPort<H::Snapshot>>,
    drain: JoinHandle<()>,
}

impl<H: TapHandler> Actor for Tap<H> {
    type Msg = TapMsg<H::Snapshot>;
    type State = TapState<H>;
    type Arguments = H;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        handler: H,
    ) -> Result<TapState<H>, ActorProcessingErr> {
        let (tx, rx) = mpsc::channel::<Published>(SUBSCRIBER_CAPACITY);
        let (snapshots, requests) = mpsc::channel(SNAPSHOT_REQUESTS);
        let drain = tokio::spawn(drain(handler, rx, requests));
        Ok(TapState {
            tx,
            snapshots,
            drain,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        st: &mut TapState<H>,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            TapMsg::Subscribe(reply) => {
                let _caller_gone = reply.send(st.tx.clone());
            }
            TapMsg::Snapshot(reply) => {
                // The drain answers once it has applied what is queued ahead.
                let _drain_gone = st.snapshots.send(reply).await;
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        st: &mut TapState<H>,
    ) -> Result<(), ActorProcessingErr> {
        st.drain.abort();
        Ok(())
    }
}

/// Apply events as they come; answer each snapshot request after applying every
/// event that was queued when it arrived (and no more: a flood cannot starve it).
async fn drain<H: TapHandler>(
    mut handler: H,
    mut rx: mpsc::Receiver<Published>,
    mut requests: mpsc::Receiver<RpcReplyPort<H::Snapshot>>,
) {
    let mut open = true;
    loop {
        tokio::select! {
            biased;
            request = requests.recv() => {
                let Some(reply) = request else { return };
                for _ in 0..rx.len() {
                    match rx.try_recv() {
                        Ok(event) => handler.on_event(&event),
                        Err(_) => break,
                    }
                }
                let _caller_gone = reply.send(handler.snapshot());
            }
            event = rx.recv(), if open => match event {
                Some(event) => handler.on_event(&event),
                None => open = false,
            },
        }
    }
}
