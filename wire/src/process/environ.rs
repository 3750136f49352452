//! What a spawned process inherits of capfleet's environment: all of it but the
//! variables the application withholds — its own secrets (a webhook's signing
//! secret, a NATS token, a collector's headers), which an agent must never read.
//!
//! The engine knows no names: the application declares them once at start
//! ([`withhold`]); every spawn ([`super::SpawnSpec`]) removes them from the child's
//! environment before the launch's own variables are set (a fleet's `env` may still
//! give a variable of that name a value of its own), and a lookup made on an agent's
//! behalf ([`inherited`], e.g. an A2A peer's `secret_env`) finds them unset.

use std::ffi::OsString;
use std::sync::RwLock;

/// The withheld names, in the order declared, each once.
static WITHHELD: RwLock<Vec<OsString>> = RwLock::new(Vec::new());

/// Withhold the variables `names` from every process spawned from now on (added to
/// those withheld already).
pub fn withhold<I, S>(names: I)
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let mut all = WITHHELD.write().unwrap_or_else(|p| p.into_inner());
    for name in names {
        let name = name.into();
        if !name.is_empty() && !all.contains(&name) {
            all.push(name);
        }
    }
}

/// The variables withheld from spawned processes.
pub(crate) fn withheld() -> Vec<OsString> {
    WITHHELD.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Whether `name` is withheld.
pub(crate) fn is_withheld(name: &str) -> bool {
    WITHHELD
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|n| n == name)
}

/// `$name` as an agent would inherit it: unset when withheld.
pub(crate) fn inherited(name: &str) -> Option<String> {
    if is_withheld(name) {
        return None;
    }
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::{Io, SpawnSpec};

    #[tokio::test]
    async fn a_withheld_variable_reaches_no_child_unless_the_launch_sets_it() {
        // Names of this test only: the set is process-wide.
        const KEPT: &str = "CAPFLEET_ENVIRON_TEST_KEPT";
        const HIDDEN: &str = "CAPFLEET_ENVIRON_TEST_HIDDEN";
        // SAFETY: nextest runs each test in a process of its own, and these names are
        // this test's: nothing else reads or writes them.
        unsafe {
            std::env::set_var(KEPT, "kept");
            std::env::set_var(HIDDEN, "hidden");
        }
        withhold([HIDDEN]);
        assert!(is_withheld(HIDDEN) && !is_withheld(KEPT));
        assert_eq!(inherited(HIDDEN), None);
        assert_eq!(inherited(KEPT).as_deref(), Some("kept"));
        let echo = |spec: SpawnSpec| async move {
            let out = spec
                .stdio(Io::Null, Io::Piped, Io::Null)
                .command()
                .output()
                .await
                .expect("sh runs");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let script = format!("echo \"${KEPT}/${{{HIDDEN}:-unset}}\"");
        let said = echo(SpawnSpec::new("sh").args(["-c", &script])).await;
        assert_eq!(said.trim(), "kept/unset");
        let said = echo(
            SpawnSpec::new("sh")
                .args(["-c", &script])
                .env(HIDDEN, "own"),
        )
        .await;
        assert_eq!(said.trim(), "kept/own");
    }
}
