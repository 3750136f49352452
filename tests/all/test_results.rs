//! `test_result` parsing (coding §6.3) on real outputs: tiny projects with passing,
//! failing and skipped tests run by the real `cargo test`, `cargo nextest`,
//! `pytest` (the pinned peer) and `node --test` (both reporters) through
//! `run_tests`, as a session's `test_command` is run.

use std::path::Path;
use std::time::Duration;

use capfleet_engine::protocol::coding::TestResult;
use capfleet_engine::workspace::{TestCommand, TestRun, run_tests};

use crate::common;

fn run(cmd: TestCommand, dir: &Path, timeout: Duration) -> TestRun {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run_tests(&cmd, dir, timeout, "test-results", None))
        .expect("the command runs")
}

fn shell(line: &str) -> TestCommand {
    TestCommand::Shell(line.to_owned())
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// (framework, passed, failed, skipped)
fn counts(r: &TestResult) -> (String, u64, u64, u64) {
    (
        r.framework.get().cloned().unwrap_or_default(),
        r.passed,
        r.failed,
        r.skipped.get().copied().unwrap_or(0),
    )
}

/// (suite, passed, failed, skipped)
fn suites(r: &TestResult) -> Vec<(String, u64, u64, u64)> {
    r.suites
        .get()
        .map(|s| {
            s.iter()
                .map(|s| {
                    let skipped = s.skipped.get().copied().unwrap_or(0);
                    (s.name.clone(), s.passed, s.failed, skipped)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn owned(v: &[(&str, u64, u64, u64)]) -> Vec<(String, u64, u64, u64)> {
    v.iter()
        .map(|(n, p, f, s)| ((*n).to_owned(), *p, *f, *s))
        .collect()
}

const LIB_RS: &str = "pub fn add(a: i32, b: i32) -> i32 { a + b }

#[cfg(test)]
mod tests {
    use super::*;
    #[test] fn adds() { assert_eq!(add(1, 2), 3); }
    #[test] fn fails() { assert_eq!(add(1, 1), 3); }
    #[test] #[ignore] fn slow() {}
    mod inner { #[test] fn nested() {} }
}
";

#[test]
fn cargo_test_and_cargo_nextest() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "Cargo.toml",
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    );
    write(d, "src/lib.rs", LIB_RS);
    write(
        d,
        "tests/api.rs",
        "#[test] fn api_ok() {}\n#[test] fn api_ok2() {}\n",
    );
    let target = d.join("target").display().to_string();
    let cargo = run(
        shell(&format!(
            "CARGO_TARGET_DIR={target} cargo test --offline --no-fail-fast"
        )),
        d,
        Duration::from_secs(240),
    );
    let r = &cargo.result;
    assert_eq!(counts(r), ("cargo-test".into(), 4, 1, 1), "{:?}", r.output);
    assert_eq!(
        suites(r),
        owned(&[("src/lib.rs", 2, 1, 1), ("tests/api.rs", 2, 0, 0)])
    );
    assert!(cargo.failed() && cargo.exit_code == Some(101));
    assert!(r.output.get().unwrap().contains("tests::fails"));

    // nextest (installed with the toolchain by .ci/run).
    let nextest = run(
        shell(&format!(
            "CARGO_TARGET_DIR={target} cargo nextest run --offline --no-fail-fast"
        )),
        d,
        Duration::from_secs(240),
    );
    let r = &nextest.result;
    assert_eq!(
        counts(r),
        ("cargo-nextest".into(), 4, 1, 1),
        "{:?}",
        r.output
    );
    assert_eq!(
        suites(r),
        owned(&[("demo", 2, 1, 0), ("demo::api", 2, 0, 0)])
    );
    assert!(r.duration_ms.get().is_some());
}

const TEST_A: &str = "import pytest
def test_ok(): assert 1 == 1
def test_bad(): assert 1 == 2
@pytest.mark.skip(reason='later')
def test_skip(): pass
@pytest.mark.xfail
def test_xf(): assert False
";

#[test]
fn pytest_plain_quiet_and_verbose() {
    let python = common::peer("pytest").display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "tests/test_a.py", TEST_A);
    write(
        d,
        "tests/test_b.py",
        "def test_b1(): pass\ndef test_b2(): pass\n",
    );
    let by_file = owned(&[("tests/test_a.py", 1, 1, 2), ("tests/test_b.py", 2, 0, 0)]);
    for (flag, files) in [("", by_file.clone()), ("-q", vec![]), ("-v", by_file)] {
        let mut argv = vec![python.clone(), "-m".into(), "pytest".into()];
        argv.extend((!flag.is_empty()).then(|| flag.to_owned()));
        let run = run(TestCommand::Argv(argv), d, Duration::from_secs(120));
        let r = &run.result;
        assert_eq!(
            counts(r),
            ("pytest".into(), 3, 1, 2),
            "{flag}: {:?}",
            r.output
        );
        assert_eq!(suites(r), files, "{flag}");
        assert!(run.failed() && run.exit_code == Some(1));
        assert!(r.output.get().unwrap().contains("test_bad"));
    }
    // All green.
    std::fs::remove_file(d.join("tests/test_a.py")).unwrap();
    let ok = run(
        shell(&format!("{python} -m pytest")),
        d,
        Duration::from_secs(120),
    );
    assert_eq!(counts(&ok.result), ("pytest".into(), 2, 0, 0));
    assert!(!ok.failed());
}

const NODE_A: &str = "import { test, describe } from 'node:test';
import assert from 'node:assert';
test('top ok', () => { assert.strictEqual(1, 1); });
test('top bad', () => { assert.strictEqual(1, 2); });
test('skipped', { skip: true }, () => {});
test('todo one', { todo: true }, () => {});
describe('math', () => {
  test('adds', () => assert.strictEqual(1 + 1, 2));
  test('subs', () => assert.strictEqual(2 - 1, 1));
});
";

#[test]
fn node_test_with_its_reporters() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "a.test.mjs", NODE_A);
    write(
        d,
        "b.test.mjs",
        "import { test } from 'node:test';\ntest('b ok', () => {});\n",
    );
    for cmd in [
        "node --test",
        "node --test --test-reporter=tap",
        "node --test --test-reporter=spec",
    ] {
        let run = run(shell(cmd), d, Duration::from_secs(120));
        let r = &run.result;
        assert_eq!(
            counts(r),
            ("node-test".into(), 4, 1, 2),
            "{cmd}: {:?}",
            r.output
        );
        assert_eq!(suites(r), owned(&[("math", 2, 0, 0)]), "{cmd}");
        assert!(run.failed());
    }
}

#[test]
fn unknown_runners_are_judged_by_exit_code_and_a_hang_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run_ = run(shell("echo building; exit 3"), d, Duration::from_secs(30));
    assert_eq!(counts(&run_.result), ("unknown".into(), 0, 1, 0));
    assert_eq!(run_.exit_code, Some(3));
    let ok = run(
        TestCommand::Argv(vec!["true".into()]),
        d,
        Duration::from_secs(30),
    );
    assert_eq!(counts(&ok.result), ("unknown".into(), 1, 0, 0));

    let hung = run(
        shell("echo $$ > pid; sleep 60 & echo $! >> pid; wait"),
        d,
        Duration::from_secs(1),
    );
    assert!(hung.timed_out && hung.failed());
    assert!(hung.result.output.get().unwrap().contains("was killed"));
    let pids = std::fs::read_to_string(d.join("pid")).unwrap();
    for pid in pids.split_whitespace() {
        let pid: i32 = pid.parse().unwrap();
        assert!(!common::is_alive(pid), "{pid} survived the timeout");
    }
}
