//! The journal's durability: a sync puts what was published on disk at once (not at
//! the next 100 ms batch), a large prompt is kept by reference in a blob synced with it.

use ractor::Actor;

use super::{Journal, JournalArgs, JournalMsg, blobs, replay};
use crate::events::{EventBody, Prompt, Publisher};

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
