//! Collect routes (races, gathers): the candidates' outputs — and for coding
//! sessions their diffs against the base, which is their actual work — go to the
//! picker. A picker session gets them in its prompt; the human picker gets each diff
//! as a `cap.artifact` record (journal, live view, `capfleet diff`).

use super::{Core, Delivery, Origin};
use crate::protocol::CancelScope;
use crate::router::RaceWon;
use crate::router::spec::{CollectMode, Picker};
use crate::session::SessionMsg;
use crate::workspace::candidates::CandidateDiff;
use capfleet_wire::events::{EventBody, RouteVia};

impl Core {
    /// Fire collect route `race.0` (its `when`, the session that just finished):
    /// `from` and `text` are the candidates and their joined outputs.
    pub(super) async fn collect(
        &mut self,
        race: (usize, &[String], &str),
        from: Vec<String>,
        text: String,
        picker: Picker,
        mode: CollectMode,
    ) {
        let (i, when, session) = race;
        if self.collected[i] {
            return;
        }
        self.collected[i] = true;
        if mode == CollectMode::First {
            let cancelled = self.cancel_others(when, session).await;
            let won = RaceWon {
                route: i,
                winner: session.to_owned(),
                cancelled,
            };
            self.record(EventBody::RaceWon {
                route: won.route,
                winner: won.winner.clone(),
                cancelled: won.cancelled.clone(),
            })
            .await;
            self.races.push(won);
        }
        let diffs = self.candidate_diffs(&from).await;
        match picker {
            Picker::Session(to) => {
                let mut text = format!("Pick the best of these results:\n\n{text}");
                for d in &diffs {
                    text.push_str("\n\n");
                    text.push_str(&d.text);
                }
                let d = Delivery {
                    from,
                    text,
                    via: RouteVia::Collect,
                    origin: Origin::Route,
                    key: None,
                };
                self.deliver(&to, d).await;
            }
            // No picker session: the first (or, for `all`, the first listed) wins.
            Picker::Human => {
                for d in diffs {
                    self.record(EventBody::Cap { event: d.event }).await;
                }
                let winner = from.first().cloned().unwrap_or_default();
                let to = format!("human (picked {winner})");
                let key = self.next_key(&to);
                self.record(EventBody::Routed {
                    from,
                    to,
                    via: RouteVia::Collect,
                    bytes: text.len(),
                    key,
                })
                .await;
            }
        }
    }

    /// Each candidate's diff, for those with a workspace.
    async fn candidate_diffs(&self, from: &[String]) -> Vec<CandidateDiff> {
        let Some(c) = &self.candidates else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for name in from {
            out.extend(c.diff(name).await);
        }
        out
    }

    /// Cancel the candidates still running: the ones cancelled.
    async fn cancel_others(&mut self, candidates: &[String], winner: &str) -> Vec<String> {
        let mut cancelled = Vec::new();
        for c in candidates.iter().filter(|c| *c != winner) {
            if let Some(slot) = self.slots.get_mut(c)
                && slot.running.is_some()
            {
                self.race_losers.insert(c.clone());
                slot.cast(SessionMsg::Cancel {
                    scope: CancelScope::CurrentTurn,
                    reason: format!("cancelled because {winner} won the race"),
                });
                cancelled.push(c.clone());
            }
        }
        cancelled
    }
}
