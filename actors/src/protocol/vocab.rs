//! The closed enum vocabularies of CAP events (core §7, coding §4.6).
//!
//! Each vocabulary is a typed enum whose `ALL` / `NAMES` slices are data: the
//! decoder's field checks ([`super::kinds::KINDS`]) and the conformance tests read
//! them, so a value is spelled exactly once.

use std::fmt;

/// Defines a closed string vocabulary: a `Copy` enum with serde wire names,
/// `ALL`, `NAMES`, `as_str`, `parse` and `Display`.
macro_rules! vocab {
    (
        $(#[$attr:meta])*
        pub enum $name:ident { $( $(#[$vattr:meta])* $variant:ident = $wire:literal, )+ }
    ) => {
        $(#[$attr])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
        )]
        pub enum $name {
            $( $(#[$vattr])* #[serde(rename = $wire)] $variant, )+
        }

        impl $name {
            /// Every value of the vocabulary, in spec order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The wire spelling of every value, in the order of `ALL`.
            pub const NAMES: &'static [&'static str] = &[$($wire),+];

            /// The wire spelling.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire,)+ }
            }

            /// Parses a wire spelling; `None` when out of vocabulary.
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($wire => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use vocab;

vocab! {
    /// `cap.text_chunk.channel` (§7.1).
    pub enum Channel {
        Assistant = "assistant",
        Thought = "thought",
        System = "system",
    }
}

vocab! {
    /// Status of a plan entry (§7.3).
    pub enum PlanStatus {
        Pending = "pending",
        InProgress = "in_progress",
        Completed = "completed",
        Cancelled = "cancelled",
        Blocked = "blocked",
    }
}

vocab! {
    /// Priority of a plan entry (§7.3). OPTIONAL: absent means "unspecified",
    /// never a default, hence always carried as `Option<Priority>`.
    pub enum Priority {
        Urgent = "urgent",
        High = "high",
        Medium = "medium",
        Low = "low",
    }
}

vocab! {
    /// `cap.cancel.scope` (§7.8).
    pub enum CancelScope {
        CurrentTurn = "current_turn",
        Session = "session",
    }
}

vocab! {
    /// `cap.permission.request.scope` (§7.6).
    pub enum PermissionScope {
        Read = "read",
        Write = "write",
        Execute = "execute",
        Network = "network",
    }
}

vocab! {
    /// `cap.permission.request.risk_level` (§7.6). `High` is never auto-approved
    /// without explicit user policy.
    pub enum RiskLevel {
        Low = "low",
        Medium = "medium",
        High = "high",
    }
}

impl RiskLevel {
    /// Order of severity: low < medium < high.
    pub fn rank(self) -> u8 {
        match self {
            RiskLevel::Low => 0,
            RiskLevel::Medium => 1,
            RiskLevel::High => 2,
        }
    }
}

vocab! {
    /// `cap.permission.response.decision` (§7.6).
    pub enum Decision {
        AllowOnce = "allow_once",
        AllowAlways = "allow_always",
        Deny = "deny",
    }
}

vocab! {
    /// `cap.session.config.permission_mode` (§7.10).
    pub enum PermissionMode {
        None = "none",
        Confirm = "confirm",
        Interactive = "interactive",
    }
}

vocab! {
    /// `cap.usage.stop_reason` (§7.9).
    pub enum StopReason {
        EndTurn = "end_turn",
        MaxTokens = "max_tokens",
        ToolUse = "tool_use",
        StopSequence = "stop_sequence",
        Cancelled = "cancelled",
        Error = "error",
    }
}

vocab! {
    /// `cap.fs.change.event` (coding §4.6).
    pub enum FsEvent {
        Created = "created",
        Modified = "modified",
        Deleted = "deleted",
        Renamed = "renamed",
    }
}

/// Direction of flow of an event kind (§7.0.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Emitted by the Driver on behalf of the Agent, consumed by the Orchestrator.
    AgentToOrchestrator,
    /// Sent by the Orchestrator, consumed by the Driver.
    OrchestratorToAgent,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::AgentToOrchestrator => "agent-to-orchestrator",
            Direction::OrchestratorToAgent => "orchestrator-to-agent",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_all_agree() {
        for (v, n) in PlanStatus::ALL.iter().zip(PlanStatus::NAMES) {
            assert_eq!(v.as_str(), *n);
            assert_eq!(PlanStatus::parse(n), Some(*v));
            assert_eq!(serde_json::to_value(v).unwrap(), serde_json::json!(n));
        }
        assert_eq!(StopReason::ALL.len(), StopReason::NAMES.len());
        assert_eq!(Priority::parse("normal"), None);
        assert_eq!(Decision::AllowAlways.to_string(), "allow_always");
    }
}
