//! One journal line as the chaos report reads it: the few fields of every record kind
//! it looks at, strings borrowed from the line where they have no escapes. Unknown
//! record kinds and fields are ignored, so the report reads journals of any version.

use std::borrow::Cow;

use serde::Deserialize;

/// The fields the report reads, whatever the record's `type`.
#[derive(Debug, Deserialize)]
pub(super) struct Line<'a> {
    #[serde(default)]
    pub seq: Option<u64>,
    /// A joined text run (or a `journal_cut`): the last sequence number it covers.
    #[serde(default)]
    pub last_seq: Option<u64>,
    #[serde(default, borrow)]
    pub urn: Option<Cow<'a, str>>,
    #[serde(default)]
    pub turn: Option<u32>,
    #[serde(default)]
    pub ts_ms: Option<u64>,
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    /// `chaos`: the fault's kind, its target, its position in the seeded sequence and
    /// what was done.
    #[serde(default, borrow)]
    pub fault: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub target: Option<Cow<'a, str>>,
    #[serde(default)]
    pub seed_pos: Option<u64>,
    #[serde(default)]
    pub detail: Option<String>,
    /// A signal fault's target process group.
    #[serde(default)]
    pub group: Option<i32>,
    /// `turn_started`.
    #[serde(default)]
    pub attempt: Option<u32>,
    /// `turn_ended`, `delivered`, `stopping`, `run_ended`.
    #[serde(default, borrow)]
    pub outcome: Option<Cow<'a, str>>,
    /// `failed`, `stopping`, `paused`.
    #[serde(default)]
    pub reason: Option<String>,
    /// `restart`: the driver's exit cause (`{"kind":"signaled","signal":9}`).
    #[serde(default)]
    pub cause: Option<Cause>,
    /// `cap`: the CAP event.
    #[serde(default, borrow)]
    pub event: Option<CapLite<'a>>,
    /// `routed`, `delivered`: the delivery's idempotency key.
    #[serde(default, borrow)]
    pub key: Option<Cow<'a, str>>,
    /// `resumed`: a torn last line it found, reported and cut.
    #[serde(default)]
    pub torn_bytes: Option<u64>,
    /// `budget_exceeded`.
    #[serde(default)]
    pub overshoot_usd: Option<f64>,
    /// `session`: a session of the run.
    #[serde(default)]
    pub name: Option<String>,
}

/// A restart's exit cause: its kind, and the signal or status.
#[derive(Debug, Deserialize)]
pub(super) struct Cause {
    pub kind: String,
    #[serde(default)]
    pub signal: Option<i32>,
    #[serde(default)]
    pub code: Option<i32>,
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.kind)?;
        match (self.signal, self.code) {
            (Some(s), _) => write!(f, " {s}"),
            (None, Some(c)) => write!(f, " {c}"),
            (None, None) => Ok(()),
        }
    }
}

/// A CAP event: its kind, an error's code and message, a usage's cost.
#[derive(Debug, Deserialize)]
pub(super) struct CapLite<'a> {
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
    #[serde(default, borrow)]
    pub code: Option<Cow<'a, str>>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub cost_usd_estimate: Option<f64>,
}

/// `cap.session.ready`: the agent is up.
pub(super) const READY: &str = "cap.session.ready";
/// `cap.error`.
pub(super) const ERROR: &str = "cap.error";
/// `cap.usage`: a turn result's usage.
pub(super) const USAGE: &str = "cap.usage";
/// The fleet's own stream, where `self_kill` is journaled.
pub(super) const ROUTER_SUFFIX: &str = "/router";

/// A record's place: its `seq` and the *first* `urn` (the stream's). A record whose
/// body names a URN too (`budget_exceeded`: the session that crossed the budget)
/// carries the key twice, which a derived struct refuses and a map keeps the last of.
#[derive(Debug, Default)]
pub(super) struct Head {
    pub seq: Option<u64>,
    pub last_seq: Option<u64>,
    pub urn: Option<String>,
}

impl<'de> Deserialize<'de> for Head {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Head, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Head;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a journal record")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Head, A::Error> {
                let mut head = Head::default();
                while let Some(key) = m.next_key::<Cow<'de, str>>()? {
                    match &*key {
                        "seq" if head.seq.is_none() => head.seq = m.next_value()?,
                        "last_seq" if head.last_seq.is_none() => {
                            head.last_seq = m.next_value()?;
                        }
                        "urn" if head.urn.is_none() => head.urn = m.next_value()?,
                        _ => {
                            m.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(head)
            }
        }
        d.deserialize_map(Visit)
    }
}
