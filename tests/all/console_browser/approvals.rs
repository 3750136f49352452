//! A permission a sim agent asks for, approved in the page: its turn completes, and a
//! second answer (another user) is shown as "already answered by X".

use std::time::Duration;

use serde_json::{Value, json};

use super::{Console, PERMISSION_THEN_ASK, PERMISSION_THEN_HTML, SHOWN, ended};
use crate::common::browser::{Browser, DESKTOP};
use crate::common::console::{logged_in, route, sel, texts, wait_text};
use crate::common::{EnvMarker, journal_records};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_approved_in_the_page_completes_its_turn_and_a_second_answer_is_refused() {
    let (c, t) = Console::start();
    let m = EnvMarker::new("console-approve");
    let b = Browser::start("approve", DESKTOP).await;
    logged_in(&b, &c.base, &t.alice).await;
    let id = c.submit(&t, &m, PERMISSION_THEN_HTML);
    let ask = &c.open_asks(&id, &t.ci)[0];
    let ask_id = ask["ask_id"].as_str().unwrap();
    route(&b, "#/approvals").await;
    let one = format!("{}[data-ask-id=\"{ask_id}\"]", sel("approval"));
    b.element(&one).await;
    let text = texts(&b, &one).await.join(" ");
    let risk = ask["risk"].as_str().unwrap();
    for what in ["Bash", "echo hi", risk] {
        assert!(
            text.contains(what),
            "the approval shows no `{what}`: {text}"
        );
    }
    b.shot("approvals").await;
    b.element(&format!("{one} {}", sel("approve-once")))
        .await
        .click()
        .await
        .unwrap();
    // The card stays, saying who answered.
    wait_text(
        &b,
        &format!("{one} {}", sel("answered")),
        "Answered by alice",
        SHOWN,
    )
    .await;
    let run = ended(&c, &id, &t.ci);
    assert_eq!(run["state"], "completed", "{run}");
    let decisions: Vec<(Value, Value)> = journal_records(&c.server.journal(&id))
        .iter()
        .filter(|r| r["event"]["kind"] == "cap.permission.response")
        .map(|r| {
            (
                r["event"]["decision"].clone(),
                r["event"]["_meta"]["capfleet.rule"].clone(),
            )
        })
        .collect();
    assert_eq!(decisions, [(json!("allow_once"), json!("remote:alice"))]);
    // The turn went on: its text shown, as text (no element made of it).
    route(&b, &format!("#/runs/{id}/sessions/s0")).await;
    wait_text(&b, &sel("event-list"), "after the tool", SHOWN).await;
    wait_text(&b, &sel("event-list"), "<b id='injected'>", SHOWN).await;
    assert_eq!(b.count("#injected").await, 0, "agent text became HTML");
    b.shot("session-events").await;

    // A second run: bob answers its permission over the API first; alice's answer in
    // the page is the API's 409, shown as already answered by bob. Its ask's options
    // are then buttons.
    let id = c.submit(&t, &m, PERMISSION_THEN_ASK);
    let ask = &c.open_asks(&id, &t.ci)[0];
    let ask_id = ask["ask_id"].as_str().unwrap().to_owned();
    route(&b, "#/approvals").await;
    let one = format!("{}[data-ask-id=\"{ask_id}\"]", sel("approval"));
    b.element(&one).await;
    let (status, body) = c.server.json(
        "POST",
        &format!("/v1/runs/{id}/asks/{ask_id}"),
        Some(&t.bob),
        Some(&json!({"decision": "allow_once"})),
    );
    assert_eq!(status, 200, "{body}");
    b.element(&format!("{one} {}", sel("deny")))
        .await
        .click()
        .await
        .unwrap();
    wait_text(&b, &sel("answered-by"), "lready answered by bob", SHOWN).await;
    b.shot("approvals-answered-by").await;
    let options = format!("{} {}", sel("approval"), sel("ask-option"));
    wait_text(&b, &options, "staging", SHOWN).await;
    assert_eq!(texts(&b, &options).await, ["staging", "production"]);
    b.shot("approvals-options").await;
    b.driver()
        .find(thirtyfour::By::XPath(
            "//*[@data-testid='ask-option'][normalize-space()='staging']",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let run = ended(&c, &id, &t.ci);
    assert_eq!(run["state"], "completed", "{run}");
    let journal = std::fs::read_to_string(c.server.journal(&id)).unwrap();
    assert!(
        journal.contains("remote:alice") && journal.contains("staging"),
        "{journal}"
    );
    b.quit().await;
    m.wait_gone(Duration::from_secs(10), "the sim agents");
}
