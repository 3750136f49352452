//! `split = "by_subtask"`: the source's output carries a fenced `cap-subtasks` block,
//! a JSON array of subtasks — strings, or `{ "to": "<session>", "task": "..." }` —
//! that the router hands out over the fan-out's targets.

use serde_json::Value;

/// Why a `cap-subtasks` block could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SubtaskError {
    #[error("no ```cap-subtasks block in the output")]
    Missing,
    #[error("the cap-subtasks block is not a JSON array of subtasks: {0}")]
    Malformed(String),
    #[error("subtask {index} names `{to}`, which is not a target of this fan-out")]
    UnknownTarget { index: usize, to: String },
    #[error("the cap-subtasks block is empty")]
    Empty,
}

/// The block's subtasks assigned to targets: explicit `to` first, the rest round-robin.
pub(crate) fn assign(
    text: &str,
    targets: &[String],
) -> Result<Vec<(String, String)>, SubtaskError> {
    let body = block(text).ok_or(SubtaskError::Missing)?;
    let items: Vec<Value> =
        serde_json::from_str(body).map_err(|e| SubtaskError::Malformed(e.to_string()))?;
    if items.is_empty() {
        return Err(SubtaskError::Empty);
    }
    let mut next = 0usize;
    let mut out = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let (to, task) = match item {
            Value::String(task) => (None, task),
            Value::Object(mut o) => {
                let task = match o.remove("task") {
                    Some(Value::String(t)) => t,
                    _ => {
                        return Err(SubtaskError::Malformed(format!(
                            "subtask {index} has no string `task`"
                        )));
                    }
                };
                let to = match o.remove("to") {
                    Some(Value::String(t)) => Some(t),
                    None => None,
                    Some(_) => {
                        return Err(SubtaskError::Malformed(format!(
                            "subtask {index}: `to` is not a string"
                        )));
                    }
                };
                (to, task)
            }
            other => {
                return Err(SubtaskError::Malformed(format!(
                    "subtask {index} is {other}"
                )));
            }
        };
        let to = match to {
            Some(t) if targets.contains(&t) => t,
            Some(t) => return Err(SubtaskError::UnknownTarget { index, to: t }),
            None if targets.is_empty() => {
                return Err(SubtaskError::Malformed("the fan-out has no targets".into()));
            }
            None => {
                let t = targets[next % targets.len()].clone();
                next += 1;
                t
            }
        };
        out.push((to, task));
    }
    Ok(out)
}

/// The body of the first ```cap-subtasks fence.
fn block(text: &str) -> Option<&str> {
    let start = text.find("```cap-subtasks")?;
    let after = &text[start + "```cap-subtasks".len()..];
    let body_start = after.find('\n')? + 1;
    let body = &after[body_start..];
    let end = body.find("```")?;
    Some(body[..end].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets() -> Vec<String> {
        vec!["a".into(), "b".into()]
    }

    #[test]
    fn strings_go_round_robin_and_explicit_targets_stay() {
        let text = "Plan:\n```cap-subtasks\n[\"one\", {\"to\": \"a\", \"task\": \"two\"}, \"three\"]\n```\nbye";
        let got = assign(text, &targets()).unwrap();
        assert_eq!(
            got,
            vec![
                ("a".into(), "one".into()),
                ("a".into(), "two".into()),
                ("b".into(), "three".into())
            ]
        );
    }

    #[test]
    fn missing_malformed_and_unknown_targets_are_errors() {
        assert_eq!(assign("no block", &targets()), Err(SubtaskError::Missing));
        assert!(matches!(
            assign("```cap-subtasks\n{nope\n```", &targets()),
            Err(SubtaskError::Malformed(_))
        ));
        assert_eq!(
            assign("```cap-subtasks\n[]\n```", &targets()),
            Err(SubtaskError::Empty)
        );
        assert_eq!(
            assign(
                "```cap-subtasks\n[{\"to\":\"z\",\"task\":\"x\"}]\n```",
                &targets()
            ),
            Err(SubtaskError::UnknownTarget {
                index: 0,
                to: "z".into()
            })
        );
    }
}
