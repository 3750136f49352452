//! `cap.fs.watch` -> `cap.fs.change` (rate-limited, in scope), `cap.user_io.*` and
//! `cap.notify` through a test host; every wait bounded.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::host::{BoxFuture, Reply};
use super::watch::{diff, snapshot};
use super::{Approver, Audited, CommandApproval, Host, Rpc, RpcError, TermConfig, WatchConfig};
use crate::manifest::{CodingCaps, FsCaps, FsScope, ToolPermission};
use crate::protocol::{CapEvent, Channel, FsEvent};

struct Deny;

impl Approver for Deny {
    fn approve(&self, _req: CommandApproval) -> Pin<Box<dyn Future<Output = bool> + Send>> {
        Box::pin(async { false })
    }
}

/// Publishes into a bounded channel; answers inputs with `answer`.
struct TestHost {
    events: mpsc::Sender<CapEvent>,
    answer: Option<String>,
}

impl Host for TestHost {
    fn publish(&self, event: CapEvent) -> BoxFuture<bool> {
        let tx = self.events.clone();
        Box::pin(async move { tx.send(event).await.is_ok() })
    }

    fn audit(&self, _record: Audited) -> BoxFuture<bool> {
        Box::pin(async { true })
    }

    fn ask(&self, _prompt: String, _form: Option<Value>) -> BoxFuture<Reply> {
        let a = self
            .answer
            .clone()
            .map_or(Reply::Declined, |a| Reply::Answered(Value::String(a)));
        Box::pin(async move { a })
    }
}

fn caps(watch: bool) -> CodingCaps {
    CodingCaps {
        fs: FsCaps {
            read: true,
            watch,
            scope: Some(FsScope::WorkspaceOnly),
            ..FsCaps::default()
        },
        ..CodingCaps::only(ToolPermission::Interactive)
    }
}

fn rpc(
    dir: &std::path::Path,
    per_sec: u32,
    answer: Option<&str>,
) -> (Rpc, mpsc::Receiver<CapEvent>) {
    let (tx, rx) = mpsc::channel(1024);
    let host = Arc::new(TestHost {
        events: tx,
        answer: answer.map(str::to_owned),
    });
    let cfg = WatchConfig {
        interval: Duration::from_millis(20),
        max_events_per_sec: per_sec,
        ..WatchConfig::default()
    };
    let r = Rpc::new(caps(true), dir, TermConfig::default(), Arc::new(Deny))
        .expect("rpc")
        .with_host(host, cfg);
    (r, rx)
}

async fn next(rx: &mut mpsc::Receiver<CapEvent>) -> CapEvent {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("an event within 5 s")
        .expect("event")
}

fn change(ev: &CapEvent) -> (String, FsEvent, Option<String>) {
    match ev {
        CapEvent::FsChange(c) => (c.path.clone(), c.event, c.new_path.get().cloned()),
        other => panic!("not a cap.fs.change: {other:?}"),
    }
}

#[test]
fn diff_sees_created_modified_deleted_renamed() {
    let d = tempfile::tempdir().expect("dir");
    let p = |n: &str| d.path().join(n);
    std::fs::write(p("a"), "1").expect("a");
    std::fs::write(p("b"), "1").expect("b");
    std::fs::write(p("c"), "1").expect("c");
    let before = snapshot(d.path(), true, 100);
    std::fs::write(p("a"), "22").expect("modify a");
    std::fs::remove_file(p("b")).expect("delete b");
    std::fs::rename(p("c"), p("d")).expect("rename c");
    std::fs::write(p("e"), "1").expect("create e");
    let got = diff(&before, &snapshot(d.path(), true, 100));
    assert_eq!(
        got,
        vec![
            (p("b"), FsEvent::Deleted, None),
            (p("c"), FsEvent::Renamed, Some(p("d"))),
            (p("e"), FsEvent::Created, None),
            (p("a"), FsEvent::Modified, None),
        ]
    );
}

#[tokio::test]
async fn watch_publishes_changes_in_scope_only() {
    let d = tempfile::tempdir().expect("dir");
    let root = std::fs::canonicalize(d.path()).expect("root");
    let (r, mut rx) = rpc(&root, 50, None);
    let sub = r
        .call("cap.fs.watch", json!({ "path": root, "recursive": true }))
        .await
        .expect("watch");
    let sub = sub["subscription_id"].as_str().expect("id").to_owned();
    tokio::time::sleep(Duration::from_millis(60)).await;
    std::fs::create_dir(root.join("sub")).expect("sub");
    std::fs::write(root.join("sub/x.txt"), "x").expect("x");
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let ev = next(&mut rx).await;
        if let CapEvent::FsChange(c) = &ev {
            assert_eq!(c.subscription_id, sub);
        }
        seen.push(change(&ev));
    }
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    let s = |p: &str| root.join(p).display().to_string();
    assert_eq!(
        seen,
        vec![
            (s("sub"), FsEvent::Created, None),
            (s("sub/x.txt"), FsEvent::Created, None)
        ]
    );
    let outside = r
        .call("cap.fs.watch", json!({ "path": "/etc" }))
        .await
        .expect_err("outside the scope");
    assert!(matches!(outside, RpcError::ScopeViolation));
}

#[tokio::test]
async fn watch_events_are_rate_limited() {
    let d = tempfile::tempdir().expect("dir");
    let root = std::fs::canonicalize(d.path()).expect("root");
    let (r, mut rx) = rpc(&root, 5, None);
    r.call("cap.fs.watch", json!({ "path": root }))
        .await
        .expect("watch");
    tokio::time::sleep(Duration::from_millis(60)).await;
    for i in 0..20 {
        std::fs::write(root.join(format!("f{i}")), "x").expect("f");
    }
    for _ in 0..5 {
        next(&mut rx).await;
    }
    let more = tokio::time::timeout(Duration::from_millis(400), rx.recv()).await;
    assert!(more.is_err(), "a 6th event within the second");
    // The next window's first event is one more file, counting what was dropped.
    tokio::time::sleep(Duration::from_millis(700)).await;
    std::fs::write(root.join("late"), "x").expect("late");
    let ev = next(&mut rx).await;
    let dropped = match &ev {
        CapEvent::FsChange(c) => c
            .meta
            .as_ref()
            .and_then(|m| m.get("capfleet.dropped"))
            .cloned(),
        _ => None,
    };
    assert_eq!(dropped, Some(json!(15)), "{ev:?}");
}

#[tokio::test]
async fn watch_needs_the_capability() {
    let d = tempfile::tempdir().expect("dir");
    let r = Rpc::new(caps(false), d.path(), TermConfig::default(), Arc::new(Deny)).expect("rpc");
    let e = r
        .call("cap.fs.watch", json!({ "path": d.path() }))
        .await
        .expect_err("not declared");
    assert!(matches!(e, RpcError::Unsupported("fs.watch")));
}

#[tokio::test]
async fn user_io_show_notify_and_input() {
    let d = tempfile::tempdir().expect("dir");
    let (r, mut rx) = rpc(d.path(), 50, None);
    let ok = r
        .call(
            "cap.user_io.show",
            json!({ "title": "Build", "body": "done", "level": "info" }),
        )
        .await
        .expect("show");
    assert_eq!(ok, json!({ "ok": true }));
    r.call(
        "cap.notify",
        json!({ "title": "Ping", "body": "", "urgent": true }),
    )
    .await
    .expect("notify");
    for (text, key, value) in [
        ("Build: done", "capfleet.level", json!("info")),
        ("Ping", "capfleet.urgent", json!(true)),
    ] {
        let CapEvent::TextChunk(t) = next(&mut rx).await else {
            panic!("not text");
        };
        assert_eq!((t.text.as_str(), t.channel), (text, Some(Channel::System)));
        assert_eq!(t.meta.as_ref().and_then(|m| m.get(key)), Some(&value));
    }
    let with_default = r
        .call(
            "cap.user_io.input",
            json!({ "prompt": "name?", "default": "anon" }),
        )
        .await
        .expect("default");
    assert_eq!(with_default, json!({ "text": "anon" }));
    let e = r
        .call("cap.user_io.input", json!({ "prompt": "name?" }))
        .await
        .expect_err("nobody answers");
    assert_eq!(e.code(), -32800);
    let (answered, _rx) = rpc(d.path(), 50, Some("bob"));
    let v: Value = answered
        .call(
            "cap.user_io.input",
            json!({ "prompt": "name?", "default": "anon" }),
        )
        .await
        .expect("answered");
    assert_eq!(v, json!({ "text": "bob" }));
}
