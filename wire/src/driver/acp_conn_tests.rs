//! The connection task of [`super::acp_conn`] against the Python SDK echo agent
//! (`tests/support/acp_echo_agent.py`, peer `py-acp`), with a probe standing in for
//! the session: `session/cancel` answers every pending permission `cancelled` (ACP
//! requires it), a form elicitation comes back `accept` with the answer, `decline`
//! or (withdrawn by a cancel) `cancel`, a session ending mid-turn withdraws what
//! waits and sends `session/close`, and agent -> client requests in flight are
//! capped; a permission the agent cancels itself (`$/cancel_request`) is withdrawn
//! and answered `cancelled`; `usage_update`s make one `cap.usage` per turn; a resume
//! is `session/resume` where the agent advertises it, else `session/load`. And the line gate of [`super::acp_lines`] on its own: the lines handed to
//! the SDK stay within two windows of the markers that came back.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::io::AsyncWriteExt;
use tokio::sync::{Semaphore, mpsc};

use super::acp_conn::{self, Cmd, Conn, MAX_IN_FLIGHT};
use super::acp_host::SessionHost;
use super::acp_lines::{self, MARKER_METHOD, WINDOW_LINES};
use super::acp_perms::Perms;
use super::sink::OutputBatch;
use super::{DriverOutput, OutputSink};
use crate::protocol::{CapEvent, Decision, StopReason};

/// Stands in for the session: forwards the driver's outputs to the test.
struct Probe;

impl Actor for Probe {
    type Msg = OutputBatch;
    type State = mpsc::Sender<DriverOutput>;
    type Arguments = mpsc::Sender<DriverOutput>;

    async fn pre_start(
        &self,
        _myself: ActorRef<OutputBatch>,
        tx: mpsc::Sender<DriverOutput>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(tx)
    }

    async fn handle(
        &self,
        _myself: ActorRef<OutputBatch>,
        msg: OutputBatch,
        tx: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        for o in msg.outputs {
            tx.send(o).await?;
        }
        Ok(())
    }
}

fn support(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/support")
        .join(name)
}

/// The py-acp venv's python; a missing peer fails with install advice.
fn python() -> PathBuf {
    let out = std::process::Command::new("bash")
        .arg(support("install_peers.sh"))
        .args(["--path", "py-acp"])
        .output()
        .expect("run install_peers.sh");
    assert!(
        out.status.success(),
        "peer 'py-acp' is not installed ({}); run ./tests/run.sh or \
         tests/support/install_peers.sh py-acp",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

async fn next(rx: &mut mpsc::Receiver<DriverOutput>) -> DriverOutput {
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("driver output within 20 s")
        .expect("driver output")
}

/// The connection task on a fresh echo agent, and the test's handles on it.
struct Harness {
    rx: mpsc::Receiver<DriverOutput>,
    cmds: mpsc::Sender<Cmd>,
    perms: Arc<Perms>,
    host: Arc<SessionHost>,
    probe: ActorRef<OutputBatch>,
    _child: tokio::process::Child,
    ws: tempfile::TempDir,
    /// The first output after `initialize`: `Ready`.
    ready: DriverOutput,
}

impl Harness {
    async fn start() -> Harness {
        Harness::resuming(None, false).await
    }

    /// Started with `resume_id`; `advertise` makes the agent offer `session/resume`.
    async fn resuming(resume_id: Option<&str>, advertise: bool) -> Harness {
        let ws = tempfile::tempdir().expect("ws");
        let mut child = tokio::process::Command::new(python())
            .arg(support("acp_echo_agent.py"))
            .env("ACP_ECHO_RESUME", if advertise { "1" } else { "0" })
            .current_dir(ws.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the echo agent");
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let (tx, mut rx) = mpsc::channel(256);
        let (probe, _task) = Actor::spawn(None, Probe, tx).await.expect("probe");
        let sink = OutputSink::new(1, probe.get_derived(), Arc::new(Semaphore::new(32)));
        let perms = Perms::new(sink.clone());
        let host = SessionHost::new(sink);
        let conn = Conn {
            perms: perms.clone(),
            host: host.clone(),
            rpc: None,
            cwd: ws.path().to_path_buf(),
            resume_id: resume_id.map(str::to_owned),
            max_line: crate::process::lines::DEFAULT_MAX_LINE,
        };
        let (cmds, cmd_rx) = mpsc::channel(8);
        let (i, o) = (stdin.expect("stdin"), stdout.expect("stdout"));
        tokio::spawn(acp_conn::run(conn, i, o, cmd_rx));
        let ready = next(&mut rx).await;
        assert!(matches!(ready, DriverOutput::Ready { .. }), "{ready:?}");
        Harness {
            ready,
            rx,
            cmds,
            perms,
            host,
            probe,
            _child: child,
            ws,
        }
    }

    async fn prompt(&self, text: &str) {
        self.cmds
            .send(Cmd::Prompt(text.into()))
            .await
            .expect("prompt");
    }

    /// The next `cap.ask_user`'s id and form, skipping other outputs.
    async fn next_ask(&mut self) -> (String, Option<serde_json::Value>) {
        loop {
            if let DriverOutput::Event(CapEvent::AskUser(a)) = next(&mut self.rx).await {
                return (a.ask_id, a.form.into_option());
            }
        }
    }

    /// The text said until the turn ends, whether an ask was withdrawn, the end.
    async fn rest_of_turn(&mut self) -> (String, bool, StopReason) {
        let (mut text, mut withdrawn) = (String::new(), false);
        loop {
            match next(&mut self.rx).await {
                DriverOutput::Withdrawn { .. } => withdrawn = true,
                DriverOutput::Event(CapEvent::TextChunk(t)) => text.push_str(&t.text),
                DriverOutput::TurnEnd(end) => return (text, withdrawn, end.stop_reason),
                _ => {}
            }
        }
    }

    /// The next permission request's id, skipping other outputs.
    async fn next_request(&mut self) -> String {
        loop {
            if let DriverOutput::Event(CapEvent::PermissionRequest(p)) = next(&mut self.rx).await {
                return p.req_id;
            }
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.probe.stop(None);
    }
}

#[tokio::test]
async fn cancel_answers_pending_permissions_cancelled() {
    let mut h = Harness::start().await;
    h.prompt("perm").await;
    let req_id = h.next_request().await;
    // Nobody answers: the cancel must.
    h.cmds.send(Cmd::Cancel).await.expect("cancel");
    let (mut withdrawn, mut text) = (false, String::new());
    let end = loop {
        match next(&mut h.rx).await {
            DriverOutput::Withdrawn { req_id: id } => withdrawn |= id == req_id,
            DriverOutput::Event(CapEvent::TextChunk(t)) => text.push_str(&t.text),
            DriverOutput::TurnEnd(end) => break end,
            _ => {}
        }
    };
    assert!(withdrawn, "the session is told the request was withdrawn");
    assert_eq!(text, "outcome=cancelled", "the agent saw `cancelled`");
    assert_eq!(end.stop_reason, StopReason::Cancelled);
    assert!(
        !h.perms.answer(&req_id, Decision::AllowOnce),
        "already answered"
    );
}

#[tokio::test]
async fn a_permission_the_agent_cancels_is_withdrawn_and_answered_cancelled() {
    let mut h = Harness::start().await;
    h.prompt("perm-withdrawn").await;
    let req_id = h.next_request().await;
    // Nobody answers, and no session/cancel: the agent's `$/cancel_request` must.
    let (text, withdrawn, end) = h.rest_of_turn().await;
    assert!(withdrawn, "the session is told the request was withdrawn");
    assert_eq!(text, "outcome=cancelled", "the agent saw `cancelled`");
    assert_eq!(end, StopReason::EndTurn, "the turn itself goes on");
    assert!(
        !h.perms.answer(&req_id, Decision::AllowOnce),
        "already answered"
    );
}

#[tokio::test]
async fn usage_updates_make_one_cap_usage_per_turn() {
    let mut h = Harness::start().await;
    // The session's cumulative cost 0.5, then 0.75, then no report.
    let mut per_turn = Vec::new();
    for prompt in ["cost 0.5", "cost 0.75", "echo: none"] {
        h.prompt(prompt).await;
        let mut usages = Vec::new();
        loop {
            match next(&mut h.rx).await {
                DriverOutput::Event(CapEvent::Usage(u)) => usages.push(u),
                DriverOutput::TurnEnd(_) => break,
                _ => {}
            }
        }
        assert!(usages.len() <= 1, "one cap.usage per turn: {usages:?}");
        per_turn.push(usages.pop());
    }
    let cost = |u: &Option<crate::protocol::Usage>| u.as_ref().and_then(|u| u.cost_usd());
    assert_eq!(cost(&per_turn[0]), Some(0.5));
    assert_eq!(
        cost(&per_turn[1]),
        Some(0.25),
        "the increase, not the total"
    );
    assert!(per_turn[2].is_none(), "a turn with no report has none");
    let meta = per_turn[0]
        .as_ref()
        .and_then(|u| u.meta.clone())
        .expect("meta");
    assert_eq!(meta["acp.context_used"], 7);
    assert_eq!(meta["acp.context_size"], 100);
}

#[tokio::test]
async fn resume_is_session_resume_where_advertised_else_session_load() {
    for (advertise, said) in [
        (true, "[resumed echo-old] hi"),
        (false, "[loaded echo-old] hi"),
    ] {
        let mut h = Harness::resuming(Some("echo-old"), advertise).await;
        let DriverOutput::Ready {
            resume_id, resumed, ..
        } = &h.ready
        else {
            unreachable!()
        };
        assert_eq!((resume_id.as_deref(), *resumed), (Some("echo-old"), true));
        h.prompt("echo: hi").await;
        let (text, _, _) = h.rest_of_turn().await;
        assert_eq!(text, said, "advertised resume: {advertise}");
    }
}

#[tokio::test]
async fn form_elicitation_accepted_declined_and_withdrawn() {
    let mut h = Harness::start().await;
    h.prompt("elicit").await;
    let (ask_id, form) = h.next_ask().await;
    let form = form.expect("the requested schema");
    assert_eq!(form["properties"]["name"]["type"], "string", "{form}");
    assert!(
        h.host
            .answer(&ask_id, Some(serde_json::json!({"name": "Ada"})))
    );
    let (text, _, end) = h.rest_of_turn().await;
    assert_eq!(text, r#"action=accept content={"name": "Ada"}"#);
    assert_eq!(end, StopReason::EndTurn);

    h.prompt("elicit").await;
    let (ask_id, _) = h.next_ask().await;
    assert!(h.host.answer(&ask_id, None), "declined");
    let (text, _, _) = h.rest_of_turn().await;
    assert_eq!(text, "action=decline content=null");

    h.prompt("elicit").await;
    let (ask_id, _) = h.next_ask().await;
    h.cmds.send(Cmd::Cancel).await.expect("cancel");
    let (text, withdrawn, end) = h.rest_of_turn().await;
    assert!(withdrawn, "the session is told the ask was withdrawn");
    assert_eq!(text, "action=cancel content=null", "the agent saw `cancel`");
    assert_eq!(end, StopReason::Cancelled);
    assert!(!h.host.answer(&ask_id, None), "already answered");
}

#[tokio::test]
async fn ending_mid_turn_withdraws_what_waits_and_closes_the_session() {
    let mut h = Harness::start().await;
    h.prompt("perm").await;
    let req_id = h.next_request().await;
    // The session ends: the actor drops its end of the commands.
    let (ended, _) = mpsc::channel(1);
    drop(std::mem::replace(&mut h.cmds, ended));
    loop {
        if let DriverOutput::Withdrawn { req_id: id } = next(&mut h.rx).await {
            assert_eq!(id, req_id);
            break;
        }
    }
    assert!(
        !h.perms.answer(&req_id, Decision::AllowOnce),
        "already answered"
    );
    // The echo agent records the `session/close` it got in its cwd.
    let closed = h.ws.path().join(".closed");
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        while !closed.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(seen.is_ok(), "session/close reached the agent");
}

#[tokio::test]
async fn agent_requests_in_flight_are_capped() {
    let mut h = Harness::start().await;
    let n = MAX_IN_FLIGHT + 8;
    h.prompt(&format!("perm-many {n}")).await;
    let mut open = Vec::new();
    for _ in 0..MAX_IN_FLIGHT {
        open.push(h.next_request().await);
    }
    // The agent sent all of them; only the cap is being served.
    let more = tokio::time::timeout(Duration::from_millis(700), h.next_request()).await;
    assert!(
        more.is_err(),
        "request {} admitted past the cap",
        MAX_IN_FLIGHT + 1
    );
    for id in open.drain(..) {
        assert!(h.perms.answer(&id, Decision::AllowOnce));
    }
    for _ in MAX_IN_FLIGHT..n {
        let id = h.next_request().await;
        assert!(h.perms.answer(&id, Decision::AllowOnce));
    }
    let mut text = String::new();
    loop {
        match next(&mut h.rx).await {
            DriverOutput::Event(CapEvent::TextChunk(t)) => text.push_str(&t.text),
            DriverOutput::TurnEnd(_) => break,
            _ => {}
        }
    }
    assert_eq!(
        text,
        format!("allowed={n}"),
        "the waiting ones were served after"
    );
}

/// The lines the gate lets through until it waits (300 ms without one), or the end:
/// updates are counted, markers kept.
async fn take_ready(
    lines: &mut (impl Stream<Item = std::io::Result<String>> + Unpin),
    updates: &mut usize,
    markers: &mut Vec<serde_json::Value>,
) -> bool {
    loop {
        match tokio::time::timeout(Duration::from_millis(300), lines.next()).await {
            Err(_) => return true,
            Ok(None) => return false,
            Ok(Some(line)) => {
                let v: serde_json::Value =
                    serde_json::from_str(&line.expect("line")).expect("json");
                if v["method"] == MARKER_METHOD {
                    markers.push(v["params"].clone());
                } else {
                    *updates += 1;
                }
            }
        }
    }
}

#[tokio::test]
async fn the_sdk_is_handed_at_most_two_windows_ahead_of_its_dispatch() {
    let (tx, _rx) = mpsc::channel(8);
    let (probe, _task) = Actor::spawn(None, Probe, tx).await.expect("probe");
    let sink = OutputSink::new(1, probe.get_derived(), Arc::new(Semaphore::new(32)));
    let (mut agent, ours) = tokio::io::duplex(64 << 10);
    let total = 4 * WINDOW_LINES;
    tokio::spawn(async move {
        for n in 0..total {
            let line = format!(
                "{{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{{\"n\":{n}}}}}\n"
            );
            agent.write_all(line.as_bytes()).await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let (drained, lines) = acp_lines::incoming(ours, crate::process::lines::DEFAULT_MAX_LINE, sink);
    let mut lines = Box::pin(lines);
    let (mut updates, mut markers) = (0, Vec::new());
    assert!(take_ready(&mut lines, &mut updates, &mut markers).await);
    assert_eq!(
        (updates, markers.len()),
        (2 * WINDOW_LINES, 2),
        "nothing dispatched yet"
    );
    // The agent cannot forge a marker: it does not know the token.
    let forged = serde_json::json!({ "token": "guess", "window": 99 });
    assert!(drained.is_marker(MARKER_METHOD, &forged));
    assert!(take_ready(&mut lines, &mut updates, &mut markers).await);
    assert_eq!(updates, 2 * WINDOW_LINES, "a forged marker opened the gate");
    assert!(!drained.is_marker("session/update", &markers[0]));
    assert!(drained.is_marker(MARKER_METHOD, &markers[0]));
    assert!(take_ready(&mut lines, &mut updates, &mut markers).await);
    assert_eq!(
        (updates, markers.len()),
        (3 * WINDOW_LINES, 3),
        "one window more"
    );
    for m in markers.clone() {
        drained.is_marker(MARKER_METHOD, &m);
    }
    // Window 3 dispatched: the reader goes on past window 4, to the agent's end.
    assert!(
        !take_ready(&mut lines, &mut updates, &mut markers).await,
        "the end"
    );
    assert_eq!((updates, markers.len()), (total, 4));
    probe.stop(None);
}
