//! What capfleet writes: the frames on the agent's stdin against what Claude Code was
//! sent, the argv a manifest makes, permission scope and risk on the wire, and the
//! (ignored) throughput comparison against plain value parsing.

use super::*;

fn stdin_lines(src: &str) -> Vec<Value> {
    src.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn parse_line(line: &str) -> Value {
    assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
    serde_json::from_str(line).unwrap()
}

#[test]
fn outbound_frames_equal_what_claude_was_sent() {
    // allow: prompt, permission allow (via the mapper's pending input), prompt.
    let sent = stdin_lines(fixture!("allow.stdin.ndjson"));
    let mut m = StreamJsonMapper::new();
    replay_into(
        &mut m,
        fixture!("allow.ndjson")
            .lines()
            .take(4)
            .collect::<Vec<_>>()
            .join("\n")
            .as_str(),
    );
    assert_eq!(
        parse_line(&outbound::user_frame("Create out.txt containing hello.")),
        sent[0]
    );
    let req = "a72edca0-980a-4473-bb63-81a6442eb837";
    assert_eq!(
        parse_line(
            &m.respond_permission(req, Decision::AllowOnce, None)
                .unwrap()
        ),
        sent[1]
    );
    assert_eq!(
        m.respond_permission(req, Decision::AllowOnce, None)
            .unwrap_err()
            .code(),
        CapCode::UnknownPermission
    );
    let inject = UserInputInject::text("Now just say something.");
    assert_eq!(parse_line(&outbound::user_inject(&inject)), sent[2]);

    // deny with a message.
    let sent = stdin_lines(fixture!("deny.stdin.ndjson"));
    let input = json!({"command": "echo hello > out.txt", "description": "Create out.txt"});
    let line = outbound::permission_response(
        "753e84aa-0f94-47fd-b348-1c4012c9e7c5",
        Decision::Deny,
        &input,
        Some("Denied by the capfleet test driver"),
    );
    assert_eq!(parse_line(&line), sent[1]);

    // interrupt.
    let sent = stdin_lines(fixture!("interrupt.stdin.ndjson"));
    assert_eq!(parse_line(&outbound::interrupt_request("x")), sent[1]);
    let sent = stdin_lines(fixture!("interrupt-permission.stdin.ndjson"));
    assert_eq!(parse_line(&outbound::interrupt_request("x")), sent[1]);

    // Block content other than one text block is passed through.
    let blocks = json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]);
    let inject = UserInputInject {
        content: blocks.clone(),
        meta: None,
        extra: Default::default(),
    };
    assert_eq!(
        parse_line(&outbound::user_inject(&inject))["message"]["content"],
        blocks
    );
}

const MANIFEST: &str = r#"
[agent]
name = "claude-code"
binary = "claude"
profiles = []

[startup]
command = ["claude"]
ready_when = { silence_ms = 100 }
{STARTUP}

[fast_path]
stream_json = ["claude", "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"{PROMPT}]

[pty]
cols = 80
rows = 24

[capabilities]
streaming_output = true
"#;

fn manifest(startup: &str, prompt_tool: bool) -> Manifest {
    let prompt = if prompt_tool {
        r#", "--permission-prompt-tool", "stdio""#
    } else {
        ""
    };
    let src = MANIFEST
        .replace("{STARTUP}", startup)
        .replace("{PROMPT}", prompt);
    Manifest::parse(&src, "test").unwrap().manifest
}

const FULL: &str = r#"model_arg = "--model"
resume_arg = "--resume"
permission_mode_arg = "--permission-mode"
cwd_arg = "--cwd=""#;

#[test]
fn argv_table() {
    let base = "claude -p --input-format stream-json --output-format stream-json --verbose --permission-prompt-tool stdio";
    let sid = "dcdc10f5-cb9b-4b75-9301-311aedafc504";
    let cases: Vec<(&str, SessionConfig, String)> = vec![
        ("", SessionConfig::new("/w"), base.to_owned()),
        (FULL, SessionConfig::new("/w"), format!("{base} --cwd=/w")),
        (
            FULL,
            SessionConfig::new("/w").with_model("claude-opus-4-8"),
            format!("{base} --cwd=/w --model claude-opus-4-8"),
        ),
        (
            FULL,
            SessionConfig::new("/w").with_resume(sid),
            format!("{base} --cwd=/w --resume {sid}"),
        ),
        (
            FULL,
            SessionConfig::new("/w").with_permission_mode(PermissionMode::None),
            format!("{base} --cwd=/w --permission-mode bypassPermissions"),
        ),
        (
            FULL,
            SessionConfig::new("/w").with_permission_mode(PermissionMode::Confirm),
            format!("{base} --cwd=/w --permission-mode default"),
        ),
        (
            FULL,
            SessionConfig::new("/w").with_permission_mode(PermissionMode::Interactive),
            format!("{base} --cwd=/w --permission-mode default"),
        ),
        (
            "",
            SessionConfig::new("/w").with_permission_mode(PermissionMode::Interactive),
            base.to_owned(),
        ),
    ];
    for (startup, config, want) in cases {
        let got = build_argv(&manifest(startup, true), &config).unwrap();
        assert_eq!(got.argv.join(" "), want, "{startup} {config:?}");
        assert!(got.warnings.is_empty(), "{:?}", got.warnings);
    }
    // The resume argv is exactly what the recording used.
    let llm: Value = serde_json::from_str(fixture!("resume-2.llm.json")).unwrap();
    let got = build_argv(
        &manifest(FULL.lines().nth(1).unwrap(), true),
        &SessionConfig::new("/w").with_resume(sid),
    )
    .unwrap();
    assert_eq!(serde_json::to_value(&got.argv).unwrap(), llm["argv"][0]);
}

#[test]
fn argv_errors_and_warnings() {
    let bare = manifest("", false);
    assert_eq!(
        build_argv(&bare, &SessionConfig::new("/w").with_model("m")),
        Err(ArgvError::MissingManifestKey {
            field: "model",
            key: "startup.model_arg"
        })
    );
    assert_eq!(
        build_argv(&bare, &SessionConfig::new("/w").with_resume("s")),
        Err(ArgvError::MissingManifestKey {
            field: "session_resume_id",
            key: "startup.resume_arg"
        })
    );
    let c = SessionConfig::new("/w")
        .with_permission_mode(PermissionMode::None)
        .with_system_prompt("be brief")
        .with_max_turns(3)
        .with_budget_usd(1.0);
    let got = build_argv(&bare, &c).unwrap();
    assert_eq!(
        got.warnings,
        [
            ArgvWarning::Ignored {
                field: "permission_mode",
                key: "startup.permission_mode_arg"
            },
            ArgvWarning::Inexpressible("system_prompt"),
            ArgvWarning::Inexpressible("max_turns"),
            ArgvWarning::Inexpressible("budget_usd"),
        ]
    );
    let got = build_argv(
        &bare,
        &SessionConfig::new("/w").with_permission_mode(PermissionMode::Interactive),
    )
    .unwrap();
    assert_eq!(
        got.warnings,
        [ArgvWarning::PromptsNotRouted(PermissionMode::Interactive)]
    );
    let mut none = bare.clone();
    none.fast_path.stream_json = Default::default();
    assert_eq!(
        build_argv(&none, &SessionConfig::new("/w")),
        Err(ArgvError::Unsupported)
    );
}

#[test]
fn permission_scope_and_risk_on_the_wire() {
    let mut m = StreamJsonMapper::new();
    let line = json!({"type": "control_request", "request_id": "r1", "request": {
        "subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": "rm -rf /"}}});
    let out = replay_into(&mut m, &line.to_string());
    let Output::Event(CapEvent::PermissionRequest(p)) = &out[0] else {
        panic!()
    };
    assert_eq!(
        (p.scope, p.risk_level),
        (Some(PermissionScope::Execute), RiskLevel::High)
    );
    let out = replay_into(
        &mut m,
        r#"{"type":"control_response","response":{"subtype":"error","request_id":"i1","error":"nope"}}"#,
    );
    assert_eq!(
        out,
        [Output::ControlAck(ControlAck {
            request_id: "i1".into(),
            result: Err("nope".into())
        })]
    );
    // A turn end withdraws what is still pending.
    let out = replay_into(&mut m, r#"{"type":"result","subtype":"success"}"#);
    assert_eq!(summary(&out)[1], "withdrawn r1 -");
}

/// Throughput against parsing the same lines into `serde_json::Value` (target: at
/// least half as fast). Run with
/// `cargo test --release -p capfleet-engine --test all stream_json_fixtures -- --ignored`.
#[test]
#[ignore = "timing; run in release"]
fn throughput_vs_value_parsing() {
    use std::time::Instant;
    let src = [fixture!("partial.ndjson"), fixture!("allow.ndjson")].concat();
    let lines: Vec<&[u8]> = src.lines().map(str::as_bytes).collect();
    let rounds = 1_000_000 / lines.len() + 1;
    let start = Instant::now();
    let mut n = 0usize;
    for _ in 0..rounds {
        for l in &lines {
            n += serde_json::from_slice::<Value>(l)
                .map_or(0, |v| v.as_object().map_or(0, |o| o.len()));
        }
    }
    let raw = start.elapsed();
    let mut m = StreamJsonMapper::new();
    let mut out = Vec::new();
    let start = Instant::now();
    for _ in 0..rounds {
        for l in &lines {
            m.on_line(l, &mut out);
            out.clear();
        }
        m.process_restarted();
    }
    let mapped = start.elapsed();
    let frames = rounds * lines.len();
    eprintln!("{frames} frames: Value {raw:?}, mapper {mapped:?} ({n})");
    assert_eq!(m.stats().malformed_frames, 0);
    assert!(
        mapped.as_secs_f64() <= 2.0 * raw.as_secs_f64(),
        "mapper slower than half of Value parsing"
    );
}
