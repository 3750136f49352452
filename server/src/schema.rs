//! The app's types in the API document. `capfleet-app` knows no API document (no
//! utoipa), so the server describes the two it sends and takes here, field for field
//! with their serde attributes: [`Finding`] (`capfleet_app::submission::Finding`) and
//! [`Submission`] (`capfleet_app::submission::Submission`). The tests below check that
//! each lists the fields the app's type (de)serializes, no more, no fewer.

use std::collections::BTreeMap;

use utoipa::ToSchema;

/// One reason a fleet was rejected, as `run --dry-run` prints it.
#[derive(ToSchema)]
#[allow(dead_code)] // Only its schema is used.
pub(crate) struct Finding {
    /// The file the finding is in (`fleet.toml`, or a file of `files`).
    origin: String,
    line: Option<usize>,
    /// The dotted key (`sessions[1].agent`), empty for the file as a whole.
    key: String,
    /// The whole finding, as printed.
    message: String,
}

/// What a client submitted.
#[derive(ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // Only its schema is used.
pub(crate) struct Submission {
    /// The fleet.toml's text.
    fleet: String,
    /// Replaces the fleet's task.
    #[serde(default)]
    task: Option<String>,
    /// Files beside the fleet (relative path -> text), e.g. the sim's scripts.
    #[serde(default)]
    files: BTreeMap<String, String>,
    /// The directory the sessions that name no `cwd` work in: inside a root the
    /// server allows (`--allow-root`). Default: the server's working directory.
    #[serde(default)]
    cwd: Option<String>,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use utoipa::PartialSchema;
    use utoipa::openapi::{RefOr, Schema};

    /// The property names of `T`'s schema, and the required ones.
    fn fields<T: PartialSchema>() -> (BTreeSet<String>, BTreeSet<String>) {
        let RefOr::T(Schema::Object(o)) = T::schema() else {
            panic!("not an object schema");
        };
        (
            o.properties.keys().cloned().collect(),
            o.required.iter().cloned().collect(),
        )
    }

    fn keys(v: serde_json::Value) -> BTreeSet<String> {
        v.as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn the_finding_schema_has_the_fields_the_app_sends() {
        let sent = capfleet_app::submission::Finding {
            origin: "fleet.toml".into(),
            line: Some(1),
            key: "k".into(),
            message: "m".into(),
        };
        let (props, _) = fields::<super::Finding>();
        assert_eq!(props, keys(serde_json::to_value(sent).unwrap()));
    }

    #[test]
    fn the_submission_schema_has_the_fields_the_app_takes() {
        let (props, required) = fields::<super::Submission>();
        // Every field the schema lists is taken (the app denies unknown ones) ...
        let all = serde_json::json!({"fleet": "", "task": "t", "files": {}, "cwd": "/"});
        let taken: capfleet_app::submission::Submission = serde_json::from_value(all.clone())
            .expect("the app takes every field the schema lists");
        // ... and the app sends back no field the schema lacks.
        assert_eq!(props, keys(all));
        assert_eq!(props, keys(serde_json::to_value(taken).unwrap()));
        // The required ones are those the app cannot do without.
        assert_eq!(required, BTreeSet::from(["fleet".to_owned()]));
        assert!(
            serde_json::from_value::<capfleet_app::submission::Submission>(serde_json::json!({}))
                .is_err()
        );
    }
}
