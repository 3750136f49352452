//! The checker's merge series (issue 36): `capfleet merge` of a finished `--commit`
//! run's session branches, one after another as a user merges them, `SIGKILL`ed at
//! a seeded moment — a seeded session, and in its merge a seeded time into its
//! checkout (after its intent, `merge_started`, or after its start when it finishes
//! a cut one), right after it wrote the index (`HEAD` not yet moved), right after
//! it moved main (its end not yet journaled), or after its process ended (between
//! sessions) — then every merge run again, each to exit 0, and the end
//! compared with an uninterrupted pass: main's history (each commit's tree, parents
//! and message), the refs, `HEAD`, no git lock left, a clean tree, and the merges the
//! run directory records as made (each once, with its outcome, on main).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::EnvMarker;
use super::durable::{Moments, send};
use super::repo::{Fixture, stderr};

/// The wide fleet's sessions; files each one adds; tracked files each one rewrites
/// (and one more it deletes).
const SESSIONS: [&str; 3] = ["a", "b", "c"];
const ADDS: usize = 150;
const REWRITES: usize = 8;

/// A git checkout with three sessions, each adding [`ADDS`] files, rewriting
/// [`REWRITES`] tracked files of its own and deleting one: merges whose checkouts
/// write a few hundred files (a kill lands inside them), no two in conflict; the
/// marker and the usage file in each session's environment.
pub(crate) fn wide(m: &EnvMarker, emitted: &Path) -> Fixture {
    let base: Vec<(String, String)> = SESSIONS
        .iter()
        .flat_map(|s| {
            (0..=REWRITES).map(move |i| (format!("base/{s}-{i}.txt"), format!("{s} {i}\n")))
        })
        .collect();
    let mut files: Vec<(&str, &str)> = base.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    files.push(("README.md", "x\n"));
    let f = Fixture::git_repo(&files);
    let (k, v) = m.pair();
    let mut fleet =
        "[fleet]\nname = \"wide\"\nstart = [\"a\", \"b\", \"c\"]\ntask = \"spread\"\n".to_owned();
    for s in SESSIONS {
        let mut steps: Vec<String> = (0..ADDS)
            .map(|i| format!("{{ write = \"{s}/{i}.txt\", content = \"{s} added {i}\\n\" }}"))
            .collect();
        steps.extend((0..REWRITES).map(|i| {
            format!("{{ write = \"base/{s}-{i}.txt\", content = \"{s} rewrote {i}\\n\" }}")
        }));
        steps.push(format!("{{ delete = \"base/{s}-{REWRITES}.txt\" }}"));
        steps.push(format!("{{ say = \"{s} done\" }}"));
        steps.push(
            "{ usage = { input_tokens = 200, output_tokens = 20, cost_usd = 0.003 } }".into(),
        );
        f.write(
            &format!("{s}.toml"),
            &format!("[[turn]]\nsteps = [{}]\n", steps.join(", ")),
        );
        fleet.push_str(&format!(
            "\n[[sessions]]\nname = \"{s}\"\nagent = \"sim\"\nscript = \"{s}.toml\"\n\
             env = {{ {k} = \"{v}\", CAPFLEET_SIM_EMITTED = \"{}\" }}\n",
            emitted.display()
        ));
    }
    f.write("fleet.toml", &fleet);
    f
}

/// How long a session's merge took uninterrupted: from its journaled intent to its
/// end, and from its start to its end.
struct Span {
    after_intent: Duration,
    whole: Duration,
}

/// An uninterrupted merge pass: its end and each session's [`Span`].
pub(crate) struct Merged {
    end: End,
    spans: Vec<Span>,
}

/// What a merge pass leaves, as compared (the run id written `<run>`).
#[derive(Debug, PartialEq)]
struct End {
    /// main's commits, newest first: its tree, each parent as the session branch
    /// whose head it is (`-` for none), its subject.
    history: Vec<(String, Vec<String>, String)>,
    refs: Vec<String>,
    head: String,
    /// git's lock files left under `.git`.
    locks: Vec<String>,
    /// `git status` of the tracked files.
    status: String,
    /// By merge key: each merge recorded as made (`merged` not `up_to_date`), its
    /// outcome and whether its sha is on main.
    made: BTreeMap<String, Vec<(String, bool)>>,
    /// Merge keys journaled as started and never as ended.
    open: BTreeSet<String>,
}

/// The sessions of `f`'s run that have a worktree (a branch), in order.
fn sessions(f: &Fixture) -> Vec<String> {
    let names: BTreeSet<String> = f
        .journal()
        .iter()
        .filter(|r| r["type"] == "worktree")
        .filter_map(|r| r["session"].as_str().map(str::to_owned))
        .collect();
    names.into_iter().collect()
}

fn key(f: &Fixture, session: &str) -> String {
    format!("merge:capfleet/{}/{session}", f.run_id())
}

/// `capfleet merge` of `session`, to its end: exit 0.
fn merge(f: &Fixture, session: &str) {
    let out = f.capfleet(&["merge", &f.run_id(), session]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "capfleet merge {session}: {}",
        stderr(&out)
    );
}

/// `capfleet merge` of `session`, started.
fn start(f: &Fixture, session: &str) -> Child {
    f.command(&["merge", &f.run_id(), session])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The run's journal from byte `from` on.
fn tail(f: &Fixture, from: u64) -> String {
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(f.run_dir().join("journal.jsonl")) {
        let _ = file
            .seek(SeekFrom::Start(from))
            .and_then(|_| file.read_to_string(&mut text));
    }
    text
}

fn journal_len(f: &Fixture) -> u64 {
    std::fs::metadata(f.run_dir().join("journal.jsonl")).map_or(0, |m| m.len())
}

/// The journal past `from` holds a record of `kind` for merge `key`.
fn journaled(f: &Fixture, from: u64, kind: &str, key: &str) -> bool {
    let (kind, key) = (format!("\"type\":\"{kind}\""), format!("\"key\":\"{key}\""));
    tail(f, from)
        .lines()
        .any(|l| l.contains(&kind) && l.contains(&key))
}

/// Poll (every 100 µs, at most 60 s) until the journal past `from` holds merge
/// `key`'s intent or `child` ended: when.
fn intent_journaled(f: &Fixture, from: u64, key: &str, child: &mut Child) -> Instant {
    let t = Instant::now();
    while !journaled(f, from, "merge_started", key) && child.try_wait().unwrap().is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no merge_started in 60 s"
        );
        std::thread::sleep(Duration::from_micros(100));
    }
    Instant::now()
}

/// Merge `key` is journaled as started and not as ended.
fn open(f: &Fixture, key: &str) -> bool {
    ends(f).1.contains(key)
}

/// By merge key: each merge made, its outcome and sha.
type Made = BTreeMap<String, Vec<(String, String)>>;

/// The merges the journal records as made and the keys started and not ended.
fn ends(f: &Fixture) -> (Made, BTreeSet<String>) {
    let (mut made, mut open) = (Made::new(), BTreeSet::new());
    // A torn last line left by a kill is no record (the next append ends it).
    for r in f.journal_so_far() {
        let key = r["key"].as_str().unwrap_or_default().to_owned();
        match r["type"].as_str() {
            Some("merge_started") => {
                open.insert(key);
            }
            Some("merged") => {
                open.remove(&key);
                if r["outcome"] != "up_to_date" {
                    let how = r["outcome"].as_str().unwrap_or_default().to_owned();
                    let sha = r["sha"].as_str().unwrap_or_default().to_owned();
                    made.entry(key).or_default().push((how, sha));
                }
            }
            _ => {}
        }
    }
    (made, open)
}

/// `git` in `f` without taking any lock (`GIT_OPTIONAL_LOCKS=0`: a status does not
/// refresh the index); its stdout.
fn git(f: &Fixture, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(f.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// git's lock files under `dir`, relative to `root`.
fn locks(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            locks(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "lock") {
            out.push(p.strip_prefix(root).unwrap().display().to_string());
        }
    }
}

fn end(f: &Fixture) -> End {
    let run = f.run_id();
    let norm = |s: &str| s.replace(&run, "<run>");
    let heads: BTreeMap<String, String> = git(
        f,
        &[
            "for-each-ref",
            "--format=%(objectname) %(refname:short)",
            "refs/heads/capfleet",
        ],
    )
    .lines()
    .filter_map(|l| l.split_once(' '))
    .map(|(sha, name)| (sha.to_owned(), norm(name)))
    .collect();
    let on_main: BTreeSet<String> = git(f, &["rev-list", "main"])
        .lines()
        .map(str::to_owned)
        .collect();
    let history = git(
        f,
        &["log", "--first-parent", "--format=%T %P%x09%s", "main"],
    )
    .lines()
    .map(|l| {
        let (ids, subject) = l.split_once('\t').unwrap();
        let mut ids = ids.split(' ').filter(|i| !i.is_empty());
        let tree = ids.next().unwrap().to_owned();
        let parents = ids
            .map(|p| heads.get(p).cloned().unwrap_or_else(|| "-".into()))
            .collect();
        (tree, parents, norm(subject))
    })
    .collect();
    let git_dir = f.path().join(".git");
    let mut left = Vec::new();
    locks(&git_dir, &git_dir, &mut left);
    left.sort();
    let (made, open) = ends(f);
    End {
        history,
        refs: git(f, &["for-each-ref", "--format=%(refname)"])
            .lines()
            .map(norm)
            .collect(),
        head: git(f, &["symbolic-ref", "HEAD"]),
        locks: left,
        status: git(f, &["status", "--porcelain", "--untracked-files=no"]),
        made: made
            .into_iter()
            .map(|(k, v)| {
                let v = v
                    .into_iter()
                    .map(|(how, sha)| (how, on_main.contains(&sha)));
                (norm(&k), v.collect())
            })
            .collect(),
        open: open.iter().map(|k| norm(k)).collect(),
    }
}

/// Merge every session of `f`'s finished run, uninterrupted, timing each.
pub(crate) fn whole(f: &Fixture) -> Merged {
    let spans = sessions(f)
        .iter()
        .map(|s| {
            let from = journal_len(f);
            let t = Instant::now();
            let mut child = start(f, s);
            let intent = intent_journaled(f, from, &key(f, s), &mut child);
            let status = child.wait().unwrap();
            assert!(status.success(), "capfleet merge {s}: {status}");
            Span {
                after_intent: intent.elapsed(),
                whole: t.elapsed(),
            }
        })
        .collect();
    Merged { end: end(f), spans }
}

/// Poll (every 50 µs, at most 60 s) until `done` holds or `child` ended: whether
/// it still runs.
fn until(child: &mut Child, mut done: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while !done() {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "no moment in 60 s");
        std::thread::sleep(Duration::from_micros(50));
    }
    child.try_wait().unwrap().is_none()
}

/// A file's identity and time: changed when git renames a new one over it.
fn stamp(path: &Path) -> Option<(u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.mtime(), m.mtime_nsec()))
}

/// `git status` lines of every file, untracked ones each named.
fn statuses(f: &Fixture) -> BTreeSet<String> {
    git(f, &["status", "--porcelain", "--untracked-files=all"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// What a killed merge left: the files it changed, git's locks, whether `HEAD`
/// moved and its end was journaled.
fn left(f: &Fixture, from: u64, key: &str, head: &str, before: &BTreeSet<String>) -> String {
    let git_dir = f.path().join(".git");
    let mut held = Vec::new();
    locks(&git_dir, &git_dir, &mut held);
    let changed = statuses(f).difference(before).count();
    let moved = git(f, &["rev-parse", "HEAD"]) != head;
    format!(
        "left {changed} files changed, locks {held:?}, HEAD {}, its end {}journaled",
        if moved { "moved" } else { "not moved" },
        if journaled(f, from, "merged", key) {
            ""
        } else {
            "not "
        }
    )
}

/// Stop `stops` passes of merges over `f`'s finished run at seeded moments (`at`),
/// each said in `moments`, then merge every session again to its end, and compare
/// with `whole` (panics on a difference).
pub(crate) fn cut(
    f: &Fixture,
    whole: &Merged,
    at: &mut Moments,
    stops: usize,
    moments: &mut Vec<String>,
) {
    let names = sessions(f);
    for stop in 1..=stops {
        let k = at.below(names.len() as u64) as usize;
        for s in &names[..k] {
            merge(f, s);
        }
        let s = &names[k];
        let key = key(f, s);
        let (from, head, before) = (journal_len(f), git(f, &["rev-parse", "HEAD"]), statuses(f));
        // A merge that finishes a cut one journals no new intent: timed from its start.
        let finishing = open(f, &key);
        let index = stamp(&f.path().join(".git/index"));
        let mut child = start(f, s);
        let (since, span, after) = if finishing {
            (
                Instant::now(),
                whole.spans[k].whole,
                "start (finishing a cut merge)",
            )
        } else {
            let seen = intent_journaled(f, from, &key, &mut child);
            (seen, whole.spans[k].after_intent, "merge_started")
        };
        // Where the kill lands: a seeded time into the checkout, right after the
        // index is written (the checkout done, HEAD not yet moved), right after HEAD
        // moved (its end not yet journaled), or after the end (between sessions).
        let (alive, what) = match at.below(4) {
            0 => {
                let d = Duration::from_micros(at.below(span.as_micros() as u64 + 1));
                let alive = until(&mut child, || since.elapsed() >= d);
                (alive, format!("{} µs after {s}'s {after}", d.as_micros()))
            }
            1 => {
                let alive = until(&mut child, || stamp(&f.path().join(".git/index")) != index);
                (alive, format!("right after {s}'s merge wrote the index"))
            }
            2 => {
                let main = f.path().join(".git/refs/heads/main");
                let moved = || std::fs::read_to_string(&main).is_ok_and(|h| h != head);
                (
                    until(&mut child, moved),
                    format!("right after {s}'s merge moved main"),
                )
            }
            _ => (until(&mut child, || false), format!("after {s}'s merge")),
        };
        if !alive {
            moments.push(format!(
                "stop {stop}: {what}: it had ended (between sessions)"
            ));
            continue;
        }
        send(&child, libc::SIGKILL);
        child.wait().unwrap();
        moments.push(format!(
            "stop {stop}: SIGKILL {what}: {}",
            left(f, from, &key, &head, &before)
        ));
    }
    for s in &names {
        merge(f, s);
    }
    assert_eq!(
        end(f),
        whole.end,
        "the merges stopped and run again against the uninterrupted ones"
    );
}
