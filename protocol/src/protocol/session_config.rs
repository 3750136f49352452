//! `cap.session.config` (core §7.10): the REQUIRED first frame from the
//! Orchestrator, applied by the Driver before spawning the agent.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

use super::meta::{Meta, impl_has_meta};
use super::nullable::Nullable;
use super::vocab::PermissionMode;

/// `cap.session.config`: workspace, model, limits and permission mode of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionConfig {
    /// Working directory of the agent (required: §3.3 makes the Driver apply it).
    pub cwd: String,
    /// The model the agent should use.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub model: Nullable<String>,
    /// A system prompt for the session.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub system_prompt: Nullable<String>,
    /// The most turns the session may take.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub max_turns: Nullable<u64>,
    /// A [`Number`] so `5.00` and `5` both re-encode as read.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub budget_usd: Nullable<Number>,
    /// How the agent asks before acting: none, confirm or interactive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<PermissionMode>,
    /// The agent's session id to resume, from an earlier `cap.session.ready`.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub session_resume_id: Nullable<String>,
    /// Profile name (e.g. `coding`) to that profile's opaque config.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub profile_config: Nullable<Map<String, Value>>,
    /// `_meta`: implementation-defined annotations (§7.0), kept verbatim.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Fields outside the spec, kept so the value re-encodes unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SessionConfig {
    /// A config with only `cwd` set.
    pub fn new(cwd: impl Into<String>) -> Self {
        SessionConfig {
            cwd: cwd.into(),
            model: Nullable::Absent,
            system_prompt: Nullable::Absent,
            max_turns: Nullable::Absent,
            budget_usd: Nullable::Absent,
            permission_mode: None,
            session_resume_id: Nullable::Absent,
            profile_config: Nullable::Absent,
            meta: None,
            extra: Map::new(),
        }
    }

    /// Sets `model`.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Nullable::Value(model.into());
        self
    }

    /// Sets `system_prompt`.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Nullable::Value(prompt.into());
        self
    }

    /// Sets `max_turns`.
    pub fn with_max_turns(mut self, max_turns: u64) -> Self {
        self.max_turns = Nullable::Value(max_turns);
        self
    }

    /// Sets the budget; a non-finite value leaves it unset.
    pub fn with_budget_usd(mut self, usd: f64) -> Self {
        self.budget_usd = Number::from_f64(usd).into();
        self
    }

    /// Sets `permission_mode`.
    pub fn with_permission_mode(mut self, mode: PermissionMode) -> Self {
        self.permission_mode = Some(mode);
        self
    }

    /// Sets `session_resume_id`: resume that agent session.
    pub fn with_resume(mut self, session_id: impl Into<String>) -> Self {
        self.session_resume_id = Nullable::Value(session_id.into());
        self
    }

    /// Sets one profile's config (e.g. `"coding"`), keeping the others.
    pub fn with_profile_config(mut self, profile: &str, config: Value) -> Self {
        let mut map = match std::mem::take(&mut self.profile_config) {
            Nullable::Value(m) => m,
            _ => Map::new(),
        };
        map.insert(profile.to_owned(), config);
        self.profile_config = Nullable::Value(map);
        self
    }

    /// `budget_usd` as `f64` when set.
    pub fn budget(&self) -> Option<f64> {
        self.budget_usd.get().and_then(Number::as_f64)
    }

    /// One profile's config when set.
    pub fn profile(&self, profile: &str) -> Option<&Value> {
        self.profile_config.get()?.get(profile)
    }
}

impl_has_meta!(SessionConfig);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builder_encodes_only_what_is_set() {
        let c = SessionConfig::new("/w")
            .with_model("m")
            .with_budget_usd(5.0)
            .with_permission_mode(PermissionMode::Confirm)
            .with_profile_config("coding", json!({"tools_allowed": ["Bash"]}));
        assert_eq!(c.budget(), Some(5.0));
        assert_eq!(
            c.profile("coding"),
            Some(&json!({"tools_allowed": ["Bash"]}))
        );
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"cwd": "/w", "model": "m", "budget_usd": 5.0, "permission_mode": "confirm",
                   "profile_config": {"coding": {"tools_allowed": ["Bash"]}}})
        );
    }
}
