//! An ask's answer checked against its form before it goes to the agent (an answer
//! the agent would reject leaves its turn hanging to its timeout): the form is the
//! JSON Schema subset CAP §7.5 uses — `const`, `enum`, `oneOf`/`anyOf` choices, `type`,
//! an object's `properties` (one per question) and `required`, an array's `items` —
//! and an ask with no form takes free text (a string, number or boolean). What does
//! not fit is said with where it is and what the form expects there.

use serde_json::{Map, Value};

/// Whether `value` answers an ask of `form`; why not, and what it expects, if not.
pub(crate) fn check(form: Option<&Value>, value: &Value) -> Result<(), String> {
    match form {
        Some(form) => fits(form, value, "answer"),
        None if matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_)) => Ok(()),
        None => Err(format!(
            "`answer` is {value}: this ask has no form, it takes free text (a string)"
        )),
    }
}

/// What `schema` takes, for people: `one of "pg", "sqlite"`, `an object {…}`, ….
pub(crate) fn describe(schema: &Value) -> String {
    if let Some(c) = schema.get("const") {
        return c.to_string();
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        return one_of(e.iter().map(Value::to_string));
    }
    if let Some(alts) = choices(schema) {
        return one_of(alts.iter().map(describe));
    }
    if let Some(opts) = schema.get("options").and_then(Value::as_array) {
        return one_of(opts.iter().map(|o| {
            o.get("value")
                .or_else(|| o.get("label"))
                .unwrap_or(o)
                .to_string()
        }));
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        let fields: Vec<String> = props
            .iter()
            .map(|(k, s)| format!("{}: {}", Value::from(k.as_str()), describe(s)))
            .collect();
        return format!("an object {{{}}}", fields.join(", "));
    }
    match types(schema).as_slice() {
        ["array"] => match schema.get("items") {
            Some(items) => format!("a list of {}", describe(items)),
            None => "a list".into(),
        },
        ["string"] => "a string".into(),
        ["number"] => "a number".into(),
        ["integer"] => "an integer".into(),
        ["boolean"] => "true or false".into(),
        ["object"] => "an object".into(),
        [] => "any value".into(),
        many => format!("a value of type {}", many.join(" or ")),
    }
}

fn one_of(items: impl Iterator<Item = String>) -> String {
    format!("one of {}", items.collect::<Vec<_>>().join(", "))
}

fn choices(schema: &Value) -> Option<&Vec<Value>> {
    schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array)
}

fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn of_type(v: &Value, t: &str) -> bool {
    match t {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "null" => v.is_null(),
        // A type this subset does not know: not checked.
        _ => true,
    }
}

/// `v` (at `at`) against `schema`.
fn fits(schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    if !schema.is_object() {
        // `true`, or not a schema: anything.
        return Ok(());
    }
    let misfit = || Err(format!("`{at}` is {v}: expected {}", describe(schema)));
    let types = types(schema);
    if !types.is_empty() && !types.iter().any(|t| of_type(v, t)) {
        return misfit();
    }
    if schema.get("const").is_some_and(|c| c != v)
        || schema
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.contains(v))
        || choices(schema).is_some_and(|alts| !alts.iter().any(|a| fits(a, v, at).is_ok()))
        || schema
            .get("options")
            .and_then(Value::as_array)
            .is_some_and(|opts| {
                !opts
                    .iter()
                    .any(|o| o == v || o.get("label") == Some(v) || o.get("value") == Some(v))
            })
    {
        return misfit();
    }
    match v {
        Value::Object(answers) => fields(schema, answers, at),
        Value::Array(items) => {
            let count = |k: &str| schema.get(k).and_then(Value::as_u64);
            let n = items.len() as u64;
            if count("minItems").is_some_and(|m| n < m) || count("maxItems").is_some_and(|m| n > m)
            {
                return misfit();
            }
            match schema.get("items") {
                Some(each) => items
                    .iter()
                    .enumerate()
                    .try_for_each(|(i, x)| fits(each, x, &format!("{at}[{i}]"))),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// An object's fields: each a property of the form (unless it takes others), each
/// fitting its property, every required one there.
fn fields(schema: &Value, answers: &Map<String, Value>, at: &str) -> Result<(), String> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    let others = schema.get("additionalProperties");
    for (k, x) in answers {
        match (props.get(k), others) {
            (Some(s), _) => fits(s, x, &format!("{at}.{k}"))?,
            (None, Some(s)) if s.is_object() => fits(s, x, &format!("{at}.{k}"))?,
            (None, Some(Value::Bool(true))) => {}
            (None, _) => {
                return Err(format!(
                    "`{at}` answers `{k}`, not a question of this ask: expected {}",
                    describe(schema)
                ));
            }
        }
    }
    let required = schema.get("required").and_then(Value::as_array);
    for r in required.into_iter().flatten().filter_map(Value::as_str) {
        if !answers.contains_key(r) {
            return Err(format!(
                "`{at}` does not answer `{r}`: expected {}",
                describe(schema)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The form Claude's `AskUserQuestion` (and the sim) asks with.
    fn questions() -> Value {
        json!({
            "type": "object",
            "properties": {
                "Proceed?": {"type": "string", "oneOf": [{"const": "yes", "title": "yes"}, {"const": "no", "title": "no"}]},
                "Which?": {"type": "array", "items": {"type": "string", "oneOf": [{"const": "a"}, {"const": "b"}]}},
            },
            "required": ["Proceed?", "Which?"],
        })
    }

    #[test]
    fn a_multi_question_form_takes_an_object_of_offered_answers() {
        let form = questions();
        assert_eq!(
            check(
                Some(&form),
                &json!({"Proceed?": "yes", "Which?": ["a", "b"]})
            ),
            Ok(())
        );
        for (wrong, said) in [
            (
                json!("yes"),
                "`answer` is \"yes\": expected an object {\"Proceed?\": one of \"yes\", \"no\"",
            ),
            (json!(5), "`answer` is 5: expected an object"),
            (
                json!({"Proceed?": "maybe", "Which?": []}),
                "`answer.Proceed?` is \"maybe\": expected one of \"yes\", \"no\"",
            ),
            (
                json!({"Proceed?": "yes", "Which?": ["c"]}),
                "`answer.Which?[0]` is \"c\": expected one of \"a\", \"b\"",
            ),
            (
                json!({"Proceed?": "yes"}),
                "`answer` does not answer `Which?`",
            ),
            (
                json!({"Proceed?": "yes", "Which?": [], "Other": "x"}),
                "`answer` answers `Other`, not a question of this ask",
            ),
        ] {
            let e = check(Some(&form), &wrong).unwrap_err();
            assert!(e.starts_with(said), "{wrong}: {e}");
        }
    }

    #[test]
    fn choices_consts_types_and_free_text() {
        let pick = json!({"type": "string", "oneOf": [{"const": "pg", "title": "PostgreSQL"}, {"const": "sqlite"}]});
        assert_eq!(check(Some(&pick), &json!("pg")), Ok(()));
        assert!(
            check(Some(&pick), &json!("PostgreSQL")).is_err(),
            "a title is not the value"
        );
        assert!(check(Some(&pick), &json!(1)).is_err());
        let free = json!({"type": "string"});
        assert_eq!(check(Some(&free), &json!("anything")), Ok(()));
        assert_eq!(
            check(Some(&free), &json!(3)).unwrap_err(),
            "`answer` is 3: expected a string"
        );
        let n = json!({"type": "integer", "enum": [1, 2]});
        assert_eq!(check(Some(&n), &json!(2)), Ok(()));
        assert!(check(Some(&n), &json!(3)).is_err());
        let options = json!({"options": [{"label": "Yes", "value": "y"}, "n"]});
        assert_eq!(check(Some(&options), &json!("y")), Ok(()));
        assert_eq!(check(Some(&options), &json!("n")), Ok(()));
        assert!(check(Some(&options), &json!("x")).is_err());
        // No form: free text.
        assert_eq!(check(None, &json!("sure")), Ok(()));
        assert_eq!(check(None, &json!(true)), Ok(()));
        assert!(check(None, &json!({"a": 1})).is_err());
    }
}
