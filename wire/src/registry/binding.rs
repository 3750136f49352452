//! Binding selection (spec §6): the highest-priority fast path the manifest declares
//! and this build supports, always ending at PTY.

use std::fmt;

use crate::manifest::Manifest;

/// A transport binding, with its wire name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Binding {
    Grpc,
    StreamJson,
    /// `codex app-server`, one long-lived process per session speaking JSON-RPC (a
    /// capfleet extension: `fast_path.x-codex_app_server`); placed before `codex exec`,
    /// which the same manifest declares for a Codex without `app-server`.
    CodexAppServer,
    /// `codex exec --json`, one process per turn (a capfleet extension:
    /// `fast_path.x-codex_exec`); placed with stream-json.
    CodexExec,
    AcpStdio,
    A2a,
    Pty,
}

impl Binding {
    /// Spec §6 priority, best first.
    pub const PRIORITY: [Binding; 7] = [
        Binding::Grpc,
        Binding::StreamJson,
        Binding::CodexAppServer,
        Binding::CodexExec,
        Binding::AcpStdio,
        Binding::A2a,
        Binding::Pty,
    ];

    /// Wire name: `grpc`, `stream_json`, `codex_app_server`, `codex_exec`, `acp_stdio`, `a2a`, `pty`.
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::Grpc => "grpc",
            Binding::StreamJson => "stream_json",
            Binding::CodexAppServer => "codex_app_server",
            Binding::CodexExec => "codex_exec",
            Binding::AcpStdio => "acp_stdio",
            Binding::A2a => "a2a",
            Binding::Pty => "pty",
        }
    }

    pub fn from_wire(s: &str) -> Option<Self> {
        Binding::PRIORITY.into_iter().find(|b| b.as_str() == s)
    }

    /// Whether the manifest declares this binding (`[fast_path]`; PTY always).
    pub fn declared_by(self, m: &Manifest) -> bool {
        let fp = &m.fast_path;
        match self {
            Binding::Grpc => fp.grpc.is_supported(),
            Binding::StreamJson => fp.stream_json.is_supported(),
            Binding::CodexExec => fp.codex_exec.is_supported(),
            Binding::CodexAppServer => fp.codex_app_server.is_supported(),
            Binding::AcpStdio => fp.acp_stdio.is_supported(),
            Binding::A2a => fp.a2a_serve_at.is_supported(),
            Binding::Pty => true,
        }
    }
}

impl fmt::Display for Binding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a higher-priority binding was passed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// The manifest does not declare it (`false` or absent).
    NotDeclared,
    /// The manifest declares it but this build has no driver for it.
    NotSupportedByBuild,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SkipReason::NotDeclared => "not declared",
            SkipReason::NotSupportedByBuild => "not supported by this build",
        })
    }
}

/// The chosen binding and what was skipped on the way, in priority order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub binding: Binding,
    pub skipped: Vec<(Binding, SkipReason)>,
}

impl fmt::Display for Selection {
    /// e.g. `stream_json (skipped grpc: not supported by this build)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.binding)?;
        if !self.skipped.is_empty() {
            let parts: Vec<String> = self
                .skipped
                .iter()
                .map(|(b, r)| format!("{b}: {r}"))
                .collect();
            write!(f, " (skipped {})", parts.join(", "))?;
        }
        Ok(())
    }
}

/// Pick the first binding in [`Binding::PRIORITY`] that `m` declares and `supported`
/// lists (this build's drivers: [`crate::driver::SUPPORTED`]). PTY is the universal
/// fallback (spec §6.1) and is chosen even if `supported` omits it.
pub fn select_binding(m: &Manifest, supported: &[Binding]) -> Selection {
    let mut skipped = Vec::new();
    for b in Binding::PRIORITY {
        if b == Binding::Pty {
            break;
        }
        if !b.declared_by(m) {
            skipped.push((b, SkipReason::NotDeclared));
        } else if !supported.contains(&b) {
            skipped.push((b, SkipReason::NotSupportedByBuild));
        } else {
            return Selection {
                binding: b,
                skipped,
            };
        }
    }
    Selection {
        binding: Binding::Pty,
        skipped,
    }
}

/// Every usable binding in priority order, ending with PTY: the fall-through list a
/// driver walks when a fast path fails at runtime (spec §5.1 `[fast_path]` comment).
pub fn candidates(m: &Manifest, supported: &[Binding]) -> Vec<Binding> {
    let mut out: Vec<Binding> = Binding::PRIORITY
        .into_iter()
        .filter(|b| *b != Binding::Pty && b.declared_by(m) && supported.contains(b))
        .collect();
    out.push(Binding::Pty);
    out
}
