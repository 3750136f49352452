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
        /// The agent's answer, shown to the user.
        Assistant = "assistant",
        /// The agent's reasoning, not echoed by default.
        Thought = "thought",
        /// Notices from the agent or driver, not part of the answer.
        System = "system",
    }
}

vocab! {
    /// Status of a plan entry (§7.3).
    pub enum PlanStatus {
        /// Not started.
        Pending = "pending",
        /// Being worked on.
        InProgress = "in_progress",
        /// Done.
        Completed = "completed",
        /// Dropped before completion.
        Cancelled = "cancelled",
        /// Waiting on something outside the agent.
        Blocked = "blocked",
    }
}

vocab! {
    /// Priority of a plan entry (§7.3). OPTIONAL: absent means "unspecified",
    /// never a default, hence always carried as `Option<Priority>`.
    pub enum Priority {
        /// Before anything else.
        Urgent = "urgent",
        /// Soon.
        High = "high",
        /// In due course.
        Medium = "medium",
        /// When nothing more important is left.
        Low = "low",
    }
}

vocab! {
    /// `cap.cancel.scope` (§7.8).
    pub enum CancelScope {
        /// Stop the turn in progress; the session stays.
        CurrentTurn = "current_turn",
        /// End the whole session.
        Session = "session",
    }
}

vocab! {
    /// `cap.permission.request.scope` (§7.6).
    pub enum PermissionScope {
        /// Reading files or data.
        Read = "read",
        /// Changing files or data.
        Write = "write",
        /// Running a program.
        Execute = "execute",
        /// Reaching the network.
        Network = "network",
    }
}

vocab! {
    /// `cap.permission.request.risk_level` (§7.6). `High` is never auto-approved
    /// without explicit user policy.
    pub enum RiskLevel {
        /// Harmless or easily undone.
        Low = "low",
        /// May change state that matters.
        Medium = "medium",
        /// Destructive or hard to undo.
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
        /// Allow this request only.
        AllowOnce = "allow_once",
        /// Allow this and like requests for the rest of the session.
        AllowAlways = "allow_always",
        /// Refuse the request.
        Deny = "deny",
    }
}

vocab! {
    /// `cap.session.config.permission_mode` (§7.10).
    pub enum PermissionMode {
        /// The agent acts without asking.
        None = "none",
        /// The agent asks a yes/no before risky actions.
        Confirm = "confirm",
        /// The agent asks through `cap.permission.request`.
        Interactive = "interactive",
    }
}

vocab! {
    /// `cap.usage.stop_reason` (§7.9).
    pub enum StopReason {
        /// The model finished its answer.
        EndTurn = "end_turn",
        /// The output hit the token limit.
        MaxTokens = "max_tokens",
        /// The model stopped to call a tool.
        ToolUse = "tool_use",
        /// A stop sequence was generated.
        StopSequence = "stop_sequence",
        /// The turn was cancelled.
        Cancelled = "cancelled",
        /// The turn failed.
        Error = "error",
    }
}

vocab! {
    /// `cap.fs.change.event` (coding §4.6).
    pub enum FsEvent {
        /// The path was created.
        Created = "created",
        /// The file's content changed.
        Modified = "modified",
        /// The path was removed.
        Deleted = "deleted",
        /// The path was renamed; the event carries `new_path`.
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
