//! Hostile wires end to end: frames where none may come (a stream-json `result`
//! before `init`, an `assistant` frame's text before it), lines far over the line cap
//! on every binding, with and without a newline, and a flood of ACP updates (each
//! under the cap) into a session that stalls, against capfleet's peak memory.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::chaos::{
    Chat, Finished, Output, RUN_TIMEOUT, assert_no_agent_left, assert_stream_and_journal, cap_kind,
    count, error_code, lines, turn_text, ty,
};
use crate::common::repo::Fixture;
use crate::common::sim::fleet_session;
use crate::common::{EnvMarker, hwm_kib};

/// A `result` frame before the agent's `init` is reported as stray (`cap.error
/// stray_frame`, once), never taken as turn 1's answer or cost: the turn ends on its
/// own `result`, with its own text and cost.
#[test]
fn a_result_before_init_is_stray_not_an_answer() {
    let chat = Chat::start("stray", "stray_result.toml", Output::Json, &[]);
    let marker = chat.marker.clone();
    let run = chat.finish();
    let ev = &run.events;
    run.assert_success();
    assert_eq!(
        count(ev, |e| error_code(e) == Some("stray_frame")),
        1,
        "{}",
        lines(ev)
    );
    let ended: Vec<&Value> = ev.iter().filter(|e| ty(e) == "turn_ended").collect();
    assert_eq!(ended.len(), 1, "{}", lines(ev));
    assert_eq!(ended[0]["outcome"], "completed");
    assert_eq!(turn_text(ev, 1), "the-answer.");
    let costs: Vec<f64> = ev
        .iter()
        .filter(|e| cap_kind(e) == "cap.usage")
        .filter_map(|e| e["event"]["cost_usd_estimate"].as_f64())
        .collect();
    assert_eq!(costs, [0.01], "{}", lines(ev));
    assert!(!lines(ev).contains("\"result_text\":\"stray-answer\""));
    assert_stream_and_journal(ev, &run.journal);
    assert_no_agent_left(&marker);
}

/// Peak memory (VmHWM) capfleet may reach above an idle run of the same binding.
const FLOOD_HEADROOM_KIB: u64 = 64 << 10;
/// The line sent down each pipe binding: 1 GiB, 1024x the 1 MiB cap.
const PIPE_FLOOD: u64 = 1 << 30;
/// The line typed onto the PTY (~15 MB/s through a terminal): 80 MiB, 80x the cap and
/// more than the headroom, so a line buffered whole (or one copy per rendered row)
/// could not stay under it, in a few seconds.
const PTY_FLOOD: u64 = 80 << 20;

/// One binding's agent as `chat` takes it: the agent and the flags it needs.
struct Binding {
    name: &'static str,
    agent: String,
    extra: Vec<String>,
}

impl Binding {
    fn stream_json() -> Binding {
        Binding {
            name: "stream-json",
            agent: "sim".into(),
            extra: Vec::new(),
        }
    }

    fn acp() -> Binding {
        let bin = crate::common::BIN.to_owned();
        Binding {
            name: "acp",
            agent: crate::common::support("sim-acp.toml").display().to_string(),
            extra: vec![
                "--argv".into(),
                bin,
                "sim".into(),
                "--mode".into(),
                "acp".into(),
            ],
        }
    }

    fn pty() -> Binding {
        Binding {
            name: "pty",
            agent: "sim-tui".into(),
            extra: Vec::new(),
        }
    }

    /// Runs `chat --json` on `script` to its end; its events, exit and peak memory.
    fn run(&self, label: &str, script: &str, flags: &[&str]) -> (Finished, u64) {
        self.run_with(label, script, flags, Output::Json)
    }

    /// [`Binding::run`] with stdout taken as `output`.
    fn run_with(
        &self,
        label: &str,
        script: &str,
        flags: &[&str],
        output: Output,
    ) -> (Finished, u64) {
        let dir = tempfile::tempdir().expect("script dir");
        let path = dir.path().join("script.toml");
        std::fs::write(&path, script).expect("script");
        let mut extra: Vec<&str> = flags.to_vec();
        extra.extend(self.extra.iter().map(String::as_str));
        let chat = Chat::start_agent(label, &self.agent, &path, output, &extra);
        let pid = chat.pid;
        let sampler = std::thread::spawn(move || {
            let mut peak = 0;
            loop {
                match hwm_kib(pid) {
                    0 => return peak, // gone: VmHWM only grows, the last read is the peak
                    kib => peak = kib,
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let marker = chat.marker.clone();
        // A stalled consumer's run has its stall, then the backlog, on top.
        let run = match output {
            Output::Stalled(stall) => chat.finish_within(RUN_TIMEOUT + 2 * stall),
            _ => chat.finish(),
        };
        let peak = sampler.join().expect("sampler");
        assert_no_agent_left(&marker);
        (run, peak)
    }

    /// An idle run (one short answer), then a line of `bytes` with its newline (the
    /// turn goes on and completes) and one without (the agent dies inside it, no
    /// restart): each reported as one `parse_failed`, never buffered, and capfleet's
    /// peak memory within [`FLOOD_HEADROOM_KIB`] of the idle run's.
    fn flood(&self, bytes: u64) {
        let t0 = Instant::now();
        let (idle, idle_peak) = self.run("idle", IDLE, &[]);
        assert!(
            idle.status.success(),
            "{}: idle run {:?}",
            self.name,
            idle.status
        );
        let terminated = format!(
            "[[turn]]\nsteps = [{{ say = \"before.\" }}, {{ oversize = {bytes} }}, {{ say = \"after.\" }}]\n"
        );
        let (run, peak) = self.run("flood-nl", &terminated, &[]);
        let ev = &run.events;
        assert!(
            run.status.success(),
            "{}: exit {:?}\n{}",
            self.name,
            run.status,
            run.stderr
        );
        assert_eq!(
            oversize_errors(ev, true),
            1,
            "{}:\n{}",
            self.name,
            lines(ev)
        );
        assert_eq!(
            turn_text(ev, 1).replace('\n', ""),
            "before.after.",
            "{}",
            self.name
        );
        assert!(
            ev.iter()
                .any(|e| ty(e) == "turn_ended" && e["outcome"] == "completed")
        );
        let (open, open_peak) = self.run(
            "flood-open",
            &format!(
                "[[turn]]\nsteps = [{{ oversize = {bytes}, newline = false }}, {{ crash = 3 }}]\n"
            ),
            &["--restart", "temporary"],
        );
        assert_eq!(
            oversize_errors(&open.events, false),
            1,
            "{}:\n{}",
            self.name,
            lines(&open.events)
        );
        assert_eq!(count(&open.events, |e| ty(e) == "restart"), 0);
        assert!(!open.stderr.contains("panick"), "{}", open.stderr);
        let mib = |kib: u64| kib as f64 / 1024.0;
        eprintln!(
            "{}: {} MiB line: peak RSS idle {:.1} MiB, with newline {:.1} MiB ({:?}), without {:.1} MiB ({:?}); test {:?}",
            self.name,
            bytes >> 20,
            mib(idle_peak),
            mib(peak),
            run.elapsed,
            mib(open_peak),
            open.elapsed,
            t0.elapsed()
        );
        for (what, p) in [("with", peak), ("without", open_peak)] {
            assert!(
                p < idle_peak + FLOOD_HEADROOM_KIB,
                "{}: peak {p} KiB on a line {what} newline vs {idle_peak} KiB idle",
                self.name
            );
        }
    }
}

const IDLE: &str = "[[turn]]\nsteps = [{ say = \"before.after.\" }]\n";

/// `cap.error parse_failed` events of oversize lines ended by a newline or not.
fn oversize_errors(events: &[Value], terminated: bool) -> usize {
    count(events, |e| {
        error_code(e) == Some("parse_failed")
            && e["event"]["details"]["terminated"] == terminated
            && e["event"]["details"]["max_line_bytes"] == 1 << 20
    })
}

#[test]
fn a_huge_line_on_stream_json_stays_bounded() {
    Binding::stream_json().flood(PIPE_FLOOD);
}

#[test]
fn a_huge_line_on_acp_stays_bounded() {
    Binding::acp().flood(PIPE_FLOOD);
}

#[test]
fn a_huge_line_on_the_pty_stays_bounded() {
    Binding::pty().flood(PTY_FLOOD);
}

/// The ACP flood: 200 MiB of text in 16 KiB `session/update`s (12,800 lines, each far
/// under the line cap), while capfleet's stdout is not read for [`STALL`].
const UPDATES_TEXT: u64 = 200 << 20;
/// How long the flood's consumer stalls: capfleet's printer blocks, then the session,
/// then the driver's sink. Without the gate, the SDK's queue took everything the agent
/// sent meanwhile (about 10 MB/s here, 137 MB after 10 s).
const STALL: Duration = Duration::from_secs(10);

/// A flood of `session/update`s, each far under the line cap, into a session that
/// stops taking them: the SDK queues what our reader hands it in front of its dispatch
/// loop, and the reader hands it at most two windows ahead (`driver/acp_lines.rs`;
/// the window itself, in lines, is the library's unit test), so capfleet's peak memory
/// stays within [`FLOOD_HEADROOM_KIB`] of an idle run's, the agent waits on its pipe,
/// and every chunk comes through once the consumer is back.
#[test]
fn a_flood_of_acp_updates_into_a_stalled_session_stays_bounded() {
    let acp = Binding::acp();
    let (idle, idle_peak) = acp.run_with("idle", IDLE, &[], Output::Drain);
    assert!(idle.status.success(), "idle run {:?}", idle.status);
    let script = format!(
        "[[turn]]\nsteps = [{{ flood = {UPDATES_TEXT}, chunk = 16384 }}, {{ say = \"flood-end.\" }}]\n"
    );
    let (run, peak) = acp.run_with("updates", &script, &[], Output::Stalled(STALL));
    let tail = String::from_utf8_lossy(&run.drained.tail);
    run.assert_success();
    assert!(tail.contains("flood-end."), "turn did not finish: …{tail}");
    assert!(
        run.drained.bytes >= UPDATES_TEXT,
        "{} bytes of text out",
        run.drained.bytes
    );
    let mib = |kib: u64| kib as f64 / 1024.0;
    eprintln!(
        "acp: {} MiB in 16 KiB updates, stdout stalled {STALL:?}: peak RSS idle {:.1} MiB, flood {:.1} MiB ({:?})",
        UPDATES_TEXT >> 20,
        mib(idle_peak),
        mib(peak),
        run.elapsed
    );
    assert!(
        peak < idle_peak + FLOOD_HEADROOM_KIB,
        "peak {peak} KiB during the stalled flood vs {idle_peak} KiB idle"
    );
}

/// An agent that writes an `assistant` frame and a `result` before its `init`: the text
/// is no answer either. A fleet run (`--metrics-addr`, held open by a second session
/// while it is scraped): both frames are counted in `capfleet_stray_frames_total` and
/// journaled as `stray_frame`, and turn 1's text, journal and transcript hold only the
/// real answer.
#[test]
fn text_before_init_is_stray_not_part_of_turn_one() {
    let f = Fixture::plain();
    let m = EnvMarker::new("stray-text");
    f.write(
        "stray.toml",
        r#"before_init = [
  '{"type":"assistant","message":{"id":"msg_stray","role":"assistant","content":[{"type":"text","text":"stray-text"}]}}',
  '{"type":"result","subtype":"success","result":"stray-text","total_cost_usd":0.5}',
]

[[turn]]
steps = [{ say = "the-answer." }, { usage = { input_tokens = 3, output_tokens = 4, cost_usd = 0.01 } }]
"#,
    );
    f.write("idle.toml", "[[turn]]\nsteps = [{ sleep_ms = 10000 }]\n");
    f.write(
        "fleet.toml",
        &format!(
            "[fleet]\nname = \"st\"\nstart = [\"stray\", \"idle\"]\ntask = \"go\"\n\n{}{}",
            fleet_session("stray", "stray.toml", &m, ""),
            fleet_session("idle", "idle.toml", &m, "")
        ),
    );
    let done =
        "capfleet_turns_total{session=\"cap://st/stray\",agent=\"sim\",outcome=\"completed\"} 1";
    let (seen, status, scraped) = crate::common::scraped::run_scraped_until(&f, done);
    assert!(seen, "the stray session's turn completes:\n{scraped}");
    assert!(
        scraped.contains("capfleet_stray_frames_total{session=\"cap://st/stray\"} 2"),
        "{scraped}"
    );
    assert!(status.success(), "{status:?}");
    let journal = f.journal();
    let of_stray = |kind: &str| -> Vec<&Value> {
        journal
            .iter()
            .filter(|r| r["urn"] == "cap://st/stray" && r["event"]["kind"] == kind)
            .collect()
    };
    let strays: Vec<&str> = of_stray("cap.error")
        .iter()
        .filter(|r| r["event"]["code"] == "stray_frame")
        .filter_map(|r| r["event"]["message"].as_str())
        .collect();
    assert_eq!(strays.len(), 2, "{strays:?}");
    assert!(strays[0].starts_with("stray `assistant` frame before the agent's init"));
    assert!(strays[1].starts_with("stray `result` frame before the agent's init"));
    let text: String = of_stray("cap.text_chunk")
        .iter()
        .inspect(|r| assert_eq!(r["turn"], 1, "{r}"))
        .filter_map(|r| r["event"]["text"].as_str())
        .collect();
    assert_eq!(text, "the-answer.");
    let transcript: Value =
        serde_json::from_str(&f.artifact("stray", "transcript.json")).expect("transcript");
    let said: String = transcript["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["kind"] == "cap.text_chunk")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(said, "the-answer.", "{transcript}");
}
