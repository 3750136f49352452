//! A submitted fleet: the request body read (exactly `application/toml`, or JSON
//! `{fleet, task, files}` as `application/json`), written into the run's `input/` directory (the fleet as
//! `fleet.toml`, each file of `files` beside it, so that the fleet's relative paths —
//! scripts, `@task` files — name them), then loaded and validated exactly as `capfleet
//! run` does: the same findings `run --dry-run` prints, each with its line and key.
//! Every session is sandboxed as the host's [`Confinement`] says (a session that says
//! nothing under `sandbox = "workspace"`, a `"none"` refused unless the rule allows
//! it, the host's files hidden); a host with no backend for them refuses the run
//! ([`SubmissionError::NoSandbox`]) rather than run it unconfined.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::fleet::plain_relative;
use crate::fleet::{self, FleetErrors, Loaded};
use crate::sandboxing::Confinement;
use capfleet_wire::process::sandbox::availability;

/// The input directory inside a run's directory.
pub const INPUT_DIR: &str = "input";
/// The fleet's file name in it.
pub const FLEET_FILE: &str = "fleet.toml";

/// One reason a fleet was rejected, as `run --dry-run` prints it.
/// (Its schema in the API document: the server's `schema::Finding`.)
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// The file the finding is in (`fleet.toml`, or a file of `files`).
    pub origin: String,
    pub line: Option<usize>,
    /// The dotted key (`sessions[1].agent`), empty for the file as a whole.
    pub key: String,
    /// The whole finding, as printed.
    pub message: String,
}

/// Why a submission was not taken (the server answers each with its API error).
#[derive(Debug, thiserror::Error)]
pub enum SubmissionError {
    #[error("{0}")]
    BadRequest(String),
    #[error("the fleet is invalid: {} finding(s)", .0.len())]
    InvalidFleet(Vec<Finding>),
    #[error("content type `{got}`: send {want}")]
    UnsupportedMedia { got: String, want: &'static str },
    /// A session must run sandboxed and this host has no backend for it: it is not
    /// run unconfined (the server answers 503 `no_sandbox`).
    #[error("{0}")]
    NoSandbox(String),
    #[error("{0}")]
    Internal(String),
}

/// What a client submitted.
/// (Its schema in the API document: the server's `schema::Submission`.)
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submission {
    /// The fleet.toml's text.
    pub fleet: String,
    /// Replaces the fleet's task.
    #[serde(default)]
    pub task: Option<String>,
    /// Files beside the fleet (relative path -> text), e.g. the sim's scripts.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// The directory the sessions that name no `cwd` work in: inside a root the
    /// server allows (`--allow-root`). Default: the server's working directory.
    #[serde(default)]
    pub cwd: Option<String>,
}

impl Submission {
    /// The body as a submission, by its media type (`kind`: the content type without
    /// its parameters, lower case).
    pub fn parse(kind: &str, body: &[u8]) -> Result<Submission, SubmissionError> {
        let text = || {
            String::from_utf8(body.to_vec())
                .map_err(|_| SubmissionError::BadRequest("the body is not UTF-8".into()))
        };
        let s = match kind {
            "application/toml" => Submission {
                fleet: text()?,
                ..Submission::default()
            },
            "application/json" => serde_json::from_slice(body)
                .map_err(|e| SubmissionError::BadRequest(format!("the JSON body: {e}")))?,
            other => {
                return Err(SubmissionError::UnsupportedMedia {
                    got: other.to_owned(),
                    want: "application/toml or application/json",
                });
            }
        };
        s.checked()
    }

    /// A submission carried as JSON by other means (a queued run's message), checked
    /// as a request's body is.
    pub fn from_json(value: serde_json::Value) -> Result<Submission, SubmissionError> {
        let s: Submission = serde_json::from_value(value)
            .map_err(|e| SubmissionError::BadRequest(format!("the submission: {e}")))?;
        s.checked()
    }

    /// Refuse a task read from a file and a file outside the input directory.
    fn checked(self) -> Result<Submission, SubmissionError> {
        let s = self;
        if s.task.as_deref().is_some_and(|t| t.starts_with('@')) {
            return Err(SubmissionError::BadRequest(
                "`task` is the task's text (a file reference `@…` is read on the server only from `files`, through the fleet's own `task`)".into(),
            ));
        }
        for name in s.files.keys() {
            if !plain_relative(name) || name == FLEET_FILE {
                return Err(SubmissionError::BadRequest(format!(
                    "`files`: `{name}` is not a plain relative path (no `..`, not absolute, not {FLEET_FILE})"
                )));
            }
        }
        Ok(s)
    }

    /// `cwd`, canonical, if it is a directory inside one of `roots`.
    pub fn cwd(&self, roots: &[PathBuf]) -> Result<Option<PathBuf>, SubmissionError> {
        let Some(cwd) = &self.cwd else {
            return Ok(None);
        };
        let refuse = |why: String| SubmissionError::BadRequest(format!("`cwd` `{cwd}`: {why}"));
        if roots.is_empty() {
            return Err(refuse(
                "this server takes no cwd (start it with --allow-root DIR)".into(),
            ));
        }
        let path = std::fs::canonicalize(cwd).map_err(|e| refuse(e.to_string()))?;
        if !path.is_dir() {
            return Err(refuse("not a directory".into()));
        }
        if !roots.iter().any(|r| path.starts_with(r)) {
            return Err(refuse(
                "not inside a root this server allows (--allow-root)".into(),
            ));
        }
        Ok(Some(path))
    }

    /// Write the fleet and its files into `input` (made). A file that cannot be
    /// written where its name says (a name too long, a directory in the way) is the
    /// client's error, naming it.
    pub fn write(&self, input: &Path) -> Result<(), SubmissionError> {
        let io =
            |e: std::io::Error| SubmissionError::Internal(format!("writing the submission: {e}"));
        std::fs::create_dir_all(input).map_err(io)?;
        std::fs::write(input.join(FLEET_FILE), &self.fleet).map_err(io)?;
        for (name, text) in &self.files {
            let path = input.join(name);
            let bad =
                |e: std::io::Error| SubmissionError::BadRequest(format!("`files`: `{name}`: {e}"));
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(bad)?;
            }
            std::fs::write(&path, text).map_err(bad)?;
        }
        Ok(())
    }

    /// Load and validate the fleet written into `input` without looking for its
    /// agents or a sandbox backend (a submitter's check of a fleet that runs on
    /// another host). With `roots`, the fleet is this host's to run: confined as a
    /// submitted fleet is ([`fleet::load_submitted`]: its sessions' `cwd` inside
    /// `roots`, its notices signed with its own secret). Its sessions are sandboxed
    /// as `confinement` says either way.
    pub(crate) async fn load_fleet(
        &self,
        input: &Path,
        cwd: Option<&Path>,
        roots: Option<&[PathBuf]>,
        confinement: &Confinement,
    ) -> Result<Loaded, SubmissionError> {
        let path = input.join(FLEET_FILE);
        let task = self.task.as_deref();
        let loaded = match roots {
            Some(roots) => fleet::load_submitted(&path, task, cwd, roots, confinement).await,
            None => fleet::load_confined(&path, task, confinement).await,
        };
        loaded.map_err(|errors| SubmissionError::InvalidFleet(findings(&errors, Some(input))))
    }

    /// Load and validate the fleet written into `input` to run it here, confined to
    /// `roots` and sandboxed as `confinement` says; a missing agent is a finding too
    /// (nothing would spawn), a sandbox this host cannot give is
    /// [`SubmissionError::NoSandbox`] (nothing runs unconfined).
    pub async fn load(
        &self,
        input: &Path,
        cwd: Option<&Path>,
        roots: &[PathBuf],
        confinement: &Confinement,
    ) -> Result<Loaded, SubmissionError> {
        runnable(
            self.load_fleet(input, cwd, Some(roots), confinement)
                .await?,
        )
    }
}

/// Load and validate the fleet file at `path` as `capfleet run` does (the local
/// user's own file, its relative paths its own, its sandbox its own), to run it
/// here; a missing agent is a finding too, a sandbox this host cannot give is
/// [`SubmissionError::NoSandbox`].
pub async fn load_file(path: &Path, task: Option<&str>) -> Result<Loaded, SubmissionError> {
    let loaded = fleet::load(path, task)
        .await
        .map_err(|errors| SubmissionError::InvalidFleet(findings(&errors, None)))?;
    runnable(loaded)
}

/// `loaded`, unless an agent of it is missing (nothing would spawn) or a session's
/// sandbox cannot be had here (nothing runs unconfined).
fn runnable(loaded: Loaded) -> Result<Loaded, SubmissionError> {
    let missing: Vec<Finding> = loaded
        .fleet
        .specs()
        .filter_map(|spec| {
            crate::agents::missing_agent(spec, "set the session's `argv` in the fleet")
        })
        .map(|message| Finding {
            origin: FLEET_FILE.into(),
            line: None,
            key: String::new(),
            message,
        })
        .collect();
    if !missing.is_empty() {
        return Err(SubmissionError::InvalidFleet(missing));
    }
    if let Some(why) = unconfinable(&loaded.fleet) {
        return Err(SubmissionError::NoSandbox(why));
    }
    Ok(loaded)
}

/// Why this host cannot give the first session that must run sandboxed its sandbox.
fn unconfinable(fleet: &fleet::Fleet) -> Option<String> {
    fleet.specs().find_map(|spec| {
        let sandbox = spec.launch.sandbox.as_ref()?;
        let e = availability().choose(sandbox.backend).err()?;
        Some(format!(
            "session {:?} must run sandboxed and this host cannot give it: {e} (install \
             bubblewrap, or run on a kernel with Landlock); it is not run unconfined",
            spec.name
        ))
    })
}

/// The findings, with the server's directories (`input`) taken out of their paths.
fn findings(errors: &FleetErrors, input: Option<&Path>) -> Vec<Finding> {
    let prefix = input.map(|i| format!("{}/", i.display()));
    let local = |s: &str| match &prefix {
        Some(p) => s.replace(p.as_str(), ""),
        None => s.to_owned(),
    };
    errors
        .errors
        .iter()
        .map(|e| {
            let at = e.location();
            Finding {
                origin: at.map_or_else(|| FLEET_FILE.into(), |l| local(&l.origin)),
                line: at.and_then(|l| l.line),
                key: at.map_or_else(String::new, |l| l.key.clone()),
                message: local(&e.to_string()),
            }
        })
        .collect()
}
