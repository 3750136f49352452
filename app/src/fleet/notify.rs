//! `[notify]`: the run's webhook, read strictly (an unknown key is an error: a
//! misspelt `secret_env` must not send unsigned, or not at all, silently), then built
//! into a [`NotifySpec`] with its secret read — from the variable `secret_env` names
//! or the file `secret_file` names (relative to the fleet file) — never printed.
//!
//! A fleet submitted to a server (`capfleet serve`, `capfleet worker`) signs with a
//! secret of its own only: a `secret_file` it submitted beside it (a plain relative
//! path); `secret_env` would name a variable of the server, whose secrets are not a
//! submitter's to sign with, and is refused.
//!
//! ```toml
//! [notify]
//! url = "https://hooks.example.com/capfleet"
//! secret_env = "CAPFLEET_NOTIFY_SECRET"     # or secret_file = "hook.secret"
//! events = ["waiting", "run_ended", "budget_exceeded"]   # default: all
//! ```

use toml::de::DeTable;

use super::build::Context;
use super::config::At;
use super::error::FleetError;
use super::read::{Reader, strict_keys, string_at};
use crate::notify::{Kind, NotifySpec, Secret};

const KEYS: &[&str] = &["url", "secret_env", "secret_file", "events"];

/// `[notify]` as written.
#[derive(Debug, Clone)]
pub(crate) struct NotifySection {
    pub url: At<String>,
    pub secret: At<SecretFrom>,
    pub events: Vec<Kind>,
}

/// Where the shared secret is.
#[derive(Debug, Clone)]
pub(crate) enum SecretFrom {
    Env(String),
    File(String),
}

/// `[notify]`, if present.
pub(super) fn read(r: &mut Reader, root: &DeTable<'_>) -> Option<NotifySection> {
    let path = "notify";
    let (t, span) = r.table(root, "", path)?;
    strict_keys(r, t, path, KEYS);
    let url = string_at(r, t, path, "url");
    if url.is_none() && t.get("url").is_none() {
        r.missing("notify.url", Some(span.clone()));
    }
    if let Some(u) = &url
        && !(u.value.starts_with("http://") || u.value.starts_with("https://"))
    {
        r.invalid(
            "notify.url",
            Reader::span_of(t, "url"),
            format!("{:?} is not an http:// or https:// URL", u.value),
        );
    }
    let env = string_at(r, t, path, "secret_env");
    let file = string_at(r, t, path, "secret_file");
    let secret = match (env, file) {
        (Some(e), None) => Some(At {
            value: SecretFrom::Env(e.value),
            at: e.at,
        }),
        (None, Some(f)) => Some(At {
            value: SecretFrom::File(f.value),
            at: f.at,
        }),
        (Some(_), Some(_)) => {
            r.invalid(
                "notify.secret_file",
                Reader::span_of(t, "secret_file"),
                "give the secret once: secret_env or secret_file, not both",
            );
            None
        }
        (None, None) => {
            if t.get("secret_env").is_none() && t.get("secret_file").is_none() {
                r.invalid(
                    "notify",
                    Some(span.clone()),
                    "a webhook is signed: set secret_env = \"VAR\" (a variable holding the \
                     shared secret) or secret_file = \"PATH\"",
                );
            }
            None
        }
    };
    let events = match r.strings(t, path, "events") {
        None => Kind::ALL.to_vec(),
        Some(names) => {
            let mut kinds = Vec::new();
            for n in &names {
                match Kind::parse(n) {
                    Some(k) => kinds.push(k),
                    None => r.invalid(
                        "notify.events",
                        Reader::span_of(t, "events"),
                        format!("{n:?} is not one of waiting | run_ended | budget_exceeded"),
                    ),
                }
            }
            kinds
        }
    };
    Some(NotifySection {
        url: url?,
        secret: secret?,
        events,
    })
}

/// The webhook, its secret read.
pub(super) fn build(n: &NotifySection, cx: &Context<'_>) -> Result<NotifySpec, FleetError> {
    let invalid = |reason: String| FleetError::InvalidValue {
        at: n.secret.at.clone(),
        reason,
    };
    let secret = match (&n.secret.value, cx.submitted) {
        (SecretFrom::Env(var), Some(_)) => {
            return Err(invalid(format!(
                "a submitted fleet signs with a secret of its own: secret_file = \"PATH\", a file of the submission, not secret_env ({var} would be this server's variable)"
            )));
        }
        (SecretFrom::File(file), Some(_)) if !super::plain_relative(file) => {
            return Err(invalid(format!(
                "a submitted fleet's secret_file is a file of the submission (a plain relative path), not {file:?}"
            )));
        }
        (SecretFrom::Env(var), None) => Secret::from_env(var).map_err(invalid)?,
        (SecretFrom::File(file), _) => Secret::from_file(&cx.dir.join(file)).map_err(invalid)?,
    };
    Ok(NotifySpec {
        url: n.url.value.clone(),
        secret,
        events: n.events.clone(),
    })
}
