//! What a fleet run's events say when the fleet answers as one agent: the answering
//! session's final text, why the run failed, each inner session's own conversation
//! id, the worktrees; and which events the consumer sees (the answering session's,
//! every artifact, every session's plan — a fleet's master plan is one —, every
//! restart: a restart inside is a note, never a failure).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use capfleet_engine::error::TreeError;
use capfleet_engine::protocol::{CapEvent, Channel};
use capfleet_engine::run::RunReport;
use capfleet_wire::events::{EventBody, Published, RunOutcome, SessionEvent};
use serde_json::Value;
use tokio::sync::mpsc;

use super::FleetEnd;
use crate::fleet::RunDir;

/// A coding session's worktree after the run.
#[derive(Debug, Clone)]
pub struct Worktree {
    pub session: String,
    pub path: PathBuf,
    /// The commit it branched from.
    pub base: Option<String>,
    /// Files changed.
    pub files: usize,
    /// The stored diff, when there were changes.
    pub diff: Option<PathBuf>,
}

/// What the events said so far.
#[derive(Debug, Default)]
pub(super) struct Seen {
    answerer: String,
    /// The answering session's text in the turn in progress.
    current: String,
    /// Its last completed turn's text.
    answer: String,
    last_error: Option<String>,
    failed: Option<String>,
    stopping: Option<String>,
    resume_ids: HashMap<String, String>,
    /// Session -> the commit its worktree branched from.
    bases: HashMap<String, Option<String>>,
}

fn session_of(urn: &str) -> &str {
    urn.rsplit('/').next().unwrap_or(urn)
}

/// Watch the run's events until the run drops its senders, passing on what the
/// consumer sees (a consumer gone stops only the passing on).
pub(super) async fn forward(
    mut rx: mpsc::Receiver<Published>,
    answerer: String,
    to: mpsc::Sender<Published>,
) -> Seen {
    let mut seen = Seen {
        answerer,
        ..Seen::default()
    };
    let mut to = Some(to);
    while let Some(event) = rx.recv().await {
        seen.on(&event);
        if let Some(tx) = to.as_ref().filter(|_| seen.shows(&event))
            && tx.send(event).await.is_err()
        {
            to = None;
        }
    }
    seen
}

impl Seen {
    fn shows(&self, e: &SessionEvent) -> bool {
        *e.urn == *self.answerer
            || matches!(
                e.body,
                EventBody::Restart { .. } | EventBody::PlanEntry { .. }
            )
            || matches!(
                e.body,
                EventBody::Cap {
                    event: CapEvent::Artifact(_) | CapEvent::Plan(_)
                }
            )
    }

    fn on(&mut self, e: &SessionEvent) {
        let mine = *e.urn == *self.answerer;
        let session = session_of(&e.urn);
        match &e.body {
            EventBody::TurnStarted { .. } if mine => self.current.clear(),
            EventBody::TurnEnded {
                outcome: capfleet_wire::events::TurnOutcome::Completed,
                ..
            } if mine => self.answer = std::mem::take(&mut self.current),
            EventBody::Cap { event } => match event {
                CapEvent::TextChunk(t)
                    if mine && matches!(t.channel, None | Some(Channel::Assistant)) =>
                {
                    self.current.push_str(&t.text);
                }
                CapEvent::Error(err) => {
                    self.last_error = Some(format!("{session}: {}", err.message));
                }
                CapEvent::SessionReady(r) => {
                    if let Some(id) = r.session_id.get() {
                        self.resume_ids.insert(session.to_owned(), id.clone());
                    }
                }
                _ => {}
            },
            EventBody::ResumeId { id } => {
                self.resume_ids.insert(session.to_owned(), id.clone());
            }
            EventBody::Failed { reason } => {
                self.failed = Some(format!("session {session} failed: {reason}"));
            }
            EventBody::Stopping { reason, .. } => self.stopping = Some(reason.clone()),
            EventBody::Worktree { session, base, .. } => {
                self.bases.insert(session.clone(), base.clone());
            }
            _ => {}
        }
    }

    /// The run's end as the consumer answers it; a run that never ran has its
    /// journal ended here.
    pub(super) fn end(mut self, run: &RunDir, report: Result<RunReport, TreeError>) -> FleetEnd {
        let mut end = FleetEnd {
            run_id: run.id.clone(),
            journal: run.journal(),
            outcome: None,
            // A run cut before its answerer completed a turn answers what it said.
            text: match std::mem::take(&mut self.answer) {
                a if a.is_empty() => std::mem::take(&mut self.current),
                a => a,
            },
            usage: Default::default(),
            error: None,
            worktrees: Vec::new(),
            resume_ids: std::mem::take(&mut self.resume_ids),
        };
        let r = match report {
            Ok(r) => r,
            Err(e) => {
                if let Err(e) = run.record_end(crate::launch::EXIT_SESSION_FAILED) {
                    tracing::error!("{e}");
                }
                end.error = Some(format!("the fleet could not run: {e}"));
                return end;
            }
        };
        end.outcome = Some(r.outcome);
        end.usage = r.budget.total;
        end.error = match r.outcome {
            RunOutcome::Completed => None,
            RunOutcome::BudgetExceeded => Some(match r.budget.fleet_crossing() {
                Some(c) => format!(
                    "the fleet's budget was exceeded: ${:.4} spent of ${:.4}",
                    r.budget.spent_against(c),
                    c.limit_usd
                ),
                None => "a session's budget was exceeded".to_owned(),
            }),
            RunOutcome::Interrupted => {
                Some(self.stopping.take().unwrap_or_else(|| "interrupted".into()))
            }
            RunOutcome::SessionFailed => Some(
                self.failed
                    .take()
                    .or_else(|| self.last_error.take())
                    .unwrap_or_else(|| "a session of the fleet failed".into()),
            ),
            RunOutcome::DiskFailed => Some(r.faults.first().map_or_else(
                || "the run's records could not be written".into(),
                ToString::to_string,
            )),
            RunOutcome::TreeFailed => Some(r.deaths.first().map_or_else(
                || "a part of the supervision tree died".into(),
                ToString::to_string,
            )),
        };
        end.worktrees = r
            .workspaces
            .iter()
            .map(|w| {
                let base = self.bases.get(&w.session).cloned().flatten();
                Worktree {
                    session: w.session.clone(),
                    path: w.path.clone(),
                    base,
                    files: w.files,
                    diff: w.diff.clone(),
                }
            })
            .collect();
        end
    }
}

/// Inner session name -> its agent's conversation id, as a run's journal recorded
/// them (a journal that cannot be read has none: the sessions start afresh).
pub(super) fn resume_ids_in(journal: &Path) -> HashMap<String, String> {
    let mut ids = HashMap::new();
    let Ok(text) = std::fs::read_to_string(journal) else {
        return ids;
    };
    for record in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let id = match record["type"].as_str() {
            Some("resume_id") => record["id"].as_str(),
            Some("cap") if record["event"]["kind"] == "cap.session.ready" => {
                record["event"]["session_id"].as_str()
            }
            _ => None,
        };
        if let (Some(id), Some(urn)) = (id, record["urn"].as_str()) {
            ids.insert(session_of(urn).to_owned(), id.to_owned());
        }
    }
    ids
}

/// The run of `journal` had ended (its `run_ended` record is there).
pub(super) fn ended(journal: &Path) -> bool {
    std::fs::read_to_string(journal).is_ok_and(|t| {
        t.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|r| r["type"] == "run_ended")
    })
}
