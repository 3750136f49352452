//! Static routes firing when their `when` sessions are done: one target, fan-out
//! (broadcast or by subtask), or collect (all, or the first of a race).
//!
//! `<session>.done`: the session has completed a turn since the route last fired and
//! is idle now — no turn running, no delivery waiting for it (its own queue or
//! admission), and none of its master-plan entries pending or in progress. A join
//! fires once every `when` session is done; a race's first done candidate wins.

use super::super::spec::{CollectMode, RouteAction, Split};
use super::super::subtasks;
use super::{Core, Delivery, Origin};
use capfleet_wire::events::{EventBody, RouteVia};

impl Core {
    pub(super) async fn fire_routes(&mut self, session: &str) {
        for i in 0..self.spec.routes.len() {
            let route = self.spec.routes[i].clone();
            if !route.when.iter().any(|w| w == session) {
                continue;
            }
            let arrived = self.done_since[i].insert(session.to_owned());
            let all = route
                .when
                .iter()
                .all(|w| self.done_since[i].contains(w) && self.is_done(w));
            let first_of_race = matches!(
                route.action,
                RouteAction::Collect {
                    mode: CollectMode::First,
                    ..
                }
            );
            let first = first_of_race && !self.collected[i] && self.is_done(session);
            let fired = all || first;
            if arrived || fired {
                self.record_join(i, fired).await;
            }
            if !fired {
                continue;
            }
            self.done_since[i].clear();
            let (from, text) = self.joined(&route.when, first_of_race.then_some(session));
            match route.action {
                RouteAction::To(to) => {
                    let d = Delivery {
                        from,
                        text,
                        via: RouteVia::Route,
                        origin: Origin::Route,
                        key: None,
                    };
                    self.deliver(&to, d).await;
                }
                RouteAction::FanOut {
                    to,
                    split: Split::Broadcast,
                } => {
                    for t in to {
                        let d = Delivery {
                            from: from.clone(),
                            text: text.clone(),
                            via: RouteVia::FanOut,
                            origin: Origin::Route,
                            key: None,
                        };
                        self.deliver(&t, d).await;
                    }
                }
                RouteAction::FanOut {
                    to,
                    split: Split::BySubtask,
                } => match subtasks::assign(&text, &to) {
                    Ok(tasks) => {
                        for (t, task) in tasks {
                            let d = Delivery {
                                from: from.clone(),
                                text: task,
                                via: RouteVia::Subtask,
                                origin: Origin::Route,
                                key: None,
                            };
                            self.deliver(&t, d).await;
                        }
                    }
                    Err(e) => {
                        self.any_failed = true;
                        self.record(EventBody::RouteFailed {
                            route: Some(i),
                            reason: e.to_string(),
                        })
                        .await;
                    }
                },
                RouteAction::Collect { picker, mode } => {
                    let race = (i, route.when.as_slice(), session);
                    self.collect(race, from, text, picker, mode).await;
                }
            }
        }
    }

    /// Route `i`'s join state: who arrived since it last fired, and whether it fires.
    async fn record_join(&mut self, i: usize, fired: bool) {
        let mut arrived: Vec<String> = self.done_since[i].iter().cloned().collect();
        arrived.sort();
        self.record(EventBody::Join {
            route: i,
            arrived,
            fired,
        })
        .await;
    }

    /// Idle with nothing waiting for it and no plan entry of its own left open.
    fn is_done(&self, name: &str) -> bool {
        let idle = self
            .slots
            .get(name)
            .is_some_and(|s| s.running.is_none() && s.queue.is_empty());
        idle && !self.admission.iter().any(|(to, _)| to == name)
            && !self.plan.as_ref().is_some_and(|p| p.has_open(name))
    }

    /// The outputs of `when` (or only `only`), each headed by its session.
    fn joined(&self, when: &[String], only: Option<&str>) -> (Vec<String>, String) {
        let names: Vec<String> = match only {
            Some(s) => vec![s.to_owned()],
            None => when.to_vec(),
        };
        let text = names
            .iter()
            .map(|n| {
                let out = self
                    .slots
                    .get(n)
                    .and_then(|s| s.output.as_deref())
                    .unwrap_or("");
                if names.len() == 1 {
                    out.to_owned()
                } else {
                    format!("## Output of {n}\n{out}")
                }
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        (names, text)
    }
}
