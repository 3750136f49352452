//! `cap.terminal.*` (coding §5): commands the agent asks the orchestrator to run.
//!
//! Each terminal is a process group (shared [`crate::process`] plumbing) whose stdout
//! and stderr are retained up to a byte limit (the oldest bytes go first, `truncated`
//! says so; offsets stay absolute). Kill is SIGTERM then SIGKILL after the grace. A
//! released terminal's buffer stays queryable for the retention time, then is freed.

use std::collections::{HashMap, VecDeque};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::error::RpcError;
use crate::process::sandbox::Sandbox;
use crate::process::{DEFAULT_GRACE, Io, SpawnSpec};
use crate::sync::lock;

/// Limits of the terminals of one session.
#[derive(Debug, Clone)]
pub struct TermConfig {
    /// Bytes of output retained per terminal when the request sets no limit.
    pub output_limit: usize,
    /// How long a released terminal's buffer stays queryable (spec: 60 s).
    pub retention: Duration,
    pub concurrent_max: Option<u32>,
    /// SIGTERM -> SIGKILL grace (spec: 5 s).
    pub kill_grace: Duration,
    /// The session's sandbox: every terminal runs inside it.
    pub sandbox: Option<Arc<Sandbox>>,
}

impl Default for TermConfig {
    fn default() -> Self {
        TermConfig {
            output_limit: 1024 * 1024,
            retention: Duration::from_secs(60),
            concurrent_max: None,
            kill_grace: DEFAULT_GRACE,
            sandbox: None,
        }
    }
}

/// `env` as CAP (`{k: v}`) or ACP (`[{name, value}]`) spells it.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum EnvParam {
    Map(HashMap<String, String>),
    List(Vec<EnvVar>),
}

#[derive(Debug, Deserialize)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Deserialize)]
pub struct CreateParams {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Already checked against the scope by the caller.
    #[serde(skip)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub env: Option<EnvParam>,
    #[serde(default, alias = "outputByteLimit")]
    pub output_byte_limit: Option<u64>,
}

/// How a terminal ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Killed by the orchestrator (not at the agent's request).
    pub by_orchestrator: bool,
}

#[derive(Debug, Default)]
struct Buf {
    data: VecDeque<u8>,
    /// Bytes dropped from the front (so offsets stay absolute).
    dropped: u64,
    truncated: bool,
}

#[derive(Debug)]
struct Term {
    /// The command line, for the audit of a kill.
    command: String,
    buf: Mutex<Buf>,
    limit: usize,
    exit: watch::Receiver<Option<Exit>>,
    kill: mpsc::Sender<(i32, bool)>,
    released_at: Mutex<Option<Instant>>,
}

/// The terminals of one session.
#[derive(Debug)]
pub struct Terminals {
    cfg: TermConfig,
    next: AtomicU64,
    map: Mutex<HashMap<String, Arc<Term>>>,
}

impl Terminals {
    pub fn new(cfg: TermConfig) -> Self {
        Terminals {
            cfg,
            next: AtomicU64::new(1),
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Free released terminals whose retention has passed.
    fn purge(&self) {
        let now = Instant::now();
        lock(&self.map).retain(|_, t| {
            lock(&t.released_at).is_none_or(|at| now.duration_since(at) < self.cfg.retention)
        });
    }

    fn get(&self, id: &str) -> Result<Arc<Term>, RpcError> {
        self.purge();
        lock(&self.map)
            .get(id)
            .cloned()
            .ok_or_else(|| RpcError::InvalidParams(format!("unknown terminal {id:?}")))
    }

    /// `cap.terminal.create` (vetting and the cwd scope check happened before).
    pub fn create(&self, p: CreateParams) -> Result<String, RpcError> {
        self.purge();
        if let Some(max) = self.cfg.concurrent_max {
            let running = lock(&self.map)
                .values()
                .filter(|t| t.exit.borrow().is_none() && lock(&t.released_at).is_none())
                .count();
            if running >= max as usize {
                return Err(RpcError::TerminalUnavailable(format!(
                    "terminal.concurrent_max = {max} reached"
                )));
            }
        }
        // Marked: what leaves the terminal's group is still found (and by the keeper,
        // should capfleet die).
        let confined = match &self.cfg.sandbox {
            Some(s) => Some(Arc::new(s.confine(Path::new(&p.command)).map_err(|e| {
                RpcError::TerminalUnavailable(format!("cannot confine {:?}: {e}", p.command))
            })?)),
            None => None,
        };
        let mut spec = SpawnSpec::new(&p.command)
            .args(&p.args)
            .stdio(Io::Null, Io::Piped, Io::Piped)
            .marked("terminal")
            .confined(confined);
        if let Some(cwd) = &p.cwd {
            spec = spec.cwd(cwd);
        }
        match p.env {
            Some(EnvParam::Map(m)) => spec
                .env
                .extend(m.into_iter().map(|(k, v)| (k.into(), v.into()))),
            Some(EnvParam::List(l)) => spec
                .env
                .extend(l.into_iter().map(|e| (e.name.into(), e.value.into()))),
            None => {}
        }
        let mut pg = spec.spawn().map_err(|e| {
            RpcError::TerminalUnavailable(format!("cannot run {:?}: {e}", p.command))
        })?;
        let limit = p.output_byte_limit.map_or(self.cfg.output_limit, |l| {
            usize::try_from(l).unwrap_or(usize::MAX)
        });
        let (exit_tx, exit_rx) = watch::channel(None);
        let (kill_tx, mut kill_rx) = mpsc::channel::<(i32, bool)>(4);
        let term = Arc::new(Term {
            command: super::vetting::command_line(&p.command, &p.args),
            buf: Mutex::new(Buf::default()),
            limit,
            exit: exit_rx,
            kill: kill_tx,
            released_at: Mutex::new(None),
        });
        let readers: Vec<_> = [
            pg.child()
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            pg.child()
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        ]
        .into_iter()
        .flatten()
        .map(|r| tokio::spawn(pump(r, term.clone())))
        .collect();
        let grace = self.cfg.kill_grace;
        tokio::spawn(async move {
            let mut by_orchestrator = false;
            let status = tokio::select! {
                s = pg.wait() => s,
                Some((sig, by)) = kill_rx.recv() => {
                    by_orchestrator = by;
                    let grace = if sig == libc::SIGKILL { Duration::ZERO } else { grace };
                    pg.kill_with(sig, grace).await
                }
            };
            for r in readers {
                let _joined = r.await;
            }
            let exit = match status {
                Ok(s) => Exit {
                    code: s.code(),
                    signal: s.signal(),
                    by_orchestrator,
                },
                Err(_) => Exit {
                    code: None,
                    signal: None,
                    by_orchestrator,
                },
            };
            let _nobody_left = exit_tx.send(Some(exit));
        });
        let id = format!("term-{}", self.next.fetch_add(1, Ordering::Relaxed));
        lock(&self.map).insert(id.clone(), term);
        Ok(id)
    }

    /// `cap.terminal.output`: output from `since_byte` (absolute), and the exit if any.
    pub fn output(&self, id: &str, since_byte: Option<u64>) -> Result<Value, RpcError> {
        let t = self.get(id)?;
        let exit = *t.exit.borrow();
        let b = lock(&t.buf);
        let next = b.dropped + b.data.len() as u64;
        let from = since_byte.unwrap_or(b.dropped).max(b.dropped).min(next);
        let skip = usize::try_from(from - b.dropped).unwrap_or(0);
        let bytes: Vec<u8> = b.data.iter().skip(skip).copied().collect();
        let mut v = json!({
            "output": String::from_utf8_lossy(&bytes),
            "next_byte": next,
            "truncated": b.truncated,
        });
        if let Some(e) = exit {
            v["exit_code"] = json!(e.code);
            v["signal"] = json!(e.signal.map(signal_name));
            v["killed"] = json!(e.by_orchestrator);
        }
        Ok(v)
    }

    /// `cap.terminal.wait`: the exit, or `timed_out` after `timeout`.
    pub async fn wait(&self, id: &str, timeout: Option<Duration>) -> Result<Value, RpcError> {
        let t = self.get(id)?;
        let mut rx = t.exit.clone();
        let waited = async { rx.wait_for(Option::is_some).await.ok().and_then(|e| *e) };
        let exit = match timeout {
            Some(d) => match tokio::time::timeout(d, waited).await {
                Ok(e) => e,
                Err(_) => {
                    let mut v = self.output(id, None)?;
                    v["timed_out"] = json!(true);
                    return Ok(v);
                }
            },
            None => waited.await,
        };
        match exit {
            Some(e) if e.by_orchestrator => Err(RpcError::TerminalKilled),
            _ => self.output(id, None),
        }
    }

    /// The command line of a terminal this session knows.
    pub fn command(&self, id: &str) -> Option<String> {
        self.get(id).ok().map(|t| t.command.clone())
    }

    /// Is this terminal's command still running (and not released)?
    pub fn running(&self, id: &str) -> bool {
        self.get(id)
            .is_ok_and(|t| t.exit.borrow().is_none() && lock(&t.released_at).is_none())
    }

    /// `cap.terminal.kill` at the agent's request (`signal` defaults to SIGTERM).
    pub fn kill(&self, id: &str, signal: Option<&str>) -> Result<(), RpcError> {
        let sig = match signal.unwrap_or("SIGTERM") {
            "SIGTERM" => libc::SIGTERM,
            "SIGKILL" => libc::SIGKILL,
            "SIGINT" => libc::SIGINT,
            other => return Err(RpcError::InvalidParams(format!("unknown signal {other:?}"))),
        };
        let t = self.get(id)?;
        let _already_exiting = t.kill.try_send((sig, false));
        Ok(())
    }

    /// `cap.terminal.release`: kill if running; the buffer stays for the retention.
    pub fn release(&self, id: &str) -> Result<(), RpcError> {
        let t = self.get(id)?;
        if t.exit.borrow().is_none() {
            let _already_exiting = t.kill.try_send((libc::SIGTERM, false));
        }
        lock(&t.released_at).get_or_insert_with(Instant::now);
        Ok(())
    }

    /// The orchestrator kills every running terminal (session end, cancel).
    pub fn kill_all(&self) {
        for t in lock(&self.map).values() {
            if t.exit.borrow().is_none() {
                let _already_exiting = t.kill.try_send((libc::SIGTERM, true));
            }
        }
    }
}

fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGINT => "SIGINT".into(),
        n => format!("SIG{n}"),
    }
}

/// Copy one output stream into the terminal's bounded buffer.
async fn pump(mut r: Box<dyn tokio::io::AsyncRead + Send + Unpin>, t: Arc<Term>) {
    let mut chunk = vec![0u8; 64 * 1024];
    while let Ok(n) = r.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        let mut b = lock(&t.buf);
        b.data.extend(&chunk[..n]);
        let over = b.data.len().saturating_sub(t.limit);
        if over > 0 {
            b.data.drain(..over);
            b.dropped += over as u64;
            b.truncated = true;
        }
    }
}
