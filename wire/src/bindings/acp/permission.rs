//! `session/request_permission`: risk from the tool kind, and the CAP decision mapped
//! back onto the options the agent offered.

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, StopReason as AcpStop, ToolKind,
};

use crate::protocol::{Decision, RiskLevel, StopReason};

/// read/search/think < edit/move/delete/fetch < execute; unknown kinds are medium.
pub(crate) fn risk_of(kind: Option<&ToolKind>) -> RiskLevel {
    match kind {
        Some(ToolKind::Read | ToolKind::Search | ToolKind::Think | ToolKind::SwitchMode) => {
            RiskLevel::Low
        }
        Some(ToolKind::Execute) => RiskLevel::High,
        _ => RiskLevel::Medium,
    }
}

/// The offered option for a decision: the exact kind first, then the nearest one of
/// the same polarity; `None` when the agent offered nothing fitting (answer cancelled).
pub(crate) fn option_for(options: &[PermissionOption], decision: Decision) -> Option<String> {
    let prefs: &[PermissionOptionKind] = match decision {
        Decision::AllowOnce => &[
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ],
        Decision::AllowAlways => &[
            PermissionOptionKind::AllowAlways,
            PermissionOptionKind::AllowOnce,
        ],
        Decision::Deny => &[
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ],
    };
    prefs.iter().find_map(|k| {
        options
            .iter()
            .find(|o| o.kind == *k)
            .map(|o| o.option_id.to_string())
    })
}

/// ACP's `stopReason` as CAP's.
pub(crate) fn stop_reason(s: &AcpStop) -> StopReason {
    match s {
        AcpStop::EndTurn => StopReason::EndTurn,
        AcpStop::MaxTokens | AcpStop::MaxTurnRequests => StopReason::MaxTokens,
        AcpStop::Cancelled => StopReason::Cancelled,
        AcpStop::Refusal => StopReason::Error,
        _ => StopReason::EndTurn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_risk() {
        let opts: Vec<PermissionOption> = serde_json::from_value(serde_json::json!([
            {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
            {"optionId": "always", "name": "Always", "kind": "allow_always"},
            {"optionId": "no", "name": "No", "kind": "reject_once"},
        ]))
        .expect("options");
        assert_eq!(
            option_for(&opts, Decision::AllowOnce).as_deref(),
            Some("yes")
        );
        assert_eq!(
            option_for(&opts, Decision::AllowAlways).as_deref(),
            Some("always")
        );
        assert_eq!(option_for(&opts, Decision::Deny).as_deref(), Some("no"));
        assert_eq!(option_for(&opts[..1], Decision::Deny), None);
        assert_eq!(risk_of(Some(&ToolKind::Read)), RiskLevel::Low);
        assert_eq!(risk_of(Some(&ToolKind::Edit)), RiskLevel::Medium);
        assert_eq!(risk_of(Some(&ToolKind::Execute)), RiskLevel::High);
    }
}
