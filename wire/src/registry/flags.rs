//! Flag spellings the installed binary decides (`[probe] x-help_command` and
//! `x-flag_fallbacks`): a manifest names the current spelling of a flag in its launch
//! argvs (`gemini --acp`) and the older one (`--experimental-acp`); the help probe's
//! output (bounded like the manifest probe) tells which one this binary takes. A flag
//! the output lists is kept; one it does not is replaced by the older spelling in
//! `startup.command` and every fast-path argv. When the help cannot be read (not on
//! `PATH`, failed, timed out) the manifest's spelling is kept and the choice says why.
//! No version number is compared: a fork or a backport decides by what it prints.
//!
//! The same output settles `x-help_requires` (`"FAST_PATH=WORD"`): a fast path kept
//! only when the help lists the word (Codex's `x-codex_app_server` needs its
//! `app-server` command); else it is dropped, and binding selection falls to the
//! next one the manifest declares (`x-codex_exec`). Unreadable help keeps it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::manifest::{AcpFastPath, ArgvFastPath, Manifest};

use super::probe::{self, ProbeOutcome};

/// What was chosen for one flag, and why (`capfleet resolve` shows it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagChoice {
    /// The manifest's (current) spelling.
    pub flag: String,
    /// The spelling the launch argvs now carry.
    pub used: String,
    pub why: String,
}

impl fmt::Display for FlagChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} -> {} ({})", self.flag, self.used, self.why)
    }
}

/// Settle the manifest's flag spellings against the installed binary.
pub(crate) async fn settle(
    m: &mut Manifest,
    path_dirs: &[PathBuf],
    timeout: Duration,
) -> Vec<FlagChoice> {
    let Some(help) = m.probe.as_ref().and_then(|p| p.help_command.clone()) else {
        return Vec::new();
    };
    let owned = |(a, b): (&str, &str)| (a.to_owned(), b.to_owned());
    let pairs: Vec<(String, String)> = m
        .probe
        .iter()
        .flat_map(|p| p.fallbacks())
        .map(owned)
        .collect();
    let requires: Vec<(String, String)> = m
        .probe
        .iter()
        .flat_map(|p| p.requires())
        .map(owned)
        .collect();
    if pairs.is_empty() && requires.is_empty() {
        return Vec::new();
    }
    let shown = format!("`{}`", help.join(" "));
    let output = match binary(&help[0], path_dirs) {
        None => Err(format!("`{}` not found on PATH", help[0])),
        Some(bin) => match probe::run_args(&bin, &help[1..], timeout).await {
            ProbeOutcome::Printed(text) => Ok(text),
            ProbeOutcome::Failed { status, .. } => Err(format!("{shown} failed: {status}")),
            ProbeOutcome::TimedOut => Err(format!("{shown} timed out after {timeout:?}")),
            ProbeOutcome::TooLarge => Err(format!("{shown} printed too much")),
            ProbeOutcome::NotUtf8 => Err(format!("{shown} printed no UTF-8")),
            ProbeOutcome::Spawn(e) => Err(format!("{shown} cannot run: {e}")),
        },
    };
    let mut choices = Vec::with_capacity(pairs.len() + requires.len());
    for (key, word) in requires {
        let (used, why) = match &output {
            Ok(text) if lists(text, &word) => ("kept", format!("{shown} lists {word}")),
            Ok(_) => match fast_path(m, &key) {
                Some(slot) => {
                    *slot = ArgvFastPath::Unsupported;
                    ("dropped", format!("{shown} does not list {word}"))
                }
                None => ("kept", format!("no argv fast path {key}")),
            },
            Err(e) => ("kept", format!("{e}; the manifest's fast path kept")),
        };
        tracing::info!(fast_path = %key, used, %why, "fast path settled by the help");
        choices.push(FlagChoice {
            flag: format!("fast_path.{key}"),
            used: used.to_owned(),
            why,
        });
    }
    for (new, old) in pairs {
        let (used, why) = match &output {
            Ok(text) if lists(text, &new) => (new.clone(), format!("{shown} lists it")),
            Ok(_) => (old.clone(), format!("{shown} does not list {new}")),
            Err(e) => (new.clone(), format!("{e}; the manifest's spelling kept")),
        };
        if used != new {
            for argv in argvs(m) {
                argv.iter_mut()
                    .filter(|a| **a == new)
                    .for_each(|a| a.clone_from(&used));
            }
        }
        tracing::info!(flag = %new, %used, %why, "flag spelling settled");
        choices.push(FlagChoice {
            flag: new,
            used,
            why,
        });
    }
    choices
}

/// The help command's binary: a path as given, a name looked up on `PATH`.
fn binary(name: &str, path_dirs: &[PathBuf]) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(Path::new(name).to_owned());
    }
    probe::which(name, path_dirs)
}

/// Does the help `text` list `flag` as a word of its own (`--acp`, not `--acp-x`)?
fn lists(text: &str, flag: &str) -> bool {
    let part = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
    text.match_indices(flag).any(|(at, _)| {
        let before = text[..at].chars().next_back().is_none_or(|c| !part(c));
        let after = text[at + flag.len()..]
            .chars()
            .next()
            .is_none_or(|c| !part(c));
        before && after
    })
}

/// The argv fast path a manifest key names (`x-codex_app_server`).
fn fast_path<'m>(m: &'m mut Manifest, key: &str) -> Option<&'m mut ArgvFastPath> {
    let fp = &mut m.fast_path;
    match key {
        "stream_json" => Some(&mut fp.stream_json),
        "x-codex_exec" => Some(&mut fp.codex_exec),
        "x-codex_app_server" => Some(&mut fp.codex_app_server),
        _ => None,
    }
}

/// Every launch argv of the manifest.
fn argvs(m: &mut Manifest) -> Vec<&mut Vec<String>> {
    let fp = &mut m.fast_path;
    let mut out = vec![&mut m.startup.command];
    for a in [
        &mut fp.stream_json,
        &mut fp.codex_exec,
        &mut fp.codex_app_server,
    ] {
        if let ArgvFastPath::Argv(v) = a {
            out.push(v);
        }
    }
    if let AcpFastPath::Argv(v) = &mut fp.acp_stdio {
        out.push(v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::lists;

    #[test]
    fn a_flag_is_listed_only_as_a_word_of_its_own() {
        let help = "      --acp                 Starts the agent in ACP mode  [boolean]\n\
                    --experimental-acp    (deprecated, use --acp instead)";
        assert!(lists(help, "--acp"));
        assert!(lists(help, "--experimental-acp"));
        let old = "      --experimental-acp    Starts the agent in ACP mode";
        assert!(!lists(old, "--acp"), "a longer flag does not list it");
        assert!(!lists("--acp-mode", "--acp"));
        assert!(lists("[--acp]", "--acp"));
    }
}
