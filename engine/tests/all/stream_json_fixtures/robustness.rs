//! Lines the mapper must survive: malformed, unknown, oversize and truncated frames,
//! result errors and API failures, questions and control requests it does not support.

use super::*;

#[test]
fn malformed_unknown_and_oversize_lines_are_counted() {
    let mut m = StreamJsonMapper::new().with_max_line_bytes(1000);
    let long = format!(r#"{{"type":"assistant","pad":"{}"}}"#, "x".repeat(2000));
    let lines = [
        "",
        "   ",
        "not json",
        "[1,2]",
        "42",
        r#"{"type":"assistant""#,
        r#"{"type":"rate_limit_event","rate_limit_info":{}}"#,
        r#"{"type":"system","subtype":"status","status":"requesting"}"#,
        r#"{"type":"system","subtype":"compact_boundary"}"#,
        r#"{"no_type":true}"#,
        r#"{"type":"stream_event","event":{"type":"ping"}}"#,
        r#"{"type":"assistant","message":"oops"}"#,
        long.as_str(),
    ];
    let out = replay_into(&mut m, &lines.join("\n"));
    let stats = m.stats();
    assert_eq!(stats.frames, 11);
    assert_eq!(stats.malformed_frames, 6);
    assert_eq!(stats.ignored_frames, 5);
    let errors: Vec<_> = events(&out)
        .map(|e| match e {
            CapEvent::Error(e) => e,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(errors.len(), 6);
    for e in &errors {
        assert_eq!(e.code, ErrorKind::ParseFailed);
        let excerpt = e.details.get().unwrap()["excerpt"].as_str().unwrap();
        assert!(excerpt.len() <= 200);
    }
    assert!(errors[5].message.contains("exceeds the 1000-byte limit"));
    // A multi-byte character at the cut is never split.
    let mut m = StreamJsonMapper::new();
    let line = format!("{}é garbage", "ü".repeat(150));
    let out = replay_into(&mut m, &line);
    let Some(Output::Event(CapEvent::Error(e))) = out.first() else {
        panic!()
    };
    let excerpt = e.details.get().unwrap()["excerpt"].as_str().unwrap();
    assert!(excerpt.len() <= 200 && excerpt.chars().all(|c| c == 'ü'));
}

#[test]
fn every_truncation_of_every_fixture_line_is_safe() {
    for src in [
        fixture!("allow.ndjson"),
        fixture!("partial.ndjson"),
        fixture!("interrupt-permission.ndjson"),
    ] {
        for line in src.lines() {
            let bytes = line.as_bytes();
            let mut m = StreamJsonMapper::new();
            let mut out = Vec::new();
            for cut in 0..bytes.len() {
                m.on_line(&bytes[..cut], &mut out);
                m.on_line(&bytes[cut..], &mut out);
            }
            assert!(m.stats().frames > 0 || bytes.is_empty());
        }
    }
}

#[test]
fn result_errors_and_api_failures() {
    let cases = [
        (
            r#"{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":5}"#,
            Some(ErrorKind::Other("max_turns".into())),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"error_max_budget_usd","is_error":true}"#,
            Some(ErrorKind::Other("budget_exceeded".into())),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["boom"]}"#,
            Some(ErrorKind::Other("execution_error".into())),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"error_something_new","is_error":true}"#,
            Some(ErrorKind::Other("agent_error".into())),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429"}"#,
            Some(ErrorKind::RateLimit),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":401}"#,
            Some(ErrorKind::AuthError),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"success","is_error":true,"result":"Prompt is too long: prompt is too long"}"#,
            Some(ErrorKind::ContextOverflow),
            StopReason::Error,
        ),
        (
            r#"{"type":"result","subtype":"success","is_error":false,"stop_reason":"max_tokens","total_cost":0.5}"#,
            None,
            StopReason::MaxTokens,
        ),
    ];
    for (line, code, stop) in cases {
        let mut m = StreamJsonMapper::new();
        let out = replay_into(&mut m, line);
        let errs: Vec<_> = events(&out)
            .filter_map(|e| match e {
                CapEvent::Error(e) => Some(e.code.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(errs, code.into_iter().collect::<Vec<_>>(), "{line}");
        let Some(Output::TurnEnd(t)) = out.last() else {
            panic!("{line}")
        };
        assert_eq!(t.stop_reason, stop, "{line}");
    }
    // Older cost spellings are cumulative too.
    let mut m = StreamJsonMapper::new();
    let out = replay_into(
        &mut m,
        "{\"type\":\"result\",\"subtype\":\"success\",\"cost_usd\":0.25}\n{\"type\":\"result\",\"subtype\":\"success\",\"cost_usd\":0.75}",
    );
    assert_eq!(costs(&out), vec![0.25, 0.5]);
    // An interrupted turn reports a cumulative 0: no negative delta, and the next
    // turn's delta is over the highest total seen.
    let mut m = StreamJsonMapper::new();
    let out = replay_into(
        &mut m,
        &[
            r#"{"type":"result","subtype":"success","total_cost_usd":0.1}"#,
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"terminal_reason":"aborted_streaming","total_cost_usd":0}"#,
            r#"{"type":"result","subtype":"success","total_cost_usd":0.3}"#,
        ]
        .join("\n"),
    );
    assert_eq!(costs(&out), vec![0.1, 0.0, 0.2]);
    assert!(!events(&out).any(|e| matches!(e, CapEvent::Error(_))));
}

#[test]
fn ask_user_question_and_unsupported_control_requests() {
    let mut m = StreamJsonMapper::new();
    let ask = json!({"type": "control_request", "request_id": "q1", "request": {
    "subtype": "can_use_tool", "tool_name": "AskUserQuestion", "tool_use_id": "toolu_q",
    "input": {"questions": [
        {"question": "Which DB?", "header": "DB", "multiSelect": false,
         "options": [{"label": "pg", "description": "Postgres"}, {"label": "sqlite"}]},
        {"question": "Which extras?", "header": "Extras", "multiSelect": true,
         "options": [{"label": "a"}, {"label": "b"}]}
    ]}}});
    let hook =
        r#"{"type":"control_request","request_id":"h1","request":{"subtype":"hook_callback"}}"#;
    let out = replay_into(&mut m, &format!("{ask}\n{hook}"));
    assert_eq!(
        summary(&out),
        [
            "ask q1 Which DB?\nWhich extras?",
            "unsupported hook_callback"
        ]
    );
    let Output::Event(CapEvent::AskUser(a)) = &out[0] else {
        panic!()
    };
    let form = a.form.get().unwrap();
    assert_eq!(form["properties"]["Which DB?"]["oneOf"][0]["const"], "pg");
    assert_eq!(form["properties"]["Which extras?"]["type"], "array");
    assert_eq!(m.pending("q1").unwrap().kind, PendingKind::Ask);

    let err = m
        .respond_permission("q1", Decision::AllowOnce, None)
        .unwrap_err();
    assert_eq!(err, ResponseError::NotAPermission("q1".into()));
    let bad = m.respond_ask("q1", &json!("pg")).unwrap_err();
    assert_eq!(bad.code(), CapCode::InvalidAnswer);
    let line = m
        .respond_ask(
            "q1",
            &json!({"Which DB?": "pg", "Which extras?": ["a", "b"]}),
        )
        .unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    let r = &v["response"]["response"];
    assert_eq!(r["behavior"], "allow");
    assert_eq!(
        r["updatedInput"]["answers"],
        json!({"Which DB?": "pg", "Which extras?": "a, b"})
    );
    assert_eq!(r["updatedInput"]["questions"][0]["header"], "DB");
    assert_eq!(
        m.respond_ask("q1", &json!({})).unwrap_err(),
        ResponseError::UnknownRequest("q1".into())
    );
    let line = outbound::control_error_response("h1", "unsupported");
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["response"]["subtype"], "error");
}
