//! Child processes in their own process group, and killing that whole group.
//!
//! Every agent (and probe) runs as the leader of a new process group so that one
//! signal reaches it and everything it spawned. [`ProcessGroup::kill`] escalates:
//! SIGTERM to the group, up to a grace period, then SIGKILL, then reap.
//!
//! The rest of the plumbing every driver shares lives beside it: [`lines`] (bounded
//! line reading of agent stdout) and [`stderr_ring`] (the last lines of stderr, quoted
//! when an agent dies), and [`halt`] (how urgently agents are being ended: a stop
//! signal cuts every wait short at once), and [`keeper`] (the process that kills every
//! group still registered when capfleet dies, by whatever means), and [`members`] (who
//! is in a group: a group whose members left are all zombies is finished), and [`environ`] (the
//! variables no child inherits: the application's secrets), and [`sandbox`] (a
//! session's processes confined to its workspace: every spawn of a [`SpawnSpec`]
//! with [`SpawnSpec::confined`] runs inside).

pub(crate) mod environ;
pub mod halt;
pub mod keeper;
pub(crate) mod lines;
pub(crate) mod members;
pub mod sandbox;
pub(crate) mod stderr_ring;
pub mod sweep;

pub use environ::withhold;
pub use lines::{DEFAULT_MAX_LINE, LineConfig, LineItem, LineReader};

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::time::{Instant, sleep};

/// Default grace between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// How long to wait for a SIGKILLed group's members to stop running.
const KILL_SETTLE: Duration = Duration::from_secs(2);

const POLL: Duration = Duration::from_millis(20);

/// What a standard stream of the child is connected to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Io {
    #[default]
    Null,
    Piped,
    Inherit,
}

impl Io {
    fn stdio(self) -> Stdio {
        match self {
            Io::Null => Stdio::null(),
            Io::Piped => Stdio::piped(),
            Io::Inherit => Stdio::inherit(),
        }
    }
}

/// What to run. The user's environment is inherited but for the variables
/// [`environ`] withholds; `env` only adds or overrides.
#[derive(Debug, Clone, Default)]
pub struct SpawnSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: Option<PathBuf>,
    pub env: Vec<(OsString, OsString)>,
    pub stdin: Io,
    pub stdout: Io,
    pub stderr: Io,
    /// A unique value put in the environment as [`sweep::MARKER_KEY`], so processes
    /// that leave the group are still found and killed with it.
    pub marker: Option<String>,
    /// The sandbox the process runs in (see [`sandbox`]); `None`: unconfined.
    pub confined: Option<Arc<sandbox::Confined>>,
}

impl SpawnSpec {
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        SpawnSpec {
            program: program.as_ref().to_owned(),
            ..SpawnSpec::default()
        }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Run the process inside `confined` (`None`: unconfined).
    pub fn confined(mut self, confined: Option<Arc<sandbox::Confined>>) -> Self {
        self.confined = confined;
        self
    }

    pub fn stdio(mut self, stdin: Io, stdout: Io, stderr: Io) -> Self {
        (self.stdin, self.stdout, self.stderr) = (stdin, stdout, stderr);
        self
    }

    /// The command: new process group (`process_group(0)`), `kill_on_drop(true)`.
    pub fn command(&self) -> Command {
        let mut cmd = self.session_command();
        cmd.process_group(0);
        cmd
    }

    /// The command without `process_group(0)`, for a spawner that makes the child a
    /// session leader itself (a PTY: `setsid` fails in a process-group leader). A
    /// session leader leads its own group, so [`ProcessGroup::from_leader`] applies.
    pub fn session_command(&self) -> Command {
        let mut cmd = match &self.confined {
            Some(c) => c.command(&self.args),
            None => {
                let mut cmd = Command::new(&self.program);
                cmd.args(&self.args);
                cmd
            }
        };
        for name in environ::withheld() {
            cmd.env_remove(name);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(self.stdin.stdio())
            .stdout(self.stdout.stdio())
            .stderr(self.stderr.stdio())
            .kill_on_drop(true);
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        if let Some(m) = &self.marker {
            cmd.env(sweep::MARKER_KEY, m);
        }
        cmd
    }

    /// Mark the process tree with a fresh unique value (see [`sweep`]).
    pub fn marked(mut self, label: &str) -> Self {
        self.marker = Some(sweep::unique_marker(label));
        self
    }

    pub fn spawn(&self) -> io::Result<ProcessGroup> {
        let mut group = ProcessGroup::spawn(self.command())?;
        group.marker = self.marker.clone();
        group.confined = self.confined.clone();
        Ok(group)
    }
}

/// Where `program` would be found when spawned from `cwd` with `search` as `PATH`
/// (`None`: this process's `PATH`): a name without `/` is looked up on the path, one
/// with `/` is taken as it is (relative to `cwd`). `None` when it is not there, or
/// not an executable file.
pub fn find_program(
    program: &std::path::Path,
    cwd: &std::path::Path,
    search: Option<&OsStr>,
) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.components().count() > 1 || program.is_absolute() {
        let full = cwd.join(program);
        return executable(&full).then_some(full);
    }
    let path = search
        .map(OsStr::to_owned)
        .or_else(|| std::env::var_os("PATH"))?;
    std::env::split_paths(&path)
        .map(|dir| cwd.join(dir).join(program))
        .find(|p| executable(p))
}

/// Process groups alive (spawned and not yet dropped), for the metrics.
static LIVE_GROUPS: AtomicUsize = AtomicUsize::new(0);

/// How many process groups this process holds now (agents, their commands, probes).
pub fn live_groups() -> usize {
    LIVE_GROUPS.load(Ordering::Relaxed)
}

/// A child that leads its own process group.
#[derive(Debug)]
pub struct ProcessGroup {
    child: Child,
    pgid: i32,
    /// The group was killed and seen empty: nothing left to clean up on drop.
    settled: bool,
    /// The environment marker of the tree, when spawned [`SpawnSpec::marked`].
    marker: Option<String>,
    /// The marker sweep ran after the group was killed: drop need not repeat it.
    swept: bool,
    /// The sandbox it runs in, kept (its private `TMPDIR`) as long as the group.
    confined: Option<Arc<sandbox::Confined>>,
}

impl Drop for ProcessGroup {
    /// The last line of defence, for an owner dropped without its async cleanup (an
    /// actor killed outright): SIGKILL whatever is left of the group. tokio reaps the
    /// leader (`kill_on_drop`).
    fn drop(&mut self) {
        LIVE_GROUPS.fetch_sub(1, Ordering::Relaxed);
        if !self.settled {
            let _already_gone = signal_group(self.pgid, libc::SIGKILL);
            keeper::unregister(self.pgid);
        }
        if let Some(m) = self.marker.take().filter(|_| !self.swept) {
            // Off this thread and batched with other teardowns when a runtime is
            // there; a plain scan otherwise.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let _detached = rt.spawn(async move { sweep::kill_marked_shared(&m).await });
            } else {
                sweep::kill_marked(sweep::MARKER_KEY, &m);
            }
        }
    }
}

impl ProcessGroup {
    /// Spawn `cmd`, which must have been set up with `process_group(0)` (as
    /// [`SpawnSpec::command`] does): the child's pid is then its group id.
    pub fn spawn(mut cmd: Command) -> io::Result<Self> {
        Self::from_leader(cmd.spawn()?, None)
    }

    /// Adopt a child that already leads its own process group (spawned with
    /// `process_group(0)` or as a session leader); the group is registered with the
    /// [`keeper`] until this is dropped.
    pub fn from_leader(child: Child, marker: Option<String>) -> io::Result<Self> {
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("child exited before its pid was read"))?;
        let pgid = i32::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
        LIVE_GROUPS.fetch_add(1, Ordering::Relaxed);
        keeper::register(pgid);
        Ok(ProcessGroup {
            child,
            pgid,
            settled: false,
            marker,
            swept: false,
            confined: None,
        })
    }

    /// Keep `confined` (the sandbox the group was spawned in) as long as the group.
    pub fn holding(mut self, confined: Option<Arc<sandbox::Confined>>) -> Self {
        self.confined = confined;
        self
    }

    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// A test's read of the whole (piped) stdout, then the wait for the exit.
    #[cfg(test)]
    pub(crate) async fn stdout_to_end(&mut self) -> String {
        let mut out = String::new();
        let mut stdout = self.child().stdout.take().expect("piped");
        tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut out)
            .await
            .expect("read");
        self.wait().await.expect("wait");
        out
    }

    /// Wait for the leader to exit (does not wait for the rest of the group).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// SIGTERM the group, wait up to `grace`, then SIGKILL it; the leader is reaped.
    pub async fn kill(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        self.kill_with(libc::SIGTERM, grace).await
    }

    /// Like [`ProcessGroup::kill`] with a chosen first signal (e.g. `SIGINT`). The
    /// grace ends early when the process's [`halt::Urgency`] reaches `Force`.
    pub async fn kill_with(&mut self, first: i32, grace: Duration) -> io::Result<ExitStatus> {
        // ESRCH (group already gone) is fine: we still reap below.
        let _ignored = signal_group(self.pgid, first);
        // A stopped group (a chaos `hang`, a debugger) takes the signal only once it
        // runs again; continuing one that runs changes nothing.
        let _ignored = signal_group(self.pgid, libc::SIGCONT);
        let deadline = Instant::now() + grace;
        let mut status = None;
        loop {
            if status.is_none() {
                status = self.child.try_wait()?;
            }
            if status.is_some() && !group_alive(self.pgid) {
                break;
            }
            if Instant::now() >= deadline || halt::current() == halt::Urgency::Force {
                let _ignored = signal_group(self.pgid, libc::SIGKILL);
                break;
            }
            sleep(POLL).await;
        }
        let status = match status {
            Some(s) => s,
            None => self.child.wait().await?,
        };
        settle(self.pgid, KILL_SETTLE).await;
        self.settled = !group_alive(self.pgid);
        if self.settled {
            // Gone: its number may be reused, so the keeper must forget it now.
            keeper::unregister(self.pgid);
        }
        self.sweep_escaped().await;
        Ok(status)
    }

    /// Kill what carries the marker but left the group (daemons), and check that
    /// nothing of the tree survives.
    async fn sweep_escaped(&mut self) {
        let Some(m) = &self.marker else { return };
        let escaped = sweep::kill_marked_shared(m).await;
        self.swept = true;
        if escaped == 0 {
            return;
        }
        tracing::warn!(
            pgid = self.pgid,
            escaped,
            "killed processes that had left the agent's group"
        );
        let deadline = Instant::now() + KILL_SETTLE;
        while !sweep::processes_with_marker(sweep::MARKER_KEY, m).is_empty() {
            if Instant::now() >= deadline {
                tracing::error!(pgid = self.pgid, "processes of the agent survive SIGKILL");
                return;
            }
            sleep(POLL).await;
        }
    }
}

/// Kill a process group we do not hold a `Child` for: signal `first`, wait up to
/// `grace` for it to vanish, then SIGKILL. Returns true if the group is gone.
///
#[cfg(test)]
pub(crate) async fn kill_group(pgid: i32, first: i32, grace: Duration) -> bool {
    if signal_group(pgid, first).is_err() {
        return !group_alive(pgid);
    }
    let deadline = Instant::now() + grace;
    while group_alive(pgid) && Instant::now() < deadline {
        sleep(POLL).await;
    }
    if group_alive(pgid) {
        let _ignored = signal_group(pgid, libc::SIGKILL);
        settle(pgid, KILL_SETTLE).await;
    }
    !group_alive(pgid)
}

/// Wait up to `max` for a group to have no member running.
async fn settle(pgid: i32, max: Duration) {
    let deadline = Instant::now() + max;
    while group_alive(pgid) && Instant::now() < deadline {
        sleep(POLL).await;
    }
}

/// Send `sig` to every process of group `pgid`.
pub(crate) fn signal_group(pgid: i32, sig: i32) -> io::Result<()> {
    if pgid <= 1 {
        // killpg(0 or 1, ..) would hit our own group or everything we may signal.
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "refusing to signal process group <= 1",
        ));
    }
    // SAFETY: killpg has no memory-safety preconditions; pgid > 1 is checked above.
    let rc = unsafe { libc::killpg(pgid, sig) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// True while a process of group `pgid` runs: a group left with zombies only (not yet
/// reaped by whoever inherited them) is finished ([`members`] says why).
pub fn group_alive(pgid: i32) -> bool {
    !members::group_state(pgid).finished()
}

#[cfg(test)]
mod tests;
