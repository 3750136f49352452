//! The router through the library, with real simulator sessions: pipelines, fan-out
//! and joins, by_subtask, races, mentions, master plans, budgets and admission — each
//! asserting the router's records (what the journal keeps).

use std::path::Path;
use std::time::Duration;

use capfleet_engine::budget::BudgetLimits;
use capfleet_engine::router::{CollectMode, Picker, Route, RouteAction, RoutingSpec, Split};
use capfleet_engine::run::{RunReport, RunSpec, run_fleet};
use capfleet_engine::session::SessionSpec;
use capfleet_wire::events::{EventBody, Published, RunOutcome, SessionState, Signal};
use common::EnvMarker;
use tokio::sync::mpsc;

use crate::common;
use crate::common::chat::assert_no_survivor;

fn session(dir: &Path, name: &str, script: &str, marker: &EnvMarker) -> SessionSpec {
    let mut spec = common::sim::session_spec(dir, "t", name, script, marker);
    spec.turn_timeout = Duration::from_secs(20);
    spec
}

fn say(text: &str) -> String {
    format!("[[turn]]\nsteps = [{{ say = {text:?} }}]\n")
}

struct Ran {
    report: RunReport,
    events: Vec<Published>,
}

impl Ran {
    fn routed(&self) -> Vec<(Vec<String>, String, String)> {
        self.events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::Routed { from, to, via, .. } => Some((
                    from.clone(),
                    to.clone(),
                    serde_json::to_value(via)
                        .unwrap()
                        .as_str()
                        .unwrap()
                        .to_owned(),
                )),
                _ => None,
            })
            .collect()
    }

    fn prompts_to(&self, name: &str) -> Vec<String> {
        // The sim echoes nothing by default: read the turns' prompts from routed bytes.
        self.events
            .iter()
            .filter(|e| *e.urn == format!("cap://t/{name}"))
            .filter_map(|e| match &e.body {
                EventBody::Cap { event } => serde_json::to_value(event).ok(),
                _ => None,
            })
            .filter(|v| v["kind"] == "cap.text_chunk")
            .map(|v| v["text"].as_str().unwrap_or("").to_owned())
            .collect()
    }
}

async fn run(sessions: Vec<SessionSpec>, routing: RoutingSpec, budget: BudgetLimits) -> Ran {
    run_until(sessions, routing, budget, mpsc::channel(1).1).await
}

/// [`run`], stopped by what comes on `signals`.
async fn run_until(
    sessions: Vec<SessionSpec>,
    routing: RoutingSpec,
    budget: BudgetLimits,
    signals: mpsc::Receiver<Signal>,
) -> Ran {
    let (tx, mut rx) = mpsc::channel(4096);
    let collector = tokio::spawn(async move {
        let mut all = Vec::new();
        while let Some(e) = rx.recv().await {
            all.push(e);
        }
        all
    });
    let spec = RunSpec {
        fleet: "t".into(),
        sessions,
        routing,
        policy: Default::default(),
        budget,
        journal: None,
        human: None,
        research: None,
        abort_on_error: false,
        telemetry: Default::default(),
        workspace: None,
        resume: None,
        chaos: None,
        calls: None,
    };
    let report = tokio::time::timeout(Duration::from_secs(60), run_fleet(spec, vec![tx], signals))
        .await
        .expect("the run ends")
        .expect("the run starts");
    let events = collector.await.unwrap();
    Ran { report, events }
}

fn routing(start: &[&str], routes: Vec<Route>) -> RoutingSpec {
    RoutingSpec {
        start: start.iter().map(|s| s.to_string()).collect(),
        task: "the task".into(),
        routes,
        max_concurrent: 0,
        queue: Default::default(),
    }
}

fn route(when: &[&str], action: RouteAction) -> Route {
    Route {
        when: when.iter().map(|s| s.to_string()).collect(),
        action,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_fan_out_and_join() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("router-join");
    let d = dir.path();
    let sessions = vec![
        session(d, "plan", &say("plan done"), &m),
        session(d, "a", "[[turn]]\nsteps = [{ echo = true }]\n", &m),
        session(d, "b", "[[turn]]\nsteps = [{ echo = true }]\n", &m),
        session(d, "review", "[[turn]]\nsteps = [{ echo = true }]\n", &m),
    ];
    let r = routing(
        &["plan"],
        vec![
            route(
                &["plan"],
                RouteAction::FanOut {
                    to: vec!["a".into(), "b".into()],
                    split: Split::Broadcast,
                },
            ),
            route(&["a", "b"], RouteAction::To("review".into())),
        ],
    );
    let ran = run(sessions, r, BudgetLimits::default()).await;
    assert_eq!(ran.report.outcome, RunOutcome::Completed);
    let routed = ran.routed();
    let vias: Vec<(&str, &str)> = routed
        .iter()
        .map(|(_, to, via)| (to.as_str(), via.as_str()))
        .collect();
    assert_eq!(vias[0], ("plan", "task"));
    assert!(vias.contains(&("a", "fan_out")) && vias.contains(&("b", "fan_out")));
    assert_eq!(
        *vias.last().unwrap(),
        ("review", "route"),
        "the join fires last, once"
    );
    assert_eq!(vias.iter().filter(|(to, _)| *to == "review").count(), 1);
    let (from, _, _) = routed.last().unwrap();
    assert_eq!(from, &vec!["a".to_string(), "b".to_string()]);
    let review = ran.prompts_to("review").join("");
    assert!(
        review.contains("## Output of a") && review.contains("## Output of b"),
        "{review}"
    );
    assert!(
        review.contains("plan done"),
        "the join carries both outputs: {review}"
    );
    assert_no_survivor(&m);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_are_delivered_when_the_target_is_idle() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("router-mention");
    let d = dir.path();
    let sessions = vec![
        session(
            d,
            "a",
            &say("working.\n@cap://b please check the frame format"),
            &m,
        ),
        session(
            d,
            "b",
            "[[turn]]\nsteps = [{ sleep_ms = 300 }, { echo = true }]\n",
            &m,
        ),
    ];
    let ran = run(
        sessions,
        routing(&["a", "b"], vec![]),
        BudgetLimits::default(),
    )
    .await;
    assert_eq!(ran.report.outcome, RunOutcome::Completed);
    let routed = ran.routed();
    let mention = routed
        .iter()
        .find(|(_, _, via)| via == "mention")
        .expect("mention routed");
    assert_eq!(mention.0, vec!["a".to_string()]);
    assert_eq!(mention.1, "b");
    // b was busy with its task when the mention came: it got it after, as a second turn.
    let b_turns: Vec<String> = ran.prompts_to("b");
    assert!(
        b_turns
            .iter()
            .any(|t| t.contains("Message from cap://t/a: please check the frame format")),
        "{b_turns:?}"
    );
    let b_starts = ran
        .events
        .iter()
        .filter(|e| &*e.urn == "cap://t/b" && matches!(e.body, EventBody::TurnStarted { .. }))
        .count();
    assert_eq!(b_starts, 2);
    assert_no_survivor(&m);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_plan_runs_in_dependency_order() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("router-plan");
    let d = dir.path();
    let planner = r#"
[[turn]]
steps = [
  { plan = [
    { id = "t1", content = "build the core", status = "pending", _meta = { "cap.assigned_to" = "cap://t/a" } },
    { id = "t2", content = "write the docs", status = "pending", _meta = { "cap.assigned_to" = "cap://t/b", "cap.depends_on" = ["t1"] } },
  ] },
  { say = "plan published" },
]
"#;
    let sessions = vec![
        session(d, "planner", planner, &m),
        session(d, "a", "[[turn]]\nsteps = [{ echo = true }]\n", &m),
        session(d, "b", "[[turn]]\nsteps = [{ echo = true }]\n", &m),
    ];
    let ran = run(
        sessions,
        routing(&["planner"], vec![]),
        BudgetLimits::default(),
    )
    .await;
    assert_eq!(ran.report.outcome, RunOutcome::Completed);
    let plan: Vec<(String, String)> = ran
        .events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::PlanEntry { id, status, .. } => Some((
                id.clone(),
                serde_json::to_value(status)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )),
            _ => None,
        })
        .collect();
    let pos = |id: &str, st: &str| {
        plan.iter()
            .position(|(i, s)| i == id && s == st)
            .unwrap_or_else(|| panic!("{id} {st} in {plan:?}"))
    };
    assert!(
        pos("t1", "completed") < pos("t2", "in_progress"),
        "t2 waits for t1: {plan:?}"
    );
    assert!(pos("t2", "completed") > pos("t2", "in_progress"));
    assert!(ran.prompts_to("b").join("").contains("write the docs"));
    assert_no_survivor(&m);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_subtask_splits_and_a_missing_block_fails_the_route() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("router-subtask");
    let d = dir.path();
    let split = "split:\n```cap-subtasks\n[\"first part\", {\"to\": \"y\", \"task\": \"second part\"}]\n```";
    let sessions = vec![
        session(d, "s", &say(split), &m),
        session(d, "x", "[[turn]]\nsteps = [{ echo = true }]\n", &m),
        session(d, "y", "[[turn]]\nsteps = [{ echo = true }]\n", &m),
        session(d, "bad", &say("no block here"), &m),
    ];
    let r = routing(
        &["s", "bad"],
        vec![
            route(
                &["s"],
                RouteAction::FanOut {
                    to: vec!["x".into(), "y".into()],
                    split: Split::BySubtask,
                },
            ),
            route(
                &["bad"],
                RouteAction::FanOut {
                    to: vec!["x".into()],
                    split: Split::BySubtask,
                },
            ),
        ],
    );
    let ran = run(sessions, r, BudgetLimits::default()).await;
    assert!(ran.prompts_to("x").join("").contains("first part"));
    assert!(ran.prompts_to("y").join("").contains("second part"));
    let failed: Vec<&str> = ran
        .events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::RouteFailed { reason, .. } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1);
    assert!(failed[0].contains("cap-subtasks"), "{failed:?}");
    assert_eq!(
        ran.report.outcome,
        RunOutcome::SessionFailed,
        "a failed route fails the run"
    );
    assert_no_survivor(&m);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_race_hands_the_first_result_to_the_picker_and_cancels_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("router-race");
    let d = dir.path();
    let sessions = vec![
        session(d, "fast", &say("fast answer"), &m),
        session(
            d,
            "slow",
            "[[turn]]\nsteps = [{ sleep_ms = 3000 }, { say = \"slow answer\" }]\n",
            &m,
        ),
        session(d, "judge", "[[turn]]\nsteps = [{ echo = true }]\n", &m),
    ];
    let r = routing(
        &["fast", "slow"],
        vec![route(
            &["fast", "slow"],
            RouteAction::Collect {
                picker: Picker::Session("judge".into()),
                mode: CollectMode::First,
            },
        )],
    );
    let started = std::time::Instant::now();
    let ran = run(sessions, r, BudgetLimits::default()).await;
    let judge = ran.prompts_to("judge").join("");
    assert!(
        judge.contains("fast answer") && !judge.contains("slow answer"),
        "{judge}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(2900),
        "the slow candidate was cancelled"
    );
    assert_no_survivor(&m);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crossing_the_budget_stops_every_session() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("router-budget");
    let d = dir.path();
    let spender = "[[turn]]\nsteps = [{ usage = { input_tokens = 10, output_tokens = 10, cost_usd = 0.75 } }, { say = \"spent\" }]\n";
    let idler = "[[turn]]\nsteps = [{ sleep_ms = 10000 }, { say = \"never\" }]\n";
    let sessions = vec![
        session(d, "spend", spender, &m),
        session(d, "idle", idler, &m),
    ];
    let limits = BudgetLimits {
        total_usd: Some(0.5),
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let ran = run(sessions, routing(&["spend", "idle"], vec![]), limits).await;
    assert_eq!(ran.report.outcome, RunOutcome::BudgetExceeded);
    assert!(ran.report.budget.exceeded);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the 10 s session was stopped"
    );
    assert!(!ran.prompts_to("idle").join("").contains("never"));
    assert_no_survivor(&m);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrent_admits_at_most_that_many_turns() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("router-admission");
    let d = dir.path();
    let names: Vec<String> = (0..6).map(|i| format!("w{i}")).collect();
    let sessions = names
        .iter()
        .map(|n| {
            session(
                d,
                n,
                "[[turn]]\nsteps = [{ sleep_ms = 200 }, { say = \"ok\" }]\n",
                &m,
            )
        })
        .collect();
    let mut r = routing(
        &names.iter().map(String::as_str).collect::<Vec<_>>(),
        vec![],
    );
    r.max_concurrent = 2;
    let ran = run(sessions, r, BudgetLimits::default()).await;
    assert_eq!(ran.report.outcome, RunOutcome::Completed);
    let mut running = 0i32;
    let mut peak = 0;
    for e in &ran.events {
        match &e.body {
            EventBody::TurnStarted { .. } => running += 1,
            EventBody::TurnEnded { .. } => running -= 1,
            _ => {}
        }
        peak = peak.max(running);
    }
    assert_eq!(peak, 2, "never more than 2 turns at once, and 2 used");
    assert_no_survivor(&m);
}

/// Sessions enough that the last ones come up well after the router has started.
const MANY: usize = 30;

fn many(d: &Path, m: &EnvMarker) -> Vec<SessionSpec> {
    (0..MANY)
        .map(|i| session(d, &format!("s{i}"), &say(&format!("s{i} done")), m))
        .collect()
}

/// The session's agent is up (ready, or straight to work on a prompt that waited).
fn started(b: &EventBody) -> bool {
    matches!(
        b,
        EventBody::State {
            from: SessionState::Starting,
            ..
        }
    )
}

/// Where in `ran`'s events `urn`'s first record of kind `is` is.
fn first(ran: &Ran, urn: &str, is: impl Fn(&EventBody) -> bool) -> Option<usize> {
    ran.events
        .iter()
        .position(|e| *e.urn == *urn && is(&e.body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_to_a_session_not_up_yet_waits_for_it_and_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("router-not-up");
    let last = format!("s{}", MANY - 1);
    let r = routing(
        &[&last],
        vec![route(&[&last], RouteAction::To("s0".into()))],
    );
    let ran = run(many(dir.path(), &m), r, BudgetLimits::default()).await;
    assert_eq!(ran.report.outcome, RunOutcome::Completed);
    let routed = ran.routed();
    let to = |name: &str| routed.iter().filter(|(_, t, _)| t == name).count();
    assert_eq!((to(&last), to("s0"), routed.len()), (1, 1, 2), "{routed:?}");
    // The router went before the session was up: its task waited, and ran once.
    let urn = format!("cap://t/{last}");
    let task = first(
        &ran,
        "cap://t/router",
        |b| matches!(b, EventBody::Routed { to, .. } if *to == last),
    );
    let ready = first(&ran, &urn, started);
    assert!(
        task < ready,
        "routed at {task:?}, the session ready at {ready:?}"
    );
    let turns = |name: &str| {
        ran.events
            .iter()
            .filter(|e| *e.urn == format!("cap://t/{name}"))
            .filter(|e| matches!(e.body, EventBody::TurnStarted { .. }))
            .count()
    };
    assert_eq!((turns(&last), turns("s0")), (1, 1));
    assert_eq!(ran.prompts_to(&last).join(""), format!("{last} done"));
    // A run that ends by itself has started every session.
    for i in 0..MANY {
        let ready = first(&ran, &format!("cap://t/s{i}"), started);
        assert!(ready.is_some(), "s{i} never started");
    }
    assert_no_survivor(&m);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_sessions_come_up_ends_the_waiting_turn_and_starts_no_more() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("router-not-up-stop");
    let last = format!("s{}", MANY - 1);
    let (stop, signals) = mpsc::channel(1);
    stop.send(Signal::Int).await.unwrap();
    let ran = run_until(
        many(dir.path(), &m),
        routing(&[&last], vec![]),
        BudgetLimits::default(),
        signals,
    )
    .await;
    assert_eq!(ran.report.outcome, RunOutcome::Interrupted);
    let turns = ran
        .events
        .iter()
        .filter(|e| matches!(e.body, EventBody::TurnStarted { .. }))
        .count();
    assert!(turns <= 1, "{turns} turns for one delivery");
    let up = (0..MANY)
        .filter(|i| {
            let urn = format!("cap://t/s{i}");
            ran.events.iter().any(|e| *e.urn == urn)
        })
        .count();
    assert!(
        up < MANY,
        "the stop came first, yet every session was started"
    );
    assert_no_survivor(&m);
}
