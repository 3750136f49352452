//! `capfleet speak` arguments: capfleet's own, then Claude Code's flags where they
//! mean something here, then the Claude Code flags a driver passes that have no
//! meaning for capfleet (accepted, said once on stderr, so a Claude driver such as
//! the Agent SDK runs unchanged). Anything else is an error naming the flag (clap's).

use std::path::PathBuf;
use std::sync::Arc;

use capfleet_engine::answerer::Policy;
use capfleet_engine::protocol::PermissionMode;
use capfleet_engine::session::SessionSpec;

use capfleet_app::agents::{SessionRequest, registry, session_spec};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum InputFormat {
    /// The prompt from the argument, else all of stdin: one turn.
    Text,
    /// One `user` frame per line (and control requests), a turn each.
    StreamJson,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OutputFormat {
    /// The last turn's answer text.
    Text,
    /// The last turn's `result` frame, once.
    Json,
    /// Every frame, one per line: `system/init`, `assistant`, `user` (tool results),
    /// `stream_event` (with --include-partial-messages), `result`.
    StreamJson,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "\
capfleet as a Claude-compatible agent: anything that drives Claude Code headless \
(`claude -p --input-format stream-json --output-format stream-json`, the Claude Agent \
SDK) can drive one capfleet session of any agent capfleet can drive, over any binding \
(a PTY-only agent spoken to as stream-json).

Examples:
  capfleet speak --agent sim -p 'hello'
      one turn, the answer printed
  capfleet speak --agent aider --input-format stream-json --output-format stream-json
      aider (a TUI) behind Claude Code's stream-json
  printf '#!/bin/sh\\nexec capfleet speak --agent sim \"$@\"\\n' > claude-cap; chmod +x claude-cap
      an executable for the Agent SDK's cli_path / pathToClaudeCodeExecutable
  capfleet speak --fleet review.toml --input-format stream-json --output-format stream-json
      a whole fleet as one Claude-compatible agent

A fleet (--fleet): each user message is one run of the fleet with the message as its \
task, in a run directory under the working directory (`capfleet log` reads it); the \
answer is the `[fleet].answer_from` session's final text. `system/init`'s \
`session_id` is the conversation's first run id (later runs are `<id>.2`, `<id>.3`, \
each resuming the inner agents' own conversations); `--resume <id>` goes on with it \
(a run of it cut by a kill is finished first, as `capfleet run --resume` does). \
A `result` carries the whole fleet's usage; a budget stop is `error_max_budget_usd`. \
Permissions the fleet's policy leaves open go upstream; `interrupt` cancels every \
inner session's turn; after each run an `artifact` frame names its journal \
(`_meta.\"capfleet.run\"`), and the worktrees' diffs and transcripts follow as \
`artifact` frames.

Session config: CAP_SESSION_CONFIG (JSON `cap.session.config`, as a CAP \
orchestrator hands it, tai's --cap-speak too) fills what the flags leave unset: \
cwd, model, system_prompt, max_turns, permission_mode, session_resume_id.

Out: stdout carries protocol frames only (every diagnostic goes to stderr). The \
`result` frame of a turn has the turn's usage and `total_cost_usd`, cumulative over \
the process as Claude reports it; its `session_id` is the inner agent's conversation \
id when it has one (so `--resume <session_id>` resumes it natively).

Permissions: --disallowedTools, then --allowedTools decide first; what they leave \
open goes upstream as a `control_request` `can_use_tool` with \
--permission-prompt-tool stdio, and is denied (fail-safe, recorded) without it. \
--permission-mode bypassPermissions starts the inner agent unattended (CAP mode none).

Control requests: `interrupt` cancels the turn in progress; `initialize`, \
`set_permission_mode`, `set_model` are acknowledged; others get an error response. \
stdin's end ends the session once the queued turns are done.

Exit codes, as Claude Code's: 0 the last turn completed, 1 it failed or was \
interrupted by an `interrupt` request (or the session failed), 2 bad usage, 130 stopped \
by a signal (SIGINT or SIGTERM: an error result is written, the inner agent's process \
group is killed first).")]
pub(crate) struct SpeakArgs {
    /// The agent that answers: a registry name (see `capfleet resolve`) or a manifest path.
    #[arg(
        long,
        env = "CAPFLEET_SPEAK_AGENT",
        required_unless_present_any = ["version", "fleet"]
    )]
    pub agent: Option<String>,
    /// A whole fleet answers instead of one agent: each user message is one run of
    /// this fleet file with the message as its task; the answer is its `answer_from`
    /// session's final text (default: the first start session's).
    #[arg(long, env = "CAPFLEET_SPEAK_FLEET", value_name = "FLEET_TOML")]
    pub fleet: Option<PathBuf>,
    /// Simulator script (sets CAPFLEET_SIM_SCRIPT for the agent).
    #[arg(long, conflicts_with = "fleet")]
    pub script: Option<PathBuf>,
    /// Append every event of the inner session to this JSONL journal (a fleet's runs
    /// keep their own).
    #[arg(long, conflicts_with = "fleet")]
    pub journal: Option<PathBuf>,
    /// The prompt (with --input-format text; else stdin is read).
    pub prompt: Option<String>,
    /// Print the answer and exit (Claude's headless mode; the only mode here).
    #[arg(short = 'p', long)]
    pub print: bool,
    #[arg(long, value_enum, default_value = "text")]
    pub input_format: InputFormat,
    #[arg(long, value_enum, default_value = "text")]
    pub output_format: OutputFormat,
    /// Accepted (Claude requires it for stream-json output); frames are complete anyway.
    #[arg(long)]
    pub verbose: bool,
    /// Also stream each text and thinking chunk as a `stream_event` delta.
    #[arg(long)]
    pub include_partial_messages: bool,
    /// The model to ask the inner agent for.
    #[arg(long)]
    pub model: Option<String>,
    /// Claude's modes: default | acceptEdits | plan | bypassPermissions | dontAsk.
    #[arg(long, value_parser = parse_claude_mode)]
    pub permission_mode: Option<PermissionMode>,
    /// `stdio`: permissions the policy leaves open are asked upstream as `can_use_tool`.
    #[arg(long, value_name = "TOOL")]
    pub permission_prompt_tool: Option<String>,
    /// Resume the inner agent's conversation (a `session_id` this command reported).
    #[arg(long, short = 'r', value_name = "SESSION_ID")]
    pub resume: Option<String>,
    /// Turns allowed in this session.
    #[arg(long)]
    pub max_turns: Option<u32>,
    /// Sent to the inner agent as its system prompt (with --system-prompt, after it).
    #[arg(long)]
    pub append_system_prompt: Option<String>,
    /// The inner agent's system prompt (empty: the agent's own).
    #[arg(long)]
    pub system_prompt: Option<String>,
    /// Approve these tools' permission requests (comma or space separated).
    #[arg(long = "allowedTools", alias = "allowed-tools", value_delimiter = ',', num_args = 1..)]
    pub allowed_tools: Vec<String>,
    /// Deny these tools' permission requests (comma or space separated).
    #[arg(long = "disallowedTools", alias = "disallowed-tools", value_delimiter = ',', num_args = 1..)]
    pub disallowed_tools: Vec<String>,
    /// Print the version (`X.Y.Z (capfleet speak)`, as Claude prints its own) and exit.
    #[arg(short = 'v', long)]
    pub version: bool,
    #[command(flatten)]
    pub ignored: IgnoredClaudeFlags,
    #[command(flatten)]
    pub telemetry: capfleet_app::telemetry::TelemetryArgs,
}

/// Claude Code flags a driver passes that mean nothing for capfleet: accepted so the
/// driver runs unchanged, named once on stderr.
#[derive(Debug, Default, clap::Args)]
#[command(next_help_heading = "Claude Code flags accepted without effect")]
pub(crate) struct IgnoredClaudeFlags {
    #[arg(long, value_name = "V")]
    setting_sources: Option<String>,
    #[arg(long, value_name = "V")]
    tools: Option<String>,
    #[arg(long, value_name = "V")]
    mcp_config: Vec<String>,
    #[arg(long)]
    strict_mcp_config: bool,
    #[arg(long, value_name = "V")]
    max_thinking_tokens: Option<String>,
    #[arg(long, value_name = "V")]
    thinking: Option<String>,
    #[arg(long, value_name = "V")]
    effort: Option<String>,
    #[arg(long, value_name = "V")]
    settings: Option<String>,
    #[arg(long, value_name = "V")]
    add_dir: Vec<String>,
    #[arg(long, value_name = "V")]
    fallback_model: Option<String>,
    #[arg(long, value_name = "V")]
    betas: Option<String>,
    #[arg(long)]
    include_hook_events: bool,
}

impl IgnoredClaudeFlags {
    /// The flags given, by name.
    pub(crate) fn given(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        let mut note = |set: bool, name| {
            if set {
                given.push(name);
            }
        };
        note(self.setting_sources.is_some(), "--setting-sources");
        note(self.tools.is_some(), "--tools");
        note(!self.mcp_config.is_empty(), "--mcp-config");
        note(self.strict_mcp_config, "--strict-mcp-config");
        note(self.max_thinking_tokens.is_some(), "--max-thinking-tokens");
        note(self.thinking.is_some(), "--thinking");
        note(self.effort.is_some(), "--effort");
        note(self.settings.is_some(), "--settings");
        note(!self.add_dir.is_empty(), "--add-dir");
        note(self.fallback_model.is_some(), "--fallback-model");
        note(self.betas.is_some(), "--betas");
        note(self.include_hook_events, "--include-hook-events");
        given
    }
}

/// Claude Code's `--permission-mode` as a CAP mode: only `bypassPermissions` runs the
/// inner agent unattended; every other mode keeps its prompts.
fn parse_claude_mode(s: &str) -> Result<PermissionMode, String> {
    match s {
        "bypassPermissions" => Ok(PermissionMode::None),
        "default" | "acceptEdits" | "plan" | "dontAsk" | "auto" => Ok(PermissionMode::Confirm),
        other => PermissionMode::parse(other).ok_or_else(|| {
            format!(
                "expected default | acceptEdits | plan | bypassPermissions | dontAsk, got {other:?}"
            )
        }),
    }
}

/// The variable a CAP orchestrator hands the session config in (JSON
/// `cap.session.config`), as tai's `--cap-speak` reads it.
pub(crate) const SESSION_CONFIG_ENV: &str = "CAP_SESSION_CONFIG";

impl SpeakArgs {
    /// Fill what the flags leave unset from `CAP_SESSION_CONFIG` (flags win): the
    /// working directory, model, system prompt, max turns, permission mode and the
    /// conversation to resume. `Err` names the variable and what is wrong.
    pub(crate) fn apply_session_config(&mut self) -> Result<(), String> {
        let Some(text) = std::env::var_os(SESSION_CONFIG_ENV).filter(|v| !v.is_empty()) else {
            return Ok(());
        };
        let text = text
            .into_string()
            .map_err(|_| format!("{SESSION_CONFIG_ENV} is not UTF-8"))?;
        let c: capfleet_engine::protocol::SessionConfig = serde_json::from_str(&text)
            .map_err(|e| format!("{SESSION_CONFIG_ENV} is not a cap.session.config: {e}"))?;
        if !c.cwd.is_empty() {
            std::env::set_current_dir(&c.cwd)
                .map_err(|e| format!("{SESSION_CONFIG_ENV} cwd {:?}: {e}", c.cwd))?;
        }
        fill(&mut self.model, c.model.get());
        fill(&mut self.system_prompt, c.system_prompt.get());
        fill(&mut self.resume, c.session_resume_id.get());
        if self.max_turns.is_none() {
            self.max_turns = c
                .max_turns
                .get()
                .map(|&n| u32::try_from(n).unwrap_or(u32::MAX));
        }
        if self.permission_mode.is_none() {
            self.permission_mode = c.permission_mode;
        }
        Ok(())
    }

    /// Permissions left open go upstream.
    pub(crate) fn prompts_upstream(&self) -> bool {
        self.permission_prompt_tool.as_deref() == Some("stdio")
    }

    pub(crate) fn policy(&self) -> Policy {
        Policy {
            deny_tools: self.disallowed_tools.clone(),
            allow_tools: self.allowed_tools.clone(),
            max_risk: None,
            ..Policy::default()
        }
    }

    /// The inner agent's system prompt: `--system-prompt`, then `--append-system-prompt`.
    pub(crate) fn system_prompt(&self) -> Option<String> {
        let parts: Vec<&str> = [&self.system_prompt, &self.append_system_prompt]
            .into_iter()
            .filter_map(|p| p.as_deref())
            .filter(|p| !p.is_empty())
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// Resolve the agent and build the session spec (the working directory is the
    /// process's, as for Claude Code).
    pub(crate) async fn session_spec(&self) -> Result<SessionSpec, String> {
        let agent = self.agent.as_deref().unwrap_or_default();
        let resolved = registry().resolve(agent).await.map_err(|e| e.to_string())?;
        let manifest = Arc::new(resolved.manifest);
        let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
        let script = match &self.script {
            Some(s) => Some(
                std::fs::canonicalize(s).map_err(|e| format!("--script {}: {e}", s.display()))?,
            ),
            None => None,
        };
        let mut spec = session_spec(SessionRequest {
            fleet: "speak",
            name: manifest.agent.name.clone(),
            manifest,
            cwd: &cwd,
            model: self.model.clone(),
            system_prompt: self.system_prompt(),
            permission_mode: self.permission_mode,
            argv: None,
            env: Vec::new(),
            script: script.as_deref(),
        });
        if let Some(id) = &self.resume {
            spec.launch.config = spec.launch.config.clone().with_resume(id.clone());
        }
        spec.max_turns = self.max_turns;
        Ok(spec)
    }
}

/// `slot` from `value` when the flag left it unset.
fn fill(slot: &mut Option<String>, value: Option<&String>) {
    if slot.is_none() {
        *slot = value.cloned();
    }
}
