//! The fuzz crate's one test binary: every target searched with random inputs for a
//! bounded number of cases, its seeds and kept regressions replayed, and the harness
//! itself shown to catch what it claims to.

use capfleet_fuzz::alloc::Counting;

#[global_allocator]
static ALLOC: Counting = Counting;

mod harness;
mod targets;
