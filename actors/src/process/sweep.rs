//! Finding an agent's processes that left its process group.
//!
//! A process group catches everything an agent spawns unless a descendant starts a
//! session or group of its own and outlives its parent (a daemon, such as Codex's
//! `app-server`, re-parented to init). Every agent is therefore spawned with a marker
//! in its environment (`CAPFLEET_AGENT=<urn>#<generation>`), which its descendants
//! inherit; after the group is killed, a sweep of `/proc` finds and kills whatever
//! still carries the marker.

use std::fs;

/// The environment variable carrying an agent's marker.
pub const MARKER_KEY: &str = "CAPFLEET_AGENT";

/// `<label>#<capfleet pid>.<n>`: unique among this machine's live processes.
pub fn unique_marker(label: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{label}#{}.{n}", std::process::id())
}

/// Pids of live processes whose environment holds `key=value` (zombies excluded).
pub fn processes_with_marker(key: &str, value: &str) -> Vec<i32> {
    let needle = format!("{key}={value}");
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| u32::try_from(pid).is_ok_and(|p| p != me))
        .filter(|&pid| !is_zombie(pid))
        .filter(|&pid| {
            fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        })
        .collect()
}

fn is_zombie(pid: i32) -> bool {
    // /proc/PID/stat: "pid (comm) S ..."; comm may hold spaces and parentheses.
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .map(|i| s[i + 1..].trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// SIGKILL every live process carrying the marker; returns how many were found.
pub fn kill_marked(key: &str, value: &str) -> usize {
    let pids = processes_with_marker(key, value);
    for &pid in &pids {
        // SAFETY: kill(2) has no memory-safety preconditions; pid > 0 (from /proc).
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    pids.len()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
