//! A tap: an actor that sees every event every session publishes, through its own
//! bounded channel (a slow tap slows the sessions; it never queues without bound).
//! The budget and telemetry actors are taps; each supplies a [`TapHandler`].
//!
//! A snapshot is settled: it is taken after every event already in the tap's channel
//! has been applied, so whoever has seen a publisher's `publish` return (a session's
//! turn result, the run's end) reads a snapshot that includes that event.
//!
//! A handler that panics fails its tap (the tap's supervisor, the root, is told and
//! reports it: [`crate::death`]); a tap never goes on taking events into nowhere.

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinError, JoinHandle};

use capfleet_wire::events::{Published, SUBSCRIBER_CAPACITY, SessionEvent};

/// Snapshot requests waiting for the drain at most (callers wait, never queue more).
const SNAPSHOT_REQUESTS: usize = 16;

/// What a tap does with events, and what it reports.
pub(crate) trait TapHandler: Send + 'static {
    type Snapshot: Send + 'static;

    fn on_event(&mut self, event: &SessionEvent);
    fn snapshot(&self) -> Self::Snapshot;
}

pub enum TapMsg<S> {
    /// A sender for a new publisher (a session, the router, the workspace stream).
    Subscribe(RpcReplyPort<mpsc::Sender<Published>>),
    /// What the tap has gathered, including every event queued before the request.
    Snapshot(RpcReplyPort<S>),
    /// The handler panicked (sent by the tap's own watch on its drain): the tap
    /// fails with the panic's message.
    HandlerPanicked(String),
}

/// The tap actor over handler `H`.
pub(crate) struct Tap<H>(std::marker::PhantomData<fn() -> H>);

impl<H> Default for Tap<H> {
    fn default() -> Self {
        Tap(std::marker::PhantomData)
    }
}

pub(crate) struct TapState<H: TapHandler> {
    tx: mpsc::Sender<Published>,
    snapshots: mpsc::Sender<RpcReplyPort<H::Snapshot>>,
    drain: AbortHandle,
    watch: JoinHandle<()>,
}

impl<H: TapHandler> Actor for Tap<H> {
    type Msg = TapMsg<H::Snapshot>;
    type State = TapState<H>;
    type Arguments = H;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        handler: H,
    ) -> Result<TapState<H>, ActorProcessingErr> {
        let (tx, rx) = mpsc::channel::<Published>(SUBSCRIBER_CAPACITY);
        let (snapshots, requests) = mpsc::channel(SNAPSHOT_REQUESTS);
        let drain = tokio::spawn(drain(handler, rx, requests));
        let abort = drain.abort_handle();
        let watch = tokio::spawn(async move {
            if let Err(e) = drain.await
                && e.is_panic()
            {
                let _tap_gone = myself.cast(TapMsg::HandlerPanicked(panic_message(e)));
            }
        });
        Ok(TapState {
            tx,
            snapshots,
            drain: abort,
            watch,
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
            TapMsg::HandlerPanicked(message) => {
                return Err(format!("its handler panicked: {message}").into());
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
        st.watch.abort();
        Ok(())
    }
}

/// What a panicked task's payload says (a `panic!` with a message, else a placeholder).
fn panic_message(e: JoinError) -> String {
    let payload = e.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
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

#[cfg(test)]
mod tests {
    use ractor::SupervisionEvent;

    use super::*;
    use capfleet_wire::events::{EventBody, Publisher, RunOutcome, urn};

    /// Counts events; panics on the second.
    struct Fragile(u32);

    impl TapHandler for Fragile {
        type Snapshot = u32;

        fn on_event(&mut self, _: &SessionEvent) {
            self.0 += 1;
            assert!(self.0 < 2, "a bug on event {}", self.0);
        }

        fn snapshot(&self) -> u32 {
            self.0
        }
    }

    /// Tells the test what its child died of.
    struct Watcher(mpsc::Sender<String>);

    impl Actor for Watcher {
        type Msg = ();
        type State = ();
        type Arguments = ();

        async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
            Ok(())
        }

        async fn handle_supervisor_evt(
            &self,
            _: ActorRef<()>,
            evt: SupervisionEvent,
            _: &mut (),
        ) -> Result<(), ActorProcessingErr> {
            if let SupervisionEvent::ActorFailed(_, err) = evt {
                self.0.send(err.to_string()).await?;
            }
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_handler_that_panics_fails_its_tap_and_its_supervisor_is_told() {
        let (told, mut failures) = mpsc::channel(1);
        let (watcher, _) = Actor::spawn(None, Watcher(told), ()).await.unwrap();
        let (tap, _) = Actor::spawn_linked(None, Tap::default(), Fragile(0), watcher.get_cell())
            .await
            .unwrap();
        let tx = ractor::call!(tap, TapMsg::Subscribe).unwrap();
        let mut bus = Publisher::new(urn("f", "router"), vec![tx]);
        let body = || EventBody::RunEnded {
            outcome: RunOutcome::Completed,
            signal: None,
        };
        bus.publish(None, body()).await;
        assert_eq!(ractor::call!(tap, TapMsg::Snapshot).unwrap(), 1);
        bus.publish(None, body()).await;
        let failure = tokio::time::timeout(std::time::Duration::from_secs(5), failures.recv())
            .await
            .expect("the supervisor is told")
            .unwrap();
        assert!(
            failure.contains("its handler panicked: a bug on event 2"),
            "{failure}"
        );
        assert!(ractor::call!(tap, TapMsg::Snapshot).is_err());
        watcher.stop(None);
    }
}
