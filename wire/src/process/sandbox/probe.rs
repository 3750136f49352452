//! Which backends this host has, probed once: bubblewrap if it can create its
//! namespaces here, Landlock if the kernel has it (and at which ABI). The variable
//! [`BACKEND_ENV`] forces one (`bubblewrap`, `landlock`) or none (`none`: a host
//! with neither, for tests of the refusal).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::{Backend, BackendChoice, Network, SandboxError};

/// The bubblewrap program.
const BWRAP: &str = "bwrap";

/// bubblewrap as found on `PATH` once (its name when it is not there: the probe
/// says so), for every spawn to name by its path.
pub(super) fn bwrap() -> &'static Path {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    FOUND.get_or_init(|| {
        crate::process::find_program(Path::new(BWRAP), Path::new("/"), None)
            .unwrap_or_else(|| PathBuf::from(BWRAP))
    })
}

/// Forces the backend every sandbox gets: `bubblewrap`, `landlock` or `none`.
pub(crate) const BACKEND_ENV: &str = "CAPFLEET_SANDBOX_BACKEND";

/// The Landlock ABI that scopes signals and abstract unix sockets.
const LANDLOCK_SCOPES: i64 = 6;

/// What this host offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Availability {
    /// Why bubblewrap is not usable, when it is not.
    pub bubblewrap: Result<(), String>,
    /// The kernel's Landlock ABI (0: none).
    pub landlock_abi: i64,
    /// The backend [`BACKEND_ENV`] forces, or `Err(())` for `none`.
    pub forced: Option<Result<Backend, ()>>,
}

/// The host's backends (probed on first use).
pub fn availability() -> &'static Availability {
    static PROBED: OnceLock<Availability> = OnceLock::new();
    PROBED.get_or_init(|| Availability {
        bubblewrap: probe_bwrap(),
        landlock_abi: landlock_abi(),
        forced: std::env::var(BACKEND_ENV).ok().map(|v| match v.as_str() {
            "bubblewrap" => Ok(Backend::Bubblewrap),
            "landlock" => Ok(Backend::Landlock),
            _ => Err(()),
        }),
    })
}

impl Availability {
    fn landlock(&self) -> Result<(), String> {
        if self.landlock_abi >= 1 {
            Ok(())
        } else {
            Err("the kernel has no Landlock (CONFIG_SECURITY_LANDLOCK, `lsm=`)".into())
        }
    }

    /// The backend a sandbox asking for `choice` gets here.
    pub fn choose(&self, choice: BackendChoice) -> Result<Backend, SandboxError> {
        let choice = match self.forced {
            Some(Ok(Backend::Bubblewrap)) => BackendChoice::Bubblewrap,
            Some(Ok(Backend::Landlock)) => BackendChoice::Landlock,
            Some(Err(())) => {
                return Err(SandboxError::Unavailable(format!(
                    "{BACKEND_ENV}=none: neither bubblewrap nor Landlock may be used"
                )));
            }
            None => choice,
        };
        let bwrap = self.bubblewrap.clone();
        match choice {
            BackendChoice::Bubblewrap => bwrap
                .map(|()| Backend::Bubblewrap)
                .map_err(SandboxError::Unavailable),
            BackendChoice::Landlock => self
                .landlock()
                .map(|()| Backend::Landlock)
                .map_err(SandboxError::Unavailable),
            BackendChoice::Auto => match (bwrap, self.landlock()) {
                (Ok(()), _) => Ok(Backend::Bubblewrap),
                (Err(_), Ok(())) => Ok(Backend::Landlock),
                (Err(b), Err(l)) => Err(SandboxError::Unavailable(format!("{b}; {l}"))),
            },
        }
    }
}

/// What `backend` does not enforce on this host for a sandbox with `network`.
pub(super) fn unenforced(backend: Backend, network: Network) -> Vec<String> {
    let mut out = Vec::new();
    if network == Network::Host {
        out.push("network: the host's, any address it reaches (network = \"host\")".into());
    }
    if backend == Backend::Landlock {
        out.push(
            "processes: not hidden (no pid namespace): the session sees other processes \
             in /proc, their command lines included"
                .into(),
        );
        if availability().landlock_abi < LANDLOCK_SCOPES {
            out.push(format!(
                "signals and abstract unix sockets: not scoped (Landlock ABI {} < {LANDLOCK_SCOPES})",
                availability().landlock_abi
            ));
        }
        if network == Network::None {
            out.push(
                "network = \"none\": TCP only (UDP and unix sockets are not confined by Landlock)"
                    .into(),
            );
        }
    }
    out
}

fn probe_bwrap() -> Result<(), String> {
    let out = std::process::Command::new(bwrap())
        .args([
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--die-with-parent",
            "--ro-bind",
            "/",
            "/",
            "--",
            "true",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output();
    match out {
        Err(e) => Err(format!("bubblewrap (`{BWRAP}`) cannot run: {e}")),
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "bubblewrap cannot create its namespaces here: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
    }
}

/// The kernel's Landlock ABI version; 0 without Landlock.
fn landlock_abi() -> i64 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query takes no attribute (null, size 0) and touches no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    v.max(0)
}
