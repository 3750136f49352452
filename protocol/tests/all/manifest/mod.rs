//! Manifest parsing and validation (spec §5, coding profile §3/§8).

use std::path::PathBuf;

use capfleet_protocol::manifest::*;
use capfleet_protocol::protocol::CapCode;

mod patterns;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/manifests")
        .join(name)
}

fn load(name: &str) -> Validated {
    match Manifest::load(fixture(name)) {
        Ok(v) => v,
        Err(e) => panic!("{name} should parse:\n{e}"),
    }
}

fn parse_ok(src: &str) -> Validated {
    match Manifest::parse(src, "test.toml") {
        Ok(v) => v,
        Err(e) => panic!("should parse:\n{e}\n---\n{src}"),
    }
}

fn parse_err(src: &str) -> ManifestErrors {
    match Manifest::parse(src, "test.toml") {
        Ok(v) => panic!("should fail, got {:?}", v.manifest),
        Err(e) => e,
    }
}

/// The §5.2 required fields, one `(section, line)` each, in a valid minimal manifest.
const REQUIRED: [(&str, &str, &str); 8] = [
    ("agent", "name", "name = \"m\""),
    ("agent", "binary", "binary = \"m-agent\""),
    ("agent", "profiles", "profiles = []"),
    ("startup", "command", "command = [\"m-agent\"]"),
    (
        "startup",
        "ready_when",
        "ready_when = { pattern = \"^ready$\" }",
    ),
    ("pty", "cols", "cols = 80"),
    ("pty", "rows", "rows = 24"),
    (
        "capabilities",
        "streaming_output",
        "streaming_output = true",
    ),
];

/// A minimal manifest without the listed `section.key`s, plus `extra` appended.
fn minimal_without(skip: &[&str], extra: &str) -> String {
    let mut out = String::new();
    let mut section = "";
    for (sec, key, line) in REQUIRED {
        if sec != section {
            out.push_str(&format!("\n[{sec}]\n"));
            section = sec;
        }
        if !skip.contains(&format!("{sec}.{key}").as_str()) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str(extra);
    out
}

#[test]
fn spec_example_parses() {
    let v = load("spec-5.1-claude-code.toml");
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
    let m = &v.manifest;
    assert_eq!(m.agent.name, "claude-code");
    assert_eq!(m.agent.binary, "claude");
    assert_eq!(m.agent.profiles, ["coding"]);
    assert_eq!(m.agent.version_match.as_deref(), Some("^2\\."));
    assert_eq!(
        m.probe.as_ref().and_then(|p| p.command.clone()),
        Some(vec!["claude".into(), "--version".into()])
    );
    assert_eq!(m.startup.command, ["claude"]);
    assert_eq!(m.startup.model_arg.as_deref(), Some("--model"));
    assert_eq!(
        m.startup.session_id_env.as_deref(),
        Some("CLAUDE_SESSION_ID")
    );
    assert_eq!(m.startup.cwd_arg, None);
    assert_eq!(m.startup.init_timeout_seconds, 60);
    assert_eq!(
        m.startup.ready_when.pattern.as_deref(),
        Some("Try \"how do I\\?\"")
    );
    assert_eq!(
        m.fast_path.stream_json,
        ArgvFastPath::Argv(
            [
                "claude",
                "-p",
                "--input-format=stream-json",
                "--output-format=stream-json"
            ]
            .map(String::from)
            .to_vec()
        )
    );
    assert_eq!(m.fast_path.grpc, AddressFastPath::Unsupported);
    assert_eq!(m.fast_path.acp_stdio, AcpFastPath::Unsupported);
    assert_eq!(m.fast_path.a2a_serve_at, AddressFastPath::Unsupported);
    assert_eq!((m.pty.cols, m.pty.rows), (200, 50));
    assert!(m.pty.bracketed_paste && m.pty.queued_input_supported);
    assert_eq!(m.pty.sigint_cancels_turn, CancelMode::Graceful);
    assert_eq!(m.parse.idle, ["^> $", "^❯ $"]);
    assert_eq!(m.parse.error_lines.len(), 3);
    assert_eq!(m.capabilities.mid_turn_cancel, Some(CancelMode::Graceful));
    assert!(
        m.capabilities.multi_session
            && m.capabilities.queued_input
            && m.capabilities.streaming_output
    );
    assert_eq!(
        m.capabilities.ask_user,
        AskUser {
            yes_no: true,
            options: false,
            free_text: true
        }
    );
    assert_eq!(
        m.capabilities.input_modalities.as_deref(),
        Some(&["text".to_string()][..])
    );
    assert_eq!(m.cost.currency.as_deref(), Some("USD"));
    assert!(!m.cost.metered);
    // Every pattern compiled once, ready for drivers.
    let p = &m.patterns;
    assert_eq!(p.idle.len(), 2);
    assert_eq!(p.error_lines.len(), 3);
    assert!(p.tool_call_start.is_some() && p.tool_call_end.is_some() && p.plan_section.is_some());
    assert!(p.thought_section.is_some() && p.ask_yes_no.is_some() && p.ask_options.is_some());
    assert!(p.ready_when.is_some() && p.version_match.is_some() && p.version_pattern.is_some());
    let caps = p
        .tool_call_start
        .as_ref()
        .unwrap()
        .captures("◉ Read(src/main.rs)")
        .expect("matches");
    assert_eq!(&caps["tool"], "Read");
    assert_eq!(&caps["args"], "src/main.rs");
    assert!(
        p.ready_when
            .as_ref()
            .unwrap()
            .is_match("Welcome\nTry \"how do I?\"\n")
    );
}

#[test]
fn coding_examples_parse() {
    let claude = load("coding-8.1-claude-code.toml").manifest;
    let c = claude.capabilities.coding.expect("coding section");
    assert_eq!(c.revision.as_deref(), Some("2026-05-18"));
    assert_eq!(
        c.fs,
        FsCaps {
            read: true,
            write: true,
            list: true,
            exists: true,
            delete: false,
            watch: false,
            scope: Some(FsScope::WorkspaceOnly)
        }
    );
    assert_eq!(
        c.terminal,
        TerminalCaps {
            enabled: true,
            concurrent_max: Some(4)
        }
    );
    assert_eq!(c.tool_permission, ToolPermission::Interactive);
    assert_eq!(c.artifacts, ["diff", "plan_doc", "pr_link", "test_result"]);
    assert!(c.git_aware);

    let aider = load("coding-8.2-aider.toml").manifest;
    assert!(
        !aider.fast_path.stream_json.is_supported() && !aider.fast_path.acp_stdio.is_supported()
    );
    let a = aider.capabilities.coding.expect("coding section");
    assert!(!a.fs.any());
    assert_eq!(a.fs.scope, Some(FsScope::WorkspaceOnly));
    assert_eq!(
        a.terminal,
        TerminalCaps {
            enabled: false,
            concurrent_max: None
        }
    );
    assert_eq!(a.artifacts, ["diff", "commit"]);
}

#[test]
fn dotted_and_inline_spellings_are_equal() {
    let dotted = load("coding-dotted.toml").manifest;
    let inline = load("coding-inline.toml").manifest;
    let d = dotted.capabilities.coding.clone().expect("dotted coding");
    assert_eq!(d.fs.scope, Some(FsScope::WorkspaceOnly));
    assert!(d.fs.read && d.fs.write && d.fs.list && d.fs.exists && !d.fs.delete && !d.fs.watch);
    assert_eq!(d.terminal.concurrent_max, Some(4));
    assert_eq!(d.language_servers, ["rust-analyzer", "tsserver"]);
    assert_eq!(d.test_runners, ["cargo", "vitest"]);
    assert_eq!(dotted.capabilities.coding, inline.capabilities.coding);
    assert_eq!(dotted, inline);
}

#[test]
fn each_required_field_missing_is_its_own_error() {
    assert!(Manifest::parse(&minimal_without(&[], ""), "t").is_ok());
    for (sec, key, _) in REQUIRED {
        let dotted = format!("{sec}.{key}");
        let errs = parse_err(&minimal_without(&[&dotted], ""));
        assert_eq!(errs.len(), 1, "{dotted}: {errs}");
        let e = &errs.errors[0];
        assert!(matches!(e, ManifestError::Missing { .. }), "{dotted}: {e}");
        assert_eq!(e.key(), Some(dotted.as_str()));
        assert!(
            e.to_string()
                .contains(&format!("{dotted}: required field missing")),
            "{e}"
        );
        assert_eq!(e.code(), CapCode::ManifestMissing);
    }
}

#[test]
fn all_errors_are_collected() {
    let all: Vec<String> = REQUIRED
        .iter()
        .map(|(s, k, _)| format!("{s}.{k}"))
        .collect();
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    let errs = parse_err(&minimal_without(&refs, "[parse]\nidle = \"(?=x)\"\n"));
    let keys: Vec<&str> = errs.iter().filter_map(|e| e.key()).collect();
    for k in &refs {
        assert!(keys.contains(k), "{k} not in {keys:?}");
    }
    assert!(keys.contains(&"parse.idle"));
    assert_eq!(errs.len(), 9, "{errs}");
    // An empty document names all eight too.
    assert_eq!(parse_err("").len(), 8);
}

#[test]
fn errors_carry_line_numbers() {
    let src = "[agent]\nname = \"a\"\nbinary = \"b\"\nprofiles = []\n\n[startup]\ncommand = [\"b\"]\n\n[pty]\ncols = \"wide\"\nrows = 24\n\n[capabilities]\nstreaming_output = true\n";
    let errs = parse_err(src);
    let msgs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        msgs,
        [
            "test.toml:6: startup.ready_when: required field missing",
            "test.toml:10: pty.cols: expected an integer, found string",
        ]
    );
    assert_eq!(errs.errors[0].line(), Some(6));
    let syntax = parse_err("[agent]\nname = \n");
    assert!(matches!(syntax.errors[0], ManifestError::Syntax { .. }));
    assert_eq!(syntax.errors[0].line(), Some(2), "{syntax}");
}

#[test]
fn defaults_are_applied() {
    let m = load("minimal.toml").manifest;
    assert!(!m.pty.bracketed_paste);
    assert_eq!(m.pty.sigint_cancels_turn, CancelMode::Hard);
    assert!(!m.pty.queued_input_supported);
    assert!(
        !m.capabilities.multi_session
            && !m.capabilities.streaming_tool_output
            && !m.capabilities.queued_input
    );
    assert_eq!(
        m.capabilities.ask_user,
        AskUser {
            yes_no: false,
            options: false,
            free_text: false
        }
    );
    assert_eq!(m.capabilities.mid_turn_cancel, None);
    assert!(!m.cost.metered);
    assert_eq!(m.parse.idle, DEFAULT_IDLE);
    assert_eq!(m.parse, Parse::default());
    assert!(m.parse.error_lines.is_empty() && m.patterns.error_lines.is_empty());
    assert!(m.patterns.tool_call_start.is_none() && m.patterns.ask_yes_no.is_none());
    assert_eq!(m.patterns.idle.len(), 2);
    assert!(m.patterns.idle[0].is_match("out\n>   "));
    assert!(m.patterns.idle[1].is_match("out\n❯"));
    assert_eq!(m.startup.init_timeout_seconds, 60);
    assert_eq!(m.fast_path, FastPath::default());
    assert_eq!(m.probe, None);
    assert_eq!(m.capabilities.coding, None);
}

#[test]
fn unknown_keys_warn_and_x_keys_do_not() {
    let extra = "x-vendor = 1\n[parse]\nidel = \"^> $\"\nx-hint = \"ok\"\n[pty.x-extra]\nanything = true\n[x-table]\nz = 1\n";
    let src = minimal_without(&[], extra).replace("[startup]\n", "[startup]\nbanner = \"hi\"\n");
    let v = parse_ok(&src);
    let keys: Vec<&str> = v.warnings.iter().map(|w| w.at.key.as_str()).collect();
    assert_eq!(keys, ["startup.banner", "parse.idel"], "{:?}", v.warnings);
    assert!(
        v.warnings
            .iter()
            .all(|w| matches!(w.kind, WarningKind::UnknownKey { .. }) && w.at.line.is_some())
    );
    assert!(
        v.warnings[1]
            .to_string()
            .contains("parse.idel: unknown key"),
        "{}",
        v.warnings[1]
    );
}

#[test]
fn coding_rules() {
    let base = minimal_without(&[], "");
    let errs = parse_err(&format!(
        "{base}[capabilities.coding]\nfs.read = true\ntool_permission = \"none\"\n"
    ));
    assert_eq!(errs.len(), 1, "{errs}");
    assert_eq!(errs.errors[0].key(), Some("capabilities.coding.fs.scope"));
    let errs = parse_err(&format!(
        "{base}[capabilities.coding]\nfs = {{ read = false }}\n"
    ));
    assert_eq!(errs.len(), 1, "{errs}");
    assert_eq!(
        errs.errors[0].key(),
        Some("capabilities.coding.tool_permission")
    );
    let errs = parse_err(&format!(
        "{base}[capabilities.coding]\ntool_permission = \"always\"\nfs.scope = \"home\"\n"
    ));
    let keys: Vec<&str> = errs.iter().filter_map(|e| e.key()).collect();
    assert_eq!(
        keys,
        [
            "capabilities.coding.tool_permission",
            "capabilities.coding.fs.scope"
        ],
        "{errs}"
    );
    // All fs.* false: no scope needed.
    let v = parse_ok(&format!(
        "{base}[capabilities.coding]\nfs.read = false\ntool_permission = \"confirm\"\n"
    ));
    assert_eq!(
        v.manifest.capabilities.coding.map(|c| c.tool_permission),
        Some(ToolPermission::Confirm)
    );
}

#[test]
fn fast_path_forms() {
    let fp = "[fast_path]\ngrpc = \"127.0.0.1:50051\"\nacp_stdio = true\na2a_serve_at = \"https://h/a2a\"\nstream_json = [\"a\", \"-p\"]\n";
    let m = parse_ok(&minimal_without(&[], fp)).manifest;
    assert_eq!(
        m.fast_path.grpc,
        AddressFastPath::Address("127.0.0.1:50051".into())
    );
    assert_eq!(m.fast_path.acp_stdio, AcpFastPath::StartupCommand);
    assert_eq!(
        m.fast_path.a2a_serve_at,
        AddressFastPath::Address("https://h/a2a".into())
    );
    assert_eq!(
        m.fast_path.stream_json,
        ArgvFastPath::Argv(vec!["a".into(), "-p".into()])
    );
    let m = parse_ok(&minimal_without(
        &[],
        "[fast_path]\nacp_stdio = [\"agent\", \"--acp\"]\n",
    ))
    .manifest;
    assert_eq!(
        m.fast_path.acp_stdio,
        AcpFastPath::Argv(vec!["agent".into(), "--acp".into()])
    );
    let errs = parse_err(&minimal_without(
        &[],
        "[fast_path]\nstream_json = true\ngrpc = 5\na2a_serve_at = []\n",
    ));
    let keys: Vec<&str> = errs.iter().filter_map(|e| e.key()).collect();
    assert_eq!(
        keys,
        [
            "fast_path.stream_json",
            "fast_path.grpc",
            "fast_path.a2a_serve_at"
        ],
        "{errs}"
    );
}

#[test]
fn stream_json_traceparent_is_a_boolean_that_needs_stream_json() {
    let reads = |extra: &str| {
        parse_ok(&minimal_without(&[], &format!("[fast_path]\n{extra}")))
            .manifest
            .fast_path
            .stream_json_traceparent
    };
    assert!(!reads("stream_json = [\"a\"]\n"));
    assert!(reads(
        "stream_json = [\"a\"]\nx-stream_json_traceparent = true\n"
    ));
    let errs = parse_err(&minimal_without(
        &[],
        "[fast_path]\nstream_json = [\"a\"]\nx-stream_json_traceparent = \"yes\"\n",
    ));
    assert_eq!(
        errs.iter().filter_map(|e| e.key()).collect::<Vec<_>>(),
        ["fast_path.x-stream_json_traceparent"],
        "{errs}"
    );
    let errs = parse_err(&minimal_without(
        &[],
        "[fast_path]\nx-stream_json_traceparent = true\n",
    ));
    let text = errs.to_string();
    assert!(
        text.contains("fast_path.x-stream_json_traceparent") && text.contains("stream_json argv"),
        "{text}"
    );
}

#[test]
fn revision_is_kept_from_either_place() {
    let top = parse_ok(&format!(
        "revision = \"2026-05-18\"\n{}",
        minimal_without(&[], "")
    ));
    assert_eq!(top.manifest.revision.as_deref(), Some("2026-05-18"));
    let nested = parse_ok(
        &minimal_without(&[], "").replace("[agent]\n", "[agent]\nrevision = 2026-05-19\n"),
    );
    assert_eq!(nested.manifest.revision.as_deref(), Some("2026-05-19"));
    assert!(nested.warnings.is_empty(), "{:?}", nested.warnings);
}

#[test]
fn to_toml_round_trips() {
    for name in [
        "spec-5.1-claude-code.toml",
        "coding-8.1-claude-code.toml",
        "coding-inline.toml",
        "minimal.toml",
    ] {
        let m = load(name).manifest;
        let text = m.to_toml_string().expect("serializes");
        let back = Manifest::parse(&text, "round-trip")
            .unwrap_or_else(|e| panic!("{name}:\n{e}\n---\n{text}"));
        assert!(back.warnings.is_empty(), "{name}: {:?}", back.warnings);
        assert_eq!(back.manifest, m, "{name}:\n{text}");
    }
}

#[test]
fn load_missing_file_is_an_error() {
    let errs = Manifest::load(fixture("nope.toml")).expect_err("missing");
    assert!(matches!(errs.errors[0], ManifestError::Io { .. }));
    assert!(errs.to_string().contains("nope.toml"), "{errs}");
    assert_eq!(errs.code(), CapCode::ManifestMissing);
}

#[test]
fn bad_values_are_reported() {
    let src = minimal_without(&["pty.cols"], "[cost]\nmetered = \"yes\"\n").replace(
        "[pty]\n",
        "[pty]\ncols = 0\nsigint_cancels_turn = \"soft\"\n",
    );
    let errs = parse_err(&src);
    let keys: Vec<&str> = errs.iter().filter_map(|e| e.key()).collect();
    assert_eq!(
        keys,
        ["pty.cols", "pty.sigint_cancels_turn", "cost.metered"],
        "{errs}"
    );
    assert!(
        errs.errors[1]
            .to_string()
            .contains("graceful | hard | none"),
        "{}",
        errs.errors[1]
    );
}

#[test]
fn upstream_shapes_validate_with_warnings_that_name_the_fix() {
    let v = load("upstream-shapes.toml");
    let m = &v.manifest;
    assert_eq!(m.fast_path.grpc, AddressFastPath::Unsupported, "skipped");
    assert_eq!(m.fast_path.a2a_serve_at, AddressFastPath::Unsupported);
    assert!(
        m.patterns.idle[0].is_match("›  "),
        "the escaped literal is the literal"
    );
    let shown: Vec<String> = v.warnings.iter().map(ToString::to_string).collect();
    let has = |key: &str, words: &str| shown.iter().any(|w| w.contains(key) && w.contains(words));
    assert!(
        has(
            "startup.ready_when.pattern",
            "escapes no regex metacharacter"
        ),
        "{shown:#?}"
    );
    assert!(has("parse.idle", "write it unescaped"), "{shown:#?}");
    assert!(
        has("fast_path.grpc", "this binding is skipped"),
        "{shown:#?}"
    );
    assert!(
        has("fast_path.a2a_serve_at", "this binding is skipped"),
        "{shown:#?}"
    );
    let errs = parse_err(&minimal_without(&[], "[parse]\nidle = \"(?<=\\\\›)x\"\n"));
    assert!(
        errs.to_string().contains("look-behind"),
        "look-around stays an error: {errs}"
    );
}

/// `[capabilities.x-binding.<binding>]`: a value over one binding, the section's
/// elsewhere; an unknown binding or key is a warning naming it; a wrong type an error.
#[test]
fn queued_input_is_said_per_binding() {
    let base = std::fs::read_to_string(fixture("minimal.toml")).unwrap();
    let v = parse_ok(&format!(
        "{base}queued_input = false\n\n[capabilities.x-binding.codex_app_server]\nqueued_input = true\n"
    ));
    let caps = &v.manifest.capabilities;
    assert!(caps.queued_input_over("codex_app_server"));
    assert!(!caps.queued_input_over("codex_exec"));
    assert!(v.warnings.is_empty(), "{:?}", v.warnings);
    // Written back out as read (resolve prints it).
    let again = parse_ok(&v.manifest.to_toml_string().unwrap());
    assert_eq!(again.manifest.capabilities, *caps);
    let v = parse_ok(&format!(
        "{base}\n[capabilities.x-binding.codex_ap_server]\nqueued_input = true\n\
         [capabilities.x-binding.pty]\nqueued_inptu = true\n"
    ));
    let keys: Vec<&str> = v.warnings.iter().map(|w| w.at.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "capabilities.x-binding.codex_ap_server",
            "capabilities.x-binding.pty.queued_inptu"
        ],
        "{:?}",
        v.warnings
    );
    let errs = parse_err(&format!(
        "{base}\n[capabilities.x-binding.pty]\nqueued_input = \"yes\"\n"
    ));
    assert!(errs.to_string().contains("queued_input"), "{errs}");
}
