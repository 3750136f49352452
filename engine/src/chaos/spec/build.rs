//! Building a [`ChaosSpec`] from its flattened keys: each key checked and parsed
//! (kinds, rates, targets, the parameters), every bad one named with its fix.

use super::*;

/// How a rate is written, for the errors.
const RATE_HELP: &str = "a rate is \"P/turn\" (0 <= P <= 1), \"N/min\" or \"@30s;2m\" (TOML: \
                         at = [\"30s\", \"2m\"])";

#[derive(Default)]
pub(super) struct Builder {
    seed: Option<u64>,
    targets: Vec<Target>,
    rules: Vec<(FaultKind, Option<Rate>, Option<Vec<Target>>)>,
    params: Params,
    max_self_kills: Option<u32>,
    errors: Vec<SpecError>,
}

impl Builder {
    fn fail(&mut self, key: &str, reason: impl Into<String>) {
        self.errors.push(SpecError {
            key: key.to_owned(),
            reason: reason.into(),
        });
    }

    fn rule(&mut self, kind: FaultKind) -> &mut (FaultKind, Option<Rate>, Option<Vec<Target>>) {
        let i = match self.rules.iter().position(|r| r.0 == kind) {
            Some(i) => i,
            None => {
                self.rules.push((kind, None, None));
                self.rules.len() - 1
            }
        };
        &mut self.rules[i]
    }

    fn targets(&mut self, key: &str, value: &Raw) -> Option<Vec<Target>> {
        let mut out = Vec::new();
        for t in value.texts() {
            match Target::parse(&t) {
                Ok(t) => out.push(t),
                Err(reason) => self.fail(key, reason),
            }
        }
        Some(out)
    }

    pub(super) fn entry(&mut self, e: &Entry) {
        let key = e.key.as_str();
        let (head, field) = match key.split_once('.') {
            Some((h, f)) => (h, Some(f)),
            None => (key, None),
        };
        if let Some(kind) = FaultKind::parse(head) {
            match field {
                None | Some("rate") => match parse_rate(&e.value) {
                    Ok(rate) => self.rule(kind).1 = Some(rate),
                    Err(reason) => self.fail(key, reason),
                },
                Some("at") => match parse_at(&e.value.texts()) {
                    Ok(rate) => self.rule(kind).1 = Some(rate),
                    Err(reason) => self.fail(key, reason),
                },
                Some("target") => {
                    let t = self.targets(key, &e.value);
                    self.rule(kind).2 = t;
                }
                Some(other) => self.fail(
                    key,
                    format!("{other:?} is no key of a fault: rate, at or target"),
                ),
            }
            return;
        }
        match key {
            "seed" => match e.value.number() {
                Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= u64::MAX as f64 => {
                    self.seed = Some(n as u64);
                }
                _ => self.fail(key, "a whole number >= 0 (e.g. seed = 7)"),
            },
            "target" => {
                if let Some(t) = self.targets(key, &e.value) {
                    self.targets = t;
                }
            }
            "max_self_kills" => match e.value.number() {
                Some(n) if n >= 0.0 && n.fract() == 0.0 && n <= 1000.0 => {
                    self.max_self_kills = Some(n as u32);
                }
                _ => self.fail(key, "a whole number from 0 to 1000 (default 3)"),
            },
            _ => self.param(e),
        }
    }

    fn param(&mut self, e: &Entry) {
        let key = e.key.as_str();
        let p = &mut self.params;
        let ok = match key {
            "hang_for" => match &e.value {
                Raw::Text(t) if t.trim() == "never" => {
                    p.hang_for = None;
                    true
                }
                v => v.duration().map(|d| p.hang_for = Some(d)).is_some(),
            },
            "slow_for" => e.value.duration().map(|d| p.slow_for = d).is_some(),
            "stall_for" => e.value.duration().map(|d| p.stall_for = d).is_some(),
            // Not `latency`: that key is the fault's rate.
            "latency_delay" => e.value.duration().map(|d| p.latency = d).is_some(),
            "latency_for" => e.value.duration().map(|d| p.latency_for = d).is_some(),
            "refuse_for" => e.value.duration().map(|d| p.refuse_for = d).is_some(),
            "slow_bytes_per_sec" => whole(&e.value, 1, u64::from(u32::MAX))
                .map(|n| p.slow_bytes_per_sec = n)
                .is_some(),
            "garble_frames" => whole(&e.value, 1, 1_000_000)
                .map(|n| p.garble_frames = n as u32)
                .is_some(),
            "truncate_frames" => whole(&e.value, 1, 1_000_000)
                .map(|n| p.truncate_frames = n as u32)
                .is_some(),
            "http_status" => whole(&e.value, 500, 599)
                .map(|n| p.http_status = n as u16)
                .is_some(),
            "garble_fraction" => e
                .value
                .number()
                .filter(|f| *f > 0.0 && *f <= 1.0)
                .map(|f| p.garble_fraction = f)
                .is_some(),
            _ => {
                let kinds: Vec<_> = FaultKind::ALL.iter().map(|k| k.as_str()).collect();
                let reason = format!(
                    "unknown key: the keys are seed, target, max_self_kills, the fault kinds ({}) \
                     and the parameters ({})",
                    kinds.join(", "),
                    PARAM_KEYS.join(", ")
                );
                self.fail(key, reason);
                return;
            }
        };
        if !ok {
            let reason = match key {
                "hang_for" => "a duration (\"2s\", \"500ms\") or \"never\"",
                "slow_bytes_per_sec" => "a whole number of bytes per second >= 1",
                "garble_frames" | "truncate_frames" => "a whole number of frames >= 1",
                "http_status" => "an HTTP status from 500 to 599",
                "garble_fraction" => "a fraction: 0 < f <= 1",
                _ => "a duration (\"2s\", \"500ms\", \"1m\")",
            };
            self.fail(key, reason);
        }
    }

    pub(super) fn finish(mut self) -> Result<ChaosSpec, Vec<SpecError>> {
        let mut rules = Vec::new();
        for (kind, rate, targets) in std::mem::take(&mut self.rules) {
            let Some(rate) = rate else {
                self.fail(
                    kind.as_str(),
                    format!("{kind}.target without a rate: {RATE_HELP}"),
                );
                continue;
            };
            if kind == FaultKind::SelfKill {
                if matches!(rate, Rate::PerTurn(_)) {
                    self.fail(
                        "self_kill",
                        "capfleet has no turns: \"N/min\" or \"@30s;2m\"",
                    );
                }
                if targets.is_some() {
                    self.fail("self_kill.target", "self_kill hits capfleet: no target");
                }
            }
            rules.push(FaultRule {
                kind,
                rate,
                targets: targets.unwrap_or_else(|| self.targets.clone()),
            });
        }
        if self.seed.is_none() {
            self.fail(
                "seed",
                "missing: a chaos run is reproducible from its seed (e.g. seed = 7)",
            );
        }
        if rules.is_empty() && self.errors.is_empty() {
            self.fail(
                "chaos",
                "no fault: give at least one kind with its rate (e.g. kill = \"0.2/turn\")",
            );
        }
        if !self.errors.is_empty() {
            return Err(self.errors);
        }
        Ok(ChaosSpec {
            seed: self.seed.unwrap_or_default(),
            rules,
            params: self.params,
            max_self_kills: self.max_self_kills.unwrap_or(3),
        })
    }
}

fn whole(v: &Raw, min: u64, max: u64) -> Option<u64> {
    v.number()
        .filter(|n| n.fract() == 0.0 && *n >= min as f64 && *n <= max as f64)
        .map(|n| n as u64)
}

fn parse_rate(v: &Raw) -> Result<Rate, String> {
    let Raw::Text(text) = v else {
        return Err(RATE_HELP.into());
    };
    let text = text.trim();
    if let Some(times) = text.strip_prefix('@') {
        let times: Vec<String> = times.split(';').map(|s| s.trim().to_owned()).collect();
        return parse_at(&times);
    }
    let (n, per) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?}: {RATE_HELP}"))?;
    let n: f64 = n
        .trim()
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)
        .ok_or_else(|| format!("{text:?}: {RATE_HELP}"))?;
    match per.trim() {
        "turn" if n <= 1.0 => Ok(Rate::PerTurn(n)),
        "turn" => Err(format!(
            "{text:?}: a rate per turn is a probability, at most 1 (one fault per attempt)"
        )),
        "min" | "minute" => Ok(Rate::PerMinute(n)),
        _ => Err(format!("{text:?}: {RATE_HELP}")),
    }
}

fn parse_at(times: &[String]) -> Result<Rate, String> {
    let mut out = Vec::new();
    for t in times {
        match parse_duration(t) {
            Some(d) => out.push(d),
            None => {
                return Err(format!(
                    "{t:?} is not a time after the start (\"30s\", \"2m\")"
                ));
            }
        }
    }
    if out.is_empty() {
        return Err(format!("no time given: {RATE_HELP}"));
    }
    out.sort();
    Ok(Rate::At(out))
}
