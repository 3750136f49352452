//! The answerer actor: every open `cap.ask_user` and `cap.permission.request` of every
//! session comes here. Policy first — the tool deny list, the command deny rules,
//! then the tool allow list, the command allow rules, then `max_risk` (a `high` risk
//! is never approved unless `max_risk = high` says so, spec §7.6; [`commands`]: the
//! rules match the command lines a request carries) — then a human when one is
//! attached; with nobody to ask, the research
//! answerer when the fleet has one (`[answerer]`: a one-shot session of a researcher
//! agent, [`desk`]; with `auto_answer = "research"` it goes before the human), else
//! the answer is fail-safe (deny the permission, decline the ask). The rule that
//! decided travels with the answer into the event stream and the journal. A research
//! session's own requests are answered fail-safe: it asks nothing further.

pub(crate) mod commands;
pub(crate) mod desk;
pub(crate) mod research;

pub use commands::{CommandRuleError, CommandRules};
pub use research::{DEFAULT_PARALLEL, DEFAULT_TIMEOUT, ResearchSpec};

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::mpsc;

use self::desk::{Desk, Done};
use self::research::RULE_RESEARCHER_ASKS;
use crate::fleet::FleetMsg;
use crate::protocol::{Decision, RiskLevel};
use capfleet_wire::bindings::risk::commands as command_lines;
use capfleet_wire::events::{
    Answer, AnswerTo, Decide, OpenRequest, RULE_NO_HUMAN, fail_safe, fail_safe_by,
};

/// The rule name recorded for a human's answer.
pub const RULE_HUMAN: &str = "human";
/// The rule names recorded for policy decisions.
pub(crate) const RULE_DENY_LIST: &str = "deny_tools";
pub(crate) const RULE_ALLOW_LIST: &str = "allow_tools";
pub(crate) const RULE_DENY_COMMANDS: &str = "deny_commands";
pub(crate) const RULE_ALLOW_COMMANDS: &str = "allow_commands";
pub(crate) const RULE_MAX_RISK: &str = "max_risk";

/// The automatic part of answering: tool lists, command rules and a risk ceiling.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    /// Tools always denied (`*`: every tool). The deny list wins over everything.
    pub deny_tools: Vec<String>,
    /// Tools approved without asking (a `high` risk still needs `max_risk = high`).
    pub allow_tools: Vec<String>,
    /// A request carrying a command line that one of these matches is denied (after
    /// the tool deny list, before anything approves).
    pub deny_commands: CommandRules,
    /// A request whose command lines all match one of these is approved (a `high`
    /// risk still needs `max_risk = high`).
    pub allow_commands: CommandRules,
    /// Approve any tool up to this risk without asking.
    pub max_risk: Option<RiskLevel>,
}

impl Policy {
    /// The policy's decision on a permission request for `tool` carrying the command
    /// lines `commands`, with its rule; `None` when the policy does not decide (a
    /// human or the fail-safe does).
    pub fn decide(
        &self,
        tool: &str,
        commands: &[String],
        risk: RiskLevel,
    ) -> Option<(Decision, &'static str)> {
        let listed = |list: &[String]| list.iter().any(|t| t == tool || t == "*");
        if listed(&self.deny_tools) {
            return Some((Decision::Deny, RULE_DENY_LIST));
        }
        if commands.iter().any(|c| self.deny_commands.matches(c)) {
            return Some((Decision::Deny, RULE_DENY_COMMANDS));
        }
        let high_allowed = self.max_risk == Some(RiskLevel::High);
        if risk == RiskLevel::High && !high_allowed {
            return None;
        }
        if listed(&self.allow_tools) {
            return Some((Decision::AllowOnce, RULE_ALLOW_LIST));
        }
        if !commands.is_empty() && commands.iter().all(|c| self.allow_commands.matches(c)) {
            return Some((Decision::AllowOnce, RULE_ALLOW_COMMANDS));
        }
        match self.max_risk {
            Some(max) if risk.rank() <= max.rank() => Some((Decision::AllowOnce, RULE_MAX_RISK)),
            _ => None,
        }
    }
}

/// A question for the human, with the session to answer.
#[derive(Debug)]
pub struct HumanQuestion {
    pub urn: Arc<str>,
    pub session: AnswerTo,
    pub request: OpenRequest,
}

/// Messages of the answerer. Sessions reach it through a
/// [`Decider`](capfleet_wire::events::Decider) (`get_derived()` of its ref).
#[derive(Debug)]
pub(crate) enum AnswererMsg {
    /// Decide a session's open request.
    Decide(Decide),
    /// The fleet research sessions start in (sent once the fleet is up).
    Fleet(ActorRef<FleetMsg>),
    /// A research job ended (from its task).
    Researched(Done),
}

impl From<Decide> for AnswererMsg {
    fn from(d: Decide) -> Self {
        AnswererMsg::Decide(d)
    }
}

impl TryFrom<AnswererMsg> for Decide {
    type Error = AnswererMsg;

    fn try_from(msg: AnswererMsg) -> Result<Self, AnswererMsg> {
        match msg {
            AnswererMsg::Decide(d) => Ok(d),
            other => Err(other),
        }
    }
}

pub(crate) struct Answerer;

/// Start arguments: the policy, where human questions go if a human is attached, and
/// the research answerer if the fleet has one.
pub(crate) struct AnswererArgs {
    pub policy: Policy,
    pub human: Option<mpsc::Sender<HumanQuestion>>,
    pub research: Option<ResearchSpec>,
}

/// The answerer's state.
pub(crate) struct AnswererState {
    policy: Policy,
    human: Option<mpsc::Sender<HumanQuestion>>,
    desk: Option<Desk>,
}

impl Actor for Answerer {
    type Msg = AnswererMsg;
    type State = AnswererState;
    type Arguments = AnswererArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<AnswererMsg>,
        args: AnswererArgs,
    ) -> Result<AnswererState, ActorProcessingErr> {
        Ok(AnswererState {
            policy: args.policy,
            human: args.human,
            desk: args.research.map(Desk::new),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<AnswererMsg>,
        msg: AnswererMsg,
        st: &mut AnswererState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            AnswererMsg::Decide(d) => st.decide(&myself, d).await,
            AnswererMsg::Fleet(fleet) => {
                if let Some(desk) = &mut st.desk {
                    desk.attach(fleet);
                }
            }
            AnswererMsg::Researched(done) => {
                if let Some(desk) = &mut st.desk {
                    desk.done(&myself, done);
                }
            }
        }
        Ok(())
    }
}

impl AnswererState {
    async fn decide(&mut self, myself: &ActorRef<AnswererMsg>, d: Decide) {
        let span = tracing::info_span!(
            parent: &d.span, "decide",
            cap.decision.by = tracing::field::Empty,
            cap.permission.decision = tracing::field::Empty,
            cap.permission.rule = tracing::field::Empty,
        );
        let request = &d.request;
        if let Some(desk) = &self.desk
            && desk.is_researcher(&d.urn)
        {
            span.record("cap.decision.by", RULE_RESEARCHER_ASKS);
            let _session_gone = d.session.cast(fail_safe_by(request, RULE_RESEARCHER_ASKS));
            return;
        }
        if let OpenRequest::Permission {
            req_id,
            tool,
            risk,
            intent,
            ..
        } = request
            && let Some((decision, rule)) = self.policy.decide(
                tool,
                &intent.as_ref().map(command_lines).unwrap_or_default(),
                *risk,
            )
        {
            let urn = &d.urn;
            tracing::info!(parent: &span, %urn, %tool, %risk, %decision, rule, "permission decided by policy");
            span.record("cap.decision.by", "policy");
            span.record("cap.permission.decision", decision.as_str());
            span.record("cap.permission.rule", rule);
            let _session_gone = d.session.cast(Answer::Permission {
                req_id: req_id.clone(),
                decision,
                rule: rule.into(),
            });
            return;
        }
        let research_first = self.desk.as_ref().is_some_and(Desk::first);
        if !research_first && let Some(human) = &self.human {
            let q = HumanQuestion {
                urn: d.urn.clone(),
                session: d.session.clone(),
                request: d.request.clone(),
            };
            if human.send(q).await.is_ok() {
                span.record("cap.decision.by", "human");
                return;
            }
            // The human went away: from now on nobody can be asked.
            self.human = None;
        }
        if let Some(desk) = &mut self.desk {
            span.record("cap.decision.by", research::RULE_RESEARCH);
            desk.take(myself, d, span);
            return;
        }
        span.record("cap.decision.by", RULE_NO_HUMAN);
        let _session_gone = d.session.cast(fail_safe(&d.request));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(deny: &[&str], allow: &[&str], max: Option<RiskLevel>) -> Policy {
        Policy {
            deny_tools: deny.iter().map(|s| s.to_string()).collect(),
            allow_tools: allow.iter().map(|s| s.to_string()).collect(),
            max_risk: max,
            ..Policy::default()
        }
    }

    fn lines(commands: &[&str]) -> Vec<String> {
        commands.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn command_rules_deny_before_anything_approves_and_allow_below_high() {
        let p = Policy {
            deny_commands: CommandRules::new(&["rm\\s+-rf"]).expect("deny"),
            allow_commands: CommandRules::new(&["^echo ", "^cargo test$"]).expect("allow"),
            ..policy(&[], &["command_execution"], Some(RiskLevel::High))
        };
        let rm = lines(&["rm -rf victim"]);
        assert_eq!(
            p.decide("command_execution", &rm, RiskLevel::High),
            Some((Decision::Deny, RULE_DENY_COMMANDS))
        );
        let only_allow = Policy {
            allow_tools: vec![],
            max_risk: None,
            ..p.clone()
        };
        assert_eq!(
            only_allow.decide("Bash", &lines(&["echo hi > out.txt"]), RiskLevel::Medium),
            Some((Decision::AllowOnce, RULE_ALLOW_COMMANDS))
        );
        // Every line must be allowed; a high risk needs max_risk = high; no command,
        // no command rule.
        let mixed = lines(&["echo hi", "curl x"]);
        assert_eq!(only_allow.decide("Bash", &mixed, RiskLevel::Medium), None);
        let echo = lines(&["echo hi"]);
        assert_eq!(only_allow.decide("Bash", &echo, RiskLevel::High), None);
        assert_eq!(only_allow.decide("Read", &[], RiskLevel::Low), None);
    }

    #[test]
    fn deny_list_beats_allow_list() {
        let p = policy(&["Bash"], &["Bash"], Some(RiskLevel::High));
        assert_eq!(
            p.decide("Bash", &[], RiskLevel::Low),
            Some((Decision::Deny, RULE_DENY_LIST))
        );
        let all = policy(&["*"], &["Read"], None);
        assert_eq!(
            all.decide("Read", &[], RiskLevel::Low),
            Some((Decision::Deny, RULE_DENY_LIST))
        );
    }

    #[test]
    fn high_risk_needs_an_explicit_max_risk_high() {
        let p = policy(&[], &["Bash"], Some(RiskLevel::Medium));
        assert_eq!(p.decide("Bash", &[], RiskLevel::High), None);
        assert_eq!(
            p.decide("Bash", &[], RiskLevel::Medium),
            Some((Decision::AllowOnce, RULE_ALLOW_LIST))
        );
        let high = policy(&[], &[], Some(RiskLevel::High));
        assert_eq!(
            high.decide("Bash", &[], RiskLevel::High),
            Some((Decision::AllowOnce, RULE_MAX_RISK))
        );
    }

    #[test]
    fn max_risk_approves_up_to_its_level_only() {
        let p = policy(&[], &[], Some(RiskLevel::Low));
        assert_eq!(
            p.decide("Read", &[], RiskLevel::Low),
            Some((Decision::AllowOnce, RULE_MAX_RISK))
        );
        assert_eq!(p.decide("Edit", &[], RiskLevel::Medium), None);
        assert_eq!(Policy::default().decide("Read", &[], RiskLevel::Low), None);
    }
}
