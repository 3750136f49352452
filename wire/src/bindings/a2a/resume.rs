//! Where an A2A conversation goes on from when its connection is lost (a restart) or
//! capfleet itself died (`run --resume`): the conversation (`contextId`) and the task
//! of the turn in flight, if one was. The driver hands it to the session as the
//! binding's resume id (journaled, a JSON object in a string); started with one, the
//! wire sends its next messages in that context, and the next prompt — the cut turn's —
//! reads the task again (`GetTask` / `tasks/get`) instead of starting another: a task
//! that ended meanwhile gives its result, one still running is followed on.

use serde::{Deserialize, Serialize};

/// An A2A session's resume id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ResumePoint {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The task of a turn in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

impl ResumePoint {
    /// As the session keeps it.
    pub(crate) fn id(&self) -> String {
        serde_json::json!(self).to_string()
    }

    /// A resume id read back; one that is not this shape (a conversation id a user
    /// gave) is the context.
    pub(crate) fn parse(id: &str) -> ResumePoint {
        serde_json::from_str(id).unwrap_or_else(|_| ResumePoint {
            context: Some(id.to_owned()),
            task: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::ResumePoint;

    #[test]
    fn a_point_reads_back_and_a_bare_id_is_a_context() {
        let p = ResumePoint {
            context: Some("ctx-1".into()),
            task: Some("task-9".into()),
        };
        assert_eq!(ResumePoint::parse(&p.id()), p);
        assert_eq!(p.id(), r#"{"context":"ctx-1","task":"task-9"}"#);
        let bare = ResumePoint::parse("ctx-7");
        assert_eq!(bare.context.as_deref(), Some("ctx-7"));
        assert_eq!(bare.task, None);
    }
}
