//! The `_meta` object (core §7.0): kept verbatim on every event and plan entry,
//! with typed accessors for the reserved `cap` keys of §10.2/§10.3.
//!
//! The spec writes reserved keys flat (`"cap.assigned_to"`, §10.2 example); a
//! nested `{"cap": {"assigned_to": ...}}` is read too. Setters write the flat form.
//! Other namespaces are never interpreted, only carried.

use serde_json::{Map, Value};

/// An `_meta` object.
pub type Meta = Map<String, Value>;

/// `_meta.cap.kind`: the event kind when carried as an A2A DataPart (§7.0).
pub const CAP_KIND: &str = "cap.kind";
/// `_meta.cap.assigned_to`: the sub-agent URN a plan entry is assigned to (§10.2).
pub const CAP_ASSIGNED_TO: &str = "cap.assigned_to";
/// `_meta.cap.depends_on`: ids of the entries a plan entry waits for (§10.2).
pub const CAP_DEPENDS_ON: &str = "cap.depends_on";
/// `_meta.cap.message_to`: the URN a cross-agent directive is for (§10.3).
pub const CAP_MESSAGE_TO: &str = "cap.message_to";

/// `_meta."capfleet.late_output"` (capfleet's namespace, §7.0): `true` on an event
/// made of output that arrived after its turn had ended and before the next prompt
/// went out (a terminal agent still printing). It belongs to the ended turn, never to
/// the next one. No new kind: a receiver that ignores the key sees plain events.
pub const META_LATE_OUTPUT: &str = "capfleet.late_output";

/// Whether an event's `_meta` marks it as late output ([`META_LATE_OUTPUT`]).
pub fn is_late_output(meta: Option<&Meta>) -> bool {
    meta.and_then(|m| m.get(META_LATE_OUTPUT))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// A reserved key, flat (`"cap.x"`) or nested (`"cap": {"x": ..}`); `key` is the
/// flat spelling.
pub fn cap_value<'a>(meta: &'a Meta, key: &str) -> Option<&'a Value> {
    meta.get(key).or_else(|| {
        let sub = key.strip_prefix("cap.")?;
        meta.get("cap")?.as_object()?.get(sub)
    })
}

/// Access to an object's `_meta`, with the reserved `cap` keys typed.
pub trait HasMeta {
    /// The object's `_meta`, if it has one.
    fn meta(&self) -> Option<&Meta>;
    /// The object's `_meta` slot, to set or clear.
    fn meta_mut(&mut self) -> &mut Option<Meta>;

    /// `_meta.cap.assigned_to` when it is a string.
    fn assigned_to(&self) -> Option<&str> {
        self.meta()
            .and_then(|m| cap_value(m, CAP_ASSIGNED_TO)?.as_str())
    }

    /// `_meta.cap.depends_on`: the string ids of the list (a lone string is a list
    /// of one); empty when absent.
    fn depends_on(&self) -> Vec<&str> {
        match self.meta().and_then(|m| cap_value(m, CAP_DEPENDS_ON)) {
            Some(Value::Array(ids)) => ids.iter().filter_map(Value::as_str).collect(),
            Some(Value::String(id)) => vec![id.as_str()],
            _ => Vec::new(),
        }
    }

    /// `_meta.cap.message_to` when it is a string.
    fn message_to(&self) -> Option<&str> {
        self.meta()
            .and_then(|m| cap_value(m, CAP_MESSAGE_TO)?.as_str())
    }

    /// Sets one `_meta` key (flat spelling), creating `_meta` if needed.
    fn set_meta(&mut self, key: &str, value: Value) {
        self.meta_mut()
            .get_or_insert_with(Meta::new)
            .insert(key.to_owned(), value);
    }

    /// Sets `_meta.cap.assigned_to`: the URN of the agent a plan entry is for.
    fn set_assigned_to(&mut self, urn: &str) {
        self.set_meta(CAP_ASSIGNED_TO, Value::from(urn));
    }

    /// Sets `_meta.cap.depends_on`: the ids of the entries this one waits for.
    fn set_depends_on(&mut self, ids: &[&str]) {
        self.set_meta(CAP_DEPENDS_ON, Value::from(ids.to_vec()));
    }

    /// Sets `_meta.cap.message_to`: the URN of the agent a directive is for (§10.3).
    fn set_message_to(&mut self, urn: &str) {
        self.set_meta(CAP_MESSAGE_TO, Value::from(urn));
    }
}

/// Implements [`HasMeta`] for structs with a `meta: Option<Meta>` field.
macro_rules! impl_has_meta {
    ($($ty:ty),+ $(,)?) => {$(
        impl $crate::protocol::meta::HasMeta for $ty {
            fn meta(&self) -> Option<&$crate::protocol::meta::Meta> {
                self.meta.as_ref()
            }
            fn meta_mut(&mut self) -> &mut Option<$crate::protocol::meta::Meta> {
                &mut self.meta
            }
        }
    )+};
}
pub(crate) use impl_has_meta;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct M(Option<Meta>);
    impl HasMeta for M {
        fn meta(&self) -> Option<&Meta> {
            self.0.as_ref()
        }
        fn meta_mut(&mut self) -> &mut Option<Meta> {
            &mut self.0
        }
    }

    #[test]
    fn flat_and_nested_keys() {
        let flat = M(
            json!({"cap.assigned_to": "cap://a", "cap.depends_on": ["t1", "t2"]})
                .as_object()
                .cloned(),
        );
        assert_eq!(flat.assigned_to(), Some("cap://a"));
        assert_eq!(flat.depends_on(), vec!["t1", "t2"]);
        let nested = M(json!({"cap": {"message_to": "cap://b"}})
            .as_object()
            .cloned());
        assert_eq!(nested.message_to(), Some("cap://b"));
        assert_eq!(nested.assigned_to(), None);
        let mut empty = M(None);
        assert!(empty.depends_on().is_empty());
        empty.set_depends_on(&["x"]);
        empty.set_assigned_to("cap://c");
        assert_eq!(empty.depends_on(), vec!["x"]);
        assert_eq!(empty.assigned_to(), Some("cap://c"));
    }
}
