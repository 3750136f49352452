//! fleet.toml as untrusted input (issue 18, point 5): random and mutated files through
//! the reader and the validator, every finding rendered as `run --dry-run` and the
//! server print them. No panic, heap and time bounded (the fuzz crate's harness).

use capfleet_fuzz::check::{replay_in_suite, search_in_suite};
use capfleet_fuzz::targets::{Framing, Memory, Target};

use super::{FleetErrors, check};

const FLEET: Target = Target {
    name: "fleet_toml",
    reads: "fleet.toml: [fleet], sessions, routes, joins, plans, budgets, workspaces, answerer",
    framing: Framing::Toml,
    seeds: &["config/fleets", "tests/fixtures/sim/coding_turn.toml"],
    dict: &[
        "[fleet]",
        "[[session]]",
        "[[route]]",
        "[budget]",
        "[answerer]",
        "[workspace]",
        "[session.env]",
        "name",
        "agent",
        "start",
        "task",
        "when",
        "from",
        "to",
        "join",
        "fan_out",
        "race",
        "plan",
        "master_plan",
        "on_error",
        "abort",
        "max_usd",
        "max_tokens",
        "alert_at",
        "max_turns",
        "restart",
        "turn_timeout",
        "auto_answer",
        "research",
        "max_risk",
        "low",
        "high",
        "sim",
        "parallel",
        "timeout",
        "\"30s\"",
        "\"1h 20m\"",
        "{ text = \"x\" }",
        "[\"a\", \"b\"]",
        "1e309",
        "-1",
        "true",
    ],
    run: fleet_toml,
    memory: Memory {
        fixed: 1 << 20,
        per_byte: 256,
    },
};

fn fleet_toml(input: &[u8]) {
    let Ok(src) = std::str::from_utf8(input) else {
        return;
    };
    match check("fuzz.toml", src) {
        Ok(checked) => {
            let shown = FleetErrors {
                errors: checked.errors,
                warnings: checked.warnings,
            };
            drop(shown.to_string());
        }
        Err(errors) => drop(errors.to_string()),
    }
}

#[test]
fn random_fleet_files_break_no_promise() {
    search_in_suite(&FLEET);
}

#[test]
fn fleet_seeds_and_kept_regressions_pass() {
    replay_in_suite(&FLEET);
}
