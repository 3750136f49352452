//! A JSON-RPC request read and checked before anything runs (JSON-RPC 2.0 §4, A2A
//! §9): `jsonrpc` is `"2.0"`, `method` a string, `id` a string, a number or null
//! (else -32600, answered with a null id); the method one A2A names, in either
//! spelling (else -32601); `params` an object. A message a client sends carries a
//! `messageId`, a user `role` and parts (A2A §4.1.4; else -32602).
//!
//! Besides the methods a driver calls ([`Method`]), the server answers `ListTasks`
//! ([`super::list`]), the push-notification config methods (`PushNotificationNotSupported`,
//! -32003: the card declares no push notifications, A2A §3.3.4) and
//! `GetExtendedAgentCard` (`UnsupportedOperation`, -32004: it declares no extended card).

use capfleet_wire::bindings::a2a::{Method, Spelling};
use serde_json::Value;

use super::rpc::RpcError;

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// A method the engine's A2A binding names.
    Core(Method),
    /// `ListTasks` (`tasks/list`).
    List,
    /// A push-notification config method (not supported).
    Push,
    /// `GetExtendedAgentCard` (not supported).
    ExtendedCard,
}

/// The methods beyond [`Method`], in both spellings.
const OTHERS: [(&str, Spelling, Op); 12] = [
    ("ListTasks", Spelling::V1, Op::List),
    ("tasks/list", Spelling::V03, Op::List),
    ("CreateTaskPushNotificationConfig", Spelling::V1, Op::Push),
    ("GetTaskPushNotificationConfig", Spelling::V1, Op::Push),
    ("ListTaskPushNotificationConfigs", Spelling::V1, Op::Push),
    ("DeleteTaskPushNotificationConfig", Spelling::V1, Op::Push),
    ("tasks/pushNotificationConfig/set", Spelling::V03, Op::Push),
    ("tasks/pushNotificationConfig/get", Spelling::V03, Op::Push),
    ("tasks/pushNotificationConfig/list", Spelling::V03, Op::Push),
    (
        "tasks/pushNotificationConfig/delete",
        Spelling::V03,
        Op::Push,
    ),
    ("GetExtendedAgentCard", Spelling::V1, Op::ExtendedCard),
    (
        "agent/getAuthenticatedExtendedCard",
        Spelling::V03,
        Op::ExtendedCard,
    ),
];

/// A request whose envelope holds.
#[derive(Debug)]
pub(super) struct Envelope {
    pub id: Value,
    pub spelling: Spelling,
    pub op: Op,
    pub params: Value,
}

/// Read `body`: the request, or the error to answer and the id to answer it with.
pub(super) fn read(body: &[u8]) -> Result<Envelope, (RpcError, Value)> {
    let req: Value = serde_json::from_slice(body).map_err(|_| {
        (
            RpcError::new(-32700, "parse error: the body is not JSON"),
            Value::Null,
        )
    })?;
    let Value::Object(req) = req else {
        return Err((
            RpcError::invalid_request("a request is a JSON object (batches are not served)"),
            Value::Null,
        ));
    };
    let id = match req.get("id") {
        None => Value::Null,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id.clone(),
        Some(_) => {
            return Err((
                RpcError::invalid_request("`id` is a string, a number or null"),
                Value::Null,
            ));
        }
    };
    let bad = |m: &str| Err((RpcError::invalid_request(m), id.clone()));
    if req.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return bad("`jsonrpc` must be \"2.0\"");
    }
    let Some(name) = req.get("method").and_then(Value::as_str) else {
        return bad("`method` (a string) is missing");
    };
    let (spelling, op) = match Spelling::of_method(name) {
        Some((s, m)) => (s, Op::Core(m)),
        None => match OTHERS.iter().find(|(n, ..)| *n == name) {
            Some((_, s, op)) => (*s, *op),
            None => {
                return Err((
                    RpcError::new(-32601, format!("method not found: {name}")),
                    id,
                ));
            }
        },
    };
    let params = match req.get("params") {
        None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => {
            return Err((RpcError::invalid_params("`params` is an object"), id));
        }
    };
    Ok(Envelope {
        id,
        spelling,
        op,
        params,
    })
}

/// The client's message of `params`, checked: a `messageId`, a user role, and a
/// non-empty array of parts (A2A §4.1.4).
pub(super) fn message(params: &Value) -> Result<&Value, RpcError> {
    let m = params
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| RpcError::invalid_params("params.message (an object) is missing"))?;
    if m.get("messageId")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(RpcError::invalid_params(
            "message.messageId (a non-empty string) is missing",
        ));
    }
    match m.get("role").and_then(Value::as_str) {
        Some("ROLE_USER" | "user") => {}
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "message.role `{other}`: a client's message is ROLE_USER (0.3: user)"
            )));
        }
        None => return Err(RpcError::invalid_params("message.role is missing")),
    }
    if !m
        .get("parts")
        .and_then(Value::as_array)
        .is_some_and(|p| !p.is_empty() && p.iter().all(Value::is_object))
    {
        return Err(RpcError::invalid_params(
            "message.parts is a non-empty array of part objects",
        ));
    }
    Ok(m)
}

/// `historyLength` of `params` (or of `params.configuration`): unset, or a count;
/// a negative one is refused (A2A §3.2.4).
pub(super) fn history_length(params: &Value) -> Result<Option<usize>, RpcError> {
    let v = params.get("historyLength").or_else(|| {
        params
            .get("configuration")
            .and_then(|c| c.get("historyLength"))
    });
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(n) => match n.as_i64() {
            Some(n) if n >= 0 => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
            _ => Err(RpcError::invalid_params(
                "historyLength is a count of messages, 0 or more",
            )),
        },
    }
}

/// Whether a send asks to be answered at once (1.0's `returnImmediately`; 0.3's
/// `blocking: false`), not once the task ends or waits for the client.
pub(super) fn returns_immediately(params: &Value, spelling: Spelling) -> bool {
    let config = params.get("configuration");
    let flag = |k: &str| config.and_then(|c| c.get(k)).and_then(Value::as_bool);
    match spelling {
        Spelling::V1 => flag("returnImmediately").unwrap_or(false),
        Spelling::V03 => flag("blocking") == Some(false) || flag("returnImmediately") == Some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(body: &Value) -> (i64, Value) {
        let (e, id) = read(body.to_string().as_bytes()).unwrap_err();
        (e.code, id)
    }

    #[test]
    fn the_envelope_is_checked_before_the_method() {
        let send = json!({"jsonrpc": "1.0", "id": 1, "method": "SendMessage", "params": {}});
        assert_eq!(code(&send), (-32600, json!(1)));
        assert_eq!(
            code(&json!({"jsonrpc": "2.0", "id": 2})),
            (-32600, json!(2))
        );
        let object_id = json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "SendMessage"});
        assert_eq!(code(&object_id), (-32600, Value::Null));
        let unknown = json!({"jsonrpc": "2.0", "id": "x", "method": "nope/nope"});
        assert_eq!(code(&unknown), (-32601, json!("x")));
        let bad_params = json!({"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": [1]});
        assert_eq!(code(&bad_params).0, -32602);
        assert_eq!(read(b"{\"jsonrpc\"").unwrap_err().0.code, -32700);
        let list = json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/list"});
        let e = read(list.to_string().as_bytes()).unwrap();
        assert_eq!((e.op, e.spelling), (Op::List, Spelling::V03));
    }

    #[test]
    fn a_message_needs_its_id_a_user_role_and_parts() {
        let ok =
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
        assert!(message(&ok).is_ok());
        for bad in [
            json!({"message": {"role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
            json!({"message": {"messageId": "m", "role": "ROLE_BOGUS", "parts": [{"text": "hi"}]}}),
            json!({"message": {"messageId": "m", "role": "user", "parts": "invalid"}}),
            json!({"message": {"messageId": "m", "role": "user", "parts": []}}),
            json!({}),
        ] {
            assert_eq!(message(&bad).unwrap_err().code, -32602, "{bad}");
        }
        assert_eq!(
            history_length(&json!({"historyLength": -1}))
                .unwrap_err()
                .code,
            -32602
        );
        assert_eq!(
            history_length(&json!({"historyLength": 2})).unwrap(),
            Some(2)
        );
        assert!(returns_immediately(
            &json!({"configuration": {"returnImmediately": true}}),
            Spelling::V1
        ));
        assert!(!returns_immediately(&json!({}), Spelling::V1));
        assert!(returns_immediately(
            &json!({"configuration": {"blocking": false}}),
            Spelling::V03
        ));
    }
}
