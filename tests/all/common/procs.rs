//! `/proc` walks for process-hygiene checks. Zombies count as dead everywhere:
//! they hold no resources and are reaped by whoever inherits them.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One `/proc/PID/stat` line, the parts we need.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stat {
    pub pid: i32,
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
}

pub(crate) fn stat(pid: i32) -> Option<Stat> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp ...`; comm may contain spaces and parens.
    let rest = &s[s.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    Some(Stat {
        pid,
        state,
        ppid,
        pgrp,
    })
}

/// Every live (non-zombie) process.
pub(crate) fn all_processes() -> Vec<Stat> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .filter(|s| s.state != 'Z' && s.state != 'X')
        .collect()
}

/// True if `pid` exists and is not a zombie.
pub(crate) fn is_alive(pid: i32) -> bool {
    stat(pid).is_some_and(|s| s.state != 'Z' && s.state != 'X')
}

/// Live descendants of `pid` (children, grandchildren, …; not `pid` itself),
/// sorted. Processes already re-parented away (e.g. to pid 1) are not found:
/// use [`processes_with_env_marker`] for those.
pub(crate) fn descendants(pid: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for s in all_processes() {
        children.entry(s.ppid).or_default().push(s.pid);
    }
    let mut found = BTreeSet::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            if found.insert(c) {
                todo.push(c);
            }
        }
    }
    found.into_iter().collect()
}

/// Live members of process group `pgid`, sorted.
pub(crate) fn processes_in_group(pgid: i32) -> Vec<i32> {
    let mut v: Vec<i32> = all_processes()
        .into_iter()
        .filter(|s| s.pgrp == pgid)
        .map(|s| s.pid)
        .collect();
    v.sort_unstable();
    v
}

/// Live processes whose initial environment holds `KEY=VALUE`, sorted.
/// Set a unique marker on the agents a test starts (see [`EnvMarker`]) and
/// this finds them — and everything they spawned — wherever they were re-parented.
pub(crate) fn processes_with_env_marker(key: &str, value: &str) -> Vec<i32> {
    let needle = format!("{key}={value}").into_bytes();
    let me = std::process::id() as i32;
    let mut v: Vec<i32> = all_processes()
        .into_iter()
        .map(|s| s.pid)
        .filter(|&pid| pid != me)
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == needle.as_slice()))
        })
        .collect();
    v.sort_unstable();
    v
}

/// Resident set size of `pid` in KiB (`VmRSS` of `/proc/PID/status`); 0 when
/// the process is gone or has no memory (kernel thread, zombie).
pub(crate) fn rss_kib(pid: i32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// Peak resident set size of `pid` so far in KiB (`VmHWM`); 0 when it is gone.
pub(crate) fn hwm_kib(pid: i32) -> u64 {
    status_kib(pid, "VmHWM:")
}

fn status_kib(pid: i32, field: &str) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// Polls `cond` every `poll` until it holds (true) or `timeout` passes (false;
/// `cond` is checked one last time at the deadline).
pub(crate) fn wait_until(
    timeout: Duration,
    poll: Duration,
    mut cond: impl FnMut() -> bool,
) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep(poll.min(deadline - now));
    }
}

/// Wait for `child` at most `limit`; past it the child is killed and the test fails.
pub(crate) fn wait_within(
    child: &mut std::process::Child,
    limit: Duration,
) -> std::process::ExitStatus {
    let mut status = None;
    let done = wait_until(limit, Duration::from_millis(20), || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    if !done {
        let _ = child.kill();
        let _ = child.wait();
        panic!("pid {} still running after {limit:?}", child.id());
    }
    status.expect("exited")
}

/// Run `cmd` to its end within `limit` (stdout and stderr captured).
pub(crate) fn output_within(
    mut cmd: std::process::Command,
    limit: Duration,
) -> std::process::Output {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let status = wait_within(&mut child, limit);
    std::process::Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// SIGKILL to the whole process group `pgid` (errors ignored: it may be gone).
pub(crate) fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: plain syscall.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

/// A unique `KEY=VALUE` environment marker for the processes one test starts.
#[derive(Clone, Debug)]
pub(crate) struct EnvMarker {
    pub key: String,
    pub value: String,
}

impl EnvMarker {
    pub(crate) const KEY: &'static str = "CAPFLEET_TEST_MARKER";

    /// `CAPFLEET_TEST_MARKER=<label>-<pid>-<nanos>-<n>`, unique per call.
    pub(crate) fn new(label: &str) -> EnvMarker {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        EnvMarker {
            key: Self::KEY.to_string(),
            value: format!("{label}-{}-{nanos}-{n}", std::process::id()),
        }
    }

    /// For `Command::env(k, v)`.
    pub(crate) fn pair(&self) -> (&str, &str) {
        (self.key.as_str(), self.value.as_str())
    }

    /// Live processes carrying this marker.
    pub(crate) fn processes(&self) -> Vec<i32> {
        processes_with_env_marker(&self.key, &self.value)
    }

    /// Wait (30 s at most) until `n` processes or more carry this marker: `what`
    /// started.
    pub(crate) fn wait_for(&self, n: usize, what: &str) {
        assert!(
            wait_until(Duration::from_secs(30), Duration::from_millis(20), || self
                .processes()
                .len()
                >= n),
            "{what}: {} of {n} processes",
            self.processes().len()
        );
    }

    /// Wait (`within` at most) until no process carries this marker.
    pub(crate) fn wait_gone(&self, within: Duration, what: &str) {
        assert!(
            wait_until(within, Duration::from_millis(20), || self
                .processes()
                .is_empty()),
            "{what}: {:?}",
            self.processes()
        );
    }
}

/// `SIGKILL` to `pid` (a process the test started, or its keeper).
pub(crate) fn sigkill(pid: i32) {
    // SAFETY: kill(2) with a pid the caller owns.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Live processes whose `CAPFLEET_AGENT` marker names capfleet `pid`
/// (`<label>#<pid>.<n>`): every agent, terminal and test command that capfleet started.
pub(crate) fn processes_marked_by(pid: u32) -> Vec<i32> {
    let needle = format!("#{pid}.");
    all_processes()
        .into_iter()
        .map(|s| s.pid)
        .filter(|p| {
            fs::read(format!("/proc/{p}/environ")).is_ok_and(|env| {
                env.split(|&b| b == 0).any(|kv| {
                    kv.strip_prefix(b"CAPFLEET_AGENT=")
                        .is_some_and(|v| String::from_utf8_lossy(v).contains(&needle))
                })
            })
        })
        .collect()
}

/// The pid of capfleet `pid`'s keeper (`capfleet __keeper <pid>`), while it runs.
pub(crate) fn keeper_of(pid: u32) -> Option<i32> {
    let tail = format!("\0__keeper\0{pid}\0");
    all_processes().into_iter().map(|s| s.pid).find(|p| {
        fs::read(format!("/proc/{p}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).ends_with(&tail))
    })
}
