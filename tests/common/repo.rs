//! A directory to run fleets in — a real git repository (`git` CLI) or a plain
//! directory — with `capfleet` run there and its last run's journal and artifacts
//! read back.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use super::procs::EnvMarker;

pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    /// A git repository on `main` with `files` committed.
    pub fn git_repo(files: &[(&str, &str)]) -> Fixture {
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
    pub fn plain() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap()
    }

    /// Run git here; its stdout (panics with stderr on failure).
    pub fn git(&self, args: &[&str]) -> String {
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

    pub fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// `capfleet <args>` here, to the end.
    pub fn capfleet(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("capfleet runs")
    }

    /// `capfleet <args>` here, not started (stdout and stderr piped).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_capfleet"));
        c.args(args)
            .current_dir(self.path())
            .env("XDG_CONFIG_HOME", self.path().join(".config-test"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// The last run's directory.
    pub fn run_dir(&self) -> PathBuf {
        let runs = self.path().join(".capfleet/runs");
        // The newest (two runs may start within one second).
        std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().path())
            .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
            .expect("a run directory")
    }

    /// The last run's id.
    pub fn run_id(&self) -> String {
        self.run_dir()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    pub fn journal(&self) -> Vec<Value> {
        std::fs::read_to_string(self.run_dir().join("journal.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).expect("every journal line parses"))
            .collect()
    }

    /// The last run's artifact `file` of `session`.
    pub fn artifact(&self, session: &str, file: &str) -> String {
        let p = self.run_dir().join("artifacts").join(session).join(file);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// The worktree (or plain directory) of `session` in the last run.
    pub fn worktree(&self, session: &str) -> PathBuf {
        self.path()
            .join(".cap-worktrees")
            .join(self.run_id())
            .join(session)
    }
}

/// A `[[sessions]]` entry for the simulator with `script` and the no-survivor marker.
pub fn sim_session(name: &str, script: &str, marker: &EnvMarker, extra: &str) -> String {
    let (k, v) = marker.pair();
    format!(
        "[[sessions]]\nname = \"{name}\"\nagent = \"sim\"\nscript = \"{script}\"\nenv = {{ {k} = \"{v}\" }}\n{extra}\n"
    )
}

/// The `cap` records of the journal whose event is of `kind`.
pub fn cap_events<'a>(journal: &'a [Value], kind: &str) -> Vec<&'a Value> {
    journal
        .iter()
        .filter(|r| r["type"] == "cap" && r["event"]["kind"] == kind)
        .map(|r| &r["event"])
        .collect()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}
