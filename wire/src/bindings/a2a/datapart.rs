//! CAP events carried as A2A data parts (spec §7.0, §11.3): the part's `data` is the
//! event's object without its `kind`, which travels as `_meta."cap.kind"` (or nested,
//! `_meta.cap.kind`). Answers to asks and permission requests go back the same way.
//! Whole numbers sent as doubles (protobuf's `Value`) decode as integers.

use serde_json::{Map, Value};

use crate::protocol::meta::{CAP_KIND, cap_value};
use crate::protocol::{CapEvent, decode_value};

/// Why a marked data part is no CAP event.
#[derive(Debug, thiserror::Error)]
#[error("data part marked `{kind}` is not a valid CAP event: {reason}")]
pub struct DataPartError {
    pub kind: String,
    pub reason: String,
}

/// The CAP kind a data part is marked with, if any.
pub(crate) fn marked_kind(data: &Value) -> Option<&str> {
    let meta = data.get("_meta")?.as_object()?;
    cap_value(meta, CAP_KIND)?.as_str()
}

/// The event a marked data part carries (`None`: the part is not marked).
pub fn decode(data: &Value) -> Option<Result<CapEvent, DataPartError>> {
    let kind = marked_kind(data)?.to_owned();
    let mut obj = data.as_object().cloned().unwrap_or_default();
    if let Some(Value::Object(meta)) = obj.get_mut("_meta") {
        meta.remove(CAP_KIND);
        if let Some(Value::Object(nested)) = meta.get_mut("cap") {
            nested.remove("kind");
            if nested.is_empty() {
                meta.remove("cap");
            }
        }
        if meta.is_empty() {
            obj.remove("_meta");
        }
    }
    obj.insert("kind".into(), Value::String(kind.clone()));
    let mut event = Value::Object(obj);
    whole_numbers(&mut event);
    Some(decode_value(event).map_err(|e| DataPartError {
        kind,
        reason: e.to_string(),
    }))
}

/// Peers built on protobuf (the official SDKs) carry a data part as a
/// `google.protobuf.Value`, whose numbers are all doubles: `7` arrives as `7.0`.
/// Whole numbers are made integers again, so that counts decode as counts.
fn whole_numbers(v: &mut Value) {
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            // Within ±2^53 a double is an exact integer.
            if f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 {
                *v = Value::from(f as i64);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(whole_numbers),
        Value::Object(o) => o.values_mut().for_each(whole_numbers),
        _ => {}
    }
}

/// The data of a part carrying `event` (its kind moved into `_meta."cap.kind"`).
pub fn encode(event: &CapEvent) -> Value {
    let mut obj = match serde_json::to_value(event) {
        Ok(Value::Object(o)) => o,
        _ => Map::new(),
    };
    let kind = obj.remove("kind").unwrap_or_else(|| event.kind().into());
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(CAP_KIND.into(), kind);
    }
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_round_trips_through_a_data_part() {
        let event = CapEvent::tool_start("c1", "Bash", json!({"command": "ls"}));
        let data = encode(&event);
        assert_eq!(data["_meta"]["cap.kind"], "cap.tool_call.start");
        assert!(data.get("kind").is_none());
        assert_eq!(decode(&data).unwrap().unwrap(), event);
    }

    #[test]
    fn a_protobuf_peers_doubles_decode_as_counts() {
        let data = json!({"_meta": {"cap.kind": "cap.usage"}, "input_tokens": 7.0, "output_tokens": 3.0,
            "cost_usd_estimate": 0.25});
        let CapEvent::Usage(u) = decode(&data).unwrap().unwrap() else {
            panic!("not usage")
        };
        assert_eq!(u.input_tokens.get(), Some(&7));
        assert_eq!(u.output_tokens.get(), Some(&3));
    }

    #[test]
    fn the_nested_marker_is_read_and_unmarked_data_is_not_an_event() {
        let data = json!({"_meta": {"cap": {"kind": "cap.usage"}}, "input_tokens": 3});
        let CapEvent::Usage(u) = decode(&data).unwrap().unwrap() else {
            panic!("not usage")
        };
        assert_eq!(u.input_tokens.get(), Some(&3));
        assert!(u.meta.is_none());
        assert!(decode(&json!({"x": 1})).is_none());
        assert!(
            decode(&json!({"_meta": {"cap.kind": "cap.usage"}, "input_tokens": "x"}))
                .unwrap()
                .is_err()
        );
    }
}
