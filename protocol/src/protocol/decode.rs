//! Decoding CAP frames into [`CapEvent`]s, validated against [`KINDS`].
//!
//! One JSON parse per frame: the line becomes a `Value`, the table's rules run on
//! the object (required keys, vocabularies, nested plan entries, `_meta` shape),
//! then the object moves into its typed struct. Errors name the offending field by
//! path (`entries[1].status`).

use serde_json::{Map, Value};
use thiserror::Error;

use super::errors::{CapCode, ErrorKind};
use super::event::CapEvent;
use super::kinds::{EventKind, KINDS, KindSpec, VocabField};
use super::vocab::Direction;

/// Why a frame was rejected.
#[derive(Debug, Error)]
pub enum DecodeError {
    /// Not JSON at all.
    #[error("malformed JSON: {0}")]
    Malformed(#[source] serde_json::Error),
    /// The frame is JSON but not an object.
    #[error("frame is not a JSON object")]
    NotAnObject,
    /// The object has no `kind` key.
    #[error("frame has no \"kind\"")]
    MissingKind,
    /// A kind outside the table, kept so a driver can count or forward it. A
    /// non-string `kind` is reported here as its JSON text.
    #[error("unknown event kind {0:?}")]
    UnknownKind(String),
    /// A field the kind requires is absent.
    #[error("{kind}: missing required field `{field}`")]
    MissingField {
        /// The frame's kind.
        kind: &'static str,
        /// The field's path, e.g. `entries[1].id`.
        field: String,
    },
    /// A value outside the field's vocabulary (or of the wrong shape, e.g. `_meta`
    /// not an object); `value` is its JSON text.
    #[error("{kind}: invalid value {value} for `{field}` (allowed: {})", .allowed.join(" | "))]
    InvalidValue {
        /// The frame's kind.
        kind: &'static str,
        /// The field's path, e.g. `entries[1].status`.
        field: String,
        /// The value found, as JSON text.
        value: String,
        /// The vocabulary's wire values.
        allowed: &'static [&'static str],
    },
    /// The rules held but a field has the wrong type (e.g. `"text": 3`).
    #[error("{kind}: {source}")]
    Invalid {
        /// The frame's kind.
        kind: &'static str,
        /// What serde reported.
        #[source]
        source: serde_json::Error,
    },
    /// The frame arrived in the direction its kind does not flow.
    #[error("{kind} flows {actual}, expected {expected}")]
    WrongDirection {
        /// The frame's kind.
        kind: &'static str,
        /// The direction the kind flows.
        expected: Direction,
        /// The direction the frame came from.
        actual: Direction,
    },
}

impl DecodeError {
    /// The frame's kind when it had one (known or not).
    pub fn kind(&self) -> Option<&str> {
        match self {
            DecodeError::UnknownKind(k) => Some(k),
            DecodeError::MissingField { kind, .. }
            | DecodeError::InvalidValue { kind, .. }
            | DecodeError::Invalid { kind, .. }
            | DecodeError::WrongDirection { kind, .. } => Some(kind),
            DecodeError::Malformed(_) | DecodeError::NotAnObject | DecodeError::MissingKind => None,
        }
    }

    /// The kind string of an [`DecodeError::UnknownKind`].
    pub fn unknown_kind(&self) -> Option<&str> {
        match self {
            DecodeError::UnknownKind(k) => Some(k),
            _ => None,
        }
    }

    /// The offending field path for field-level errors.
    pub fn field(&self) -> Option<&str> {
        match self {
            DecodeError::MissingField { field, .. } | DecodeError::InvalidValue { field, .. } => {
                Some(field)
            }
            _ => None,
        }
    }

    /// The registry code for the rejection, where the registry has one: a
    /// malformed `cap.ask_user.answer` is `cap_invalid_answer`.
    pub fn code(&self) -> Option<CapCode> {
        let answer = EventKind::AskUserAnswer.wire();
        match self {
            DecodeError::MissingField { kind, .. }
            | DecodeError::InvalidValue { kind, .. }
            | DecodeError::Invalid { kind, .. }
                if *kind == answer =>
            {
                Some(CapCode::InvalidAnswer)
            }
            _ => None,
        }
    }

    /// The `cap.error` code a driver reports for an unparseable agent frame.
    pub fn error_kind(&self) -> ErrorKind {
        ErrorKind::ParseFailed
    }
}

/// Decodes one NDJSON line.
pub fn decode_event(line: &str) -> Result<CapEvent, DecodeError> {
    decode_value(serde_json::from_str(line).map_err(DecodeError::Malformed)?)
}

/// Decodes an event capfleet encoded itself (a journal's record, read back): its
/// kind's struct read straight from the text, without a `Value` of the whole event
/// or the checks [`decode_event`] runs (the event passed them before it was
/// journaled). Text that does not read that way is decoded by [`decode_event`],
/// whose result (or error) it then is.
pub fn decode_trusted(json: &str) -> Result<CapEvent, DecodeError> {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(borrow)]
        kind: std::borrow::Cow<'a, str>,
    }
    if let Ok(Kind { kind }) = serde_json::from_str::<Kind<'_>>(json)
        && let Some(spec) = KINDS.iter().find(|s| s.kind == kind)
        && let Some(event) = CapEvent::from_trusted_json(spec.id, json)
    {
        return Ok(event);
    }
    decode_event(json)
}

/// Decodes one line and checks it flows in `expected` direction (e.g. a driver
/// reading orchestrator frames expects [`Direction::OrchestratorToAgent`]).
pub fn decode_event_directed(line: &str, expected: Direction) -> Result<CapEvent, DecodeError> {
    let value = serde_json::from_str(line).map_err(DecodeError::Malformed)?;
    decode_value_directed(value, expected)
}

/// Decodes an already parsed frame.
pub fn decode_value(value: Value) -> Result<CapEvent, DecodeError> {
    decode_inner(value, None)
}

/// [`decode_value`] with a direction check.
pub fn decode_value_directed(value: Value, expected: Direction) -> Result<CapEvent, DecodeError> {
    decode_inner(value, Some(expected))
}

fn decode_inner(value: Value, expected: Option<Direction>) -> Result<CapEvent, DecodeError> {
    let Value::Object(mut obj) = value else {
        return Err(DecodeError::NotAnObject);
    };
    let spec = match obj.shift_remove("kind") {
        None => return Err(DecodeError::MissingKind),
        Some(Value::String(k)) => match KINDS.iter().find(|s| s.kind == k) {
            Some(spec) => spec,
            None => return Err(DecodeError::UnknownKind(k)),
        },
        Some(other) => return Err(DecodeError::UnknownKind(other.to_string())),
    };
    if let Some(expected) = expected
        && spec.direction != expected
    {
        return Err(DecodeError::WrongDirection {
            kind: spec.kind,
            expected,
            actual: spec.direction,
        });
    }
    validate(spec, &obj)?;
    CapEvent::from_object(spec.id, obj).map_err(|source| DecodeError::Invalid {
        kind: spec.kind,
        source,
    })
}

/// Checks an event object (without `"kind"`) against its table row.
pub fn validate(spec: &'static KindSpec, obj: &Map<String, Value>) -> Result<(), DecodeError> {
    check_object(spec.kind, obj, spec.required, spec.vocab, |f| f.to_owned())?;
    let Some(nested) = spec.nested else {
        return Ok(());
    };
    match obj.get(nested.field) {
        None => Ok(()),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let path = |f: &str| format!("{}[{i}].{f}", nested.field);
                let Value::Object(entry) = item else {
                    return Err(invalid(
                        spec.kind,
                        format!("{}[{i}]", nested.field),
                        item,
                        &["object"],
                    ));
                };
                check_object(spec.kind, entry, nested.required, nested.vocab, path)?;
            }
            Ok(())
        }
        Some(other) => Err(invalid(
            spec.kind,
            nested.field.to_owned(),
            other,
            &["array"],
        )),
    }
}

fn check_object(
    kind: &'static str,
    obj: &Map<String, Value>,
    required: &[&str],
    vocab: &[VocabField],
    path: impl Fn(&str) -> String,
) -> Result<(), DecodeError> {
    if let Some(missing) = required.iter().find(|f| !obj.contains_key(**f)) {
        return Err(DecodeError::MissingField {
            kind,
            field: path(missing),
        });
    }
    for vf in vocab {
        match obj.get(vf.field) {
            None => {}
            Some(Value::String(s)) if vf.allowed.contains(&s.as_str()) => {}
            Some(other) => return Err(invalid(kind, path(vf.field), other, vf.allowed)),
        }
    }
    match obj.get("_meta") {
        None | Some(Value::Object(_)) => Ok(()),
        Some(other) => Err(invalid(kind, path("_meta"), other, &["object"])),
    }
}

fn invalid(
    kind: &'static str,
    field: String,
    value: &Value,
    allowed: &'static [&'static str],
) -> DecodeError {
    DecodeError::InvalidValue {
        kind,
        field,
        value: value.to_string(),
        allowed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journaled_event_is_read_typed_not_through_the_checks() {
        let events = [
            CapEvent::ready(Some("s1")),
            CapEvent::text("m1", "hello"),
            CapEvent::tool_start("c1", "Read", serde_json::json!({"file_path": "a"})),
            CapEvent::tool_end("c1", Some(Value::from("ok")), false, Some(3)),
            CapEvent::thought("m2", "hm"),
        ];
        for e in events {
            let text = serde_json::to_string(&e).unwrap();
            let typed = CapEvent::from_trusted_json(e.event_kind(), &text);
            assert_eq!(typed.as_ref(), Some(&e), "{text}");
        }
    }

    #[test]
    fn nested_paths_are_named() {
        let line = r#"{"kind":"cap.plan","entries":[{"id":"a","content":"x","status":"pending"},{"id":"b","content":"y","status":"done"}]}"#;
        match decode_event(line) {
            Err(DecodeError::InvalidValue { field, value, .. }) => {
                assert_eq!(field, "entries[1].status");
                assert_eq!(value, "\"done\"");
            }
            other => panic!("unexpected {other:?}"),
        }
        let line = r#"{"kind":"cap.plan","entries":[{"id":"a","status":"pending"}]}"#;
        let err = decode_event(line).unwrap_err();
        assert_eq!(err.field(), Some("entries[0].content"));
    }

    #[test]
    fn shapes_and_kinds() {
        assert!(matches!(decode_event("[1]"), Err(DecodeError::NotAnObject)));
        assert!(matches!(decode_event("{"), Err(DecodeError::Malformed(_))));
        assert!(matches!(decode_event("{}"), Err(DecodeError::MissingKind)));
        let err = decode_event(r#"{"kind":"cap.x.custom"}"#).unwrap_err();
        assert_eq!(err.unknown_kind(), Some("cap.x.custom"));
        let err = decode_event(r#"{"kind":"cap.text_chunk","text":3}"#).unwrap_err();
        assert!(matches!(
            err,
            DecodeError::Invalid {
                kind: "cap.text_chunk",
                ..
            }
        ));
        let err = decode_event(r#"{"kind":"cap.ask_user.answer","ask_id":"a"}"#).unwrap_err();
        assert_eq!(err.code(), Some(CapCode::InvalidAnswer));
        assert_eq!(err.error_kind(), ErrorKind::ParseFailed);
    }
}
