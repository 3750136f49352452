//! Conformance of `capfleet_protocol::protocol` with CAP core §7 and coding §4.6/§6:
//! spec fixtures round-trip, the kind table drives required-field, vocabulary,
//! `_meta` and direction checks, and the error registry maps both ways.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use capfleet_protocol::protocol::coding::{
    CODING_ARTIFACTS, CodingArtifact, Commit, PlanDoc, PrLink, PrState, TestResult, Transcript,
};
use capfleet_protocol::protocol::errors::CODE_TABLE;
use capfleet_protocol::protocol::{
    CapCode, CapEvent, DecodeError, Direction, EventKind, HasMeta, KINDS, PlanStatus, decode_event,
    decode_event_directed, decode_trusted, decode_value,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn fixture_dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/spec")
        .join(sub)
}

/// `(file name, raw text)` of every fixture in `sub`, sorted by name.
fn fixtures(sub: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = fs::read_dir(fixture_dir(sub))
        .expect("fixture dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read_to_string(&p).expect("read fixture"))
        })
        .collect();
    out.sort();
    out
}

/// One valid frame per kind (the first fixture of that kind).
fn samples() -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for (_, text) in fixtures("events") {
        let v: Value = serde_json::from_str(&text).unwrap();
        let kind = v["kind"].as_str().unwrap().to_owned();
        out.entry(kind).or_insert(v);
    }
    out
}

fn reencode(v: &Value) -> Result<Value, DecodeError> {
    let ev = decode_value(v.clone())?;
    Ok(serde_json::to_value(&ev).unwrap())
}

#[test]
fn every_event_fixture_round_trips() {
    let all = fixtures("events");
    assert!(
        all.len() >= 21,
        "expected the spec's examples, got {}",
        all.len()
    );
    for (name, text) in &all {
        let ev = decode_event(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let original: Value = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_value(&ev).unwrap(), original, "{name}");
        assert_eq!(ev.kind(), original["kind"], "{name}");
        // The serde path is the decoder too.
        let via_serde: CapEvent = serde_json::from_str(text).unwrap();
        assert_eq!(via_serde, ev, "{name}");
    }
    let covered = samples();
    for spec in &KINDS {
        assert!(
            covered.contains_key(spec.kind),
            "no fixture for {}",
            spec.kind
        );
    }
}

#[test]
fn a_journaled_event_reads_back_typed_as_the_decoder_reads_it() {
    // Every kind, as capfleet encodes it (the journal's text): the trusted read
    // equals the checked one, field for field (extra fields and `_meta` included).
    for (name, text) in &fixtures("events") {
        let ev = decode_event(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let encoded = serde_json::to_string(&ev).unwrap();
        let trusted = decode_trusted(&encoded).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(trusted, ev, "{name}");
        let mut extra: Value = serde_json::from_str(&encoded).unwrap();
        extra["x_added"] = json!({"k": [1, 2.5, "s"]});
        let with_extra = decode_trusted(&extra.to_string()).unwrap();
        assert_eq!(
            with_extra,
            decode_value(extra).unwrap(),
            "{name} with an extra field"
        );
    }
    // What is no event is the decoder's error, as it says it.
    for bad in [
        "{}",
        "{\"kind\":\"cap.nope\"}",
        "{\"kind\":\"cap.text_chunk\"}",
        "[1]",
    ] {
        assert_eq!(
            decode_trusted(bad).map_err(|e| e.to_string()).unwrap_err(),
            decode_event(bad).unwrap_err().to_string(),
            "{bad}"
        );
    }
}

fn payload_round_trip<T: DeserializeOwned + Serialize>(name: &str) -> T {
    let text = fs::read_to_string(fixture_dir("payloads").join(name)).unwrap();
    let original: Value = serde_json::from_str(&text).unwrap();
    let typed: T = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(serde_json::to_value(&typed).unwrap(), original, "{name}");
    typed
}

#[test]
fn coding_payload_fixtures_round_trip() {
    let pr: PrLink = payload_round_trip("coding-6.2-pr-link.json");
    assert_eq!(pr.state, Some(PrState::Open));
    assert_eq!(pr.number.get(), Some(&142));
    let tr: TestResult = payload_round_trip("coding-6.3-test-result.json");
    assert_eq!(tr.suites.get().map(Vec::len), Some(1));
    let c: Commit = payload_round_trip("coding-6.4-commit.json");
    assert_eq!(c.parents.get().map(Vec::len), Some(1));
    let t: Transcript = payload_round_trip("coding-6.6-transcript.json");
    assert_eq!(t.events.len(), 5);
    assert_eq!(t.events[0].event_kind(), EventKind::SessionReady);
    assert_eq!(fixtures("payloads").len(), 4);

    // plan_doc is the core plan schema.
    let plan = fs::read_to_string(fixture_dir("events").join("10.2-master-plan.json")).unwrap();
    let mut doc: Value = serde_json::from_str(&plan).unwrap();
    doc.as_object_mut().unwrap().remove("kind");
    let pd: PlanDoc = serde_json::from_value(doc.clone()).unwrap();
    assert_eq!(serde_json::to_value(&pd).unwrap(), doc);

    // Inline JSON artifact content, as an object or a JSON string.
    let pr_json = serde_json::to_value(&pr).unwrap();
    for content in [pr_json.clone(), Value::String(pr_json.to_string())] {
        let ev = CapEvent::artifact("a1", CodingArtifact::PrLink.mime(), None, content);
        let CapEvent::Artifact(art) = ev else {
            unreachable!()
        };
        let back: PrLink = art.json_content().unwrap().unwrap();
        assert_eq!(back, pr);
        assert_eq!(
            CodingArtifact::from_mime(&art.mime_type),
            Some(CodingArtifact::PrLink)
        );
    }
    let shorts: Vec<_> = CODING_ARTIFACTS.iter().map(|r| r.short).collect();
    assert_eq!(
        shorts,
        [
            "diff",
            "pr_link",
            "test_result",
            "commit",
            "plan_doc",
            "transcript"
        ]
    );
}

#[test]
fn kinds_table_has_19_kinds_with_spec_directions() {
    let a2o = [
        "cap.session.ready",
        "cap.text_chunk",
        "cap.tool_call.start",
        "cap.tool_call.delta",
        "cap.tool_call.end",
        "cap.plan",
        "cap.thought",
        "cap.ask_user",
        "cap.permission.request",
        "cap.usage",
        "cap.error",
        "cap.artifact",
        "cap.fs.change",
        "cap.pty.raw_bytes",
    ];
    let o2a = [
        "cap.user_input.inject",
        "cap.cancel",
        "cap.session.config",
        "cap.ask_user.answer",
        "cap.permission.response",
    ];
    let of = |d| {
        KINDS
            .iter()
            .filter(|s| s.direction == d)
            .map(|s| s.kind)
            .collect::<Vec<_>>()
    };
    assert_eq!(of(Direction::AgentToOrchestrator), a2o);
    assert_eq!(of(Direction::OrchestratorToAgent), o2a);
    assert_eq!(KINDS.len(), 14 + 5);
}

#[test]
fn required_fields_are_the_documented_choices() {
    let expected: [(&str, &[&str]); 19] = [
        ("cap.session.ready", &[]),
        ("cap.text_chunk", &["text"]),
        ("cap.tool_call.start", &["call_id", "name"]),
        ("cap.tool_call.delta", &["call_id", "output_chunk"]),
        ("cap.tool_call.end", &["call_id"]),
        ("cap.plan", &["entries"]),
        ("cap.thought", &["text"]),
        ("cap.ask_user", &["ask_id", "prompt"]),
        ("cap.permission.request", &["req_id", "tool", "risk_level"]),
        ("cap.usage", &[]),
        ("cap.error", &["code", "message"]),
        ("cap.artifact", &["artifact_id", "mime_type"]),
        ("cap.fs.change", &["subscription_id", "path", "event"]),
        ("cap.pty.raw_bytes", &["bytes_b64"]),
        ("cap.user_input.inject", &["content"]),
        ("cap.cancel", &["scope"]),
        ("cap.session.config", &["cwd"]),
        ("cap.ask_user.answer", &["ask_id", "value"]),
        ("cap.permission.response", &["req_id", "decision"]),
    ];
    for ((kind, req), spec) in expected.iter().zip(&KINDS) {
        assert_eq!((spec.kind, spec.required), (*kind, *req));
    }
    let nested = KINDS[EventKind::Plan as usize].nested.unwrap();
    assert_eq!(nested.required, ["id", "content", "status"]);
}

#[test]
fn removing_any_required_field_is_missing_field() {
    let samples = samples();
    for spec in &KINDS {
        let sample = &samples[spec.kind];
        for field in spec.required {
            let mut v = sample.clone();
            v.as_object_mut().unwrap().remove(*field);
            match decode_value(v) {
                Err(DecodeError::MissingField { kind, field: f }) => {
                    assert_eq!((kind, f.as_str()), (spec.kind, *field));
                }
                other => panic!("{} without {field}: {other:?}", spec.kind),
            }
        }
        if let Some(nested) = spec.nested {
            for field in nested.required {
                let mut v = sample.clone();
                v[nested.field][0].as_object_mut().unwrap().remove(*field);
                let err = decode_value(v).unwrap_err();
                assert!(matches!(err, DecodeError::MissingField { .. }), "{err:?}");
                assert_eq!(
                    err.field(),
                    Some(format!("{}[0].{field}", nested.field).as_str())
                );
            }
        }
    }
    // Every other key of a sample is optional.
    for spec in &KINDS {
        let mut v = samples[spec.kind].clone();
        v.as_object_mut()
            .unwrap()
            .retain(|k, _| k == "kind" || spec.required.contains(&k.as_str()));
        decode_value(v).unwrap_or_else(|e| panic!("{}: minimal frame rejected: {e}", spec.kind));
    }
}

/// The vocabularies as the spec spells them, independent of the code's tables.
const SPEC_VOCABS: [(&str, &str, &[&str]); 10] = [
    (
        "cap.text_chunk",
        "channel",
        &["assistant", "thought", "system"],
    ),
    (
        "cap.plan",
        "status",
        &[
            "pending",
            "in_progress",
            "completed",
            "cancelled",
            "blocked",
        ],
    ),
    ("cap.plan", "priority", &["urgent", "high", "medium", "low"]),
    ("cap.cancel", "scope", &["current_turn", "session"]),
    (
        "cap.permission.request",
        "scope",
        &["read", "write", "execute", "network"],
    ),
    (
        "cap.permission.request",
        "risk_level",
        &["low", "medium", "high"],
    ),
    (
        "cap.permission.response",
        "decision",
        &["allow_once", "allow_always", "deny"],
    ),
    (
        "cap.session.config",
        "permission_mode",
        &["none", "confirm", "interactive"],
    ),
    (
        "cap.usage",
        "stop_reason",
        &[
            "end_turn",
            "max_tokens",
            "tool_use",
            "stop_sequence",
            "cancelled",
            "error",
        ],
    ),
    (
        "cap.fs.change",
        "event",
        &["created", "modified", "deleted", "renamed"],
    ),
];

#[test]
fn vocabularies_match_the_spec() {
    let mut seen = 0;
    for spec in &KINDS {
        let fields = spec
            .vocab
            .iter()
            .chain(spec.nested.iter().flat_map(|n| n.vocab));
        for vf in fields {
            let (_, _, names) = SPEC_VOCABS
                .iter()
                .find(|(k, f, _)| *k == spec.kind && *f == vf.field)
                .unwrap_or_else(|| panic!("{}.{} not in the spec list", spec.kind, vf.field));
            assert_eq!(vf.allowed, *names, "{}.{}", spec.kind, vf.field);
            seen += 1;
        }
    }
    assert_eq!(seen, SPEC_VOCABS.len());
    assert_eq!(PlanStatus::NAMES, SPEC_VOCABS[1].2);
}

/// Sets `field` (top level, or in every plan entry when nested) and decodes.
fn with_field(kind: &str, sample: &Value, nested: Option<&str>, field: &str, val: Value) -> Value {
    let mut v = sample.clone();
    match nested {
        None => v[field] = val,
        Some(arr) => {
            for entry in v[arr].as_array_mut().unwrap() {
                entry[field] = val.clone();
            }
        }
    }
    assert_eq!(v["kind"], kind);
    v
}

#[test]
fn each_vocabulary_value_is_accepted_and_others_rejected() {
    let samples = samples();
    for spec in &KINDS {
        let sample = &samples[spec.kind];
        let top = spec.vocab.iter().map(|vf| (None, vf));
        let nested = spec
            .nested
            .iter()
            .flat_map(|n| n.vocab.iter().map(|vf| (Some(n.field), vf)));
        for (arr, vf) in top.chain(nested) {
            for allowed in vf.allowed {
                let v = with_field(spec.kind, sample, arr, vf.field, json!(allowed));
                let back = reencode(&v)
                    .unwrap_or_else(|e| panic!("{}.{}={allowed}: {e}", spec.kind, vf.field));
                assert_eq!(back, v);
            }
            for bad in [
                json!("not_in_vocab"),
                json!(null),
                json!(1),
                json!("ASSISTANT"),
            ] {
                let v = with_field(spec.kind, sample, arr, vf.field, bad.clone());
                let path = match arr {
                    None => vf.field.to_owned(),
                    Some(a) => format!("{a}[0].{}", vf.field),
                };
                match decode_value(v) {
                    Err(DecodeError::InvalidValue {
                        kind,
                        field,
                        value,
                        allowed,
                    }) => {
                        assert_eq!(kind, spec.kind);
                        assert_eq!(field, path);
                        assert_eq!(value, bad.to_string());
                        assert_eq!(allowed, vf.allowed);
                    }
                    other => panic!("{}.{} = {bad}: {other:?}", spec.kind, vf.field),
                }
            }
        }
    }
}

#[test]
fn absent_priority_stays_absent() {
    let v =
        json!({"kind": "cap.plan", "entries": [{"id": "a", "content": "c", "status": "pending"}]});
    let CapEvent::Plan(plan) = decode_value(v.clone()).unwrap() else {
        panic!("not a plan")
    };
    assert_eq!(plan.entries[0].priority, None);
    assert_eq!(reencode(&v).unwrap(), v);
}

#[test]
fn meta_and_unknown_fields_survive_on_every_kind() {
    let meta = json!({
        "acme.x": {"trace": [1, {"b": null}], "deep": {"z": 1.5}},
        "cap": {"kind": "ignored-here"},
        "cap.message_to": "cap://codex-1"
    });
    for (kind, sample) in samples() {
        let mut v = sample.clone();
        v["_meta"] = meta.clone();
        v["x-acme-extension"] = json!({"keep": true});
        let ev = decode_value(v.clone()).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(ev.meta().unwrap()["acme.x"], meta["acme.x"], "{kind}");
        assert_eq!(ev.message_to(), Some("cap://codex-1"), "{kind}");
        assert_eq!(
            ev.extra()["x-acme-extension"],
            json!({"keep": true}),
            "{kind}"
        );
        assert_eq!(serde_json::to_value(&ev).unwrap(), v, "{kind}");

        let mut bad = sample.clone();
        bad["_meta"] = json!("not an object");
        let err = decode_value(bad).unwrap_err();
        assert_eq!(err.field(), Some("_meta"), "{kind}");
    }
}

#[test]
fn master_plan_entries_expose_assignment() {
    let text = fs::read_to_string(fixture_dir("events").join("10.2-master-plan.json")).unwrap();
    let CapEvent::Plan(plan) = decode_event(&text).unwrap() else {
        panic!("not a plan")
    };
    assert_eq!(plan.entries[0].assigned_to(), Some("cap://claude-1"));
    assert!(plan.entries[0].depends_on().is_empty());
    assert_eq!(plan.entries[1].assigned_to(), Some("cap://codex-1"));
    assert_eq!(plan.entries[1].depends_on(), ["t1"]);
    assert_eq!(plan.entries[1].priority, None);
}

#[test]
fn explicit_nulls_round_trip() {
    let frames = [
        json!({"kind": "cap.ask_user", "ask_id": "a", "prompt": "p", "form": null, "timeout_seconds": null}),
        json!({"kind": "cap.session.config", "cwd": "/w", "model": null, "session_resume_id": null, "profile_config": null}),
        json!({"kind": "cap.text_chunk", "message_id": null, "text": "t"}),
        json!({"kind": "cap.tool_call.end", "call_id": "c", "output": null, "is_error": null}),
        json!({"kind": "cap.error", "code": "x_custom", "message": "m", "details": null}),
        json!({"kind": "cap.ask_user.answer", "ask_id": "a", "value": null}),
        json!({"kind": "cap.usage", "cost_usd_estimate": 0, "budget": null}),
    ];
    for v in frames {
        assert_eq!(reencode(&v).unwrap(), v);
    }
}

#[test]
fn direction_is_checked() {
    for (kind, sample) in samples() {
        let line = sample.to_string();
        let spec = KINDS.iter().find(|s| s.kind == kind).unwrap();
        let ev = decode_event_directed(&line, spec.direction).unwrap();
        assert_eq!(ev.direction(), spec.direction);
        let other = match spec.direction {
            Direction::AgentToOrchestrator => Direction::OrchestratorToAgent,
            Direction::OrchestratorToAgent => Direction::AgentToOrchestrator,
        };
        match decode_event_directed(&line, other) {
            Err(DecodeError::WrongDirection {
                kind: k,
                expected,
                actual,
            }) => {
                assert_eq!((k, expected, actual), (spec.kind, other, spec.direction));
            }
            res => panic!("{kind}: {res:?}"),
        }
    }
}

#[test]
fn unknown_kinds_and_bad_frames_are_typed_errors() {
    let err = decode_event(r#"{"kind":"cap.coding.custom","x":1}"#).unwrap_err();
    assert_eq!(err.unknown_kind(), Some("cap.coding.custom"));
    assert_eq!(err.kind(), Some("cap.coding.custom"));
    assert!(matches!(
        decode_event("not json"),
        Err(DecodeError::Malformed(_))
    ));
    assert!(matches!(
        decode_event(r#""cap.plan""#),
        Err(DecodeError::NotAnObject)
    ));
    assert!(matches!(
        decode_event(r#"{"text":"x"}"#),
        Err(DecodeError::MissingKind)
    ));
    let err = decode_event(r#"{"kind":"cap.plan","entries":{}}"#).unwrap_err();
    assert_eq!(err.field(), Some("entries"));
    let err = decode_event(r#"{"kind":"cap.tool_call.end","call_id":"c","duration_ms":"slow"}"#)
        .unwrap_err();
    assert!(
        matches!(
            err,
            DecodeError::Invalid {
                kind: "cap.tool_call.end",
                ..
            }
        ),
        "{err:?}"
    );
    let err = decode_event(r#"{"kind":"cap.permission.response","req_id":"r"}"#).unwrap_err();
    assert_eq!(err.code(), None);
    let err = decode_event(r#"{"kind":"cap.ask_user.answer","value":1}"#).unwrap_err();
    assert_eq!(err.code(), Some(CapCode::InvalidAnswer));
}

#[test]
fn error_code_table_maps_both_ways() {
    for row in CODE_TABLE {
        assert_eq!(CapCode::from_number(row.number), Some(row.code));
        assert_eq!(CapCode::from_symbol(row.symbol), Some(row.code));
        assert_eq!(
            (row.code.number(), row.code.symbol()),
            (row.number, row.symbol)
        );
        assert!(row.symbol.starts_with("cap_"));
        assert!((-32099..=-32000).contains(&row.number));
    }
    assert_eq!(
        CODE_TABLE.iter().filter(|r| r.profile.is_none()).count(),
        10
    );
}

/// Late output (a terminal agent printing after its turn ended) is a plain event with
/// `_meta."capfleet.late_output": true`: no new kind, the key survives a round trip,
/// and a receiver reading it knows the event belongs to the ended turn.
#[test]
fn late_output_is_a_meta_key_on_a_plain_event() {
    use capfleet_protocol::protocol::{META_LATE_OUTPUT, is_late_output};
    let mut ev = CapEvent::text("pty-msg-1", "the rest of the answer\n");
    assert!(!is_late_output(ev.meta()));
    ev.set_meta(META_LATE_OUTPUT, Value::Bool(true));
    let wire = serde_json::to_value(&ev).unwrap();
    assert_eq!(wire["kind"], "cap.text_chunk");
    assert_eq!(wire["_meta"][META_LATE_OUTPUT], true);
    let back = decode_value(wire).unwrap();
    assert!(is_late_output(back.meta()));
    assert_eq!(back, ev);
}
