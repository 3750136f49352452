//! Core reverse RPC (CAP §8): `cap.user_io.show` and `cap.notify` are published
//! into the session as `cap.text_chunk` on the `system` channel (the notify's
//! urgency and the show's level in `_meta`); `cap.user_io.input` asks the human
//! through the session (a free-text `cap.ask_user`), falling back to `default`,
//! else declined.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::RpcError;
use super::host::{Host, Reply};
use crate::protocol::{CapEvent, Channel, HasMeta};

#[derive(Deserialize)]
pub(crate) struct Show {
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub level: Option<String>,
    #[serde(default)]
    pub urgent: Option<bool>,
}

#[derive(Deserialize)]
pub(crate) struct Input {
    pub prompt: String,
    #[serde(default)]
    pub default: Option<String>,
}

static SEQ: AtomicU64 = AtomicU64::new(1);

/// `cap.user_io.show` / `cap.notify` (`method` names which, in `_meta`).
pub(crate) async fn show(host: &Arc<dyn Host>, method: &str, p: Show) -> Result<Value, RpcError> {
    let text = match (p.title.is_empty(), p.body.is_empty()) {
        (false, false) => format!("{}: {}", p.title, p.body),
        (false, true) => p.title.clone(),
        _ => p.body.clone(),
    };
    let id = format!("user-io-{}", SEQ.fetch_add(1, Ordering::Relaxed));
    let mut ev = CapEvent::text_on(Channel::System, id, text);
    let mut m = Map::new();
    m.insert("capfleet.reverse_rpc".into(), json!(method));
    if let Some(level) = p.level {
        m.insert("capfleet.level".into(), json!(level));
    }
    if let Some(urgent) = p.urgent {
        m.insert("capfleet.urgent".into(), json!(urgent));
    }
    *ev.meta_mut() = Some(m);
    if host.publish(ev).await {
        Ok(json!({ "ok": true }))
    } else {
        Err(RpcError::Io("the session is gone".into()))
    }
}

/// `cap.user_io.input`: the human's text, else the default, else denied.
pub(crate) async fn input(host: &Arc<dyn Host>, p: Input) -> Result<Value, RpcError> {
    let text = match host.ask(p.prompt, None).await {
        Reply::Answered(Value::String(s)) => Some(s),
        Reply::Answered(other) => Some(other.to_string()),
        Reply::Declined | Reply::Withdrawn => None,
    };
    match text.or(p.default) {
        Some(text) => Ok(json!({ "text": text })),
        None => Err(RpcError::Declined("nobody answered the input".into())),
    }
}
