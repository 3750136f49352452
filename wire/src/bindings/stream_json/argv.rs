//! The stream-json command line: the manifest's `fast_path.stream_json` argv, then
//! flags for the session config, only through keys the manifest declares.
//!
//! | config field | manifest key | appended | when the key is missing |
//! |---|---|---|---|
//! | `cwd` | `startup.cwd_arg` | `<cwd_arg> <cwd>` | nothing: the driver sets the child's cwd |
//! | `model` | `startup.model_arg` | `<model_arg> <model>` | **error** (a silently different model) |
//! | `session_resume_id` | `startup.resume_arg` | `<resume_arg> <id>` | **error** (a silently fresh conversation) |
//! | `permission_mode` | `startup.permission_mode_arg` | `<arg> <claude mode>` (below) | `none`: warning (the agent asks more, never less); others: nothing |
//! | `system_prompt`, `max_turns`, `budget_usd` | none exists | nothing | warning (the orchestrator enforces turns and budget from `cap.usage`) |
//!
//! A flag ending in `=` (e.g. `--model=`) is joined with its value in one argument.
//!
//! | CAP `permission_mode` | Claude `--permission-mode` | prompts |
//! |---|---|---|
//! | `none` | `bypassPermissions` | none: the agent runs unattended |
//! | `confirm` | `default` | every `can_use_tool` reaches the orchestrator, which may auto-approve its allow-list |
//! | `interactive` | `default` | every `can_use_tool` reaches the user |
//!
//! For `confirm`/`interactive` the prompts only reach us when the base argv carries
//! `--permission-prompt-tool stdio`; without it a warning says tools needing
//! permission will be refused by the agent itself.

use crate::manifest::{ArgvFastPath, Manifest};
use crate::protocol::{PermissionMode, SessionConfig};

/// Claude's flag routing permission prompts over the control protocol.
pub(crate) const PERMISSION_PROMPT_FLAG: &str = "--permission-prompt-tool";

/// Why no argv could be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgvError {
    #[error("the manifest declares no fast_path.stream_json")]
    Unsupported,
    #[error("session config sets {field}, but the manifest declares no {key}")]
    MissingManifestKey {
        /// The `cap.session.config` field asked for.
        field: &'static str,
        /// The manifest key that would express it, e.g. `startup.model_arg`.
        key: &'static str,
    },
}

/// A config field the argv cannot carry; the session goes on without it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgvWarning {
    #[error("session config sets {field}, but the manifest declares no {key}: ignored")]
    Ignored {
        field: &'static str,
        key: &'static str,
    },
    #[error("session config sets {0}, which no manifest key can express: ignored")]
    Inexpressible(&'static str),
    #[error(
        "permission_mode {0} without {PERMISSION_PROMPT_FLAG} stdio in fast_path.stream_json: \
         the agent will refuse tools that need permission"
    )]
    PromptsNotRouted(PermissionMode),
}

/// The command line and what it had to leave out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamJsonArgv {
    /// Program first.
    pub argv: Vec<String>,
    pub warnings: Vec<ArgvWarning>,
}

/// Claude's `--permission-mode` value for a CAP permission mode.
pub(crate) fn claude_permission_mode(mode: PermissionMode) -> &'static str {
    match mode {
        PermissionMode::None => "bypassPermissions",
        PermissionMode::Confirm | PermissionMode::Interactive => "default",
    }
}

fn push_flag(argv: &mut Vec<String>, flag: &str, value: &str) {
    if flag.ends_with('=') {
        argv.push(format!("{flag}{value}"));
    } else {
        argv.push(flag.to_owned());
        argv.push(value.to_owned());
    }
}

/// Builds the argv for `config` (see the module tables).
pub fn build_argv(
    manifest: &Manifest,
    config: &SessionConfig,
) -> Result<StreamJsonArgv, ArgvError> {
    let ArgvFastPath::Argv(base) = &manifest.fast_path.stream_json else {
        return Err(ArgvError::Unsupported);
    };
    let s = &manifest.startup;
    let mut argv = base.clone();
    let mut warnings = Vec::new();

    if let Some(flag) = &s.cwd_arg {
        push_flag(&mut argv, flag, &config.cwd);
    }
    let required = [
        (
            "model",
            "startup.model_arg",
            &s.model_arg,
            config.model.as_deref(),
        ),
        (
            "session_resume_id",
            "startup.resume_arg",
            &s.resume_arg,
            config.session_resume_id.as_deref(),
        ),
    ];
    for (field, key, flag, value) in required {
        let Some(value) = value else { continue };
        let Some(flag) = flag else {
            return Err(ArgvError::MissingManifestKey { field, key });
        };
        push_flag(&mut argv, flag, value);
    }
    if let Some(mode) = config.permission_mode {
        match &s.permission_mode_arg {
            Some(flag) => push_flag(&mut argv, flag, claude_permission_mode(mode)),
            None if mode == PermissionMode::None => warnings.push(ArgvWarning::Ignored {
                field: "permission_mode",
                key: "startup.permission_mode_arg",
            }),
            None => {}
        }
        let routed = base
            .iter()
            .any(|a| a == PERMISSION_PROMPT_FLAG || a.starts_with("--permission-prompt-tool="));
        if mode != PermissionMode::None && !routed {
            warnings.push(ArgvWarning::PromptsNotRouted(mode));
        }
    }
    let unsupported = [
        ("system_prompt", config.system_prompt.is_set()),
        ("max_turns", config.max_turns.is_set()),
        ("budget_usd", config.budget_usd.is_set()),
    ];
    for (field, set) in unsupported {
        if set {
            warnings.push(ArgvWarning::Inexpressible(field));
        }
    }
    Ok(StreamJsonArgv { argv, warnings })
}
