use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn policy(restart: Restart) -> RestartPolicy {
    RestartPolicy {
        restart,
        ..RestartPolicy::default()
    }
}

fn all_causes() -> Vec<ExitCause> {
    vec![
        ExitCause::Normal,
        ExitCause::Exited { code: 1 },
        ExitCause::Signaled { signal: 9 },
        ExitCause::hung(Duration::from_secs(300)),
        ExitCause::DriverError {
            message: "boom".into(),
        },
    ]
}

#[test]
fn defaults_are_transient_three_in_sixty_seconds() {
    let p = RestartPolicy::default();
    assert_eq!(p.restart, Restart::Transient);
    assert_eq!(p.max_restarts, 3);
    assert_eq!(p.window, Duration::from_secs(60));
    let parsed: RestartPolicy = toml::from_str("").unwrap();
    assert_eq!(parsed, p);
}

#[test]
fn parses_fleet_toml_fields() {
    let p: RestartPolicy = toml::from_str(
        "restart = \"permanent\"\nmax_restarts = 5\nrestart_window_s = 30\n\
         backoff_initial_ms = 50\nbackoff_max_ms = 2000\nbackoff_multiplier = 3\n",
    )
    .unwrap();
    assert_eq!(p.restart, Restart::Permanent);
    assert_eq!(p.max_restarts, 5);
    assert_eq!(p.window, Duration::from_secs(30));
    assert_eq!(p.backoff_initial, ms(50));
    assert_eq!(p.backoff_max, ms(2000));
    assert_eq!(p.multiplier, 3);
    let frac: RestartPolicy = toml::from_str("restart_window_s = 1.5").unwrap();
    assert_eq!(frac.window, ms(1500));
    assert!(toml::from_str::<RestartPolicy>("restart = \"sometimes\"").is_err());
    assert!(toml::from_str::<RestartPolicy>("restart_window_s = -1").is_err());
}

#[test]
fn temporary_never_restarts() {
    let mut t = RestartTracker::new(policy(Restart::Temporary));
    let now = Instant::now();
    for cause in all_causes() {
        assert_eq!(
            t.on_exit(now, &cause),
            Decision::Stop {
                reason: StopReason::NotRestartable {
                    policy: Restart::Temporary
                }
            }
        );
    }
    assert_eq!(t.total_restarts(), 0);
}

#[test]
fn transient_restarts_only_abnormal_exits() {
    let now = Instant::now();
    for cause in all_causes() {
        let mut t = RestartTracker::new(policy(Restart::Transient));
        let d = t.on_exit(now, &cause);
        if cause == ExitCause::Normal {
            assert!(matches!(d, Decision::Stop { .. }), "{cause}: {d:?}");
        } else {
            assert!(
                matches!(d, Decision::Restart { attempt: 1, .. }),
                "{cause}: {d:?}"
            );
        }
    }
}

#[test]
fn permanent_restarts_normal_exits_too() {
    let now = Instant::now();
    for cause in all_causes() {
        let mut t = RestartTracker::new(policy(Restart::Permanent));
        assert!(matches!(
            t.on_exit(now, &cause),
            Decision::Restart { attempt: 1, .. }
        ));
    }
}

#[test]
fn meltdown_at_exactly_max_restarts() {
    for max in [0u32, 1, 3, 7] {
        let mut t = RestartTracker::new(RestartPolicy {
            max_restarts: max,
            ..policy(Restart::Permanent)
        });
        let start = Instant::now();
        let crash = ExitCause::Signaled { signal: 11 };
        for i in 0..max {
            let d = t.on_exit(start + ms(u64::from(i)), &crash);
            assert!(
                matches!(d, Decision::Restart { attempt, .. } if attempt == i + 1),
                "max {max}, exit {i}: {d:?}"
            );
        }
        let d = t.on_exit(start + ms(u64::from(max)), &crash);
        assert_eq!(
            d,
            Decision::Stop {
                reason: StopReason::Meltdown {
                    restarts: max,
                    window: DEFAULT_WINDOW
                }
            },
            "max {max}"
        );
        assert_eq!(t.total_restarts(), u64::from(max));
        // Once melted down, further exits inside the window stay stopped.
        assert!(matches!(
            t.on_exit(start + ms(500), &crash),
            Decision::Stop { .. }
        ));
    }
}

#[test]
fn sliding_window_allows_restarts_again_later() {
    let mut t = RestartTracker::new(RestartPolicy {
        window: Duration::from_secs(10),
        ..policy(Restart::Transient)
    });
    let t0 = Instant::now();
    let crash = ExitCause::Exited { code: 2 };
    let s = Duration::from_secs;
    assert!(matches!(
        t.on_exit(t0, &crash),
        Decision::Restart { attempt: 1, .. }
    ));
    assert!(matches!(
        t.on_exit(t0 + s(4), &crash),
        Decision::Restart { attempt: 2, .. }
    ));
    assert!(matches!(
        t.on_exit(t0 + s(8), &crash),
        Decision::Restart { attempt: 3, .. }
    ));
    assert!(matches!(
        t.on_exit(t0 + s(9), &crash),
        Decision::Stop {
            reason: StopReason::Meltdown { restarts: 3, .. }
        }
    ));
    // At t0+10 s the first restart leaves the window: one slot frees up.
    assert_eq!(t.restarts_in_window(t0 + s(10)), 2);
    assert!(matches!(
        t.on_exit(t0 + s(10), &crash),
        Decision::Restart { attempt: 3, .. }
    ));
    assert!(matches!(
        t.on_exit(t0 + s(11), &crash),
        Decision::Stop { .. }
    ));
    // Long after, the count (and the backoff) starts over.
    let later = t0 + s(100);
    assert_eq!(t.restarts_in_window(later), 0);
    assert_eq!(
        t.on_exit(later, &crash),
        Decision::Restart {
            attempt: 1,
            delay: Duration::ZERO
        }
    );
    assert_eq!(t.total_restarts(), 5);
}

#[test]
fn backoff_doubles_and_caps() {
    let p = RestartPolicy {
        backoff_initial: ms(100),
        backoff_max: ms(1000),
        multiplier: 2,
        ..RestartPolicy::default()
    };
    let delays: Vec<_> = (1..=8).map(|a| p.delay(a)).collect();
    assert_eq!(
        delays,
        [0, 100, 200, 400, 800, 1000, 1000, 1000].map(ms).to_vec()
    );
    // No overflow for absurd attempts or multipliers.
    assert_eq!(p.delay(u32::MAX), ms(1000));
    let huge = RestartPolicy {
        multiplier: u32::MAX,
        ..p
    };
    assert_eq!(huge.delay(3), ms(1000));
    // Multiplier 0 or 1 is a constant delay; initial above the cap is capped.
    let flat = RestartPolicy { multiplier: 0, ..p };
    assert_eq!(flat.delay(5), ms(100));
    let over = RestartPolicy {
        backoff_initial: ms(5000),
        ..p
    };
    assert_eq!(over.delay(2), ms(1000));
}

#[test]
fn first_restart_is_immediate_and_tracker_reports_backoff() {
    let mut t = RestartTracker::new(RestartPolicy {
        max_restarts: 10,
        ..RestartPolicy::default()
    });
    let now = Instant::now();
    let crash = ExitCause::Signaled { signal: 9 };
    let delays: Vec<_> = (0..4)
        .map(|_| match t.on_exit(now, &crash) {
            Decision::Restart { delay, .. } => delay,
            d => panic!("unexpected {d:?}"),
        })
        .collect();
    assert_eq!(delays, [0, 100, 200, 400].map(ms).to_vec());
}

#[test]
fn exit_cause_from_status_and_error() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;
    assert_eq!(
        ExitCause::from_status(ExitStatus::from_raw(0)),
        ExitCause::Normal
    );
    assert_eq!(
        ExitCause::from_status(ExitStatus::from_raw(3 << 8)),
        ExitCause::Exited { code: 3 }
    );
    assert_eq!(
        ExitCause::from_status(ExitStatus::from_raw(9)),
        ExitCause::Signaled { signal: 9 }
    );

    let boxed: Box<dyn std::error::Error + Send + Sync> =
        Box::new(ExitCause::hung(Duration::from_secs(2)));
    assert_eq!(
        ExitCause::from_error(boxed.as_ref()),
        ExitCause::Hung { timeout_ms: 2000 }
    );
    let other: Box<dyn std::error::Error + Send + Sync> = "pipe closed".into();
    assert_eq!(
        ExitCause::from_error(other.as_ref()),
        ExitCause::DriverError {
            message: "pipe closed".into()
        }
    );
    let json = serde_json::to_string(&ExitCause::Signaled { signal: 15 }).unwrap();
    assert_eq!(json, r#"{"kind":"signaled","signal":15}"#);
}

#[test]
fn exit_cause_kind_is_its_serialized_tag() {
    let causes = [
        ExitCause::Normal,
        ExitCause::Exited { code: 3 },
        ExitCause::Signaled { signal: 9 },
        ExitCause::Hung { timeout_ms: 5 },
        ExitCause::DriverError {
            message: "x".into(),
        },
        ExitCause::CannotStart {
            message: "x".into(),
        },
    ];
    for c in causes {
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["kind"], c.kind(), "{c:?}");
    }
}

#[test]
fn an_agent_that_cannot_be_started_is_never_restarted() {
    let cause = ExitCause::CannotStart {
        message: "binary `claude` is not on PATH".into(),
    };
    assert!(cause.is_abnormal());
    for restart in [Restart::Permanent, Restart::Transient, Restart::Temporary] {
        let mut t = RestartTracker::new(policy(restart));
        assert!(!t.policy().restarts(&cause), "{restart:?}");
        assert_eq!(
            t.on_exit(Instant::now(), &cause),
            Decision::Stop {
                reason: StopReason::CannotStart
            },
            "{restart:?}"
        );
        assert_eq!(t.total_restarts(), 0);
    }
}
