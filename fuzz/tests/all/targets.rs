//! Per target: random inputs (`CAPFLEET_FUZZ_CASES`, default 600, from a new seed each
//! run, `CAPFLEET_FUZZ_SEED` to replay one), then its seeds and kept regressions.

use capfleet_fuzz::check::{replay_in_suite, search_in_suite};
use capfleet_fuzz::targets::{ALL, by_name};

macro_rules! targets {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use super::*;

                #[test]
                fn random_inputs_break_no_promise() {
                    search_in_suite(by_name(stringify!($name)));
                }

                #[test]
                fn seeds_and_kept_regressions_pass() {
                    replay_in_suite(by_name(stringify!($name)));
                }
            }
        )*

        /// Every target has its tests here.
        #[test]
        fn every_target_is_tested() {
            let tested = [$(stringify!($name)),*];
            let all: Vec<&str> = ALL.iter().map(|t| t.name).collect();
            assert_eq!(tested.as_slice(), all.as_slice());
        }
    };
}

targets!(
    stream_json,
    codex_exec,
    acp_update,
    lines,
    pty,
    a2a_sse,
    a2a_card,
    cap_event,
    manifest,
    session_config,
    fleet_toml,
    serve_body,
);
