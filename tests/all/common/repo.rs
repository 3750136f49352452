//! A directory to run fleets in — a real git repository (`git` CLI) or a plain
//! directory — with `capfleet` run there and its last run's journal and artifacts
//! read back.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub(crate) struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    /// A git repository on `main` with `files` committed.
    pub(crate) fn git_repo(files: &[(&str, &str)]) -> Fixture {
        let f = Fixture::plain();
        f.git(&["init", "-q", "-b", "main"]);
        f.git(&["config", "user.name", "Test User"]);
        f.git(&["config", "user.email", "test@example.com"]);
        for (path, text) in files {
            f.write(path, text);
        }
        f.commit_all("initial");
        f
    }

    /// An empty directory in no repository.
    pub(crate) fn plain() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn write(&self, rel: &str, text: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub(crate) fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap()
    }

    /// Run git here; its stdout (panics with stderr on failure).
    pub(crate) fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(self.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(crate) fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// `capfleet <args>` here, to the end.
    pub(crate) fn capfleet(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("capfleet runs")
    }

    /// `capfleet <args>` here, not started (stdout and stderr piped).
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut c = super::capfleet(self.path());
        c.args(args)
            .env("XDG_CONFIG_HOME", self.path().join(".config-test"));
        c
    }

    /// The last run's directory.
    pub(crate) fn run_dir(&self) -> PathBuf {
        super::latest_run(self.path())
    }

    /// The last run's id.
    pub(crate) fn run_id(&self) -> String {
        self.run_dir()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    /// The last run's journal records.
    pub(crate) fn journal(&self) -> Vec<Value> {
        super::run_journal(self.path())
    }

    /// The last run's journal records so far (none yet, a torn last line left out).
    pub(crate) fn journal_so_far(&self) -> Vec<Value> {
        super::capfleet::journal_so_far(self.path())
    }

    /// The last run's artifact `file` of `session`.
    pub(crate) fn artifact(&self, session: &str, file: &str) -> String {
        let p = self.run_dir().join("artifacts").join(session).join(file);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// The worktree (or plain directory) of `session` in the last run.
    pub(crate) fn worktree(&self, session: &str) -> PathBuf {
        self.path()
            .join(".cap-worktrees")
            .join(self.run_id())
            .join(session)
    }
}

/// The `cap` records of the journal whose event is of `kind`.
pub(crate) fn cap_events<'a>(journal: &'a [Value], kind: &str) -> Vec<&'a Value> {
    journal
        .iter()
        .filter(|r| r["type"] == "cap" && r["event"]["kind"] == kind)
        .map(|r| &r["event"])
        .collect()
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}
