//! The journal's durability: a sync puts what was published on disk at once (not at
//! the next 100 ms batch), a large prompt is kept by reference in a blob synced with it.

use ractor::Actor;

use super::{Journal, JournalArgs, JournalMsg, blobs, replay};
use capfleet_wire::events::{EventBody, Prompt, Publisher};

fn started(prompt: &str) -> EventBody {
    EventBody::TurnStarted {
        prompt_bytes: prompt.len(),
        attempt: 1,
        prompt: Prompt::Text(prompt.into()),
        text_from: None,
    }
}

#[tokio::test]
async fn a_sync_puts_what_was_published_on_disk_large_prompts_by_reference() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let (journal, handle) = Actor::spawn(None, Journal, JournalArgs::from(path.clone()))
        .await
        .unwrap();
    let tx = ractor::call!(journal, JournalMsg::Subscribe).unwrap();
    let durable = ractor::call!(journal, JournalMsg::Durable).unwrap();
    let mut bus = Publisher::new("cap://t/s", vec![tx]);
    // Past the first tick of the batch clock: only a sync writes now.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let big = "é".repeat(Prompt::INLINE_MAX);
    bus.publish(Some(1), started("hello")).await;
    bus.publish(Some(2), started(&big)).await;
    let t = std::time::Instant::now();
    durable.sync().await;
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(t.elapsed() < super::FLUSH_EVERY, "{:?}", t.elapsed());
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["prompt"], "hello");
    assert!(lines[1].get("prompt").is_none(), "{}", lines[1]);
    assert_eq!(lines[1]["prompt_bytes"], big.len());
    let reference = lines[1]["prompt_ref"].as_str().unwrap();
    assert_eq!(reference, blobs::reference(big.as_bytes()));
    assert_eq!(blobs::read(dir.path(), reference).unwrap(), big.as_bytes());
    // The same prompt again is the same blob.
    bus.publish(Some(3), started(&big)).await;
    durable.sync().await;
    let kept = std::fs::read_dir(dir.path().join(blobs::BLOBS_DIR))
        .unwrap()
        .count();
    assert_eq!(kept, 1);
    drop(bus);
    let _tally = ractor::call!(journal, JournalMsg::Finish).unwrap();
    journal.stop(None);
    handle.await.unwrap();
    let tail = replay::scan(&path, |l| {
        serde_json::from_slice::<serde_json::Value>(l).is_ok()
    })
    .unwrap();
    assert_eq!((tail.records, tail.torn), (3, None));
}

/// The variable that marks the process a test re-runs itself in.
const CHILD: &str = "CAPFLEET_TEST_OWN_PROCESS";

/// Run test `name` in a process of its own (it changes process-wide state: the
/// open-file limit) and check that it ran and passed there; `false` in that process.
fn in_own_process(name: &str) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return false;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("1 passed"), "the test ran: {said}");
    true
}

/// Open `/dev/null` until the process has no descriptor left; they are held.
fn every_descriptor() -> Vec<std::fs::File> {
    let mut held = Vec::new();
    loop {
        match std::fs::File::open("/dev/null") {
            Ok(f) => held.push(f),
            Err(e) if crate::fault::out_of_descriptors(&e) => return held,
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn with_no_descriptor_free_the_journal_waits_for_one_and_loses_nothing() {
    if in_own_process(
        "journal::tests::with_no_descriptor_free_the_journal_waits_for_one_and_loses_nothing",
    ) {
        return;
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: get/setrlimit(2) on structs we own, in this test's own process.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim), 0);
        lim.rlim_cur = 256;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &raw const lim), 0);
    }
    // One thread: between two awaits of this test the journal's writer does nothing.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let (faults, mut faulted) = tokio::sync::mpsc::channel(4);
        let args = JournalArgs {
            spec: path.clone().into(),
            faults: Some(faults),
        };
        let (journal, handle) = Actor::spawn(None, Journal, args).await.unwrap();
        let tx = ractor::call!(journal, JournalMsg::Subscribe).unwrap();
        let durable = ractor::call!(journal, JournalMsg::Durable).unwrap();
        let mut bus = Publisher::new("cap://t/s", vec![tx]);
        // A blob written, then every descriptor taken before the flush that syncs it
        // (tried again with another prompt if a flush came in between).
        let mut held = Vec::new();
        let mut stored = None;
        for attempt in 0..20u32 {
            let prompt = format!("{attempt} {}", "x".repeat(Prompt::INLINE_MAX));
            let reference = blobs::reference(prompt.as_bytes());
            let blob = blobs::path_of(dir.path(), &reference).unwrap();
            let tmp = blob.with_extension("tmp");
            bus.publish(Some(attempt + 1), started(&prompt)).await;
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while !tmp.exists() && !blob.exists() && std::time::Instant::now() < until {
                tokio::task::yield_now().await;
            }
            held = every_descriptor();
            if tmp.exists() {
                stored = Some((reference, attempt + 1));
                break;
            }
            held.clear();
        }
        let (reference, turn) = stored.expect("a blob pending at a flush");
        // Another large prompt, with no descriptor for its blob: kept inline.
        let inline = format!("inline {}", "y".repeat(Prompt::INLINE_MAX));
        bus.publish(Some(turn + 1), started(&inline)).await;
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(500), durable.sync()).await;
        assert!(waited.is_err(), "a sync waits while no descriptor is free");
        assert!(faulted.try_recv().is_err(), "and it is no fault");
        drop(held);
        tokio::time::timeout(std::time::Duration::from_secs(5), durable.sync())
            .await
            .expect("synced once a descriptor is free");
        assert!(faulted.try_recv().is_err());
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let last = lines.last().unwrap();
        assert_eq!(last["prompt"].as_str(), Some(inline.as_str()));
        let by_ref = &lines[lines.len() - 2];
        assert_eq!(by_ref["prompt_ref"].as_str(), Some(reference.as_str()));
        assert!(blobs::read(dir.path(), &reference).is_ok());
        drop(bus);
        let tally = ractor::call!(journal, JournalMsg::Finish).unwrap();
        assert_eq!(tally.lost, 0, "{tally:?}");
        journal.stop(None);
        handle.await.unwrap();
    });
}
