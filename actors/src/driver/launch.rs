//! What a driver needs to start its agent, and why that can fail.

use std::path::PathBuf;
use std::sync::Arc;

use crate::manifest::Manifest;
use crate::process::lines::DEFAULT_MAX_LINE;
use crate::protocol::SessionConfig;

/// Everything a driver needs to (re)start its agent. Shared by every restart.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// The session's URN (`cap://<fleet>/<session>`), for logs and errors.
    pub urn: String,
    pub manifest: Arc<Manifest>,
    /// The config sent first (cwd, model, permission mode, …).
    pub config: SessionConfig,
    /// An argv given by the fleet or `chat --argv`, replacing the manifest's.
    pub argv: Option<Vec<String>>,
    /// Run this file wherever the argv names the manifest's `agent.binary`
    /// (an orchestrator running its own simulator passes its own executable).
    pub program: Option<PathBuf>,
    /// Extra environment on top of the orchestrator's own (never scrubbed).
    pub env: Vec<(String, String)>,
    /// The longest line accepted from the agent (longer: an error event).
    pub max_line: usize,
    /// Emit `cap.pty.raw_bytes` (PTY only; a separate opt-in stream, spec §6.1).
    pub raw_bytes: bool,
}

impl LaunchSpec {
    pub fn new(urn: impl Into<String>, manifest: Arc<Manifest>, config: SessionConfig) -> Self {
        LaunchSpec {
            urn: urn.into(),
            manifest,
            config,
            argv: None,
            program: None,
            env: Vec::new(),
            max_line: DEFAULT_MAX_LINE,
            raw_bytes: false,
        }
    }

    /// `argv[0]` with [`LaunchSpec::program`] substituted for the manifest's binary.
    pub fn program_for(&self, argv0: &str) -> PathBuf {
        match &self.program {
            Some(p) if argv0 == self.manifest.agent.binary => p.clone(),
            _ => PathBuf::from(argv0),
        }
    }
}

/// Why a driver could not start its agent.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{urn}: the manifest declares no {binding} command (fast_path.{binding})")]
    NoCommand { urn: String, binding: &'static str },
    #[error("{urn}: {message}")]
    Config { urn: String, message: String },
    #[error("{urn}: cannot start `{program}`: {source}")]
    Spawn {
        urn: String,
        program: String,
        #[source]
        source: std::io::Error,
    },
}
