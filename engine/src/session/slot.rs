//! The driver slot: the session's one driver at a time — its ref, its generation
//! (outputs and exits of a replaced driver are stale), whether it got ready, the
//! credits its output sink draws on, the restart tracker, the launch spec the next
//! driver starts with (resume id, `TRACEPARENT`, terminal size), and whether its next
//! exit is one the session caused — and what the session does to start, kill and
//! lose it.

use std::sync::Arc;
use std::sync::atomic::AtomicI32;
use std::time::Instant;

use ractor::{ActorCell, ActorRef};
use tokio::sync::Semaphore;

use super::machine::Core;
use super::{Own, SessionError, SessionMsg, SessionSpec};
use crate::protocol::StopReason;
use capfleet_wire::driver::DEFAULT_CREDITS;
use capfleet_wire::driver::{DriverArgs, DriverMsg, ExitCause, LaunchSpec, OutputSink};
use capfleet_wire::events::trace::{TRACEPARENT, traceparent};
use capfleet_wire::events::{EventBody, SessionState, TurnOutcome};
use capfleet_wire::supervision::{Decision as Restart, RestartTracker};

/// The session's driver, one at a time.
pub(super) struct DriverSlot {
    pub driver: Option<ActorRef<DriverMsg>>,
    /// What the next driver starts with.
    pub launch: Arc<LaunchSpec>,
    /// The agent's session to resume, once it reported one.
    pub resume_id: Option<String>,
    /// The current agent resumed its session natively (its ready said so).
    pub resumed_natively: bool,
    /// The next agent may take up the cut turn where it has it (not after a hang:
    /// that turn is tried afresh).
    pub retake: bool,
    pub tracker: RestartTracker,
    generation: u64,
    ready_generation: u64,
    credits: Arc<Semaphore>,
    /// The next driver exit was caused by us (cancel fallback): respawn, no restart count.
    kill_expected: bool,
    /// The process group of the current driver's agent (0: none), as the driver shows it.
    pub group: Arc<AtomicI32>,
}

impl DriverSlot {
    pub(super) fn new(spec: &SessionSpec) -> Self {
        DriverSlot {
            driver: None,
            launch: Arc::new(spec.launch.clone()),
            resume_id: None,
            resumed_natively: false,
            retake: true,
            tracker: RestartTracker::new(spec.policy),
            generation: 0,
            ready_generation: 0,
            credits: Arc::new(Semaphore::new(DEFAULT_CREDITS)),
            kill_expected: false,
            group: Arc::new(AtomicI32::new(0)),
        }
    }

    /// Outputs and exits of `generation` are the current driver's.
    pub(super) fn is_current(&self, generation: u64) -> bool {
        generation == self.generation
    }

    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// Start a new generation: whatever the driver before still has in flight (a
    /// reader racing a kill) is stale from now on.
    pub(super) fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// The current driver is ready.
    pub(super) fn set_ready(&mut self) {
        self.ready_generation = self.generation;
    }

    /// The current driver is ready.
    pub(super) fn is_ready(&self) -> bool {
        self.ready_generation == self.generation
    }

    /// The driver of `generation` is the current one and not ready yet.
    pub(super) fn awaits_ready(&self, generation: u64) -> bool {
        self.is_current(generation) && self.ready_generation != generation
    }

    /// `cell` is the current driver's.
    pub(super) fn holds(&self, cell: &ActorCell) -> bool {
        self.driver
            .as_ref()
            .is_some_and(|d| d.get_id() == cell.get_id())
    }

    /// The agent's own spans (if it makes any) join the trace of `span`.
    fn join_trace(&mut self, span: &tracing::Span) {
        if let Some(tp) = traceparent(span) {
            let env = &mut Arc::make_mut(&mut self.launch).env;
            env.retain(|(k, _)| k != TRACEPARENT);
            env.push((TRACEPARENT.to_owned(), tp));
        }
    }

    /// The output sink of the current generation.
    fn sink(&self, session: &ActorRef<SessionMsg>) -> OutputSink {
        OutputSink::new(self.generation, session.get_derived(), self.credits.clone())
    }

    /// Send the driver `msg`, if there is a driver.
    pub(super) fn send(&self, msg: DriverMsg) {
        if let Some(d) = &self.driver {
            let _gone = d.cast(msg);
        }
    }

    pub(super) fn kill(&self, cause: ExitCause) {
        self.send(DriverMsg::Kill { cause });
    }

    /// Kill the driver to end a cancelled turn: its exit is no crash.
    pub(super) fn kill_cancelled(&mut self) {
        self.kill_expected = true;
        self.kill(ExitCause::Normal);
    }

    /// The viewer's terminal is `rows` x `cols`: the driver's terminal follows, and
    /// the next driver starts at it.
    pub(super) fn resize(&mut self, rows: u16, cols: u16) {
        if rows == 0 || cols == 0 {
            return;
        }
        let pty = &mut Arc::make_mut(&mut Arc::make_mut(&mut self.launch).manifest).pty;
        (pty.rows, pty.cols) = (rows, cols);
        self.send(DriverMsg::Resize { rows, cols });
    }
}

impl Core {
    pub(super) async fn start_driver(&mut self, myself: &ActorRef<SessionMsg>) {
        if self.state.is_terminal() || self.closing || self.slot.driver.is_some() {
            return;
        }
        let generation = self.slot.next_generation();
        self.slot.join_trace(self.spans.for_agent());
        let sink = self.slot.sink(myself);
        let args = DriverArgs {
            launch: self.slot.launch.clone(),
            sink,
            resume_id: self.slot.resume_id.clone(),
            retake: self.slot.retake,
            group: self.slot.group.clone(),
        };
        match capfleet_wire::driver::spawn(self.spec.binding, args, myself.get_cell()).await {
            Ok(driver) => {
                self.slot.driver = Some(driver);
                let _timer = myself.send_after(self.spec.init_timeout, move || {
                    Own::InitTimeout { generation }.into()
                });
            }
            // No driver for this binding (or shape) in this build: nothing to restart.
            Err(e) if e.code().is_some() => self.fail(e.to_string()).await,
            // A spawn failure (bad argv) counts as a crash; a missing program is
            // `CannotStart`, which no policy restarts.
            Err(e) => Box::pin(self.on_driver_exit(myself, e.exit_cause())).await,
        }
    }

    /// The current driver ended with `cause`: close, respawn after a kill of ours,
    /// restart under the policy, or fail.
    pub(super) async fn on_driver_exit(&mut self, myself: &ActorRef<SessionMsg>, cause: ExitCause) {
        self.slot.ready_generation = 0;
        if self.closing {
            self.finish_turn_with_error(SessionError::Closed).await;
            self.set_state(SessionState::Closed).await;
            return;
        }
        if std::mem::take(&mut self.slot.kill_expected) {
            // We killed it to end a cancelled turn: that turn is over, a fresh agent follows.
            self.end_turn(TurnOutcome::Cancelled, StopReason::Cancelled)
                .await;
            self.set_state(SessionState::Starting).await;
            let _go = myself.cast(Own::StartDriver.into());
            return;
        }
        // A rate limit is no crash: the turn waits for the reset, no restart counted.
        // An agent gone during a pause comes back at the resume.
        if self.state == SessionState::Paused || self.pause_instead(myself).await {
            return;
        }
        self.slot.retake = !matches!(cause, ExitCause::Hung { .. });
        // A turn whose end was lost in a dropped line is over (failed), not re-issued.
        let lost = self.dropped_then_died().await;
        let poison = if lost {
            None
        } else {
            self.book.attempt_failed(&cause)
        };
        match self.slot.tracker.on_exit(Instant::now(), &cause) {
            Restart::Restart { attempt, delay } => {
                let backoff_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
                self.spans.restart(&cause, attempt, backoff_ms);
                let urn = self.bus.urn();
                self.spans.for_agent().in_scope(
                    || tracing::warn!(%urn, %cause, attempt, ?delay, "restarting the agent"),
                );
                if let Some(event) = poison {
                    self.poison_turn(event).await;
                }
                self.book.restarting();
                self.publish(EventBody::Restart {
                    cause,
                    attempt,
                    delay_ms: delay.as_millis().try_into().unwrap_or(u64::MAX),
                })
                .await;
                self.set_state(SessionState::Starting).await;
                if delay.is_zero() {
                    let _go = myself.cast(Own::StartDriver.into());
                } else {
                    let _timer = myself.send_after(delay, || Own::StartDriver.into());
                }
            }
            Restart::Stop { reason } => {
                if cause.is_abnormal() {
                    self.fail(format!("agent {cause}; {reason}")).await;
                } else {
                    // The agent ended by itself and the policy does not bring it back.
                    self.finish_turn_with_error(SessionError::Closed).await;
                    self.set_state(SessionState::Closed).await;
                }
            }
        }
    }
}
