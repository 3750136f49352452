//! The seeded decisions. Every draw is a pure function of the seed and the fault's
//! coordinates — never of wall-clock timing — so two runs of one fleet with one seed
//! decide the same faults:
//!
//! - per-turn faults ([`ChaosSpec::on_attempt`]): at each turn attempt's prompt, for
//!   each kind with a per-turn rate targeting the session (in [`FaultKind::ALL`]'s
//!   order), a draw from (seed, session, turn, attempt, kind); the first below its
//!   rate is the attempt's fault (one per attempt at most). Its `seed_pos` is its
//!   place in that lattice: `turn << 32 | attempt << 8 | kind`.
//! - timed faults ([`Timeline`]): the per-minute rules' seeded (exponential) gaps and
//!   the `at` times, merged in time order; the n-th is `seed_pos` n, and its target
//!   is a seeded pick (from seed and n) among the targeted sessions. The times are the
//!   run's clock; the sequence of (kind, target) is the seed's.

use std::time::Duration;

use super::spec::{ChaosSpec, Rate};
use capfleet_wire::chaos::FaultKind;
use capfleet_wire::registry::Binding;

/// A per-turn fault decided for an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub kind: FaultKind,
    pub seed_pos: u64,
}

/// A timed fault: when (after the timeline's start), which kind, its position.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Timed {
    pub at: Duration,
    pub kind: FaultKind,
    pub seed_pos: u64,
    /// The target session (`None` for `self_kill`, or no session targeted).
    pub target: Option<String>,
}

/// SplitMix64's finalizer: a well-mixed 64-bit value from any 64-bit input.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One draw in [0, 1) from the seed and the coordinates.
fn draw(seed: u64, coords: &[u64]) -> f64 {
    let h = coords.iter().fold(mix(seed), |h, c| mix(h ^ c));
    // The top 53 bits: every value exactly representable.
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// A name as a coordinate (FNV-1a: stable across builds and platforms).
fn name_coord(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Domain tags, so that the streams of different decisions never share draws.
const TURN: u64 = 1;
const GAP: u64 = 2;
const PICK: u64 = 3;
const BYTES: u64 = 4;

impl ChaosSpec {
    /// The seed of session `name`'s byte interposer (a stream of draws of its own).
    pub fn byte_seed(&self, name: &str) -> u64 {
        mix(mix(self.seed ^ BYTES) ^ name_coord(name))
    }

    /// The fault of attempt `attempt` of turn `turn` of session `name`, if any.
    pub fn on_attempt(
        &self,
        name: &str,
        binding: Binding,
        turn: u32,
        attempt: u32,
    ) -> Option<Decision> {
        let mut kinds: Vec<_> = self.per_turn(name, binding).collect();
        kinds.sort_by_key(|(k, _)| k.index());
        let who = name_coord(name);
        kinds.into_iter().find_map(|(kind, p)| {
            let k = kind.index() as u64;
            let u = draw(
                self.seed,
                &[TURN, who, u64::from(turn), u64::from(attempt), k],
            );
            (u < p).then_some(Decision {
                kind,
                seed_pos: u64::from(turn) << 32 | u64::from(attempt) << 8 | k,
            })
        })
    }
}

/// The timed faults of a run, in time order (an iterator without end when a rule is
/// per minute).
pub(crate) struct Timeline {
    seed: u64,
    /// Per rule: its kind, its targets among the run's sessions, its next time and
    /// how many it gave.
    streams: Vec<Stream>,
    next_pos: u64,
}

struct Stream {
    kind: FaultKind,
    targets: Vec<String>,
    rate: Rate,
    next: Option<Duration>,
    given: u64,
}

impl Stream {
    fn time_of(&self, seed: u64, n: u64, after: Duration) -> Option<Duration> {
        match &self.rate {
            Rate::At(times) => times.get(usize::try_from(n).ok()?).copied(),
            Rate::PerMinute(per_min) if *per_min > 0.0 => {
                let u = draw(seed, &[GAP, self.kind.index() as u64, n]);
                let gap = -(1.0 - u).ln() * 60.0 / per_min;
                Some(after + Duration::from_secs_f64(gap.min(1e9)))
            }
            Rate::PerMinute(_) | Rate::PerTurn(_) => None,
        }
    }
}

impl Timeline {
    /// The timeline of `spec` over the run's sessions (name and binding each).
    pub(crate) fn new(spec: &ChaosSpec, sessions: &[(String, Binding)]) -> Timeline {
        let mut streams = Vec::new();
        for rule in &spec.rules {
            if matches!(rule.rate, Rate::PerTurn(_)) {
                continue;
            }
            let mut targets: Vec<String> = sessions
                .iter()
                .filter(|(n, b)| rule.targets_session(n, *b))
                .map(|(n, _)| n.clone())
                .collect();
            targets.sort();
            let mut s = Stream {
                kind: rule.kind,
                targets,
                rate: rule.rate.clone(),
                next: None,
                given: 0,
            };
            s.next = s.time_of(spec.seed, 0, Duration::ZERO);
            streams.push(s);
        }
        Timeline {
            seed: spec.seed,
            streams,
            next_pos: 0,
        }
    }

    /// The timeline after its first `n` faults, its times counted from the n-th's
    /// (a resumed run goes on from the journal's last `self_kill`, whose moment is
    /// the resumed run's start).
    pub(crate) fn skip_through(mut self, pos: u64) -> (Timeline, Duration) {
        let mut base = Duration::ZERO;
        while self.next_pos <= pos {
            match self.next() {
                Some(t) => base = t.at,
                None => break,
            }
        }
        (self, base)
    }
}

impl Iterator for Timeline {
    type Item = Timed;

    fn next(&mut self) -> Option<Timed> {
        let (i, at) = self
            .streams
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.next.map(|t| (i, t)))
            .min_by_key(|(i, t)| (*t, self.streams[*i].kind.index()))?;
        let seed = self.seed;
        let pos = self.next_pos;
        self.next_pos += 1;
        let s = &mut self.streams[i];
        s.given += 1;
        s.next = s.time_of(seed, s.given, at);
        let target = if s.kind == FaultKind::SelfKill || s.targets.is_empty() {
            None
        } else {
            let u = draw(seed, &[PICK, pos]);
            let n = s.targets.len();
            let pick = ((u * n as f64) as usize).min(n - 1);
            Some(s.targets[pick].clone())
        };
        Some(Timed {
            at,
            kind: s.kind,
            seed_pos: pos,
            target,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> ChaosSpec {
        ChaosSpec::parse_inline(text).expect("valid")
    }

    #[test]
    fn the_same_seed_decides_the_same_faults_and_another_seed_others() {
        let decide = |s: &ChaosSpec| -> Vec<_> {
            (1..=50)
                .flat_map(|turn| (1..=3).map(move |a| (turn, a)))
                .filter_map(|(turn, a)| s.on_attempt("worker-1", Binding::StreamJson, turn, a))
                .collect()
        };
        let a = decide(&spec("seed=7,kill=0.2/turn,hang=0.1/turn"));
        assert_eq!(a, decide(&spec("seed=7,kill=0.2/turn,hang=0.1/turn")));
        assert_ne!(a, decide(&spec("seed=8,kill=0.2/turn,hang=0.1/turn")));
        // About the rates asked: 150 attempts, kill 20 %, hang 10 % of the rest.
        let kills = a.iter().filter(|d| d.kind == FaultKind::Kill).count();
        assert!((15..=50).contains(&kills), "{kills} kills in 150 attempts");
        assert!(a.iter().any(|d| d.kind == FaultKind::Hang));
    }

    #[test]
    fn a_turn_fault_hits_only_its_targets_and_names_its_place() {
        let s = spec("seed=1,kill=1/turn,target=worker-*");
        assert_eq!(s.on_attempt("lead", Binding::Pty, 1, 1), None);
        let d = s
            .on_attempt("worker-2", Binding::Pty, 3, 2)
            .expect("certain");
        assert_eq!(d.kind, FaultKind::Kill);
        assert_eq!(d.seed_pos, 3 << 32 | 2 << 8);
    }

    #[test]
    fn the_timeline_merges_at_times_and_seeded_gaps_and_picks_targets() {
        let sessions: Vec<_> = ["b", "a", "c"]
            .iter()
            .map(|n| (n.to_string(), Binding::StreamJson))
            .collect();
        let s = spec("seed=3,term=@1s;3s,hang=6/min,self_kill=@2s");
        let first: Vec<_> = Timeline::new(&s, &sessions).take(8).collect();
        assert_eq!(
            first,
            Timeline::new(&s, &sessions).take(8).collect::<Vec<_>>()
        );
        assert!(first.windows(2).all(|w| w[0].at <= w[1].at), "{first:?}");
        assert!(
            first
                .iter()
                .enumerate()
                .all(|(i, t)| t.seed_pos == i as u64)
        );
        let kill = first
            .iter()
            .find(|t| t.kind == FaultKind::SelfKill)
            .expect("self_kill");
        assert_eq!(
            (kill.at, kill.target.as_deref()),
            (Duration::from_secs(2), None)
        );
        let terms: Vec<_> = first.iter().filter(|t| t.kind == FaultKind::Term).collect();
        assert_eq!(terms.len(), 2);
        assert!(
            first
                .iter()
                .filter(|t| t.kind != FaultKind::SelfKill)
                .all(|t| t.target.is_some())
        );

        let (rest, base) = Timeline::new(&s, &sessions).skip_through(kill.seed_pos);
        assert_eq!(base, Duration::from_secs(2));
        let after: Vec<_> = rest.take(3).collect();
        assert_eq!(after[0], first[kill.seed_pos as usize + 1]);
    }
}
