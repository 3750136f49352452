//! The one driver actor, generic over the binding's [`Wire`]: it owns the agent's
//! process group or connection, its output task and stderr ring, and decides how the
//! agent ends — deliberately (`Shutdown`: told, given time, then killed), killed
//! (`Kill`: the session's verdict), or by itself (its output closed: reaped,
//! classified, announced, and the driver fails or stops).
//!
//! The [`Shape`] decides when there is an agent at all: one for the driver's life
//! ([`Shape::LongLived`], [`Shape::Connect`]), or one per turn ([`Shape::PerTurn`]),
//! started by the prompt and retired by its clean exit while the driver lives on.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::task::JoinHandle;

use super::death::{self, ended};
use super::launch::Shape;
use super::wire::{Interrupt, OutputEnd, Peer, Start, Started, Wire};
use super::{DriverArgs, DriverMsg, DriverOutput, ExitCause, LaunchSpec, OutputSink, TurnEnd};
use crate::chaos::signals::SignalFault;
use crate::process::stderr_ring::StderrRing;
use crate::protocol::{CapCode, CapEvent, StopReason};

/// The driver of one binding: the skeleton every binding shares.
pub(crate) struct Driver<W>(PhantomData<fn() -> W>);

impl<W> Default for Driver<W> {
    fn default() -> Self {
        Driver(PhantomData)
    }
}

/// One agent process (or connection) and what the driver holds of it.
struct Live<W> {
    wire: W,
    peer: Peer,
    stderr: StderrRing,
    output: JoinHandle<OutputEnd>,
    /// Which start of this driver it is (a late `OutputClosed` names the one it was of).
    run: u64,
}

/// The state of one driver generation.
pub(crate) struct DriverState<W> {
    launch: Arc<LaunchSpec>,
    sink: OutputSink,
    /// The id the next agent resumes with (per-turn agents learn it from each other).
    resume_id: Option<String>,
    /// The cut turn may be taken up where the agent has it.
    retake: bool,
    /// Per turn: the last turn's wire, retired after its clean end, for the next.
    previous: Option<W>,
    live: Option<Live<W>>,
    runs: u64,
    /// Ending on purpose (shut down, killed, cancelled hard): an end of output is expected.
    stopping: bool,
    /// The live agent's process group, shown to the session (0: none).
    group: Arc<AtomicI32>,
}

impl<W: Wire> Actor for Driver<W> {
    type Msg = DriverMsg;
    type State = DriverState<W>;
    type Arguments = DriverArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<DriverMsg>,
        args: DriverArgs,
    ) -> Result<DriverState<W>, ActorProcessingErr> {
        let DriverArgs {
            launch,
            sink,
            resume_id,
            retake,
            group,
        } = args;
        let mut st = DriverState {
            launch,
            sink,
            resume_id,
            retake,
            previous: None,
            live: None,
            runs: 0,
            stopping: false,
            group,
        };
        match st.launch.shape {
            // Nothing to wait for: the first prompt starts the first agent.
            Shape::PerTurn => st.announce_ready().await,
            Shape::LongLived | Shape::Connect(_) => {
                st.live = Some(st.start(&myself).await?);
            }
        }
        Ok(st)
    }

    async fn handle(
        &self,
        myself: ActorRef<DriverMsg>,
        msg: DriverMsg,
        st: &mut DriverState<W>,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            DriverMsg::Prompt { text } => {
                if st.launch.shape == Shape::PerTurn {
                    st.retire(&myself).await?;
                    st.live = Some(st.start(&myself).await?);
                }
                match st.live.as_mut() {
                    Some(live) => live.wire.prompt(text).await,
                    None => tracing::debug!(urn = %st.launch.urn, "no agent; prompt dropped"),
                }
            }
            DriverMsg::Steer { text, taken } => match st.live.as_mut() {
                Some(live) => live.wire.steer(text, taken).await,
                None => tracing::debug!(urn = %st.launch.urn, "no agent; steer dropped"),
            },
            DriverMsg::Permission {
                req_id,
                decision,
                message,
            } => match st.live.as_mut() {
                Some(live) => live.wire.permission(req_id, decision, message).await,
                None => tracing::debug!(urn = %st.launch.urn, %req_id, "no agent; answer dropped"),
            },
            DriverMsg::Answer { ask_id, value } => match st.live.as_mut() {
                Some(live) => live.wire.answer(ask_id, value).await,
                None => tracing::debug!(urn = %st.launch.urn, %ask_id, "no agent; answer dropped"),
            },
            DriverMsg::Resize { rows, cols } => {
                if let Some(live) = st.live.as_mut() {
                    live.wire.resize(rows, cols).await;
                }
            }
            DriverMsg::Interrupt => {
                let verdict = match st.live.as_mut() {
                    Some(live) => live.wire.interrupt().await,
                    None => Interrupt::Sent, // no agent, no turn to cancel
                };
                match verdict {
                    Interrupt::Sent => {}
                    Interrupt::Unsupported => {
                        let event = super::registry_error(
                            CapCode::CancelUnsupported,
                            "this agent cannot cancel a turn (mid_turn_cancel = none)",
                        );
                        st.sink.send_one(DriverOutput::Event(event)).await;
                    }
                    Interrupt::Hard => {
                        st.stopping = true;
                        st.kill(false).await;
                        st.release().await;
                        st.sink
                            .send_one(DriverOutput::TurnEnd(TurnEnd::cancelled()))
                            .await;
                        myself.stop(Some("turn cancelled hard".into()));
                    }
                }
            }
            DriverMsg::Kill { cause } => {
                st.stopping = true;
                st.kill(W::READ_WHILE_KILLED).await;
                st.release().await;
                let stderr = st
                    .live
                    .as_ref()
                    .map(|l| l.stderr.clone())
                    .unwrap_or_default();
                st.announce(W::death_event(&cause, false, &stderr)).await;
                return Err(Box::new(cause));
            }
            DriverMsg::Shutdown => {
                st.stopping = true;
                if let Some(live) = st.live.as_mut() {
                    let told = live.wire.close(&live.peer);
                    live.wire.halt();
                    death::end_deliberately(
                        &mut live.peer,
                        &mut live.output,
                        &st.launch.urn,
                        W::WHO,
                        told,
                    )
                    .await;
                }
                myself.stop(None);
            }
            DriverMsg::Chaos(fault) => st.chaos(&myself, fault),
            DriverMsg::ChaosContinue { run } => {
                if let Some(Live {
                    peer: Peer::Process(group),
                    ..
                }) = st.live.as_ref().filter(|l| l.run == run)
                {
                    let _already_gone = crate::process::signal_group(group.pgid(), libc::SIGCONT);
                }
            }
            DriverMsg::OutputClosed { run } => {
                let Some(live) = st.live.as_mut().filter(|l| l.run == run && !st.stopping) else {
                    return Ok(()); // expected, or a retired agent's
                };
                let end = (&mut live.output).await.unwrap_or(OutputEnd::CLOSED);
                return st.output_ended(&myself, end).await;
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<DriverMsg>,
        st: &mut DriverState<W>,
    ) -> Result<(), ActorProcessingErr> {
        // Stopped from outside (session closed, fleet stopping): never leave the agent.
        st.kill(false).await;
        Ok(())
    }
}

impl<W: Wire> DriverState<W> {
    /// Start an agent (or connect to it) and its output task; announce readiness
    /// first when the wire is ready at start. A start that failed because the
    /// agent's program is not there fails as [`ExitCause::CannotStart`] (never
    /// restarted), whichever wire tried.
    async fn start(&mut self, myself: &ActorRef<DriverMsg>) -> Result<Live<W>, ActorProcessingErr> {
        let started = W::start(Start {
            launch: &self.launch,
            sink: &self.sink,
            resume_id: self.resume_id.as_deref(),
            retake: self.retake,
            previous: self.previous.take(),
        })
        .await;
        let Started {
            wire,
            peer,
            stderr,
            output,
        } = started.map_err(|e| -> ActorProcessingErr {
            match self.launch.missing_program() {
                Some(missing) => Box::new(ExitCause::CannotStart {
                    message: missing.to_string(),
                }),
                None => Box::new(e),
            }
        })?;
        if let Peer::Process(g) = &peer {
            self.group.store(g.pgid(), Ordering::Relaxed);
        }
        if W::READY_AT_START && self.launch.shape != Shape::PerTurn {
            self.announce_ready().await;
        }
        self.runs += 1;
        let run = self.runs;
        let me = myself.clone();
        let output = tokio::spawn(async move {
            let end = output.await;
            if end != OutputEnd::SessionGone {
                let _gone = me.cast(DriverMsg::OutputClosed { run });
            }
            end
        });
        Ok(Live {
            wire,
            peer,
            stderr,
            output,
            run,
        })
    }

    async fn announce_ready(&mut self) {
        let resume_id = self.resume_id.clone();
        let resumed = W::resumes(&self.launch, resume_id.as_deref());
        let meta = W::ready_meta(&self.launch);
        self.sink
            .send_one(DriverOutput::Ready {
                resume_id,
                resumed,
                meta,
            })
            .await;
    }

    async fn announce(&mut self, event: Option<CapEvent>) {
        if let Some(event) = event {
            self.sink.send_one(DriverOutput::Event(event)).await;
        }
    }

    /// Take the agent down now: stop reading it (unless `keep_reading`: its last
    /// output still reaches the session), stop serving it, kill its group.
    async fn kill(&mut self, keep_reading: bool) {
        if let Some(live) = self.live.as_mut() {
            if !keep_reading {
                live.output.abort();
            }
            live.wire.halt();
            death::kill(&mut live.peer).await;
        }
    }

    /// Apply a chaos fault to the agent's own group — the one this driver spawned
    /// and holds, never another (a connection has none: nothing to do).
    fn chaos(&mut self, myself: &ActorRef<DriverMsg>, fault: SignalFault) {
        let Some(live) = self.live.as_mut() else {
            tracing::debug!(urn = %self.launch.urn, ?fault, "no agent; chaos fault dropped");
            return;
        };
        let Peer::Process(group) = &live.peer else {
            return;
        };
        let pgid = group.pgid();
        match fault.signal() {
            Some(sig) => {
                if let Err(e) = crate::process::signal_group(pgid, sig) {
                    tracing::debug!(urn = %self.launch.urn, pgid, error = %e, "chaos signal not sent");
                }
            }
            None => {
                let how = live.wire.close(&live.peer);
                tracing::debug!(urn = %self.launch.urn, pgid, how, "chaos: agent input closed");
            }
        }
        if let SignalFault::Hang {
            resume_after: Some(after),
        } = fault
        {
            let run = live.run;
            let _timer = myself.send_after(after, move || DriverMsg::ChaosContinue { run });
        }
    }

    /// Withdraw what waited on the agent (never in `post_stop`: the session may no
    /// longer take output then).
    async fn release(&mut self) {
        if let Some(live) = self.live.as_mut() {
            live.wire.release().await;
        }
    }

    /// Per turn: the previous turn's agent, whose turn is over, is retired before the
    /// next one starts (its output ends by itself, or it is killed after the wait).
    async fn retire(&mut self, myself: &ActorRef<DriverMsg>) -> Result<(), ActorProcessingErr> {
        let Some(live) = self.live.as_mut() else {
            return Ok(());
        };
        let end = match tokio::time::timeout(death::EXIT_WAIT, &mut live.output).await {
            Ok(end) => end.unwrap_or(OutputEnd::CLOSED),
            Err(_) => {
                live.output.abort();
                OutputEnd::CLOSED
            }
        };
        self.output_ended(myself, end).await
    }

    /// The agent's output ended unasked: reap and classify the end. Per turn a clean
    /// exit ends the turn (if the wire did not) and the driver waits for the next
    /// prompt — and so does any exit after the wire ended the turn (a per-turn
    /// process that reported its turn, even as failed, has done its work: its status
    /// is logged, not a death); otherwise the end is announced and the driver fails
    /// (abnormal) or stops (clean).
    async fn output_ended(
        &mut self,
        myself: &ActorRef<DriverMsg>,
        end: OutputEnd,
    ) -> Result<(), ActorProcessingErr> {
        let Some(mut live) = self.live.take() else {
            return Ok(());
        };
        self.group.store(0, Ordering::Relaxed);
        live.wire.halt();
        live.wire.release().await;
        let cause = death::reap(&mut live.peer, &self.launch.urn).await;
        let reported = matches!(
            end,
            OutputEnd::Closed {
                turn_ended: true,
                ..
            }
        );
        if self.launch.shape == Shape::PerTurn && (!cause.is_abnormal() || reported) {
            if cause.is_abnormal() {
                tracing::debug!(urn = %self.launch.urn, %cause, "turn process ended after its turn");
            }
            self.previous = Some(live.wire);
            if let OutputEnd::Closed {
                turn_ended,
                resume_id,
            } = end
            {
                if resume_id.is_some() {
                    self.resume_id = resume_id;
                }
                if !turn_ended {
                    let end = TurnEnd::new(StopReason::EndTurn, false);
                    self.sink.send_one(DriverOutput::TurnEnd(end)).await;
                }
            }
            return Ok(());
        }
        let cause = W::end_of_output(cause);
        self.announce(W::death_event(&cause, true, &live.stderr))
            .await;
        ended(myself, cause)
    }
}
