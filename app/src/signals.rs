//! The stop signals of `run` and `chat`, listened for in one place.
//!
//! Once a [`StopSignals`] is made, its signals no longer end capfleet at once: they
//! arrive here, and the verb shuts its agents down first (no agent outlives it). What
//! each signal means is the engine's ([`Signal`], [`capfleet_wire::process::halt`]):
//! `SIGINT` stops cooperatively, `SIGTERM` and `SIGHUP` kill every agent's group at
//! once, and a second signal cuts the kill grace short. [`StopSignals::escalate`] is
//! that answer for a verb that stops its tree itself (`chat`); `run` hands the
//! signals to `run_fleet` ([`StopSignals::forward`]).

use capfleet_wire::events::Signal;
use capfleet_wire::process::halt::{self, Urgency};
use tokio::signal::unix::{self, SignalKind};
use tokio::sync::mpsc;

/// The signals a verb listens for.
pub struct StopSignals {
    term: Option<unix::Signal>,
    hup: Option<unix::Signal>,
    /// Only when the verb takes `SIGINT` as a stop too (`chat` cancels a turn with it).
    int: Option<unix::Signal>,
}

impl StopSignals {
    /// `SIGTERM` and `SIGHUP`.
    pub fn terminations() -> Self {
        StopSignals {
            term: listen(SignalKind::terminate()),
            hup: listen(SignalKind::hangup()),
            int: None,
        }
    }

    /// `SIGTERM`, `SIGHUP` and `SIGINT`.
    pub fn all() -> Self {
        StopSignals {
            int: listen(SignalKind::interrupt()),
            ..StopSignals::terminations()
        }
    }

    /// The next signal (never, for one whose handler could not be installed: its
    /// default action then applies). Signals that arrive in the same instant have no
    /// order anyone can see; they are taken strongest first (`SIGTERM`, `SIGHUP`,
    /// `SIGINT`), the same way every time.
    pub async fn recv(&mut self) -> Signal {
        tokio::select! {
            biased;
            Some(()) = next(&mut self.term) => Signal::Term,
            Some(()) = next(&mut self.hup) => Signal::Hup,
            Some(()) = next(&mut self.int) => Signal::Int,
            else => std::future::pending().await,
        }
    }

    /// Send every signal to `to` until it is closed (the run has ended), saying on
    /// stderr what each one does.
    pub fn forward(mut self, to: mpsc::Sender<Signal>) {
        tokio::spawn(async move {
            let mut first = true;
            loop {
                tokio::select! {
                    signal = self.recv() => {
                        say(signal, first);
                        first = false;
                        if to.send(signal).await.is_err() {
                            return;
                        }
                    }
                    () = to.closed() => return,
                }
            }
        });
    }

    /// The engine's answer to `first` for a verb that shuts its tree down itself:
    /// halt every agent (unless `first` is `SIGINT`), and from now on any signal
    /// (`SIGINT` included) forces their end at once.
    pub fn escalate(first: Signal) {
        say(first, true);
        if !first.is_interrupt() {
            halt::escalate(Urgency::Halt);
        }
        let mut later = StopSignals::all();
        tokio::spawn(async move {
            say(later.recv().await, false);
            halt::escalate(Urgency::Force);
        });
    }
}

/// What `signal` does, on stderr (above `run`'s live view).
fn say(signal: Signal, first: bool) {
    let said = match (first, signal) {
        (true, Signal::Int) => "\n^C stopping: every session is cancelled".to_owned(),
        (true, other) => format!("\ncapfleet: {other}: stopping; killing every agent"),
        (false, other) => format!("capfleet: {other} again: killing the agents now"),
    };
    crate::logging::note(&said);
}

fn listen(kind: SignalKind) -> Option<unix::Signal> {
    match unix::signal(kind) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!("cannot listen for signal {}: {e}", kind.as_raw_value());
            None
        }
    }
}

async fn next(signal: &mut Option<unix::Signal>) -> Option<()> {
    match signal {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}
