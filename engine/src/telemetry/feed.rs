//! The metrics tap: every published event updates the run's [`FleetMetrics`].

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::counters::event_kind;
use super::metrics::{
    AgentLabels, AskLabels, DecisionLabels, KindLabels, LimitLabels, Metrics, PauseLabels,
    RestartLabels, ScopeLabels, SessionLabels, StateLabels, TokenLabels, TurnLabels, UsageLabels,
};
use crate::protocol::{CapEvent, ErrorKind, HasMeta, Usage};
use crate::tap::{Tap, TapHandler, TapMsg};
use capfleet_wire::driver::{SERVER_OVERLOADED_CODE, STRAY_FRAME};
use capfleet_wire::events::{EventBody, SessionEvent};
use capfleet_wire::supervision::POISON_TURN;
use capfleet_wire::supervision::rate_limit::{DETAIL_LIMIT_TYPE, RATE_LIMIT_WARNING};

/// The metrics tap actor.
pub(crate) type MetricsTap = Tap<MetricsFeed>;
/// Its messages.
pub type MetricsTapMsg = TapMsg<()>;

/// What the tap keeps between events: spending per session, for the budget gauges.
pub(crate) struct MetricsFeed {
    metrics: Metrics,
    spent: HashMap<Arc<str>, f64>,
    total: f64,
}

impl MetricsFeed {
    pub(crate) fn new(metrics: Metrics) -> Self {
        MetricsFeed {
            metrics,
            spent: HashMap::new(),
            total: 0.0,
        }
    }

    fn usage(&mut self, urn: &Arc<str>, u: &Usage) {
        let m = &self.metrics;
        let info = m.session_info(urn);
        let model = u.model_id.get().cloned().unwrap_or(info.model);
        let tokens = [
            ("input", &u.input_tokens),
            ("output", &u.output_tokens),
            ("cache_read", &u.cache_read_tokens),
            ("cache_creation", &u.cache_creation_tokens),
            ("thinking", &u.thinking_tokens),
        ];
        for (kind, n) in tokens {
            if let Some(n) = n.get().copied().filter(|n| *n > 0) {
                let l = TokenLabels {
                    session: urn.to_string(),
                    agent: info.agent.clone(),
                    model: model.clone(),
                    r#type: kind.into(),
                };
                m.tokens.get_or_create(&l).inc_by(n);
            }
        }
        let Some(cost) = u.cost_usd().filter(|c| c.is_finite() && *c > 0.0) else {
            return;
        };
        let l = UsageLabels {
            session: urn.to_string(),
            agent: info.agent,
            model,
        };
        m.cost_usd.get_or_create(&l).inc_by(cost);
        let spent = self.spent.entry(urn.clone()).or_default();
        *spent += cost;
        self.total += cost;
        for (scope, spent) in [(urn.to_string(), *spent), ("fleet".into(), self.total)] {
            let l = ScopeLabels { scope };
            if let Some(limit) = m.budget_limit_usd.get(&l).map(|g| g.get()) {
                m.budget_remaining_usd.get_or_create(&l).set(limit - spent);
            }
        }
    }

    fn cap(&mut self, event: &SessionEvent, cap: &CapEvent) {
        let m = &self.metrics;
        let session = || event.urn.to_string();
        match cap {
            CapEvent::Usage(u) => self.usage(&event.urn, u),
            CapEvent::PermissionRequest(_) | CapEvent::AskUser(_) => {
                let kind = match cap {
                    CapEvent::AskUser(_) => "ask",
                    _ => "permission",
                };
                let l = AskLabels {
                    session: session(),
                    kind: kind.into(),
                };
                m.asks.get_or_create(&l).inc();
            }
            CapEvent::PermissionResponse(p) => {
                let l = DecisionLabels {
                    kind: "permission".into(),
                    decision: p.decision.as_str().into(),
                    rule: rule_of(p.meta()),
                };
                m.decisions.get_or_create(&l).inc();
            }
            CapEvent::AskUserAnswer(a) => {
                let decision = if a.value.is_null() {
                    "declined"
                } else {
                    "answered"
                };
                let l = DecisionLabels {
                    kind: "ask".into(),
                    decision: decision.into(),
                    rule: rule_of(a.meta()),
                };
                m.decisions.get_or_create(&l).inc();
            }
            CapEvent::UserInputInject(_) => {
                let l = SessionLabels { session: session() };
                m.steers.get_or_create(&l).inc();
            }
            CapEvent::Error(e) if e.code == ErrorKind::ParseFailed => {
                let l = SessionLabels { session: session() };
                m.malformed_frames.get_or_create(&l).inc();
            }
            CapEvent::Error(e) if matches!(&e.code, ErrorKind::Other(c) if c == POISON_TURN) => {
                let l = SessionLabels { session: session() };
                m.poison_turns.get_or_create(&l).inc();
            }
            CapEvent::Error(e) if matches!(&e.code, ErrorKind::Other(c) if c == STRAY_FRAME) => {
                let l = SessionLabels { session: session() };
                m.stray_frames.get_or_create(&l).inc();
            }
            CapEvent::Error(e) if matches!(&e.code, ErrorKind::Other(c) if c == SERVER_OVERLOADED_CODE) =>
            {
                let l = SessionLabels { session: session() };
                m.overload_retries.get_or_create(&l).inc();
            }
            CapEvent::Error(e) if matches!(&e.code, ErrorKind::Other(c) if c == RATE_LIMIT_WARNING) =>
            {
                let limit_type = e.details.get().and_then(|d| d.get(DETAIL_LIMIT_TYPE));
                let l = LimitLabels {
                    session: session(),
                    limit_type: limit_type
                        .and_then(Value::as_str)
                        .unwrap_or("unknown")
                        .into(),
                };
                m.rate_limit_warnings.get_or_create(&l).inc();
            }
            _ => {}
        }
    }
}

/// The rule recorded with an answer (`_meta."capfleet.rule"`).
fn rule_of(meta: Option<&crate::protocol::Meta>) -> String {
    meta.and_then(|m| m.get("capfleet.rule"))
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned()
}

impl TapHandler for MetricsFeed {
    type Snapshot = ();

    fn on_event(&mut self, event: &SessionEvent) {
        let kind = KindLabels {
            kind: event_kind(&event.body).into(),
        };
        self.metrics.events.get_or_create(&kind).inc();
        let m = self.metrics.clone();
        match &event.body {
            EventBody::Cap { event: cap } => self.cap(event, cap),
            EventBody::State { from, to } => {
                let l = |s: &capfleet_wire::events::SessionState| StateLabels {
                    state: s.as_str().into(),
                };
                m.sessions.get_or_create(&l(from)).dec();
                m.sessions.get_or_create(&l(to)).inc();
            }
            EventBody::TurnEnded {
                outcome,
                duration_ms,
                ..
            } => {
                let agent = m.session_info(&event.urn).agent;
                let outcome = serde_json::to_value(outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                let l = TurnLabels {
                    session: event.urn.to_string(),
                    agent: agent.clone(),
                    outcome,
                };
                m.turns.get_or_create(&l).inc();
                m.turn_duration
                    .get_or_create(&AgentLabels { agent })
                    .observe(*duration_ms as f64 / 1e3);
            }
            EventBody::Chaos { fault, .. } => {
                let l = KindLabels {
                    kind: fault.as_str().into(),
                };
                m.chaos_faults.get_or_create(&l).inc();
            }
            EventBody::Restart { cause, .. } => {
                let l = RestartLabels {
                    session: event.urn.to_string(),
                    cause: cause.kind().into(),
                };
                m.restarts.get_or_create(&l).inc();
            }
            EventBody::Paused { source, .. } => {
                let l = PauseLabels {
                    session: event.urn.to_string(),
                    source: source.as_str().into(),
                };
                m.pauses.get_or_create(&l).inc();
            }
            _ => {}
        }
    }

    fn snapshot(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{CapEvent, Decision, Nullable};
    use crate::telemetry::metrics::{FleetMetrics, SessionInfo};
    use capfleet_wire::events::{SessionState, TurnOutcome};
    use capfleet_wire::supervision::ExitCause;

    fn ev(body: EventBody) -> SessionEvent {
        SessionEvent {
            seq: 1,
            urn: Arc::from("cap://f/a"),
            turn: Some(1),
            ts_ms: 0,
            body,
        }
    }

    #[test]
    fn events_become_series() {
        let m = Arc::new(FleetMetrics::default());
        let info = SessionInfo {
            agent: "sim".into(),
            model: "sim-model".into(),
        };
        m.add_session("cap://f/a", info);
        m.set_budget(Some(1.0), &[("cap://f/a".into(), 0.5)]);
        let mut feed = MetricsFeed::new(m.clone());
        let usage = CapEvent::Usage(Usage {
            input_tokens: Nullable::Value(10),
            output_tokens: Nullable::Value(4),
            cost_usd_estimate: Nullable::Value(serde_json::Number::from_f64(0.25).unwrap()),
            ..Usage::default()
        });
        let mut decided = CapEvent::permission_response("r1", Decision::AllowOnce);
        decided.set_meta("capfleet.rule", "allow_tools".into());
        for body in [
            EventBody::State {
                from: SessionState::Starting,
                to: SessionState::Working,
            },
            EventBody::Cap { event: usage },
            EventBody::Cap { event: decided },
            EventBody::Restart {
                cause: ExitCause::Exited { code: 137 },
                attempt: 1,
                delay_ms: 0,
            },
            EventBody::Paused {
                delay_ms: 60_000,
                until_ms: 60_000,
                source: capfleet_wire::supervision::rate_limit::PauseSource::Backoff,
                limit_type: None,
                pause: 1,
                reason: "rate limited".into(),
            },
            EventBody::TurnEnded {
                stop_reason: crate::protocol::StopReason::EndTurn,
                outcome: TurnOutcome::Completed,
                duration_ms: 1500,
            },
        ] {
            feed.on_event(&ev(body));
        }
        let text = m.encode();
        for line in [
            "capfleet_sessions{state=\"starting\"} 0",
            "capfleet_sessions{state=\"working\"} 1",
            "capfleet_tokens_total{session=\"cap://f/a\",agent=\"sim\",model=\"sim-model\",type=\"input\"} 10",
            "capfleet_cost_usd_total{session=\"cap://f/a\",agent=\"sim\",model=\"sim-model\"} 0.25",
            "capfleet_budget_remaining_usd{scope=\"fleet\"} 0.75",
            "capfleet_budget_remaining_usd{scope=\"cap://f/a\"} 0.25",
            "capfleet_decisions_total{kind=\"permission\",decision=\"allow_once\",rule=\"allow_tools\"} 1",
            "capfleet_restarts_total{session=\"cap://f/a\",cause=\"exited\"} 1",
            "capfleet_pauses_total{session=\"cap://f/a\",source=\"backoff\"} 1",
            "capfleet_turns_total{session=\"cap://f/a\",agent=\"sim\",outcome=\"completed\"} 1",
            "capfleet_turn_duration_seconds_count{agent=\"sim\"} 1",
            "capfleet_events_total{kind=\"restart\"} 1",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }

    #[test]
    fn rate_limit_warnings_are_counted_by_limit() {
        let m = Arc::new(FleetMetrics::default());
        let mut feed = MetricsFeed::new(m.clone());
        let warning = |limit: Value| {
            let mut event = CapEvent::error(
                ErrorKind::Other(RATE_LIMIT_WARNING.into()),
                "five_hour limit near",
                false,
            );
            if let CapEvent::Error(e) = &mut event {
                e.details = crate::protocol::Nullable::Value(
                    serde_json::json!({ DETAIL_LIMIT_TYPE: limit }),
                );
            }
            event
        };
        for event in [
            warning("five_hour".into()),
            warning("five_hour".into()),
            warning(Value::Null),
        ] {
            feed.on_event(&ev(EventBody::Cap { event }));
        }
        let text = m.encode();
        for line in [
            "capfleet_rate_limit_warnings_total{session=\"cap://f/a\",limit_type=\"five_hour\"} 2",
            "capfleet_rate_limit_warnings_total{session=\"cap://f/a\",limit_type=\"unknown\"} 1",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }

    #[test]
    fn stray_frames_are_counted_apart_from_malformed_ones() {
        let m = Arc::new(FleetMetrics::default());
        let mut feed = MetricsFeed::new(m.clone());
        let stray = || CapEvent::error(ErrorKind::Other(STRAY_FRAME.into()), "stray", false);
        let malformed = CapEvent::error(ErrorKind::ParseFailed, "bad", false);
        for event in [stray(), stray(), malformed] {
            feed.on_event(&ev(EventBody::Cap { event }));
        }
        let text = m.encode();
        for line in [
            "capfleet_stray_frames_total{session=\"cap://f/a\"} 2",
            "capfleet_malformed_frames_total{session=\"cap://f/a\"} 1",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }

    #[test]
    fn steers_are_counted_by_session() {
        let m = Arc::new(FleetMetrics::default());
        let mut feed = MetricsFeed::new(m.clone());
        for text in ["use postcard", "and serde"] {
            let event = CapEvent::inject_text(text);
            feed.on_event(&ev(EventBody::Cap { event }));
        }
        let text = m.encode();
        let line = "capfleet_steers_total{session=\"cap://f/a\"} 2";
        assert!(text.contains(line), "missing {line} in\n{text}");
    }

    #[test]
    fn poison_turns_are_counted() {
        let m = Arc::new(FleetMetrics::default());
        let mut feed = MetricsFeed::new(m.clone());
        let failure = capfleet_wire::supervision::AttemptFailure {
            code: Some("agent_exited".into()),
            cause: ExitCause::Exited { code: 3 },
        };
        let event = capfleet_wire::supervision::poison_event(1, 2, &failure);
        feed.on_event(&ev(EventBody::Cap { event }));
        let text = m.encode();
        let line = "capfleet_poison_turns_total{session=\"cap://f/a\"} 1";
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}
