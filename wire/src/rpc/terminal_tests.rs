//! Terminals end to end with real processes; every wait bounded.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Approver, CommandApproval, Rpc, RpcError, TermConfig};
use crate::manifest::{CodingCaps, FsCaps, FsScope, TerminalCaps, ToolPermission};

struct Fixed {
    answer: bool,
    asked: AtomicUsize,
}

impl Approver for Fixed {
    fn approve(&self, _req: CommandApproval) -> Pin<Box<dyn Future<Output = bool> + Send>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let a = self.answer;
        Box::pin(async move { a })
    }
}

fn caps(tp: ToolPermission, max: Option<u32>) -> CodingCaps {
    CodingCaps {
        fs: FsCaps {
            read: true,
            write: true,
            scope: Some(FsScope::WorkspaceOnly),
            ..FsCaps::default()
        },
        terminal: TerminalCaps {
            enabled: true,
            concurrent_max: max,
        },
        ..CodingCaps::only(tp)
    }
}

fn rpc(
    dir: &std::path::Path,
    tp: ToolPermission,
    answer: bool,
    cfg: TermConfig,
) -> (Rpc, Arc<Fixed>) {
    let ap = Arc::new(Fixed {
        answer,
        asked: AtomicUsize::new(0),
    });
    let r = Rpc::new(caps(tp, Some(2)), dir, cfg, ap.clone()).expect("rpc");
    (r, ap)
}

async fn sh(r: &Rpc, script: &str) -> Result<String, RpcError> {
    let v = r
        .call(
            "cap.terminal.create",
            json!({ "command": "sh", "args": ["-c", script] }),
        )
        .await?;
    Ok(v["terminal_id"].as_str().expect("id").to_owned())
}

async fn wait(r: &Rpc, id: &str) -> Result<Value, RpcError> {
    r.call(
        "cap.terminal.wait",
        json!({ "terminal_id": id, "timeout_ms": 20_000 }),
    )
    .await
}

#[tokio::test]
async fn huge_output_is_truncated_at_the_limit() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cfg = TermConfig {
        output_limit: 64 * 1024,
        ..TermConfig::default()
    };
    let (r, _) = rpc(tmp.path(), ToolPermission::None, true, cfg);
    let t = std::time::Instant::now();
    let id = sh(&r, "head -c 100000000 /dev/zero | tr '\\0' a; echo END")
        .await
        .expect("create");
    let v = wait(&r, &id).await.expect("wait");
    eprintln!("100 MB through a terminal in {:?}", t.elapsed());
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["truncated"], true);
    assert_eq!(v["next_byte"], 100_000_004u64);
    let out = v["output"].as_str().expect("out");
    assert_eq!(out.len(), 64 * 1024);
    assert!(out.ends_with("aaaEND\n"));
}

#[tokio::test]
async fn agent_kill_reports_signal_orchestrator_kill_reports_killed() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (r, _) = rpc(
        tmp.path(),
        ToolPermission::None,
        true,
        TermConfig::default(),
    );
    let id = sh(&r, "echo hi; sleep 30").await.expect("create");
    r.call("cap.terminal.kill", json!({ "terminal_id": id }))
        .await
        .expect("kill");
    let v = wait(&r, &id).await.expect("agent kill is an exit");
    assert_eq!(v["signal"], "SIGTERM");
    let id2 = sh(&r, "trap '' TERM; sleep 30").await.expect("create");
    tokio::time::sleep(Duration::from_millis(100)).await;
    r.terminals().kill_all();
    let t = std::time::Instant::now();
    assert_eq!(wait(&r, &id2).await, Err(RpcError::TerminalKilled));
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "SIGKILL after the 5 s grace"
    );
    // Two are running at most: concurrent_max.
    let _a = sh(&r, "sleep 30").await.expect("a");
    let _b = sh(&r, "sleep 30").await.expect("b");
    assert!(matches!(
        sh(&r, "true").await,
        Err(RpcError::TerminalUnavailable(_))
    ));
}

#[tokio::test]
async fn released_buffer_lives_for_the_retention_then_goes() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cfg = TermConfig {
        retention: Duration::from_millis(300),
        ..TermConfig::default()
    };
    let (r, _) = rpc(tmp.path(), ToolPermission::None, true, cfg);
    let id = sh(&r, "echo kept").await.expect("create");
    wait(&r, &id).await.expect("wait");
    r.call("cap.terminal.release", json!({ "terminal_id": id }))
        .await
        .expect("release");
    let v = r
        .call("cap.terminal.output", json!({ "terminal_id": id }))
        .await
        .expect("kept");
    assert_eq!(v["output"], "kept\n");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let gone = r
        .call("cap.terminal.output", json!({ "terminal_id": id }))
        .await;
    assert!(matches!(gone, Err(RpcError::InvalidParams(_))), "{gone:?}");
}

#[tokio::test]
async fn interactive_deny_never_runs_and_cwd_must_be_in_scope() {
    let tmp = tempfile::tempdir().expect("tmp");
    let marker = tmp.path().join("ran");
    let script = format!("touch {}", marker.display());
    let (r, ap) = rpc(
        tmp.path(),
        ToolPermission::Interactive,
        false,
        TermConfig::default(),
    );
    assert!(matches!(sh(&r, &script).await, Err(RpcError::Denied(_))));
    assert_eq!(ap.asked.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!marker.exists(), "a denied command ran");
    let out = r
        .call(
            "cap.terminal.create",
            json!({ "command": "true", "cwd": "/" }),
        )
        .await;
    assert_eq!(out, Err(RpcError::ScopeViolation));
    assert_eq!(
        ap.asked.load(Ordering::SeqCst),
        1,
        "scope is checked before asking"
    );
    let (r, ap) = rpc(
        tmp.path(),
        ToolPermission::Interactive,
        true,
        TermConfig::default(),
    );
    let id = sh(&r, &script).await.expect("granted");
    wait(&r, &id).await.expect("wait");
    assert!(marker.exists());
    assert_eq!(ap.asked.load(Ordering::SeqCst), 1);
}
