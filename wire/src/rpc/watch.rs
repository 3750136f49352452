//! `cap.fs.watch` (coding §4.6): a subscription polls its path (a file, or a
//! directory and, with `recursive`, its subtree; symlinks are not followed) and
//! publishes `cap.fs.change` events — created / modified / deleted, and renamed
//! when a deleted and a created entry share inode, size and mtime. Polling needs no platform
//! watcher and sees every filesystem the session can read.
//!
//! Rate-limited: at most [`WatchConfig::max_events_per_sec`] events per
//! subscription and second; the excess is dropped and counted in the `_meta`
//! (`capfleet.dropped`) of the next event published. Snapshots are capped at
//! [`WatchConfig::max_entries`] entries; subscriptions per session at
//! [`WatchConfig::max_watches`]. A subscription ends with its session.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::RpcError;
use super::host::Host;
use crate::protocol::{CapEvent, FsEvent, HasMeta};

#[derive(Debug, Clone, Copy)]
pub struct WatchConfig {
    pub interval: Duration,
    pub max_events_per_sec: u32,
    pub max_entries: usize,
    pub max_watches: usize,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            interval: Duration::from_millis(250),
            max_events_per_sec: 50,
            max_entries: 20_000,
            max_watches: 16,
        }
    }
}

/// What identifies a version of an entry: inode, size, mtime, is a directory.
type Stamp = (u64, u64, SystemTime, bool);
type Snapshot = HashMap<PathBuf, Stamp>;

/// The watches of one session.
pub(crate) struct Watches {
    cfg: WatchConfig,
    seq: AtomicU64,
    tasks: Mutex<HashMap<String, JoinHandle<()>>>,
}

impl Watches {
    pub(crate) fn new(cfg: WatchConfig) -> Self {
        Watches {
            cfg,
            seq: AtomicU64::new(1),
            tasks: Mutex::new(HashMap::new()),
        }
    }

    /// Start watching `root` (already checked against the scope).
    pub(crate) fn watch(
        &self,
        root: PathBuf,
        recursive: bool,
        host: Arc<dyn Host>,
    ) -> Result<Value, RpcError> {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        tasks.retain(|_, t| !t.is_finished());
        if tasks.len() >= self.cfg.max_watches {
            return Err(RpcError::Io(format!(
                "at most {} watches per session",
                self.cfg.max_watches
            )));
        }
        let id = format!("watch-{}", self.seq.fetch_add(1, Ordering::Relaxed));
        let cfg = self.cfg;
        let sub = id.clone();
        let task = tokio::spawn(async move {
            let mut poller = Poller::new(sub, root, recursive, cfg);
            let mut before = poller.snapshot().await;
            loop {
                tokio::time::sleep(cfg.interval).await;
                let now = poller.snapshot().await;
                for ev in poller.limit(diff(&before, &now)) {
                    if !host.publish(ev).await {
                        return; // the session is gone
                    }
                }
                before = now;
            }
        });
        tasks.insert(id.clone(), task);
        Ok(json!({ "subscription_id": id }))
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        let tasks = self.tasks.get_mut().unwrap_or_else(PoisonError::into_inner);
        for (_, t) in tasks.drain() {
            t.abort();
        }
    }
}

struct Poller {
    sub: String,
    root: PathBuf,
    recursive: bool,
    cfg: WatchConfig,
    window: Instant,
    sent: u32,
    dropped: u64,
}

impl Poller {
    fn new(sub: String, root: PathBuf, recursive: bool, cfg: WatchConfig) -> Self {
        Poller {
            sub,
            root,
            recursive,
            cfg,
            window: Instant::now(),
            sent: 0,
            dropped: 0,
        }
    }

    async fn snapshot(&self) -> Snapshot {
        let (root, recursive, max) = (self.root.clone(), self.recursive, self.cfg.max_entries);
        tokio::task::spawn_blocking(move || snapshot(&root, recursive, max))
            .await
            .unwrap_or_default()
    }

    /// The changes as events, within the rate limit.
    fn limit(&mut self, changes: Vec<(PathBuf, FsEvent, Option<PathBuf>)>) -> Vec<CapEvent> {
        let mut out = Vec::new();
        for (path, kind, new_path) in changes {
            if self.window.elapsed() >= Duration::from_secs(1) {
                self.window = Instant::now();
                self.sent = 0;
            }
            if self.sent >= self.cfg.max_events_per_sec {
                self.dropped += 1;
                continue;
            }
            self.sent += 1;
            let new_path = new_path.map(|p| p.display().to_string());
            let mut ev = CapEvent::fs_change(&self.sub, path.display().to_string(), kind, new_path);
            if self.dropped > 0 {
                let mut m = serde_json::Map::new();
                m.insert("capfleet.dropped".into(), json!(self.dropped));
                *ev.meta_mut() = Some(m);
                self.dropped = 0;
            }
            out.push(ev);
        }
        out
    }
}

fn stamp(md: &std::fs::Metadata) -> Stamp {
    let mtime = md.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    (md.ino(), md.len(), mtime, md.is_dir())
}

/// The entries under `root` (itself included), without following symlinks.
pub(crate) fn snapshot(root: &Path, recursive: bool, max: usize) -> Snapshot {
    let mut snap = Snapshot::new();
    let Ok(md) = std::fs::symlink_metadata(root) else {
        return snap;
    };
    snap.insert(root.to_path_buf(), stamp(&md));
    let mut dirs = if md.is_dir() {
        vec![root.to_path_buf()]
    } else {
        vec![]
    };
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if snap.len() >= max {
                return snap;
            }
            let Ok(md) = e.metadata() else { continue };
            if recursive && md.is_dir() {
                dirs.push(e.path());
            }
            snap.insert(e.path(), stamp(&md));
        }
    }
    snap
}

/// What changed between two snapshots, in a stable (path) order.
pub(crate) fn diff(before: &Snapshot, now: &Snapshot) -> Vec<(PathBuf, FsEvent, Option<PathBuf>)> {
    let mut gone: Vec<_> = before.keys().filter(|p| !now.contains_key(*p)).collect();
    let mut born: Vec<_> = now.keys().filter(|p| !before.contains_key(*p)).collect();
    gone.sort();
    born.sort();
    let mut out = Vec::new();
    let mut renamed_to = Vec::new();
    for old in gone {
        // A rename keeps inode, size and mtime; a new file reusing a freed inode
        // has a newer mtime.
        let was = before[old];
        match born
            .iter()
            .find(|p| now[**p] == was && !renamed_to.contains(*p))
        {
            Some(new) => {
                renamed_to.push(*new);
                out.push((old.clone(), FsEvent::Renamed, Some((*new).clone())));
            }
            None => out.push((old.clone(), FsEvent::Deleted, None)),
        }
    }
    for new in born.into_iter().filter(|p| !renamed_to.contains(p)) {
        out.push((new.clone(), FsEvent::Created, None));
    }
    // A directory's own mtime moves with its entries: those are reported instead.
    let mut modified: Vec<_> = now
        .iter()
        .filter(|(p, s)| !s.3 && before.get(*p).is_some_and(|b| b != *s))
        .map(|(p, _)| p.clone())
        .collect();
    modified.sort();
    out.extend(modified.into_iter().map(|p| (p, FsEvent::Modified, None)));
    out
}
