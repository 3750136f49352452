//! A tap: an actor that sees every event every session publishes, through its own
//! bounded channel (a slow tap slows the sessions; it never queues without bound).
//! The budget and telemetry actors are taps; each supplies a [`TapHandler`].

use std::sync::{Arc, Mutex};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::events::{Published, SUBSCRIBER_CAPACITY, SessionEvent};
use crate::sync::lock;

/// What a tap does with events, and what it reports.
pub trait TapHandler: Send + 'static {
    type Snapshot: Send + 'static;

    fn on_event(&mut self, event: &SessionEvent);
    fn snapshot(&self) -> Self::Snapshot;
}

pub enum TapMsg<S> {
    /// A sender for a new publisher (a session, the router, the workspace stream).
    Subscribe(RpcReplyPort<mpsc::Sender<Published>>),
    /// What the tap has gathered so far.
    Snapshot(RpcReplyPort<S>),
}

/// The tap actor over handler `H`.
pub struct Tap<H>(std::marker::PhantomData<fn() -> H>);

impl<H> Default for Tap<H> {
    fn default() -> Self {
        Tap(std::marker::PhantomData)
    }
}

pub struct TapState<H> {
    tx: mpsc::Sender<Published>,
    handler: Arc<Mutex<H>>,
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
        let (tx, mut rx) = mpsc::channel::<Published>(SUBSCRIBER_CAPACITY);
        let handler = Arc::new(Mutex::new(handler));
        let shared = handler.clone();
        let drain = tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                // Held only for the synchronous update, never across an await.
                lock(&shared).on_event(&event);
            }
        });
        Ok(TapState { tx, handler, drain })
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
                let snap = lock(&st.handler).snapshot();
                let _caller_gone = reply.send(snap);
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
