//! The user guide's examples as tests: the ` ```console ` blocks of `README.md` and
//! `docs/guide/*.md`, run as written against the built binary.
//!
//! A block is a shell session. A line `$ COMMAND` is a command (a line ending in `\`
//! goes on on the next, and a here-document `<<'EOF'` to its `EOF`); the lines under
//! it are what it prints, checked in order,
//! each against a later line of its output (stdout and stderr together). In a shown
//! line `…` stands for anything, and a line of `…` alone for lines left out. A line
//! `(exit N)` is the exit status the command must end with; any other command must
//! succeed. A command ending in `&` runs in the background: the session waits until
//! it has printed its shown lines, and it is stopped (`SIGTERM`) when the page ends.
//!
//! A page is read as a reader follows it: its blocks run in order in one shell, in a
//! git repository of its own holding a copy of `config/` (so
//! `config/fleets/demo.toml` and its sim scripts are there), with `capfleet` on
//! `PATH` and the test environment of [`super::capfleet`]. What a block leaves (a
//! run, a file, a server in the background) is there for the next; the background
//! commands are stopped when the page ends. The well-known ports the pages show
//! (7878 for `serve`, 4222 for NATS) are replaced by free ones, in the commands and in
//! the lines shown alike. The simulator plays its scripts [`TIME_SCALE`] times faster
//! than a reader's does (`CAPFLEET_SIM_TIME_SCALE`): what the pages show does not
//! depend on it, and the suite's time stays low.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::capfleet::configured;
use super::nats::free_port;
use super::repo::Fixture;
use super::{BIN, kill_group, output_within, peer, repo_root};

/// One command of a page and what it must print.
#[derive(Debug)]
struct Step {
    /// The page's block it is in, from 1.
    block: usize,
    command: String,
    background: bool,
    shown: Vec<String>,
    exit: i32,
}

/// The ports a page may show, each replaced by a free one when its block runs.
const PORTS: [&str; 2] = ["7878", "4222"];

/// How many times faster the simulator plays its scripts here than for a reader.
const TIME_SCALE: &str = "4";

/// How long one page may take, every command in it.
const PAGE_LIMIT: Duration = Duration::from_secs(120);

/// The commands of the ` ```console ` blocks of `markdown`, in order.
fn steps(markdown: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut block = 0;
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "```console" {
            continue;
        }
        block += 1;
        // The line that ends the command: its here-document's end, or none (`\`).
        let mut until: Option<&str> = None;
        let mut continued = false;
        for line in lines.by_ref() {
            if line.trim_start().starts_with("```") {
                break;
            }
            if continued || until.is_some() {
                let step = steps.last_mut().expect("a command to continue");
                step.command.push('\n');
                step.command.push_str(line);
                continued = line.ends_with('\\');
                until = until.filter(|end| line != *end);
            } else if let Some(command) = line.strip_prefix("$ ") {
                continued = command.ends_with('\\');
                until = command.contains("<<'EOF'").then_some("EOF");
                steps.push(Step {
                    block,
                    command: command.to_owned(),
                    background: false,
                    shown: Vec::new(),
                    exit: 0,
                });
            } else {
                let step = steps
                    .last_mut()
                    .filter(|s| s.block == block)
                    .unwrap_or_else(|| panic!("output before any command: {line}"));
                match line.trim().strip_prefix("(exit ") {
                    Some(code) => step.exit = code.trim_end_matches(')').parse().expect("(exit N)"),
                    None => step.shown.push(line.trim().to_owned()),
                }
            }
        }
    }
    for step in &mut steps {
        if let Some(command) = step.command.strip_suffix('&') {
            step.command = command.trim_end().to_owned();
            step.background = true;
        }
    }
    steps
}

/// `text` in single quotes for bash.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The pieces of a shown line, between its `…`s.
fn pieces(shown: &str) -> Vec<&str> {
    shown
        .split('…')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// The bash script of a page: each command's output and status into `out/`.
fn script(steps: &[Step], out: &Path) -> String {
    let mut s = format!(
        "echo $$ > {}\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n",
        quoted(&out.join("pgid").to_string_lossy())
    );
    for (i, step) in steps.iter().enumerate() {
        let file = out.join(format!("{i}.out"));
        let file = quoted(&file.to_string_lossy());
        if step.background {
            s += &format!("{} > {file} 2>&1 < /dev/null &\n", step.command);
            let ready: Vec<String> = step
                .shown
                .iter()
                .filter_map(|l| pieces(l).first().copied())
                .map(|p| format!("grep -qF -e {} {file}", quoted(p)))
                .collect();
            if !ready.is_empty() {
                s += &format!(
                    "for _ in $(seq 1200); do {} && break; sleep 0.05; done\n",
                    ready.join(" && ")
                );
            }
        } else {
            s += &format!(
                "{{ {}\n}} > {file} 2>&1 < /dev/null; echo $? > {}\n",
                step.command,
                quoted(&out.join(format!("{i}.rc")).to_string_lossy())
            );
        }
    }
    s
}

/// Where `shown` fails to match `output` (in order), if it does.
fn mismatch(shown: &[String], output: &str) -> Option<String> {
    let mut lines = output.lines();
    for want in shown.iter().filter(|l| l.as_str() != "…") {
        let parts = pieces(want);
        let found = lines.by_ref().any(|line| {
            let mut rest = line;
            parts.iter().all(|p| match rest.find(p) {
                Some(at) => {
                    rest = &rest[at + p.len()..];
                    true
                }
                None => false,
            })
        });
        if !found {
            return Some(want.clone());
        }
    }
    None
}

/// A fresh git repository with a copy of the repository's `config/`.
fn workspace() -> Fixture {
    let f = Fixture::git_repo(&[("README.md", "a service\n")]);
    let copied = Command::new("cp")
        .arg("-r")
        .arg(repo_root().join("config"))
        .arg(f.path())
        .status()
        .expect("cp");
    assert!(copied.success());
    f.commit_all("config");
    f
}

/// `PATH` with `capfleet` (and, for a page that runs one, `nats-server`) first.
fn path_for(commands: &str, bin: &Path) -> String {
    std::os::unix::fs::symlink(BIN, bin.join("capfleet")).expect("symlink capfleet");
    let mut dirs = vec![bin.to_path_buf()];
    if commands.contains("nats-server") {
        dirs.push(peer("nats-server").parent().expect("a dir").to_path_buf());
    }
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs)
        .expect("PATH")
        .to_string_lossy()
        .into_owned()
}

/// The process group of the page's shell (its pid, in this file), killed whatever
/// happens: nothing of a page is left behind, even when it fails or times out.
struct Group(PathBuf);

impl Drop for Group {
    fn drop(&mut self) {
        let pgid = std::fs::read_to_string(&self.0).unwrap_or_default();
        kill_group(pgid.trim().parse().unwrap_or(0));
    }
}

/// Runs every console block of `page` (a path from the repository's root), in order in
/// one shell, and checks every command's status and output.
pub(crate) fn run_page(page: &str) {
    let text =
        std::fs::read_to_string(repo_root().join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
    let mut steps = steps(&text);
    assert!(!steps.is_empty(), "{page} has no ```console example to run");
    let mut ports: Vec<(String, String)> = Vec::new();
    for step in &mut steps {
        for port in PORTS {
            if !step.command.contains(port) {
                continue;
            }
            if !ports.iter().any(|(p, _)| p == port) {
                ports.push((port.to_owned(), free_port().to_string()));
            }
        }
        for (from, to) in &ports {
            step.command = step.command.replace(from.as_str(), to);
            for line in &mut step.shown {
                *line = line.replace(from.as_str(), to);
            }
        }
    }
    let repo = workspace();
    let scratch = tempfile::tempdir().unwrap();
    let (out, bin) = (scratch.path().join("out"), scratch.path().join("bin"));
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    let all: String = steps.iter().map(|s| s.command.as_str()).collect();
    let mut bash = configured(Command::new("bash"), repo.path());
    bash.env("PATH", path_for(&all, &bin))
        .env("CAPFLEET_SIM_TIME_SCALE", TIME_SCALE)
        .arg("-c")
        .arg(script(&steps, &out))
        .process_group(0);
    let _group = Group(out.join("pgid"));
    let started = Instant::now();
    let done = output_within(bash, PAGE_LIMIT);
    eprintln!(
        "{page}: {} commands in {:.1?}",
        steps.len(),
        started.elapsed()
    );
    let shell = String::from_utf8_lossy(&done.stdout).into_owned()
        + String::from_utf8_lossy(&done.stderr).as_ref();
    for (i, step) in steps.iter().enumerate() {
        let output = std::fs::read_to_string(out.join(format!("{i}.out"))).unwrap_or_default();
        let where_ = format!("{page}, block {}: $ {}", step.block, step.command);
        if !step.background {
            let rc = std::fs::read_to_string(out.join(format!("{i}.rc")))
                .unwrap_or_else(|_| panic!("{where_}: never ran ({shell})"));
            assert_eq!(
                rc.trim().parse::<i32>().ok(),
                Some(step.exit),
                "{where_}: exit status {}; it printed:\n{output}",
                rc.trim()
            );
        }
        if let Some(line) = mismatch(&step.shown, &output) {
            panic!("{where_}: no line like `{line}` in order; it printed:\n{output}");
        }
    }
}

/// The relative links of a markdown text (`](target)`, no scheme, no anchor only).
pub(crate) fn relative_links(markdown: &str) -> Vec<String> {
    markdown
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|t| t.split('#').next().unwrap_or("").to_owned())
        .filter(|t| !t.is_empty() && !t.contains("://") && !t.starts_with("mailto:"))
        .collect()
}
