//! What a driver needs to start its agent, and why that can fail.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::process::{ChildStdin, ChildStdout};

use crate::manifest::Manifest;
use crate::process::lines::DEFAULT_MAX_LINE;
use crate::process::stderr_ring::{RingConfig, StderrRing};
use crate::process::{Io, ProcessGroup, SpawnSpec};
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

/// An agent started over pipes: its process group, its stdin and stdout, and the ring
/// its stderr drains into.
pub struct Spawned {
    pub group: ProcessGroup,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: StderrRing,
}

impl LaunchSpec {
    /// Start `argv` (program substituted per [`LaunchSpec::program_for`]) in `cwd`,
    /// in its own process group, marked for the sweep, with the launch environment on
    /// top of ours and stderr drained into a ring: the one way every pipe driver
    /// spawns its agent.
    pub fn spawn_piped(
        &self,
        argv: &[String],
        cwd: impl AsRef<std::path::Path>,
    ) -> Result<Spawned, LaunchError> {
        let Some((argv0, args)) = argv.split_first() else {
            return Err(LaunchError::Config {
                urn: self.urn.clone(),
                message: "empty command line".into(),
            });
        };
        let program = self.program_for(argv0);
        let mut spec = SpawnSpec::new(&program)
            .args(args)
            .cwd(cwd.as_ref())
            .stdio(Io::Piped, Io::Piped, Io::Piped)
            .marked(&self.urn);
        for (k, v) in &self.env {
            spec = spec.env(k, v);
        }
        let mut group = spec.spawn().map_err(|source| LaunchError::Spawn {
            urn: self.urn.clone(),
            program: program.display().to_string(),
            source,
        })?;
        let child = group.child();
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let stderr = match child.stderr.take() {
            Some(err) => StderrRing::spawn(err, RingConfig::default()).0,
            None => StderrRing::new(RingConfig::default()),
        };
        tracing::info!(urn = %self.urn, pgid = group.pgid(), ?argv, "agent spawned");
        Ok(Spawned {
            group,
            stdin,
            stdout,
            stderr,
        })
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
