//! Bearer tokens: the token file (one `NAME ROLE SHA256-HEX` per line, `#` comments),
//! `capfleet serve token add`, and the check every request but the probes passes.
//!
//! The server never runs open: without `--token-file` it uses `<data dir>/tokens.txt`,
//! made at the first start with one admin token whose secret is printed once
//! ([`for_server`]); a token file with no token in it is refused at start.
//!
//! Only a token's SHA-256 is stored; a request's token is hashed and compared with
//! every stored digest in constant time (no early exit, no digest skipped), so
//! neither a timing nor a missing name tells anything. The secret itself is never
//! logged, journaled or put in a span: the caller is known by its token's name. A
//! missing or wrong token is 401 with a body that names nothing; repeated failures
//! from one address are answered after a delay that grows with them.

use std::collections::HashMap;
use std::io::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, header::AUTHORIZATION};
use ring::rand::SecureRandom as _;
use subtle::ConstantTimeEq as _;

/// Where the server serves MCP (`super::mcp`): reached with any role, each tool
/// checking the caller's.
pub(crate) const MCP_PATH: &str = "/mcp";

/// What a token may do; each role includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Role {
    /// GET routes.
    Read,
    /// + submit and cancel runs.
    Run,
    /// + answer asks and permission requests.
    Approve,
    /// Everything.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Run => "run",
            Role::Approve => "approve",
            Role::Admin => "admin",
        }
    }

    fn parse(s: &str) -> Option<Role> {
        [Role::Read, Role::Run, Role::Approve, Role::Admin]
            .into_iter()
            .find(|r| r.as_str() == s)
    }

    /// The role a request needs: reading for GET, answering asks `approve`, any other
    /// change `run`. `/mcp` needs `read` to be reached: each tool checks the caller's
    /// role itself (`capfleet_mcp::Access`), as the route of the same change would.
    pub(crate) fn needed(method: &Method, path: &str) -> Role {
        if method == Method::GET || method == Method::HEAD || path == MCP_PATH {
            Role::Read
        } else if path.contains("/asks/") {
            Role::Approve
        } else {
            Role::Run
        }
    }
}

/// Who made a request: its token's name and role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    pub name: String,
    pub role: Role,
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}: expected `NAME ROLE SHA256-HEX` (roles: read, run, approve, admin)", path.display())]
    Line { path: PathBuf, line: usize },
    #[error("{}: a token named `{name}` is already there", path.display())]
    Duplicate { path: PathBuf, name: String },
    #[error(
        "{}: no token in it (every line removed or commented out): the server runs with tokens only; add one with `capfleet serve token add NAME --role ROLE --token-file {}`",
        path.display(),
        path.display()
    )]
    NoToken { path: PathBuf },
    #[error("a token name is letters, digits, `-`, `_` and `.`: `{0}`")]
    Name(String),
    #[error("no randomness from the system")]
    Random,
}

struct Entry {
    name: String,
    role: Role,
    digest: [u8; 32],
}

/// The tokens of a token file.
pub(crate) struct Tokens {
    entries: Vec<Entry>,
}

impl Tokens {
    /// No token: a server no request reaches over HTTP (`capfleet mcp`'s).
    pub(crate) fn none() -> Tokens {
        Tokens {
            entries: Vec::new(),
        }
    }

    /// Read the token file at `path`.
    pub(crate) fn load(path: &Path) -> Result<Tokens, TokenError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenError::Io {
            path: path.to_owned(),
            source,
        })?;
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || TokenError::Line {
                path: path.to_owned(),
                line: i + 1,
            };
            let mut words = line.split_whitespace();
            let (Some(name), Some(role), Some(hexed), None) =
                (words.next(), words.next(), words.next(), words.next())
            else {
                return Err(bad());
            };
            let role = Role::parse(role).ok_or_else(bad)?;
            let mut digest = [0u8; 32];
            hex::decode_to_slice(hexed, &mut digest).map_err(|_| bad())?;
            if entries.iter().any(|e: &Entry| e.name == name) {
                return Err(TokenError::Duplicate {
                    path: path.to_owned(),
                    name: name.to_owned(),
                });
            }
            entries.push(Entry {
                name: name.to_owned(),
                role,
                digest,
            });
        }
        Ok(Tokens { entries })
    }

    /// The role of the token named `name`, if the file has it (a queued run's
    /// submitter, checked again at the next start).
    pub(crate) fn role_of(&self, name: &str) -> Option<Role> {
        self.entries.iter().find(|e| e.name == name).map(|e| e.role)
    }

    /// The caller whose token `secret` is, if any: every digest is compared, each in
    /// constant time.
    pub(crate) fn check(&self, secret: &str) -> Option<Caller> {
        let digest = sha256(secret.as_bytes());
        let mut found = None;
        for e in &self.entries {
            if bool::from(e.digest.ct_eq(&digest)) {
                found = Some(Caller {
                    name: e.name.clone(),
                    role: e.role,
                });
            }
        }
        found
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// The bearer token of a request, if it has one.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The name of the admin token a server makes for itself.
pub(crate) const FIRST_TOKEN: &str = "admin";

/// The server's tokens: those of `path`, one at least. When `path` is missing and
/// `make` (the default file, not a `--token-file` named), it is made with one admin
/// token, [`FIRST_TOKEN`], whose secret comes back to be printed once.
pub(crate) fn for_server(path: &Path, make: bool) -> Result<(Tokens, Option<String>), TokenError> {
    let made = if make && !path.exists() {
        Some(add(path, FIRST_TOKEN, Role::Admin)?)
    } else {
        None
    };
    let tokens = Tokens::load(path)?;
    if tokens.entries.is_empty() {
        return Err(TokenError::NoToken {
            path: path.to_owned(),
        });
    }
    Ok((tokens, made))
}

/// Append a new token named `name` to the file at `path` (made 0600 when missing);
/// the secret, to print once.
pub fn add(path: &Path, name: &str, role: Role) -> Result<String, TokenError> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid {
        return Err(TokenError::Name(name.to_owned()));
    }
    if path.exists() {
        let tokens = Tokens::load(path)?;
        if tokens.entries.iter().any(|e| e.name == name) {
            return Err(TokenError::Duplicate {
                path: path.to_owned(),
                name: name.to_owned(),
            });
        }
    }
    let mut raw = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut raw)
        .map_err(|_| TokenError::Random)?;
    let secret = format!("cft_{}", hex::encode(raw));
    let line = format!(
        "{name} {} {}\n",
        role.as_str(),
        hex::encode(sha256(secret.as_bytes()))
    );
    use std::os::unix::fs::OpenOptionsExt as _;
    let io = |source| TokenError::Io {
        path: path.to_owned(),
        source,
    };
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()).and_then(|()| f.sync_all()))
        .map_err(io)?;
    Ok(secret)
}

/// Failures within this window count together.
const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Failures from one address answered at once; each one past them waits longer.
const FREE_FAILURES: u32 = 5;
const MAX_DELAY: Duration = Duration::from_secs(5);
/// Addresses remembered at most (the oldest window goes first).
const MAX_ADDRESSES: usize = 4096;

/// Recent authentication failures per client address.
#[derive(Default)]
pub(crate) struct Failures {
    by_addr: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl Failures {
    /// Count a failure from `addr`; how long to hold its answer.
    pub(crate) fn failed(&self, addr: IpAddr) -> Duration {
        let now = Instant::now();
        let mut map = self.by_addr.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_ADDRESSES && !map.contains_key(&addr) {
            map.retain(|_, (since, _)| now.duration_since(*since) < FAILURE_WINDOW);
            if map.len() >= MAX_ADDRESSES
                && let Some(oldest) = map.iter().min_by_key(|(_, (s, _))| *s).map(|(a, _)| *a)
            {
                map.remove(&oldest);
            }
        }
        let slot = map.entry(addr).or_insert((now, 0));
        if now.duration_since(slot.0) >= FAILURE_WINDOW {
            *slot = (now, 0);
        }
        slot.1 += 1;
        let over = slot.1.saturating_sub(FREE_FAILURES);
        (Duration::from_millis(50) * over.min(100)).min(MAX_DELAY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_tokens_check_by_digest_and_keep_their_role() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.txt");
        let ci = add(&path, "ci", Role::Run).unwrap();
        let ops = add(&path, "ops", Role::Admin).unwrap();
        assert!(matches!(
            add(&path, "ci", Role::Read),
            Err(TokenError::Duplicate { .. })
        ));
        assert!(matches!(
            add(&path, "bad name", Role::Read),
            Err(TokenError::Name(_))
        ));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains(&ci) && !text.contains(&ops),
            "no secret stored"
        );
        let tokens = Tokens::load(&path).unwrap();
        assert_eq!(
            tokens.check(&ci),
            Some(Caller {
                name: "ci".into(),
                role: Role::Run
            })
        );
        assert_eq!(tokens.check(&ops).map(|c| c.role), Some(Role::Admin));
        assert_eq!(tokens.check("cft_wrong"), None);
        assert_eq!(tokens.check(""), None);
    }

    #[test]
    fn a_server_makes_its_first_token_and_refuses_a_file_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.txt");
        let (tokens, made) = for_server(&path, true).unwrap();
        let secret = made.expect("a token made");
        assert_eq!(tokens.check(&secret).map(|c| c.role), Some(Role::Admin));
        let (_, again) = for_server(&path, true).unwrap();
        assert_eq!(again, None, "made once");
        std::fs::write(&path, "# admin admin 00\n\n").unwrap();
        let e = for_server(&path, true).err().expect("refused");
        assert!(matches!(e, TokenError::NoToken { .. }));
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        let named = dir.path().join("named.txt");
        assert!(matches!(
            for_server(&named, false),
            Err(TokenError::Io { .. })
        ));
    }

    #[test]
    fn a_bad_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        std::fs::write(&path, "# comment\n\nci run 00\n").unwrap();
        match Tokens::load(&path) {
            Err(TokenError::Line { line, .. }) => assert_eq!(line, 3),
            other => panic!("{:?}", other.err()),
        }
    }

    #[test]
    fn roles_by_route() {
        assert_eq!(Role::needed(&Method::GET, "/v1/runs"), Role::Read);
        assert_eq!(Role::needed(&Method::POST, "/v1/runs"), Role::Run);
        assert_eq!(Role::needed(&Method::POST, "/v1/runs/x/cancel"), Role::Run);
        assert_eq!(
            Role::needed(&Method::POST, "/v1/runs/x/asks/a"),
            Role::Approve
        );
        assert_eq!(Role::needed(&Method::POST, "/mcp"), Role::Read);
        assert!(Role::Read < Role::Run && Role::Approve < Role::Admin);
    }

    #[test]
    fn repeated_failures_are_slowed() {
        let f = Failures::default();
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        for _ in 0..FREE_FAILURES {
            assert_eq!(f.failed(a), Duration::ZERO);
        }
        assert!(f.failed(a) > Duration::ZERO);
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        assert_eq!(f.failed(b), Duration::ZERO);
    }
}
