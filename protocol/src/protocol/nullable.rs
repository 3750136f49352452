//! [`Nullable`]: the tri-state of an OPTIONAL event field.
//!
//! CAP frames may omit an optional field or set it to an explicit `null`
//! (`"timeout_seconds": null`, `"session_resume_id": null` in the spec examples).
//! Both mean "not set", but a relay must re-encode exactly what it read, so the
//! difference is kept. Use on a struct field as
//! `#[serde(default, skip_serializing_if = "Nullable::is_absent")]`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An optional field: absent from the frame, explicitly `null`, or set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Nullable<T> {
    /// The key was not in the frame.
    #[default]
    Absent,
    /// The key was present with value `null`.
    Null,
    /// The key was present with a value.
    Value(T),
}

impl<T> Nullable<T> {
    /// The value when set; `None` for both absent and `null`.
    pub fn get(&self) -> Option<&T> {
        match self {
            Nullable::Value(v) => Some(v),
            _ => None,
        }
    }

    /// Consumes into the value when set.
    pub fn into_option(self) -> Option<T> {
        match self {
            Nullable::Value(v) => Some(v),
            _ => None,
        }
    }

    /// True when the field was not in the object.
    pub fn is_absent(&self) -> bool {
        matches!(self, Nullable::Absent)
    }

    /// True when the field was an explicit `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Nullable::Null)
    }

    /// True when the field holds a value.
    pub fn is_set(&self) -> bool {
        matches!(self, Nullable::Value(_))
    }
}

impl Nullable<String> {
    /// The value as `&str` when set.
    pub fn as_deref(&self) -> Option<&str> {
        self.get().map(String::as_str)
    }
}

impl<T> From<T> for Nullable<T> {
    fn from(v: T) -> Self {
        Nullable::Value(v)
    }
}

impl<T> From<Option<T>> for Nullable<T> {
    /// `None` maps to [`Nullable::Absent`] (omitted on the wire).
    fn from(v: Option<T>) -> Self {
        v.map_or(Nullable::Absent, Nullable::Value)
    }
}

impl<T: Serialize> Serialize for Nullable<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Nullable::Value(v) => v.serialize(s),
            // `Absent` is normally skipped by `skip_serializing_if`; if not, it
            // cannot be anything but null.
            Nullable::Null | Nullable::Absent => s.serialize_none(),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Nullable<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Only reached when the key is present (absent keys take `Default`).
        Ok(Option::<T>::deserialize(d)?.map_or(Nullable::Null, Nullable::Value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct S {
        #[serde(default, skip_serializing_if = "Nullable::is_absent")]
        a: Nullable<u64>,
    }

    #[test]
    fn tri_state_round_trips() {
        for v in [json!({}), json!({"a": null}), json!({"a": 3})] {
            let s: S = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(serde_json::to_value(&s).unwrap(), v);
        }
        let s: S = serde_json::from_value(json!({"a": null})).unwrap();
        assert!(s.a.is_null());
        assert_eq!(s.a.get(), None);
        assert_eq!(Nullable::from(Some(2)).get(), Some(&2));
        assert!(Nullable::<u8>::from(None).is_absent());
    }
}
