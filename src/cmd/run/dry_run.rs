//! `capfleet run --dry-run`: the validated plan — sessions (agent, binding, cwd,
//! policy, sandbox), routes, budgets, the journal's bound — as text or JSON; nothing
//! is spawned.

use std::process::ExitCode;

use capfleet_engine::answerer::CommandRules;
use capfleet_engine::router::{CollectMode, Picker, RouteAction, Split};
use capfleet_wire::supervision::Restart;
use capfleet_wire::supervision::rate_limit;
use serde_json::{Value, json};

use super::RunArgs;
use capfleet_app::fleet::{Fleet, FleetSession};
use capfleet_app::sandboxing::{Planned, Workspace};
use capfleet_app::style::Style;

pub(super) fn print(fleets: &[Fleet], args: &RunArgs, style: Style) -> ExitCode {
    for fleet in fleets {
        if args.json {
            println!("{}", plan_json(fleet));
        } else {
            print_text(fleet, style);
        }
    }
    ExitCode::SUCCESS
}

fn restart_name(r: Restart) -> &'static str {
    match r {
        Restart::Permanent => "permanent",
        Restart::Transient => "transient",
        Restart::Temporary => "temporary",
    }
}

fn action_text(action: &RouteAction) -> String {
    match action {
        RouteAction::To(to) => format!("-> {to}"),
        RouteAction::FanOut { to, split } => {
            let split = match split {
                Split::Broadcast => "broadcast",
                Split::BySubtask => "by_subtask",
            };
            format!("-> fan out ({split}) to {}", to.join(", "))
        }
        RouteAction::Collect { picker, mode } => {
            let picker = match picker {
                Picker::Human => "the human",
                Picker::Session(s) => s,
            };
            let mode = match mode {
                CollectMode::First => "the first result",
                CollectMode::All => "all results",
            };
            format!("-> collect {mode} for {picker}")
        }
    }
}

/// The fleet's `journal_max_mb`, default applied.
fn journal_max_mb(f: &Fleet) -> u64 {
    f.journal_max_bytes >> 20
}

fn usd(v: f64) -> String {
    format!("${v:.2}")
}

fn print_text(f: &Fleet, st: Style) {
    println!(
        "{} {}  ({})",
        st.bold("fleet"),
        st.bold(&f.name),
        f.file.display()
    );
    let task = f.routing.task.trim();
    let first = task.lines().next().unwrap_or("");
    let more = if task.lines().nth(1).is_some() {
        " …"
    } else {
        ""
    };
    println!(
        "  task:      {first}{more} ({} bytes)",
        f.routing.task.len()
    );
    println!("  start:     {}", f.routing.start.join(", "));
    let total = f.budgets.total_usd.map_or("none".to_owned(), usd);
    println!("  budget:    {total}");
    println!(
        "  journal:   journal_max_mb {} (text past it is cut, each cut recorded)",
        journal_max_mb(f)
    );
    let limit = match f.routing.max_concurrent {
        0 => "no limit".to_owned(),
        n => n.to_string(),
    };
    println!(
        "  run:       max_concurrent {limit}, on_error {}, turn timeout {}s, queue {}",
        f.on_error.as_str(),
        f.turn_timeout.as_secs_f64(),
        f.routing.queue.as_str()
    );
    let rl = &f.rate_limit;
    println!(
        "  rate limits: {} (max_pause {}; without a reset time, backoff {} doubling to {})",
        rl.on.as_str(),
        rate_limit::human(rl.max_pause),
        rate_limit::human(rl.backoff),
        rate_limit::human(rl.backoff_cap)
    );
    let p = &f.policy;
    let risk = p.max_risk.map_or("none", |r| r.as_str());
    println!(
        "  answerer:  deny [{}], allow [{}], max_risk {risk}, auto_answer {}",
        p.deny_tools.join(", "),
        p.allow_tools.join(", "),
        if f.auto_answer { "on" } else { "off" }
    );
    if !(p.deny_commands.is_empty() && p.allow_commands.is_empty()) {
        let list = |r: &CommandRules| r.patterns().collect::<Vec<_>>().join(", ");
        println!(
            "  commands:  deny [{}], allow [{}]",
            list(&p.deny_commands),
            list(&p.allow_commands)
        );
    }
    if let Some(r) = &f.research {
        println!(
            "  research:  {} ({}) when {}; at most {} at once, {} each, approves up to risk {}",
            r.template.launch.manifest.agent.name,
            r.template.binding,
            if r.first {
                "the policy leaves a question open"
            } else {
                "nobody else can answer"
            },
            r.parallel,
            rate_limit::human(r.timeout),
            r.max_risk.as_str()
        );
    }
    if let Some(base) = &f.base {
        println!("  base:      {base} (coding sessions' worktrees branch from it)");
    }
    println!("{}", st.bold("sessions"));
    for s in &f.sessions {
        print_session(s, st);
    }
    println!("{}", st.bold("routes"));
    if f.routing.routes.is_empty() {
        println!("  (none: the start sessions' results end the run)");
    }
    for r in &f.routing.routes {
        println!("  {} {}", r.when.join(" + "), action_text(&r.action));
    }
}

fn print_session(s: &FleetSession, st: Style) {
    let spec = &s.spec;
    println!(
        "  {}  {}  agent {} ({}), binding {}",
        st.bold(&spec.name),
        spec.urn(),
        s.agent,
        s.source,
        spec.binding.as_str()
    );
    println!("      cwd {}", spec.launch.config.cwd);
    if s.coding {
        let mut line =
            "      workspace: own worktree (branch capfleet/<run-id>/<session>; a plain directory outside git)"
                .to_owned();
        if !s.paths.is_empty() {
            line.push_str(&format!(", paths [{}]", s.paths.join(", ")));
        }
        println!("{line}");
        if let Some(t) = &s.test_command {
            println!("      test_command {}", t.display());
        }
    }
    let p = &spec.policy;
    let mut line = format!(
        "      restart {} ({} within {}s)",
        restart_name(p.restart),
        p.max_restarts,
        p.window.as_secs_f64()
    );
    if let Some(max) = spec.max_turns {
        line.push_str(&format!(", max_turns {max}"));
    }
    if let Some(b) = s.budget_usd {
        line.push_str(&format!(", budget {}", usd(b)));
    }
    println!("{line}");
    if let Some(argv) = &spec.launch.argv {
        println!("      argv {}", argv.join(" "));
    }
    for (k, v) in &spec.launch.env {
        println!("      env {k}={v}");
    }
    for line in sandbox(s).lines(&workspace_of(s)) {
        println!("      {line}");
    }
}

fn sandbox(s: &FleetSession) -> Planned {
    let launch = &s.spec.launch;
    let cwd = std::path::Path::new(&launch.config.cwd);
    Planned::of(
        launch.sandbox.as_ref(),
        s.spec.binding,
        cwd,
        &launch.manifest,
    )
}

fn workspace_of(s: &FleetSession) -> Workspace<'_> {
    if s.coding {
        Workspace::MadeAtStart(std::path::Path::new(&s.spec.launch.config.cwd))
    } else {
        Workspace::Resolved
    }
}

fn sandbox_json(s: &FleetSession) -> Value {
    sandbox(s).json(&workspace_of(s))
}

fn plan_json(f: &Fleet) -> Value {
    let sessions: Vec<Value> = f
        .sessions
        .iter()
        .map(|s| {
            let spec = &s.spec;
            json!({
                "name": spec.name,
                "urn": spec.urn(),
                "agent": s.agent,
                "manifest": s.source,
                "binding": spec.binding.as_str(),
                "cwd": spec.launch.config.cwd,
                "argv": spec.launch.argv,
                "env": spec.launch.env.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
                "restart": spec.policy,
                "max_turns": spec.max_turns,
                "budget_usd": s.budget_usd,
                "workspace": s.coding,
                "paths": s.paths,
                "test_command": s.test_command,
                "sandbox": sandbox_json(s),
            })
        })
        .collect();
    let routes: Vec<Value> = f
        .routing
        .routes
        .iter()
        .map(|r| json!({ "when": r.when, "action": action_text(&r.action) }))
        .collect();
    json!({
        "fleet": f.name,
        "file": f.file.display().to_string(),
        "task": f.routing.task,
        "start": f.routing.start,
        "max_concurrent": f.routing.max_concurrent,
        "queue": f.routing.queue.as_str(),
        "on_error": f.on_error.as_str(),
        "turn_timeout_s": f.turn_timeout.as_secs_f64(),
        "rate_limit": {
            "on_rate_limit": f.rate_limit.on.as_str(),
            "max_pause_s": f.rate_limit.max_pause.as_secs_f64(),
            "backoff_s": f.rate_limit.backoff.as_secs_f64(),
            "backoff_cap_s": f.rate_limit.backoff_cap.as_secs_f64(),
        },
        "budget_usd": f.budgets.total_usd,
        "journal_max_mb": journal_max_mb(f),
        "base": f.base,
        "session_budgets_usd": f.budgets.per_session,
        "policy": {
            "deny_tools": f.policy.deny_tools,
            "allow_tools": f.policy.allow_tools,
            "max_risk": f.policy.max_risk.map(|r| r.as_str()),
            "auto_answer": f.auto_answer,
            "research": f.research.as_ref().map(|r| serde_json::json!({
                "agent": r.template.launch.manifest.agent.name,
                "binding": r.template.binding.to_string(),
                "first": r.first,
                "parallel": r.parallel,
                "timeout_s": r.timeout.as_secs_f64(),
                "max_risk": r.max_risk.as_str(),
            })),
        },
        "sessions": sessions,
        "routes": routes,
    })
}
