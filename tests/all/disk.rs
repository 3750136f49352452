//! The disk, end to end: a fault while writing the run's record (a full disk, a
//! read-only one) fails `run` and `chat --journal` loudly — exit 1, the path and the OS
//! error named, what was kept said — and disk use is proportional: a long answer's
//! journal and transcript stay within 1.5x its text, and `journal_max_mb` cuts text
//! bodies with a record saying how much; a PTY flood's artifacts are about its size,
//! and `journal_max_mb` bounds them too, the cut marked and counted.

use std::path::Path;
use std::process::Output;

use common::disk::{ReadOnly, Tmpfs, full_file};
use common::sim::fleet_session;
use common::{EnvMarker, capfleet, latest_run, run_journal};
use serde_json::Value;

use crate::common;
use crate::common::chat::assert_no_survivor;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A fleet of one simulator session `a` (script `script`) in `dir`, `[fleet]` lines
/// `head` added.
fn one_session_fleet(dir: &Path, script: &str, head: &str, m: &EnvMarker) {
    std::fs::write(dir.join("a.toml"), script).unwrap();
    let fleet = format!(
        "[fleet]\nname = \"d\"\nstart = [\"a\"]\ntask = \"go\"\n{head}\n\n{}",
        fleet_session("a", "a.toml", m, "")
    );
    std::fs::write(dir.join("fleet.toml"), fleet).unwrap();
}

fn flood(bytes: u64) -> String {
    format!("[[turn]]\nsteps = [{{ flood = {bytes}, chunk = 64 }}]\n")
}

/// `chat --journal` on a journal whose writes fail with ENOSPC (`/dev/full`): exit 1,
/// the journal's path and the OS error said.
fn chat_on_a_full_journal_fails_loudly() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("disk-chat-full");
    std::fs::write(dir.path().join("s.toml"), flood(1_000_000)).unwrap();
    let journal = full_file(dir.path(), "journal.jsonl");
    let (k, v) = m.pair();
    let out = capfleet(dir.path())
        .args([
            "chat", "sim", "--json", "--task", "go", "--script", "s.toml",
        ])
        .arg("--journal")
        .arg(&journal)
        .env(k, v)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "cannot write the journal {}: No space left on device",
            journal.display()
        )),
        "{err}"
    );
    assert!(err.contains("kept: "), "what was kept is said: {err}");
    assert_no_survivor(&m);
}

#[test]
fn chat_journal_on_a_full_disk_fails_loudly() {
    chat_on_a_full_journal_fails_loudly();
}

/// A run on a 256 KiB tmpfs, whose answer fills it: the run fails (exit 1,
/// `disk_failed` naming the journal and ENOSPC, what was kept), its session is
/// stopped, no agent is left. Without a tmpfs here (no root), the same fault is
/// checked through `chat --journal` on `/dev/full`, and said.
#[test]
fn a_full_disk_mid_run_fails_the_run_loudly() {
    let disk = match Tmpfs::mount("256k", "") {
        Ok(t) => t,
        Err(why) => {
            eprintln!("no tmpfs ({why}): checking ENOSPC through chat --journal on /dev/full");
            return chat_on_a_full_journal_fails_loudly();
        }
    };
    let d = disk.path();
    let m = EnvMarker::new("disk-run-full");
    one_session_fleet(d, &flood(2_000_000), "", &m);
    let out = capfleet(d).args(["run", "fleet.toml"]).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let journal = latest_run(d).join("journal.jsonl");
    assert!(
        err.contains(&format!(
            "disk_failed: cannot write the journal {}: No space left on device (os error 28)",
            journal.display()
        )),
        "the outcome names the journal and the OS error: {err}"
    );
    assert!(
        err.contains("written and synced before the fault"),
        "what was kept: {err}"
    );
    assert!(err.contains("NOT written (disk fault)"), "{err}");
    assert!(!err.contains("completed"), "{err}");
    assert_no_survivor(&m);
}

/// A journal that cannot be opened (a read-only directory): the path, the OS error
/// and the fix; never "panicked during startup"; no agent answered.
#[test]
fn a_read_only_journal_is_named_with_the_fix() {
    let scratch = tempfile::tempdir().unwrap();
    let ro = ReadOnly::new(scratch.path());
    let journal = ro.path().join("journal.jsonl");
    let out = capfleet(scratch.path())
        .args(["chat", "sim", "--task", "hi", "--journal"])
        .arg(&journal)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot open the journal {}: ", journal.display())),
        "{err}"
    );
    assert!(
        err.contains("make its directory writable"),
        "the fix: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty(), "no agent answered");
}

/// The text records of a journal: the text joined, and the chunks they stand for.
fn journal_text(records: &[Value]) -> (String, u64) {
    let mut text = String::new();
    let mut chunks = 0;
    for r in records {
        if r["type"] == "cap" && r["event"]["kind"] == "cap.text_chunk" {
            text.push_str(r["event"]["text"].as_str().unwrap());
            chunks += r["chunks"].as_u64().unwrap_or(1);
        }
    }
    (text, chunks)
}

/// A 4 MB answer in 64-byte frames: journal and transcript within 1.5x of the text,
/// the text byte-identical to the one in the chat's output, every chunk counted, and
/// `capfleet log` still prints it.
#[test]
fn journal_bytes_stay_within_one_and_a_half_times_the_text() {
    const TEXT: u64 = 4 << 20;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("disk-proportional");
    one_session_fleet(d, &flood(TEXT), "", &m);
    let out = capfleet(d).args(["run", "fleet.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = latest_run(d);
    let records = run_journal(d);
    let (text, chunks) = journal_text(&records);
    assert_eq!(text.len() as u64, TEXT, "every text byte is journaled");
    assert_eq!(chunks, TEXT / 64, "every chunk is counted");
    let journal = std::fs::metadata(run.join("journal.jsonl")).unwrap().len();
    let transcript = std::fs::metadata(run.join("artifacts/a/transcript.json"))
        .unwrap()
        .len();
    let ratio = journal as f64 / TEXT as f64;
    eprintln!(
        "journal {journal} bytes, transcript {transcript} bytes for {TEXT} text bytes: {ratio:.3} journal bytes per text byte"
    );
    assert!(ratio <= 1.5, "journal {ratio:.2}x the text");
    assert!(
        transcript as f64 <= 1.5 * TEXT as f64,
        "transcript {transcript} bytes"
    );
    // The transcript holds the same text, byte for byte.
    let doc: Value =
        serde_json::from_slice(&std::fs::read(run.join("artifacts/a/transcript.json")).unwrap())
            .unwrap();
    let transcribed: String = doc["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "cap.text_chunk")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(transcribed, text);
    let log = capfleet(d).args(["log", "latest"]).output().unwrap();
    let printed = String::from_utf8_lossy(&log.stdout);
    assert!(log.status.success());
    let head: String = text
        .chars()
        .take(40)
        .collect::<String>()
        .replace('\n', "\\n");
    assert!(
        printed.contains("cap.text_chunk") && printed.contains(head.split("\\n").next().unwrap()),
        "capfleet log prints the text: {}",
        printed.lines().take(5).collect::<Vec<_>>().join("\n")
    );
}

/// `journal_max_mb = 1` and a 3 MB answer: the journal stays near 1 MiB, the text past
/// it is cut with `journal_cut` records whose bytes and the kept text add up to the
/// answer; the summary and `capfleet log` say so.
#[test]
fn journal_max_mb_cuts_text_bodies_with_a_marker() {
    const TEXT: u64 = 3 << 20;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let m = EnvMarker::new("disk-cut");
    one_session_fleet(d, &flood(TEXT), "journal_max_mb = 1", &m);
    let out = capfleet(d).args(["run", "fleet.toml"]).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let run = latest_run(d);
    let journal = std::fs::metadata(run.join("journal.jsonl")).unwrap().len();
    assert!(journal < (1 << 20) + (64 << 10), "journal {journal} bytes");
    let records = run_journal(d);
    let (kept, _) = journal_text(&records);
    let cuts: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "journal_cut")
        .collect();
    assert!(!cuts.is_empty(), "the cut is recorded");
    let cut: u64 = cuts.iter().map(|c| c["cut_bytes"].as_u64().unwrap()).sum();
    assert_eq!(kept.len() as u64 + cut, TEXT, "kept + cut = the answer");
    assert!(
        cuts[0]["reason"]
            .as_str()
            .unwrap()
            .contains("journal_max_mb = 1"),
        "{:?}",
        cuts[0]
    );
    assert!(
        err.contains(&format!("{cut} text bytes cut past journal_max_mb")),
        "{err}"
    );
    let log = capfleet(d).args(["log", "latest"]).output().unwrap();
    assert!(String::from_utf8_lossy(&log.stdout).contains("journal_cut"));
}

/// Bytes of every file under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            if p.is_dir() {
                dir_bytes(&p)
            } else {
                std::fs::metadata(&p).unwrap().len()
            }
        })
        .sum()
}

/// A 3 MiB flood on the PTY: the run's artifacts (the transcript) are about the text
/// on disk, not twice it; with `journal_max_mb = 1` the transcript copies at most
/// 1 MiB of text, marks where it stopped (`capfleet.transcript_cut`, naming the limit)
/// and counts the rest (`text_cut_bytes`): kept and cut add up to the output.
#[test]
fn pty_flood_artifacts_are_proportional_and_bounded() {
    const TEXT: u64 = 3 << 20;
    for head in ["", "journal_max_mb = 1"] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let m = EnvMarker::new("disk-pty-artifacts");
        let script = format!(
            "[[turn]]\nsteps = [{{ flood = {TEXT}, chunk = 16384 }}, {{ say = \"the end\" }}]\n"
        );
        std::fs::write(d.join("a.toml"), script).unwrap();
        let (k, v) = m.pair();
        let fleet = format!(
            "[fleet]\nname = \"d\"\nstart = [\"a\"]\ntask = \"go\"\n{head}\n\n[[sessions]]\nname = \"a\"\nagent = \"sim-tui\"\nscript = \"a.toml\"\nenv = {{ {k} = \"{v}\" }}\n"
        );
        std::fs::write(d.join("fleet.toml"), fleet).unwrap();
        let out = capfleet(d).args(["run", "fleet.toml"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let run = latest_run(d);
        let artifacts = dir_bytes(&run.join("artifacts"));
        let doc: Value = serde_json::from_slice(
            &std::fs::read(run.join("artifacts/a/transcript.json")).unwrap(),
        )
        .unwrap();
        let events = doc["events"].as_array().unwrap();
        let kept: u64 = events
            .iter()
            .filter(|e| e["kind"] == "cap.text_chunk")
            .map(|e| e["text"].as_str().unwrap().len() as u64)
            .sum();
        let cut = doc["text_cut_bytes"].as_u64().unwrap();
        let markers: Vec<&Value> = events
            .iter()
            .filter(|e| e["kind"] == "capfleet.transcript_cut")
            .collect();
        let ratio = artifacts as f64 / TEXT as f64;
        eprintln!(
            "PTY flood of {TEXT} bytes ({head:?}): artifacts {artifacts} bytes ({ratio:.3}x), transcript text {kept} kept, {cut} cut"
        );
        assert!(
            kept + cut >= TEXT && kept + cut < TEXT + 4096,
            "kept {kept} + cut {cut} vs {TEXT}"
        );
        if head.is_empty() {
            assert!(
                (0.95..=1.15).contains(&ratio),
                "artifacts {ratio:.3}x the output"
            );
            assert_eq!((cut, markers.len()), (0, 0), "{markers:?}");
        } else {
            assert!(kept <= 1 << 20, "{kept} bytes of text kept");
            assert!(
                artifacts < (1 << 20) + (64 << 10),
                "artifacts {artifacts} bytes"
            );
            assert_eq!(markers.len(), 1, "one marker");
            let says = markers[0]["message"].as_str().unwrap();
            assert!(says.contains("journal_max_mb = 1"), "{says}");
        }
        assert_no_survivor(&m);
    }
}
