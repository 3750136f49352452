//! The engine crate's one integration-test binary: the stream-json mapper against
//! Claude Code's recorded frames, and the span pipeline across an actor's panic.
//! nextest runs every test in a process of its own (`span_after_panic` installs the
//! process's global subscriber).

mod span_after_panic;
mod stream_json_fixtures;
