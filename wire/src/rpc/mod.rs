//! The reverse RPC the orchestrator serves to its agents, shared by every binding:
//! `cap.fs.*` and `cap.terminal.*` of the coding profile (§4, §5), under `fs.scope`
//! (§7.1) and terminal vetting (§7.2). A binding maps its wire names onto these
//! (ACP: `fs/read_text_file` -> `cap.fs.read`, ...) and calls [`Rpc::call`].

pub(crate) mod audit;
pub(crate) mod error;
pub(crate) mod fs;
pub(crate) mod fs_open;
pub(crate) mod host;
pub(crate) mod scope;
pub(crate) mod terminal;
pub(crate) mod user_io;
pub(crate) mod vetting;
pub(crate) mod watch;

#[cfg(test)]
mod scope_tests;
#[cfg(test)]
mod terminal_tests;
#[cfg(test)]
mod watch_tests;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub use audit::Audited;
use audit::audited_path;
pub(crate) use audit::{AuditAction, RULE_UNATTENDED};
pub(crate) use error::RpcError;
pub(crate) use host::Host;
pub(crate) use scope::Scope;
pub use terminal::TermConfig;
pub(crate) use terminal::Terminals;
pub(crate) use vetting::Vet;
pub(crate) use watch::{WatchConfig, Watches};

use crate::manifest::{CodingCaps, FsScope};
use crate::tomldoc::Wire as _;

/// A terminal command waiting for the user's approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandApproval {
    pub command_line: String,
    pub cwd: String,
}

/// Who answers [`Vet::Ask`]: the binding turns it into a `cap.permission.request`.
pub trait Approver: Send + Sync {
    fn approve(&self, req: CommandApproval) -> Pin<Box<dyn Future<Output = bool> + Send>>;
}

/// The reverse RPC endpoint of one session.
pub struct Rpc {
    caps: CodingCaps,
    scope: Scope,
    /// The session cwd, resolved: terminals start here unless told otherwise.
    cwd: std::path::PathBuf,
    terminals: Terminals,
    read_cap: u64,
    approver: Arc<dyn Approver>,
    watches: Watches,
    /// The session side of `cap.fs.watch`, `cap.user_io.*`, `cap.notify`.
    host: Option<Arc<dyn Host>>,
}

#[derive(Deserialize)]
struct WatchParams {
    path: String,
    #[serde(default)]
    recursive: bool,
}

#[derive(Deserialize)]
struct TermId {
    #[serde(alias = "terminalId")]
    terminal_id: String,
    #[serde(default)]
    since_byte: Option<u64>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    signal: Option<String>,
}

#[derive(Deserialize)]
struct CwdOnly {
    #[serde(default)]
    cwd: Option<String>,
}

fn params<T: DeserializeOwned>(v: Value) -> Result<T, RpcError> {
    serde_json::from_value(v).map_err(|e| RpcError::InvalidParams(e.to_string()))
}

impl Rpc {
    /// The endpoint of a session in `cwd` with the manifest's coding caps.
    pub fn new(
        caps: CodingCaps,
        cwd: &Path,
        term: TermConfig,
        approver: Arc<dyn Approver>,
    ) -> Result<Self, RpcError> {
        let scope = Scope::new(caps.fs.scope.unwrap_or(FsScope::WorkspaceOnly), cwd)?;
        let mut term = term;
        if term.concurrent_max.is_none() {
            term.concurrent_max = caps.terminal.concurrent_max;
        }
        let cwd = scope::resolve(cwd);
        Ok(Rpc {
            caps,
            scope,
            cwd,
            terminals: Terminals::new(term),
            read_cap: fs::DEFAULT_READ_CAP,
            approver,
            watches: Watches::new(WatchConfig::default()),
            host: None,
        })
    }

    /// Serve the session-facing methods (watch, user_io, notify) through `host`.
    pub fn with_host(mut self, host: Arc<dyn Host>, watch: WatchConfig) -> Self {
        self.host = Some(host);
        self.watches = Watches::new(watch);
        self
    }

    fn host(&self) -> Result<&Arc<dyn Host>, RpcError> {
        self.host
            .as_ref()
            .ok_or(RpcError::Unsupported("a session host"))
    }

    pub fn caps(&self) -> &CodingCaps {
        &self.caps
    }

    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    pub fn terminals(&self) -> &Terminals {
        &self.terminals
    }

    fn need(&self, flag: bool, what: &'static str) -> Result<(), RpcError> {
        if flag {
            Ok(())
        } else {
            Err(RpcError::Unsupported(what))
        }
    }

    fn need_terminal(&self) -> Result<(), RpcError> {
        if self.caps.terminal.enabled {
            Ok(())
        } else {
            Err(RpcError::TerminalUnavailable(
                "terminal.enabled is false".into(),
            ))
        }
    }

    /// Serve one call by its CAP method name.
    pub async fn call(&self, method: &str, p: Value) -> Result<Value, RpcError> {
        let f = &self.caps.fs;
        match method {
            "cap.fs.read" => {
                self.need(f.read, "fs.read")?;
                let (scope, cap, p) = (self.scope.clone(), self.read_cap, params(p)?);
                blocking(move || fs::read(&scope, &p, cap)).await?
            }
            "cap.fs.write" => {
                self.need(f.write, "fs.write")?;
                let (scope, p): (_, fs::WriteParams) = (self.scope.clone(), params(p)?);
                let asked = p.content.len() as u64;
                // The path is resolved for the audit on the fs worker, with the write.
                let (path, result) =
                    blocking(move || (audited_path(&scope, &p.path), fs::write(&scope, &p)))
                        .await?;
                let bytes = result
                    .as_ref()
                    .ok()
                    .and_then(|v| v["bytes_written"].as_u64());
                let action = AuditAction::FsWrite {
                    path,
                    bytes: bytes.unwrap_or(asked),
                };
                self.audit(action, self.fs_rule("fs.write"), &result).await;
                result
            }
            "cap.fs.list" => {
                self.need(f.list, "fs.list")?;
                let (scope, p) = (self.scope.clone(), params(p)?);
                blocking(move || fs::list(&scope, &p)).await?
            }
            "cap.fs.exists" => {
                self.need(f.exists, "fs.exists")?;
                fs::exists(&self.scope, &params(p)?)
            }
            "cap.fs.delete" => {
                self.need(f.delete, "fs.delete")?;
                let (scope, p): (_, fs::PathParams) = (self.scope.clone(), params(p)?);
                let recursive = p.recursive.unwrap_or(false);
                // Resolved before the delete, on the fs worker with it.
                let (path, result) =
                    blocking(move || (audited_path(&scope, &p.path), fs::delete(&scope, &p)))
                        .await?;
                let action = AuditAction::FsDelete { path, recursive };
                self.audit(action, self.fs_rule("fs.delete"), &result).await;
                result
            }
            "cap.fs.watch" => {
                self.need(f.watch, "fs.watch")?;
                let w: WatchParams = params(p)?;
                let root = self.scope.check(&w.path)?;
                self.watches.watch(root, w.recursive, self.host()?.clone())
            }
            "cap.user_io.show" | "cap.notify" => {
                user_io::show(self.host()?, method, params(p)?).await
            }
            "cap.user_io.input" => user_io::input(self.host()?, params(p)?).await,
            "cap.terminal.create" => self.create_terminal(p).await,
            "cap.terminal.output" => {
                self.need_terminal()?;
                let t: TermId = params(p)?;
                self.terminals.output(&t.terminal_id, t.since_byte)
            }
            "cap.terminal.wait" => {
                self.need_terminal()?;
                let t: TermId = params(p)?;
                let timeout = t.timeout_ms.map(Duration::from_millis);
                self.terminals.wait(&t.terminal_id, timeout).await
            }
            "cap.terminal.kill" => {
                self.need_terminal()?;
                let t: TermId = params(p)?;
                let signal = t.signal.as_deref().unwrap_or("SIGTERM").to_owned();
                let result = self
                    .terminals
                    .kill(&t.terminal_id, t.signal.as_deref())
                    .map(|()| json!({ "ok": true }));
                self.audit_kill(t.terminal_id, signal, &result).await;
                result
            }
            "cap.terminal.release" => {
                self.need_terminal()?;
                let t: TermId = params(p)?;
                let was_running = self.terminals.running(&t.terminal_id);
                let result = self
                    .terminals
                    .release(&t.terminal_id)
                    .map(|()| json!({ "ok": true }));
                if was_running {
                    let signal = "SIGTERM (release)".to_owned();
                    self.audit_kill(t.terminal_id, signal, &result).await;
                }
                result
            }
            other => Err(RpcError::MethodNotFound(other.to_owned())),
        }
    }

    /// Vet, check the cwd, ask when needed, then spawn; a deny never spawns.
    async fn create_terminal(&self, p: Value) -> Result<Value, RpcError> {
        self.need_terminal()?;
        let cwd: CwdOnly = params(p.clone())?;
        let mut create: terminal::CreateParams = params(p)?;
        let cwd = match cwd.cwd {
            Some(c) => self.scope.check(&c)?,
            None => self.cwd.clone(),
        };
        let line = vetting::command_line(&create.command, &create.args);
        let mut action = AuditAction::TerminalCreate {
            command: line.clone(),
            cwd: cwd.display().to_string(),
            terminal_id: None,
        };
        let (rule, allowed) = match vetting::vet(&self.caps, &create.command, &create.args) {
            Vet::Deny(why) => (why.clone(), Err(RpcError::Denied(why))),
            Vet::Ask => {
                let req = CommandApproval {
                    command_line: line.clone(),
                    cwd: cwd.display().to_string(),
                };
                let mode = self.caps.tool_permission.wire();
                if self.approver.approve(req).await {
                    (
                        format!("approved on request (tool_permission = {mode:?})"),
                        Ok(()),
                    )
                } else {
                    let why = format!("the user denied {line:?}");
                    let rule = format!("denied on request (tool_permission = {mode:?})");
                    (rule, Err(RpcError::Denied(why)))
                }
            }
            Vet::Allow(rule) => (rule, Ok(())),
        };
        let result = allowed.and_then(|()| {
            tracing::info!(command = %line, cwd = %cwd.display(), "terminal spawn");
            create.cwd = Some(cwd);
            self.terminals.create(create)
        });
        if let (AuditAction::TerminalCreate { terminal_id, .. }, Ok(id)) = (&mut action, &result) {
            *terminal_id = Some(id.clone());
        }
        let result = result.map(|id| json!({ "terminal_id": id }));
        self.audit(action, rule, &result).await;
        result
    }

    async fn audit_kill(
        &self,
        terminal_id: String,
        signal: String,
        result: &Result<Value, RpcError>,
    ) {
        let action = AuditAction::TerminalKill {
            command: self.terminals.command(&terminal_id),
            terminal_id,
            signal,
        };
        self.audit(action, "the agent's own terminal".to_owned(), result)
            .await;
    }
}

impl Drop for Rpc {
    fn drop(&mut self) {
        self.terminals.kill_all();
    }
}

/// Run filesystem work off the runtime's threads.
async fn blocking<T, F>(f: F) -> Result<T, RpcError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RpcError::Io(format!("fs worker failed: {e}")))
}
