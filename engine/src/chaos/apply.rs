//! The signal, byte and connection faults of a spec, as the driver and the
//! interposer's handles take them (`signals::SignalFault`, `interpose::ByteFault`,
//! `conn::ConnFault`), with the `detail` their record says;
//! and the handles a session of a chaos run is given ([`install`]).

use capfleet_wire::chaos::IoMetrics;
use capfleet_wire::chaos::SignalFault;
use capfleet_wire::chaos::{ByteFault, ByteFaults};
use capfleet_wire::chaos::{ConnFault, ConnFaults};
use capfleet_wire::chaos::{FaultKind, Reach};
use capfleet_wire::driver::LaunchSpec;
use capfleet_wire::registry::Binding;

use super::spec::{ChaosSpec, Params};

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The signal fault of `kind`, with its parameters; `None` for other kinds.
pub(crate) fn signal_fault(kind: FaultKind, params: &Params) -> Option<SignalFault> {
    Some(match kind {
        FaultKind::Kill => SignalFault::Kill,
        FaultKind::Term => SignalFault::Term,
        FaultKind::Hang => SignalFault::Hang {
            resume_after: params.hang_for,
        },
        FaultKind::Exit => SignalFault::Exit,
        _ => return None,
    })
}

/// The byte fault of `kind` with its parameters, and its detail; `None` for others.
pub(crate) fn byte_fault(kind: FaultKind, p: &Params) -> Option<(ByteFault, String)> {
    Some(match kind {
        FaultKind::Slow => (
            ByteFault::Slow {
                bytes_per_sec: p.slow_bytes_per_sec,
                for_ms: ms(p.slow_for),
            },
            format!(
                "output throttled to {} bytes/s for {} ms",
                p.slow_bytes_per_sec,
                ms(p.slow_for)
            ),
        ),
        FaultKind::Garble => (
            ByteFault::Garble {
                fraction: p.garble_fraction,
                frames: p.garble_frames,
            },
            format!(
                "{} of the bytes of the next {} frame(s) garbled",
                p.garble_fraction, p.garble_frames
            ),
        ),
        FaultKind::Truncate => (
            ByteFault::Truncate {
                frames: p.truncate_frames,
            },
            format!("the next {} frame(s) cut", p.truncate_frames),
        ),
        FaultKind::StallStdin => (
            ByteFault::StallStdin {
                for_ms: ms(p.stall_for),
            },
            format!("the agent's input held for {} ms", ms(p.stall_for)),
        ),
        _ => return None,
    })
}

/// The connection fault of `kind` with its parameters, and its detail; `None` for
/// others.
pub(crate) fn conn_fault(kind: FaultKind, p: &Params) -> Option<(ConnFault, String)> {
    Some(match kind {
        FaultKind::Latency => (
            ConnFault::Latency {
                ms: ms(p.latency),
                for_ms: ms(p.latency_for),
            },
            format!(
                "{} ms added to each request for {} ms",
                ms(p.latency),
                ms(p.latency_for)
            ),
        ),
        FaultKind::Drop => (ConnFault::Drop, "the connection dropped mid-stream".into()),
        FaultKind::Http5xx => (
            ConnFault::Http5xx {
                status: p.http_status,
            },
            format!("the next request answered HTTP {}", p.http_status),
        ),
        FaultKind::Refuse => (
            ConnFault::Refuse {
                for_ms: ms(p.refuse_for),
            },
            format!("connections refused for {} ms", ms(p.refuse_for)),
        ),
        _ => return None,
    })
}

/// Give session `name` (on `binding`, launched by `launch`) the interposer's handles
/// its faults need: byte faults when a byte fault targets it, connection faults when a
/// connection fault does (none otherwise: no interposer at all), counted in `metrics` when the run has them. Each session's
/// byte faults draw from their own seed (the run's seed and the session's name).
pub(crate) fn install(
    spec: &ChaosSpec,
    (name, binding): (&str, Binding),
    launch: &mut LaunchSpec,
    metrics: Option<&IoMetrics>,
) {
    let wants = |reach: Reach| {
        spec.rules
            .iter()
            .any(|r| r.kind.reach() == reach && r.targets_session(name, binding))
    };
    if wants(Reach::Bytes) {
        let (urn, seed) = (launch.urn.clone(), spec.byte_seed(name));
        launch.byte_faults = Some(match metrics {
            Some(m) => ByteFaults::with_metrics(urn, seed, m.clone()),
            None => ByteFaults::new(urn, seed),
        });
    }
    if wants(Reach::Connection) {
        let urn = launch.urn.clone();
        launch.conn_faults = Some(match metrics {
            Some(m) => ConnFaults::with_metrics(urn, m.clone()),
            None => ConnFaults::new(urn),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_signal_kind_names_its_signal() {
        let p = Params::default();
        assert_eq!(
            signal_fault(FaultKind::Kill, &p).and_then(SignalFault::signal),
            Some(libc::SIGKILL)
        );
        assert_eq!(signal_fault(FaultKind::Garble, &p), None);
    }
}
