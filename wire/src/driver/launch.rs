//! What a driver needs to start its agent, the shape it reaches the agent in, and
//! why that can fail.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::process::{ChildStdin, ChildStdout};

use crate::chaos::conn::ConnFaults;
use crate::chaos::interpose::{self, ByteFaults, FrameMode};
use crate::manifest::Manifest;
use crate::process::sandbox::{Confined, Sandbox, SandboxError, SandboxSpec};
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
    /// The longest line accepted from the agent, on every binding (longer: dropped
    /// as it streams past, a `cap.error` `parse_failed`); the manifest's
    /// `limits.max_line_bytes` unless the builder of the spec sets another.
    pub max_line: usize,
    /// Emit `cap.pty.raw_bytes` (PTY only; a separate opt-in stream, spec §6.1).
    pub raw_bytes: bool,
    /// How the agent is reached: an engine option (no manifest key), set by whoever
    /// builds the spec for a binding that needs another shape than one process.
    pub shape: Shape,
    /// A chaos run's byte faults on this session: its agent's pipes (or terminal) go
    /// through the interposer ([`crate::chaos::interpose`]). `None` (every run without
    /// `[chaos]`): no interposer at all.
    pub byte_faults: Option<ByteFaults>,
    /// A chaos run's connection faults on this session (A2A): its requests go through
    /// a fault proxy ([`crate::chaos::conn`]). `None`: straight to the peer.
    pub conn_faults: Option<ConnFaults>,
    /// `sandbox = "workspace"`: every process of the session (agent, terminals) runs
    /// confined to its workspace, `config.cwd` ([`crate::process::sandbox`]).
    pub sandbox: Option<SandboxSpec>,
}

/// The shapes of agent a driver reaches: each binding's wire admits some of them
/// ([`super::wire::Wire::admits`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Shape {
    /// One long-lived process per session: its end of output is its death (or, at
    /// status 0, its end).
    #[default]
    LongLived,
    /// One process per turn (`codex exec --json`, `claude -p --resume <id>`): a clean
    /// end of output ends the turn, not the session; the next prompt starts the next
    /// process, resuming the conversation. Its crash mid-turn is a death.
    PerTurn,
    /// No process of ours: a connection to a peer already listening at this address,
    /// speaking the binding's wire. Its loss is the death; a restart reconnects.
    Connect(SocketAddr),
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shape::LongLived => f.write_str("one process per session"),
            Shape::PerTurn => f.write_str("one process per turn"),
            Shape::Connect(addr) => write!(f, "a connection to {addr}"),
        }
    }
}

impl LaunchSpec {
    pub fn new(urn: impl Into<String>, manifest: Arc<Manifest>, config: SessionConfig) -> Self {
        let max_line = usize::try_from(manifest.limits.max_line_bytes).unwrap_or(usize::MAX);
        LaunchSpec {
            urn: urn.into(),
            manifest,
            config,
            argv: None,
            program: None,
            env: Vec::new(),
            max_line,
            raw_bytes: false,
            shape: Shape::LongLived,
            byte_faults: None,
            conn_faults: None,
            sandbox: None,
        }
    }

    /// The session's sandbox resolved for its workspace (`None`: unconfined).
    pub fn resolved_sandbox(&self) -> Result<Option<Sandbox>, LaunchError> {
        let Some(spec) = &self.sandbox else {
            return Ok(None);
        };
        let cwd = std::path::Path::new(&self.config.cwd);
        Sandbox::resolve(spec, cwd, &self.manifest.sandbox)
            .map(Some)
            .map_err(|e| self.sandbox_error(e))
    }

    /// The confinement `program` is spawned in (`None`: unconfined).
    pub fn confine(&self, program: &std::path::Path) -> Result<Option<Arc<Confined>>, LaunchError> {
        let Some(sandbox) = self.resolved_sandbox()? else {
            return Ok(None);
        };
        let confined = sandbox
            .confine(program)
            .map_err(|e| self.sandbox_error(e))?;
        tracing::debug!(urn = %self.urn, backend = %sandbox.backend, "agent confined");
        Ok(Some(Arc::new(confined)))
    }

    fn sandbox_error(&self, e: SandboxError) -> LaunchError {
        LaunchError::Config {
            urn: self.urn.clone(),
            message: e.to_string(),
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

impl LaunchSpec {
    /// The program this launch starts: the first word of the argv override, else the
    /// manifest's `agent.binary` (with [`LaunchSpec::program`] substituted).
    pub fn program(&self) -> PathBuf {
        let argv0 = self
            .argv
            .as_ref()
            .and_then(|a| a.first())
            .unwrap_or(&self.manifest.agent.binary);
        self.program_for(argv0)
    }

    /// The error of a launch whose program is not there (not on the agent's `PATH`,
    /// or a path that does not exist or is not executable); `None` when it is, or
    /// when the shape starts no process.
    pub fn missing_program(&self) -> Option<LaunchError> {
        if matches!(self.shape, Shape::Connect(_)) {
            return None;
        }
        let program = self.program();
        let search = self
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::ffi::OsStr::new(v.as_str()));
        let cwd = std::path::Path::new(&self.config.cwd);
        if crate::process::find_program(&program, cwd, search).is_some() {
            return None;
        }
        Some(LaunchError::NotFound {
            urn: self.urn.clone(),
            agent: self.manifest.agent.name.clone(),
            on_path: program.components().count() == 1 && !program.is_absolute(),
            program: program.display().to_string(),
        })
    }
}

/// An agent's stdin as its driver writes it: through the chaos interposer when the
/// run has byte faults, else the bare pipe.
pub(crate) type AgentStdin = interpose::Writer<ChildStdin>;
/// An agent's stdout as its driver reads it (see [`AgentStdin`]).
pub(crate) type AgentStdout = interpose::Reader<ChildStdout>;

/// An agent started over pipes: its process group, its stdin and stdout, and the ring
/// its stderr drains into.
pub struct Spawned {
    pub group: ProcessGroup,
    pub stdin: Option<AgentStdin>,
    pub stdout: Option<AgentStdout>,
    pub stderr: StderrRing,
}

impl LaunchSpec {
    /// Start `argv` (program substituted per [`LaunchSpec::program_for`]) in `cwd`,
    /// in its own process group, marked for the sweep, with the launch environment on
    /// top of ours and stderr drained into a ring, its stdin and stdout through the
    /// chaos interposer when the launch has [`LaunchSpec::byte_faults`]: the one way
    /// every pipe driver spawns its agent.
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
            .marked(&self.urn)
            .confined(self.confine(&program)?);
        for (k, v) in &self.env {
            spec = spec.env(k, v);
        }
        let mut group = spec.spawn().map_err(|source| LaunchError::Spawn {
            urn: self.urn.clone(),
            program: program.display().to_string(),
            source,
        })?;
        let child = group.child();
        let faults = self.byte_faults.as_ref();
        let stdin = child.stdin.take().map(|i| interpose::writer(faults, i));
        let stdout = (child.stdout.take()).map(|o| interpose::reader(faults, o, FrameMode::Lines));
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

impl LaunchSpec {
    /// Connect to a peer listening at `addr` (the [`Shape::Connect`] shape): the read
    /// and write halves of the connection.
    pub async fn connect(
        &self,
        addr: SocketAddr,
    ) -> Result<(OwnedReadHalf, OwnedWriteHalf), LaunchError> {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|source| LaunchError::Connect {
                urn: self.urn.clone(),
                addr,
                source,
            })?;
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(urn = %self.urn, "TCP_NODELAY: {e}");
        }
        tracing::info!(urn = %self.urn, %addr, "connected to the agent");
        Ok(stream.into_split())
    }
}

/// Why a driver could not start its agent.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{urn}: the manifest declares no {binding} command (fast_path.{binding})")]
    NoCommand { urn: String, binding: &'static str },
    #[error("{urn}: {message}")]
    Config { urn: String, message: String },
    /// The agent's program is not there: no restart can help (see
    /// [`crate::supervision::ExitCause::CannotStart`]).
    #[error("{urn}: agent `{agent}`: {}", if *on_path { format!("binary `{program}` is not on PATH") } else { format!("`{program}` does not exist or is not executable") })]
    NotFound {
        urn: String,
        agent: String,
        program: String,
        /// Looked up on `PATH` (a bare name), rather than a path.
        on_path: bool,
    },
    #[error("{urn}: cannot start `{program}`: {source}")]
    Spawn {
        urn: String,
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{urn}: cannot connect to {addr}: {source}")]
    Connect {
        urn: String,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}
