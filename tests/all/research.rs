//! The research answerer (issue 20, point 4) on the simulator: what the policy
//! leaves open, with no human to ask, goes to a one-shot session of the `[answerer]`
//! agent (a sim here, scripted), whose last `ANSWER:` line answers it — validated
//! against the options and the answerer's `max_risk`. A hang is a timeout, garbage an
//! invalid answer, an approval above `max_risk` refused: each answered fail-safe,
//! saying why. Identical open questions share one research; `parallel` bounds the
//! researchers; the researcher's own requests are refused; its cost is the fleet's;
//! its events are journaled under its URN, which the answer's note names.

use std::path::Path;

use serde_json::Value;

use crate::common::chat::assert_no_survivor;
use crate::common::{self, EnvMarker, capfleet};

/// An asker's script: a permission for `command` (stream-json rates `Bash` medium
/// whatever `risk` the sim claims; `risk = "high"` stands), then `finished`.
fn asker(risk: &str, command: &str) -> String {
    format!(
        "[[turn]]\nsteps = [{{ permission = \"Bash\", input = {{ command = \"{command}\" }}, \
         output = \"built\", risk = \"{risk}\" }}, {{ say = \"finished\" }}]\n"
    )
}

/// Writes `fleet.toml` (fleet `rs`): sessions named by `askers` (each with its
/// script), all started on the task, and `[answerer]` (a sim on `researcher.toml`)
/// with `answerer_keys`.
fn write_fleet(
    dir: &Path,
    askers: &[(&str, String)],
    researcher: &str,
    answerer_keys: &str,
    m: &EnvMarker,
) {
    let (k, v) = m.pair();
    std::fs::write(dir.join("researcher.toml"), researcher).unwrap();
    let names: Vec<String> = askers.iter().map(|(n, _)| format!("\"{n}\"")).collect();
    let mut fleet = format!(
        "[fleet]\nname = \"rs\"\nstart = [{}]\ntask = \"build it\"\n\n\
         [answerer]\nagent = \"sim\"\nscript = \"researcher.toml\"\nenv = {{ {k} = \"{v}\" }}\n{answerer_keys}\n\n",
        names.join(", ")
    );
    for (name, script) in askers {
        std::fs::write(dir.join(format!("{name}.toml")), script).unwrap();
        fleet.push_str(&format!(
            "[[sessions]]\nname = \"{name}\"\nagent = \"sim\"\nscript = \"{name}.toml\"\nenv = {{ {k} = \"{v}\" }}\n\n"
        ));
    }
    std::fs::write(dir.join("fleet.toml"), fleet).unwrap();
}

/// `capfleet run fleet.toml --json` (no terminal: nobody to ask) to its end: the
/// run's totals and its journal.
fn run(dir: &Path) -> (Value, Vec<Value>) {
    run_with(dir, &[])
}

/// [`run`] with more arguments.
fn run_with(dir: &Path, more: &[&str]) -> (Value, Vec<Value>) {
    let out = capfleet(dir)
        .args(["run", "fleet.toml", "--json"])
        .args(more)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let totals = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "run_totals")
        .expect("run_totals");
    (totals, common::run_journal(dir))
}

/// The answer events (`cap.permission.response`, `cap.ask_user.answer`) of `session`.
fn answers<'a>(records: &'a [Value], session: &str) -> Vec<&'a Value> {
    let urn = format!("cap://rs/{session}");
    records
        .iter()
        .filter(|r| r["urn"] == urn.as_str())
        .filter(|r| {
            let kind = &r["event"]["kind"];
            kind == "cap.permission.response" || kind == "cap.ask_user.answer"
        })
        .map(|r| &r["event"])
        .collect()
}

/// The one answer of `session`: its decision (or value), rule and research note.
fn answer<'a>(records: &'a [Value], session: &str) -> (&'a Value, &'a str, &'a Value) {
    let all = answers(records, session);
    assert_eq!(all.len(), 1, "{all:?}");
    let a = all[0];
    let decided = if a["kind"] == "cap.permission.response" {
        &a["decision"]
    } else {
        &a["value"]
    };
    (
        decided,
        a["_meta"]["capfleet.rule"].as_str().unwrap(),
        &a["_meta"]["capfleet.research"],
    )
}

/// The research sessions' URNs, in the order they first appear in the journal.
fn researchers(records: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in records {
        if let Some(urn) = r["urn"].as_str()
            && urn.starts_with("cap://rs/research.")
            && !out.iter().any(|u| u == urn)
        {
            out.push(urn.to_owned());
        }
    }
    out
}

/// A scripted `ANSWER: allow_once` under `max_risk` approves the request: the tool
/// runs, the answer's note names the research session (whose events, its transcript,
/// the journal holds), and the researcher's cost is counted in the fleet's total.
#[test]
fn a_researched_answer_approves_within_max_risk_and_its_cost_counts() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("research-ok");
    let researcher = "[[turn]]\nsteps = [{ say = \"The build is harmless.\\nANSWER: allow_once\" }, \
                      { usage = { input_tokens = 100, output_tokens = 20, cost_usd = 0.25 } }]\n";
    write_fleet(
        dir.path(),
        &[("w", asker("medium", "make"))],
        researcher,
        "max_risk = \"medium\"",
        &m,
    );
    let (totals, records) = run(dir.path());
    let (decision, rule, note) = answer(&records, "w");
    assert_eq!(
        (decision.as_str(), rule),
        (Some("allow_once"), "research"),
        "{note}"
    );
    assert_eq!(note["answer"], "allow_once");
    assert_eq!(note["reason"], Value::Null);
    assert!(
        (note["cost_usd"].as_f64().unwrap() - 0.25).abs() < 1e-9,
        "{note}"
    );
    let sessions = researchers(&records);
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(note["session"], sessions[0].as_str());
    // The research session's transcript is in the journal: its prompt and its reply.
    let of_research: Vec<&Value> = records
        .iter()
        .filter(|r| r["urn"] == sessions[0].as_str())
        .collect();
    let prompt = of_research
        .iter()
        .find(|r| r["type"] == "turn_started")
        .and_then(|r| r["prompt"].as_str())
        .unwrap_or_default();
    assert!(
        prompt.contains("`Bash`") && prompt.contains("make") && prompt.contains("build it"),
        "{prompt}"
    );
    assert!(of_research.iter().any(|r| {
        r["event"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("ANSWER: allow_once"))
    }));
    // The tool ran, and the fleet's cost includes the researcher's.
    let w_text: Vec<&Value> = records
        .iter()
        .filter(|r| r["urn"] == "cap://rs/w")
        .collect();
    assert!(w_text.iter().any(|r| {
        r["event"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("finished"))
    }));
    assert!(
        totals["total"]["cost_usd"].as_f64().unwrap() >= 0.25,
        "{totals}"
    );
    assert_no_survivor(&m);
}

/// The answerer can never approve above its `max_risk`, whatever the researcher
/// says: `allow_once` on a high-risk request under `max_risk = "medium"` is refused
/// (deny), and the note says why.
#[test]
fn an_approval_above_max_risk_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("research-risk");
    let researcher = "[[turn]]\nsteps = [{ say = \"ANSWER: allow_always\" }]\n";
    write_fleet(
        dir.path(),
        &[("w", asker("high", "rm -rf build"))],
        researcher,
        "max_risk = \"medium\"",
        &m,
    );
    let (_, records) = run(dir.path());
    let (decision, rule, note) = answer(&records, "w");
    assert_eq!(
        (decision.as_str(), rule),
        (Some("deny"), "research_fail_safe"),
        "{note}"
    );
    let reason = note["reason"].as_str().unwrap();
    assert!(
        reason.contains("above the answerer's max_risk medium"),
        "{reason}"
    );
    assert_no_survivor(&m);
}

/// A researcher that hangs is cut at `timeout`; one that answers garbage is refused:
/// both fail-safe, each saying why.
#[test]
fn a_hang_times_out_and_garbage_is_refused_fail_safe() {
    for (researcher, expect) in [
        (
            "[[turn]]\nsteps = [{ say = \"thinking\" }, { hang = true }]\n",
            "did not answer within 1 s",
        ),
        (
            "[[turn]]\nsteps = [{ say = \"ANSWER: perhaps, if it feels right\" }]\n",
            "is not a decision",
        ),
        (
            "[[turn]]\nsteps = [{ say = \"I would allow it.\" }]\n",
            "no line starts with ANSWER:",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let m = EnvMarker::new("research-bad");
        write_fleet(
            dir.path(),
            &[("w", asker("low", "make"))],
            researcher,
            "timeout = 1",
            &m,
        );
        let started = std::time::Instant::now();
        let (_, records) = run(dir.path());
        let (decision, rule, note) = answer(&records, "w");
        assert_eq!(
            (decision.as_str(), rule),
            (Some("deny"), "research_fail_safe"),
            "{note}"
        );
        let reason = note["reason"].as_str().unwrap();
        assert!(reason.contains(expect), "{reason} (expected {expect})");
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        assert_no_survivor(&m);
    }
}

/// An ask with options is answered with one of them; the researcher's own
/// permission request is refused (it asks nothing further).
#[test]
fn an_ask_is_answered_with_an_option_and_the_researcher_asks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("research-ask");
    let ask = "[[turn]]\nsteps = [{ ask = \"Deploy where?\", options = [\"staging\", \"prod\"] }, { say = \"deployed\" }]\n";
    let researcher = "[[turn]]\nsteps = [{ permission = \"Write\", input = { file_path = \"x\" }, output = \"ok\", risk = \"low\" }, \
                      { say = \"Staging first.\\nANSWER: staging\" }]\n";
    write_fleet(dir.path(), &[("w", ask.to_owned())], researcher, "", &m);
    let (_, records) = run(dir.path());
    let (value, rule, note) = answer(&records, "w");
    assert_eq!(rule, "research", "{note}");
    assert_eq!(
        value.as_object().and_then(|o| o.values().next()),
        Some(&Value::from("staging")),
        "{value}"
    );
    let research = researchers(&records);
    let own: Vec<&Value> = records
        .iter()
        .filter(|r| {
            r["urn"] == research[0].as_str() && r["event"]["kind"] == "cap.permission.response"
        })
        .collect();
    assert_eq!(own.len(), 1);
    assert_eq!(own[0]["event"]["decision"], "deny");
    assert_eq!(
        own[0]["event"]["_meta"]["capfleet.rule"],
        "researcher_asks_nothing"
    );
    assert_no_survivor(&m);
}

/// Identical open questions of two sessions share one research; with `parallel = 1`
/// distinct questions are researched one after the other, never at once.
#[test]
fn identical_questions_share_one_research_and_parallel_bounds_them() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("research-dedup");
    let researcher = "[[turn]]\nsteps = [{ sleep_ms = 400 }, { say = \"ANSWER: allow_once\" }]\n";
    let askers = [
        ("a", asker("low", "make")),
        ("b", asker("low", "make")),
        ("c", asker("low", "make test")),
        ("d", asker("low", "make docs")),
    ];
    write_fleet(
        dir.path(),
        &askers,
        researcher,
        "parallel = 1\nmax_risk = \"medium\"",
        &m,
    );
    let (_, records) = run(dir.path());
    for s in ["a", "b", "c", "d"] {
        let (decision, rule, _) = answer(&records, s);
        assert_eq!(
            (decision.as_str(), rule),
            (Some("allow_once"), "research"),
            "{s}"
        );
    }
    let (_, _, note_a) = answer(&records, "a");
    let (_, _, note_b) = answer(&records, "b");
    assert_eq!(
        note_a["session"], note_b["session"],
        "a and b share one research"
    );
    assert_eq!(note_a["askers"], 2);
    let sessions = researchers(&records);
    assert_eq!(sessions.len(), 3, "three distinct questions: {sessions:?}");
    // parallel = 1: each research's records all come before the next one's first.
    let span = |urn: &str| {
        let at: Vec<usize> = records
            .iter()
            .enumerate()
            .filter(|(_, r)| r["urn"] == urn)
            .map(|(i, _)| i)
            .collect();
        (at[0], at[at.len() - 1])
    };
    let mut spans: Vec<(usize, usize)> = sessions.iter().map(|u| span(u)).collect();
    spans.sort();
    for pair in spans.windows(2) {
        assert!(pair[0].1 < pair[1].0, "researchers overlapped: {spans:?}");
    }
    assert_no_survivor(&m);
}

/// Real Claude Code 2.1.337 over stream-json as the researcher, against the fake LLM
/// (scripted to reply with an `ANSWER:` line to the research prompt only): the sim
/// session's open permission is approved by it, the prompt that reached the model
/// carried the question and the asking session's context, and the answer's note
/// names the research session.
#[test]
fn real_claude_code_researches_an_open_permission() {
    let fake = common::FakeLlm::start();
    fake.script(serde_json::json!([{
        "text": "The command only builds the project.\nANSWER: allow_once",
        "match": "ANSWER:",
    }]));
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("research-claude");
    let (k, v) = m.pair();
    std::fs::write(dir.path().join("w.toml"), asker("medium", "make")).unwrap();
    let fleet = format!(
        "[fleet]\nname = \"rs\"\nstart = \"w\"\ntask = \"build it\"\nturn_timeout_s = 60\n\n\
         [answerer]\nagent = \"claude-code\"\nmax_risk = \"medium\"\ntimeout = 60\n\
         env = {{ {k} = \"{v}\" }}\n\n\
         [[sessions]]\nname = \"w\"\nagent = \"sim\"\nscript = \"w.toml\"\nenv = {{ {k} = \"{v}\" }}\n"
    );
    let out = common::run_fleet_with_claude(&fake, home.path(), dir.path(), &fleet);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{}", fake.stderr());
    let records = common::run_journal(dir.path());
    let (decision, rule, note) = answer(&records, "w");
    assert_eq!(
        (decision.as_str(), rule),
        (Some("allow_once"), "research"),
        "{note}\n{stderr}"
    );
    assert_eq!(note["answer"], "allow_once");
    let sessions = researchers(&records);
    assert_eq!(note["session"], sessions[0].as_str());
    let asked = fake.requests_to("/v1/messages");
    let bodies: Vec<String> = asked.iter().map(|r| r["body"].to_string()).collect();
    assert!(
        bodies
            .iter()
            .any(|b| b.contains("Bash") && b.contains("make") && b.contains("build it")),
        "the model saw the question and the context: {bodies:?}"
    );
    assert_no_survivor(&m);
}

/// `[answerer]` and `auto_answer` are checked before anything runs: an unknown key,
/// a bad value, `"research"` without a researcher — each an error naming the file,
/// the line, the key and the fix.
#[test]
fn a_bad_answerer_is_refused_with_file_line_key_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    let session = "[[sessions]]\nname = \"w\"\nagent = \"sim\"\n";
    for (fleet, says) in [
        (
            "auto_answer = \"research\"\n",
            "fleet.toml:5: fleet.auto_answer: invalid value: auto_answer = \"research\" needs a researcher: add an [answerer] table",
        ),
        (
            "auto_answer = \"maybe\"\n",
            "fleet.toml:5: fleet.auto_answer: invalid value: not one of true | false | \"research\"",
        ),
        (
            "[answerer]\nagnet = \"sim\"\n",
            "fleet.toml:6: answerer.agnet: unknown key; did you mean `agent`?",
        ),
        (
            "[answerer]\nagent = \"sim\"\nparallel = 0\n",
            "fleet.toml:7: answerer.parallel: invalid value: 0 researchers could answer nothing: set 1 or more",
        ),
        (
            "[answerer]\nagent = \"sim\"\nmax_risk = \"extreme\"\n",
            "fleet.toml:7: answerer.max_risk: invalid value: \"extreme\" is not one of low | medium | high",
        ),
        (
            "[answerer]\nagent = \"sim\"\ntimeout = \"soon\"\n",
            "fleet.toml:7: answerer.timeout: invalid value: not a positive duration",
        ),
        (
            "[answerer]\nagent = \"no-such-agent\"\n",
            "fleet.toml:6: answerer.agent: unknown agent `no-such-agent`",
        ),
    ] {
        let text =
            format!("[fleet]\nname = \"rs\"\nstart = \"w\"\ntask = \"go\"\n{fleet}\n{session}");
        std::fs::write(dir.path().join("fleet.toml"), &text).unwrap();
        let out = capfleet(dir.path())
            .args(["run", "--dry-run", "fleet.toml"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}\n{stderr}");
        assert!(
            stderr.contains(says),
            "{text}\nexpected: {says}\ngot: {stderr}"
        );
    }
    // A good one is shown in the plan.
    let text = format!(
        "[fleet]\nname = \"rs\"\nstart = \"w\"\ntask = \"go\"\nauto_answer = \"research\"\n\n\
         [answerer]\nagent = \"sim\"\nparallel = 2\ntimeout = \"2m\"\nmax_risk = \"medium\"\n\n{session}"
    );
    std::fs::write(dir.path().join("fleet.toml"), &text).unwrap();
    let out = capfleet(dir.path())
        .args(["run", "--dry-run", "fleet.toml"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("research:  sim (stream_json) when the policy leaves a question open; at most 2 at once, 2m each, approves up to risk medium"),
        "{stdout}"
    );
}

/// The research is a `research` span under the asking request's `decide` span (itself
/// under the request's span in the asking turn), and the research session's spans
/// hang under it.
#[test]
fn the_research_is_a_span_under_the_asking_request() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("research-span");
    let researcher = "[[turn]]\nsteps = [{ say = \"ANSWER: allow_once\" }]\n";
    write_fleet(
        dir.path(),
        &[("w", asker("medium", "make"))],
        researcher,
        "max_risk = \"medium\"",
        &m,
    );
    let (_, _) = run_with(dir.path(), &["--trace-file", "spans.jsonl"]);
    let spans: Vec<Value> = std::fs::read_to_string(dir.path().join("spans.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_id = |id: &Value| spans.iter().find(|s| &s["span_id"] == id);
    let research = spans
        .iter()
        .find(|s| s["name"] == "research")
        .unwrap_or_else(|| panic!("no research span: {spans:?}"));
    let decide = by_id(&research["parent_span_id"]).expect("the research span's parent");
    assert_eq!(decide["name"], "decide", "{decide}");
    let request = by_id(&decide["parent_span_id"]).expect("the decide span's parent");
    assert!(
        request["name"].as_str().unwrap().contains("Bash"),
        "the asking request's span: {request}"
    );
    assert!(
        spans
            .iter()
            .any(|s| s["parent_span_id"] == research["span_id"]),
        "the research session's span hangs under the research span"
    );
    assert_no_survivor(&m);
}
