//! The engine crate's one integration-test binary: the stream-json mapper against
//! Claude Code's recorded frames.

mod stream_json_fixtures;
