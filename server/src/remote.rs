//! `serve --nats`: a run queued to NATS and running on some worker, read from NATS
//! (so from any host): `GET /v1/runs/{id}` from the run's note, its lease and its
//! replicated journal (`capfleet_app::nats::status`), and its event stream from the journal
//! as JetStream keeps it, the records' ids their positions in the run's journal, as
//! the local stream's are ([`super::events`]).
//!
//! Its state: ended once its journal's last `run_ended` is followed by nothing that
//! goes on (a takeover, a resume, a hand-back); else `running` while a worker holds
//! its lease, `queued` while none does (not taken yet, or its worker gone and its
//! takeover not yet made). The stream's `end` event comes once a `run_ended` is
//! followed by no record for [`END_QUIET`] (a drained worker's hand-back record
//! follows its `run_ended` at once).

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::Event;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::Value;

use super::error::ApiError;
use super::events::{Filter, end, message};
use super::state::RunState;
use super::view::{Budget, Links, RunView};
use capfleet_app::nats::{Nats, NatsError};
use capfleet_app::runs::{self, JournalRead};

/// After a `run_ended`, the stream ends when nothing follows within this.
const END_QUIET: Duration = Duration::from_secs(1);

fn internal(e: NatsError) -> ApiError {
    ApiError::Internal(e.to_string())
}

/// The state a journal read says, given whether a worker holds the run now.
fn state(read: &JournalRead, held: bool) -> RunState {
    if read.ended {
        RunState::from(runs::state_of(read.outcome.as_deref(), true))
    } else if held {
        RunState::Running
    } else {
        RunState::Queued
    }
}

/// Run `id` as NATS has it; `NoRun` when NATS knows nothing of it.
pub(crate) async fn view(nats: &Nats, replicas: usize, id: &str) -> Result<RunView, ApiError> {
    let note = nats.submitted(id).await.map_err(internal)?;
    let (records, _last) = nats.replay(id, replicas).await.map_err(internal)?;
    if note.is_none() && records.is_empty() {
        return Err(ApiError::NoRun(id.to_owned()));
    }
    let read = JournalRead::of(records.iter().filter_map(|r| std::str::from_utf8(r).ok()));
    let holder = if read.ended {
        None
    } else {
        nats.holder(id).await.map_err(internal)?
    };
    Ok(RunView {
        id: id.to_owned(),
        fleet: note.as_ref().map(|n| n.fleet.clone()),
        state: state(&read, holder.is_some()),
        queue_position: None,
        submitted_by: None,
        created_ms: note.as_ref().map(|n| n.submitted_ms),
        started_ms: read.started_ms,
        ended_ms: read.ended_ms,
        outcome: read.outcome.clone(),
        exit_code: read.exit_code,
        error: None,
        cancelled_by: None,
        sessions: Vec::new(),
        budget: Budget {
            limit_usd: None,
            spent_usd: read.cost_usd,
        },
        links: Links::of(id),
        trace_url: None,
    })
}

/// Run `id`'s journal from JetStream as events, from the record after `after`.
pub(crate) async fn events(
    nats: &Nats,
    replicas: usize,
    id: &str,
    after: u64,
    filter: Filter,
) -> Result<BoxStream<'static, Result<Event, Infallible>>, ApiError> {
    // A run NATS knows nothing of is no run (the stream would wait forever).
    if nats.submitted(id).await.map_err(internal)?.is_none()
        && nats
            .replay(id, replicas)
            .await
            .map_err(internal)?
            .0
            .is_empty()
    {
        return Err(ApiError::NoRun(id.to_owned()));
    }
    let records = nats.follow(id, replicas).await.map_err(internal)?.boxed();
    let follow = Follow {
        records,
        seq: 0,
        after,
        filter,
        read: JournalRead::default(),
        done: false,
    };
    Ok(futures::stream::unfold(follow, |mut f| async move {
        let e = f.next().await?;
        Some((Ok(e), f))
    })
    .boxed())
}

/// One subscriber's place in a run's replicated journal.
struct Follow {
    records: BoxStream<'static, Result<Vec<u8>, NatsError>>,
    seq: u64,
    after: u64,
    filter: Filter,
    read: JournalRead,
    done: bool,
}

impl Follow {
    /// The next event: a wanted record, or the `end`; none after the end.
    async fn next(&mut self) -> Option<Event> {
        while !self.done {
            let record = if self.read.ended {
                match tokio::time::timeout(END_QUIET, self.records.next()).await {
                    Ok(r) => r,
                    Err(_quiet) => {
                        self.done = true;
                        let state = state(&self.read, false);
                        return Some(end(self.seq, Some(state.as_str()), self.read.exit_code));
                    }
                }
            } else {
                self.records.next().await
            };
            let line = match record {
                Some(Ok(line)) => line,
                Some(Err(e)) => {
                    tracing::warn!("an event stream from NATS: {e}");
                    self.done = true;
                    return None;
                }
                None => {
                    self.done = true;
                    return None;
                }
            };
            self.seq += 1;
            if let Ok(rec) = serde_json::from_slice::<Value>(&line) {
                self.read.add(&rec);
            }
            if self.seq > self.after && self.filter.wanted(&line) {
                return Some(message(self.seq, &line));
            }
        }
        None
    }
}
