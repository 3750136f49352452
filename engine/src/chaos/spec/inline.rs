//! The spec written inline, `capfleet run --chaos SPEC`: the same keys as the fleet
//! file's `[chaos]` table, as `key=value` pairs.

use super::{ChaosSpec, Entry, Raw, SpecError};

impl ChaosSpec {
    /// The spec written `--chaos` inline: `key=value` pairs separated by `,`, lists
    /// inside a value by `;` (`target=worker-*;reviewer`, `kill=@5s;20s`).
    pub fn parse_inline(text: &str) -> Result<ChaosSpec, Vec<SpecError>> {
        let mut entries = Vec::new();
        let mut errors = Vec::new();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some((k, v)) => entries.push(Entry {
                    key: k.trim().to_owned(),
                    value: Raw::Text(v.trim().to_owned()),
                }),
                None => errors.push(SpecError {
                    key: pair.to_owned(),
                    reason: "not key=value (e.g. seed=7,kill=0.2/turn,target=worker-*)".into(),
                }),
            }
        }
        match ChaosSpec::build(&entries) {
            Ok(spec) if errors.is_empty() => Ok(spec),
            Ok(_) => Err(errors),
            Err(more) => {
                errors.extend(more);
                Err(errors)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::chaos::spec::{Rate, Target};
    use capfleet_wire::chaos::FaultKind;
    use capfleet_wire::registry::Binding;

    #[test]
    fn the_inline_syntax_reads_every_rate_and_target() {
        let spec = ChaosSpec::parse_inline(
            "seed=7, kill=0.2/turn, hang=1/min, term=@30s;2m, target=worker-*, \
             exit=@1m, exit.target=binding:pty;lead, hang_for=2s, max_self_kills=2, \
             latency=0.5/turn, latency_delay=200ms",
        )
        .expect("a valid spec");
        assert_eq!(spec.seed, 7);
        assert_eq!(spec.max_self_kills, 2);
        assert_eq!(spec.params.hang_for, Some(Duration::from_secs(2)));
        // The fault's rate and its delay, each under its own key.
        assert_eq!(
            spec.rule(FaultKind::Latency).expect("latency").rate,
            Rate::PerTurn(0.5)
        );
        assert_eq!(spec.params.latency, Duration::from_millis(200));
        let kill = spec.rule(FaultKind::Kill).expect("kill");
        assert_eq!(kill.rate, Rate::PerTurn(0.2));
        assert_eq!(kill.targets, vec![Target::Glob("worker-*".into())]);
        assert_eq!(
            spec.rule(FaultKind::Term).expect("term").rate,
            Rate::At(vec![Duration::from_secs(30), Duration::from_secs(120)])
        );
        assert_eq!(
            spec.rule(FaultKind::Hang).expect("hang").rate,
            Rate::PerMinute(1.0)
        );
        let exit = spec.rule(FaultKind::Exit).expect("exit");
        assert_eq!(
            exit.targets,
            vec![Target::Binding(Binding::Pty), Target::Name("lead".into())]
        );
    }

    #[test]
    fn every_bad_key_is_named_with_its_fix() {
        let errors = ChaosSpec::parse_inline(
            "kill=2/turn,hang=often,nuke=1/min,hang_for=soon,term.target=a",
        )
        .expect_err("invalid");
        let keys: Vec<_> = errors.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["kill", "hang", "nuke", "hang_for", "term", "seed"]);
        assert!(errors[4].reason.contains("without a rate"), "{}", errors[4]);
        assert!(errors[0].reason.contains("at most 1"), "{}", errors[0]);
        assert!(errors[1].reason.contains("P/turn"), "{}", errors[1]);
        assert!(errors[2].reason.contains("stall_stdin"), "{}", errors[2]);
        assert!(errors[5].reason.contains("seed = 7"), "{}", errors[5]);
    }

    #[test]
    fn self_kill_takes_no_turn_rate_and_no_target() {
        let errors = ChaosSpec::parse_inline("seed=1,self_kill=0.5/turn").expect_err("no turns");
        assert_eq!(errors[0].key, "self_kill");
        let errors = ChaosSpec::parse_inline("seed=1,self_kill=@1s,self_kill.target=a")
            .expect_err("no target");
        assert_eq!(errors[0].key, "self_kill.target");
    }
}
