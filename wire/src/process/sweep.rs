//! Finding an agent's processes that left its process group.
//!
//! A process group catches everything an agent spawns unless a descendant starts a
//! session or group of its own and outlives its parent (a daemon, such as Codex's
//! `app-server`, re-parented to init). Every agent is therefore spawned with a marker
//! in its environment (`CAPFLEET_AGENT=<urn>#<generation>`), which its descendants
//! inherit; after the group is killed, a sweep of `/proc` finds and kills whatever
//! still carries the marker.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::oneshot;

use crate::sync::lock;

/// The environment variable carrying an agent's marker.
pub const MARKER_KEY: &str = "CAPFLEET_AGENT";

/// `<label>#<capfleet pid>.<n>`: unique among this machine's live processes.
pub(crate) fn unique_marker(label: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{label}#{}.{n}", std::process::id())
}

/// Pids of live processes whose environment holds `key=value` (zombies have no
/// environment left, so they never match).
pub fn processes_with_marker(key: &str, value: &str) -> Vec<i32> {
    scan(key, |v| v == value.as_bytes())
        .into_iter()
        .map(|(pid, _)| pid)
        .collect()
}

/// One pass over `/proc`: every other process whose environment has `key=<v>` with
/// `wanted(v)`, as (pid, v). Each process's environment is read once, whatever the
/// number of values looked for. (The chaos report looks for a run's orphans with it.)
pub fn scan(key: &str, wanted: impl Fn(&[u8]) -> bool) -> Vec<(i32, Vec<u8>)> {
    let prefix = format!("{key}=");
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| u32::try_from(pid).is_ok_and(|p| p != me))
        .filter_map(|pid| {
            // A zombie's (or a vanished process's) environ reads empty or fails.
            let env = fs::read(format!("/proc/{pid}/environ")).ok()?;
            let value = env
                .split(|b| *b == 0)
                .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))?;
            wanted(value).then(|| (pid, value.to_vec()))
        })
        .collect()
}

/// SIGKILL every live process carrying the marker; returns how many were found.
pub(crate) fn kill_marked(key: &str, value: &str) -> usize {
    let pids = processes_with_marker(key, value);
    pids.iter().for_each(|&pid| sigkill(pid));
    pids.len()
}

/// The capfleet pid a marker names: `<label>#<pid>.<n>` gives `pid`.
pub fn marker_owner(value: &[u8]) -> Option<u32> {
    let at = value.iter().rposition(|b| *b == b'#')?;
    let rest = &value[at + 1..];
    let dot = rest.iter().position(|b| *b == b'.')?;
    std::str::from_utf8(&rest[..dot]).ok()?.parse().ok()
}

/// SIGKILL every live process whose marker names `owner` as its capfleet (the
/// keeper's sweep once `owner` died); returns how many were found.
pub(crate) fn kill_marked_by(owner: u32) -> usize {
    let found = scan(MARKER_KEY, |v| marker_owner(v) == Some(owner));
    found.iter().for_each(|&(pid, _)| sigkill(pid));
    found.len()
}

/// SIGKILL every live process whose marker names a capfleet for which
/// `orphaned(pid)` holds (one that died and left them: what its keeper could not
/// reach); returns how many per such capfleet pid, sorted by pid.
pub fn kill_orphans(orphaned: impl Fn(u32) -> bool) -> Vec<(u32, usize)> {
    let mut per: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
    for (pid, value) in scan(MARKER_KEY, |v| marker_owner(v).is_some_and(&orphaned)) {
        sigkill(pid);
        if let Some(owner) = marker_owner(&value) {
            *per.entry(owner).or_default() += 1;
        }
    }
    per.into_iter().collect()
}

fn sigkill(pid: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions; pid > 0 (from /proc).
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Markers waiting for the next shared scan, and whether a scanning task runs.
struct Batch {
    waiting: Vec<(String, oneshot::Sender<usize>)>,
    scanning: bool,
}

static BATCH: Mutex<Batch> = Mutex::new(Batch {
    waiting: Vec::new(),
    scanning: false,
});

fn batch() -> MutexGuard<'static, Batch> {
    lock(&BATCH)
}

/// [`kill_marked`] for [`MARKER_KEY`], with concurrent callers sharing `/proc` scans:
/// a fleet tearing down a thousand sessions at once scans a few times, not a thousand
/// times a thousand processes. The scan runs off the async workers. Returns how many
/// processes carried `value`.
pub(crate) async fn kill_marked_shared(value: &str) -> usize {
    let (tx, rx) = oneshot::channel();
    let start = {
        let mut b = batch();
        b.waiting.push((value.to_owned(), tx));
        !std::mem::replace(&mut b.scanning, true)
    };
    if start {
        tokio::spawn(scan_batches());
    }
    match rx.await {
        Ok(n) => n,
        // The scanning task was dropped (its runtime shut down): scan alone.
        Err(_) => kill_marked(MARKER_KEY, value),
    }
}

/// Serves the waiting markers until none are left.
async fn scan_batches() {
    /// If this task is dropped mid-way (its runtime shut down), the next caller must be
    /// able to start a new one; the waiters it did not serve see their sender dropped
    /// and scan alone.
    struct Abandoned(bool);
    impl Drop for Abandoned {
        fn drop(&mut self) {
            if self.0 {
                let mut b = batch();
                b.scanning = false;
                b.waiting.clear();
            }
        }
    }
    let mut abandoned = Abandoned(true);
    loop {
        let waiting = {
            let mut b = batch();
            if b.waiting.is_empty() {
                b.scanning = false;
                abandoned.0 = false;
                return;
            }
            std::mem::take(&mut b.waiting)
        };
        let markers: HashSet<Vec<u8>> =
            waiting.iter().map(|(m, _)| m.as_bytes().to_vec()).collect();
        let found = tokio::task::spawn_blocking(move || {
            let found = scan(MARKER_KEY, |v| markers.contains(v));
            let mut per: HashMap<Vec<u8>, usize> = HashMap::new();
            for (pid, value) in found {
                sigkill(pid);
                *per.entry(value).or_default() += 1;
            }
            per
        })
        .await
        .unwrap_or_default();
        for (marker, tx) in waiting {
            let n = found.get(marker.as_bytes()).copied().unwrap_or(0);
            let _gone = tx.send(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_names_its_capfleet() {
        assert_eq!(marker_owner(b"cap://f/s#4242.7"), Some(4242));
        assert_eq!(marker_owner(b"label#with#hash#17.1"), Some(17));
        assert_eq!(marker_owner(b"no-pid"), None);
        assert_eq!(marker_owner(b"x#abc.1"), None);
        let m = unique_marker("cap://f/s");
        assert_eq!(marker_owner(m.as_bytes()), Some(std::process::id()));
    }

    #[tokio::test]
    async fn finds_and_kills_a_daemon_that_left_the_group() {
        let value = format!("sweep-test-{}", std::process::id());
        // The child starts its own session (setsid) and its parent exits at once:
        // a re-parented daemon outside our group.
        let status = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 30 >/dev/null 2>&1 < /dev/null &"])
            .env(MARKER_KEY, &value)
            .status()
            .expect("sh runs");
        assert!(status.success());
        // Wait until the daemon alone carries the marker (a subshell may briefly
        // carry it too before it execs).
        let mut found = Vec::new();
        for _ in 0..250 {
            found = processes_with_marker(MARKER_KEY, &value);
            if found.len() == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(found.len(), 1, "the daemon carries the marker: {found:?}");
        assert!(kill_marked(MARKER_KEY, &value) >= 1);
        let mut gone = false;
        for _ in 0..250 {
            if processes_with_marker(MARKER_KEY, &value).is_empty() {
                gone = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(gone, "killed daemon is gone");
    }

    #[tokio::test]
    async fn concurrent_shared_sweeps_kill_each_marker_and_only_it() {
        let base = format!("shared-sweep-{}", std::process::id());
        let (a, b, none) = (
            format!("{base}-a"),
            format!("{base}-b"),
            format!("{base}-none"),
        );
        for (value, daemons) in [(&a, 1), (&b, 2)] {
            for _ in 0..daemons {
                let status = std::process::Command::new("sh")
                    .args(["-c", "setsid sleep 30 >/dev/null 2>&1 < /dev/null &"])
                    .env(MARKER_KEY, value)
                    .status()
                    .expect("sh runs");
                assert!(status.success());
            }
        }
        // Settled: each daemon is `sleep` itself, past the shell's fork and `setsid`'s
        // exec (a process mid-exec is briefly counted twice or not at all).
        let sleeping = |pid: &i32| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
        };
        for (value, daemons) in [(&a, 1), (&b, 2)] {
            let mut found = Vec::new();
            for _ in 0..250 {
                found = processes_with_marker(MARKER_KEY, value);
                if found.len() == daemons && found.iter().all(sleeping) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            assert!(
                found.len() == daemons && found.iter().all(sleeping),
                "{daemons} sleeping daemons carrying {value}: {found:?}"
            );
        }
        let (ka, kb, kn) = tokio::join!(
            kill_marked_shared(&a),
            kill_marked_shared(&b),
            kill_marked_shared(&none)
        );
        assert_eq!(
            (ka, kb, kn),
            (1, 2, 0),
            "each caller gets its own marker's count"
        );
        for value in [&a, &b] {
            let mut gone = false;
            for _ in 0..250 {
                if processes_with_marker(MARKER_KEY, value).is_empty() {
                    gone = true;
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            assert!(gone, "every daemon carrying {value} was killed");
        }
    }
}
