//! The `codex exec` command line: the manifest's `fast_path.x-codex_exec` argv, then
//! flags for the session config, then `resume <thread id>` for a turn that continues
//! the conversation, then `-` (the prompt comes on stdin: no prompt in `ps`, no
//! argv length limit).
//!
//! | config field | appended | when |
//! |---|---|---|
//! | `model` | `<startup.model_arg> <model>` | the manifest declares `startup.model_arg` (else an error: a silently different model) |
//! | `permission_mode` | `--sandbox <mode>` (below) | always when set |
//! | resume id | `resume <id>` | every turn after the first |
//!
//! | CAP `permission_mode` | Codex `--sandbox` |
//! |---|---|
//! | `interactive` | `read-only`: `codex exec` cannot ask, so nothing is changed unasked |
//! | `confirm`, `none` | `workspace-write`: Codex's own sandbox keeps writes in the workspace |
//!
//! A bypass (`--dangerously-bypass-approvals-and-sandbox`, `--yolo`, `--sandbox
//! danger-full-access`) is never added by capfleet and is refused in the manifest's
//! argv: only a fleet's own `argv` for the session may carry it (the fleet says so).

use crate::manifest::{ArgvFastPath, Manifest};
use crate::protocol::{PermissionMode, SessionConfig};

/// The flags that switch Codex's sandbox and approvals off.
const BYPASS: &[&str] = &["--dangerously-bypass-approvals-and-sandbox", "--yolo"];

/// Why no argv could be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ArgvError {
    #[error("the manifest declares no fast_path.x-codex_exec")]
    Unsupported,
    #[error("session config sets model, but the manifest declares no startup.model_arg")]
    NoModelArg,
    #[error(
        "fast_path.x-codex_exec carries `{0}`, which turns Codex's sandbox and approvals off: \
         remove it from the manifest (a fleet may still pass it in the session's own argv)"
    )]
    BypassInManifest(String),
}

/// Codex's `--sandbox` value for a CAP permission mode.
pub(crate) fn sandbox_for(mode: PermissionMode) -> &'static str {
    match mode {
        PermissionMode::Interactive => "read-only",
        PermissionMode::Confirm | PermissionMode::None => "workspace-write",
    }
}

/// The bypass flag in `argv`, if any.
fn bypass_in(argv: &[String]) -> Option<String> {
    let full_access = argv
        .windows(2)
        .any(|w| matches!(w[0].as_str(), "--sandbox" | "-s") && w[1] == "danger-full-access");
    argv.iter()
        .find(|a| BYPASS.contains(&a.as_str()) || a.as_str() == "--sandbox=danger-full-access")
        .cloned()
        .or_else(|| full_access.then(|| "--sandbox danger-full-access".to_owned()))
}

/// The argv of one turn's process. `fleet_argv`: the session's own argv from the
/// fleet (replacing the manifest's, and trusted with a bypass flag).
pub(crate) fn build_argv(
    manifest: &Manifest,
    fleet_argv: Option<&[String]>,
    config: &SessionConfig,
    resume_id: Option<&str>,
) -> Result<Vec<String>, ArgvError> {
    let ArgvFastPath::Argv(base) = &manifest.fast_path.codex_exec else {
        return Err(ArgvError::Unsupported);
    };
    let mut argv = match fleet_argv {
        Some(argv) => argv.to_vec(),
        None => {
            if let Some(flag) = bypass_in(base) {
                return Err(ArgvError::BypassInManifest(flag));
            }
            base.clone()
        }
    };
    if let Some(model) = config.model.as_deref() {
        let flag = manifest
            .startup
            .model_arg
            .as_ref()
            .ok_or(ArgvError::NoModelArg)?;
        argv.extend([flag.clone(), model.to_owned()]);
    }
    if let Some(mode) = config.permission_mode
        && bypass_in(&argv).is_none()
    {
        argv.extend(["--sandbox".to_owned(), sandbox_for(mode).to_owned()]);
    }
    if let Some(id) = resume_id {
        argv.extend(["resume".to_owned(), id.to_owned()]);
    }
    argv.push("-".to_owned());
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped `codex` manifest with this `x-codex_exec` argv.
    fn manifest(argv: &str) -> Manifest {
        let shipped = include_str!("../../../../config/agents/codex.toml");
        let mut m = Manifest::parse(shipped, "codex.toml")
            .expect("shipped manifest")
            .manifest;
        let argv: Vec<String> = serde_json::from_str(argv).expect("argv");
        m.fast_path.codex_exec = ArgvFastPath::Argv(argv);
        m
    }

    fn config() -> SessionConfig {
        SessionConfig::new("/w")
            .with_model("gpt-5-codex")
            .with_permission_mode(PermissionMode::Confirm)
    }

    #[test]
    fn first_turn_then_resumed_turns_read_the_prompt_from_stdin() {
        let m = manifest(r#"["codex", "exec", "--json"]"#);
        let first = build_argv(&m, None, &config(), None).expect("argv");
        assert_eq!(
            first,
            [
                "codex",
                "exec",
                "--json",
                "--model",
                "gpt-5-codex",
                "--sandbox",
                "workspace-write",
                "-"
            ]
        );
        let next = build_argv(&m, None, &config(), Some("t-1")).expect("argv");
        assert_eq!(next[next.len() - 3..], ["resume", "t-1", "-"]);
    }

    #[test]
    fn a_bypass_is_refused_in_the_manifest_and_kept_from_the_fleet() {
        for bad in [
            r#"["codex", "exec", "--json", "--yolo"]"#,
            r#"["codex", "exec", "--json", "--sandbox", "danger-full-access"]"#,
            r#"["codex", "exec", "--dangerously-bypass-approvals-and-sandbox"]"#,
        ] {
            let err = build_argv(&manifest(bad), None, &config(), None).unwrap_err();
            assert!(
                matches!(err, ArgvError::BypassInManifest(_)),
                "{bad}: {err}"
            );
        }
        let m = manifest(r#"["codex", "exec", "--json"]"#);
        let fleet: Vec<String> = ["codex", "exec", "--json", "--yolo"]
            .map(String::from)
            .into();
        let argv = build_argv(&m, Some(&fleet), &config(), None).expect("argv");
        assert!(argv.contains(&"--yolo".to_owned()));
        assert!(!argv.contains(&"--sandbox".to_owned()), "{argv:?}");
    }

    #[test]
    fn interactive_is_read_only() {
        let m = manifest(r#"["codex", "exec", "--json"]"#);
        let c = SessionConfig::new("/w").with_permission_mode(PermissionMode::Interactive);
        let argv = build_argv(&m, None, &c, None).expect("argv");
        assert_eq!(
            argv,
            ["codex", "exec", "--json", "--sandbox", "read-only", "-"]
        );
    }
}
