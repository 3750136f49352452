//! The test crate's support the stop-anywhere checker uses, included as it is (the
//! suite's `durable_checker` and this bench run the same code).
#![allow(dead_code, unreachable_pub)]

#[path = "../../tests/all/common/capfleet.rs"]
pub(crate) mod capfleet;
#[path = "../../tests/all/common/checker.rs"]
pub(crate) mod checker;
#[path = "../../tests/all/common/checker_merge.rs"]
pub(crate) mod checker_merge;
#[path = "../../tests/all/common/durable.rs"]
pub(crate) mod durable;
#[path = "../../tests/all/common/procs.rs"]
pub(crate) mod procs;
#[path = "../../tests/all/common/repo.rs"]
pub(crate) mod repo;

pub(crate) use capfleet::{capfleet, latest_run, run_journal};
pub(crate) use procs::{EnvMarker, wait_until};
