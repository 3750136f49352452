//! The router: static routes, `@cap://` mentions and master plans — every message
//! between sessions passes here and is recorded; sessions never talk directly.

pub mod spec;

pub use spec::{CollectMode, Picker, Route, RouteAction, RoutingSpec, Split};
