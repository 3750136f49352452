//! Runs distributed over NATS JetStream (issue 22): the connection every NATS verb
//! shares (`worker`, `submit --nats`, `serve --nats`), and the queue of runs
//! ([`queue`]). NATS is the distributed engine; capfleet adds no consensus of its own.
//!
//! A secret never reaches a log: the token is read from the environment
//! ([`TOKEN_ENV`]), the credentials from a file (`--nats-creds`), and the URLs are
//! said without their user part ([`NatsArgs::shown`]).

pub(crate) mod artifacts;
pub mod lease;
pub mod presence;
pub mod queue;
pub mod replica;
pub(crate) mod status;

use std::path::PathBuf;

/// The environment variable a NATS token is read from (never from the command line).
pub(crate) const TOKEN_ENV: &str = "CAPFLEET_NATS_TOKEN";

/// How a verb reaches NATS.
#[derive(Debug, Clone, clap::Args)]
pub struct NatsArgs {
    /// The NATS servers, comma-separated (nats://host:4222,nats://other:4222).
    #[arg(long = "nats", value_name = "URL[,URL...]")]
    pub urls: Option<String>,
    /// A NATS credentials file (JWT and NKey seed); a token is read from CAPFLEET_NATS_TOKEN.
    #[arg(long = "nats-creds", value_name = "FILE", requires = "urls")]
    pub creds: Option<PathBuf>,
    /// Copies JetStream keeps of capfleet's streams when it makes them (3 on a cluster).
    #[arg(
        long = "nats-replicas",
        value_name = "N",
        default_value_t = 1,
        requires = "urls"
    )]
    pub replicas: usize,
}

/// Why NATS could not be reached or used.
#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    #[error("--nats-creds {}: {source}", path.display())]
    Creds {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot connect to NATS at {urls}: {message}")]
    Connect { urls: String, message: String },
    #[error("JetStream: {what}: {message}")]
    JetStream { what: String, message: String },
}

impl NatsError {
    /// A JetStream call that failed, said with what it was for.
    pub(crate) fn js(what: impl Into<String>, e: impl std::fmt::Display) -> NatsError {
        NatsError::JetStream {
            what: what.into(),
            message: e.to_string(),
        }
    }
}

/// A connection's JetStream context.
#[derive(Clone)]
pub struct Nats {
    pub js: async_nats::jetstream::Context,
}

impl Nats {
    /// The key-value bucket `name` (one value per key, each lapsing `ttl` after its
    /// last write), made when missing; an existing bucket keeps the TTL it was made
    /// with (returned beside it).
    pub(crate) async fn bucket(
        &self,
        name: &str,
        ttl: std::time::Duration,
        replicas: usize,
    ) -> Result<(async_nats::jetstream::kv::Store, std::time::Duration), NatsError> {
        let what = || format!("the bucket {name}");
        if let Ok(store) = self.js.get_key_value(name).await {
            let status = store.status().await.map_err(|e| NatsError::js(what(), e))?;
            return Ok((store, status.max_age()));
        }
        let store = self
            .js
            .create_key_value(async_nats::jetstream::kv::Config {
                bucket: name.to_owned(),
                history: 1,
                max_age: ttl,
                num_replicas: replicas,
                ..Default::default()
            })
            .await
            .map_err(|e| NatsError::js(what(), e))?;
        Ok((store, ttl))
    }
}

impl NatsArgs {
    /// The URLs as they may be logged: each without a `user:password@` part.
    pub fn shown(urls: &str) -> String {
        urls.split(',')
            .map(|u| match (u.find("://"), u.rfind('@')) {
                (Some(s), Some(at)) if at > s => format!("{}{}", &u[..s + 3], &u[at + 1..]),
                (None, Some(at)) => u[at + 1..].to_owned(),
                _ => u.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Connect to `urls` as `name` (the client name the server lists).
    pub async fn connect(&self, urls: &str, name: &str) -> Result<Nats, NatsError> {
        let mut options = async_nats::ConnectOptions::new()
            .name(name)
            .retry_on_initial_connect()
            .max_reconnects(None);
        if let Some(path) = &self.creds {
            options = options
                .credentials_file(path)
                .await
                .map_err(|source| NatsError::Creds {
                    path: path.clone(),
                    source,
                })?;
        } else if let Some(token) = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()) {
            options = options.token(token);
        }
        let shown = Self::shown(urls);
        let servers = urls
            .split(',')
            .map(|u| {
                u.trim()
                    .parse::<async_nats::ServerAddr>()
                    .map_err(|e| NatsError::Connect {
                        urls: shown.clone(),
                        message: format!("`{}`: {e}", Self::shown(u.trim())),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let client = tokio::time::timeout(CONNECT_TIMEOUT, options.connect(servers))
            .await
            .map_err(|_| NatsError::Connect {
                urls: shown.clone(),
                message: format!("no answer within {}s", CONNECT_TIMEOUT.as_secs()),
            })?
            .map_err(|e| NatsError::Connect {
                urls: shown.clone(),
                message: e.to_string(),
            })?;
        // The first connection is made in the background (`retry_on_initial_connect`):
        // wait for it, within the same bound.
        let flushed = tokio::time::timeout(CONNECT_TIMEOUT, client.flush()).await;
        if !matches!(flushed, Ok(Ok(()))) {
            return Err(NatsError::Connect {
                urls: shown,
                message: format!("no server answered within {}s", CONNECT_TIMEOUT.as_secs()),
            });
        }
        Ok(Nats {
            js: async_nats::jetstream::new(client),
        })
    }
}

/// Retry `attempt` while JetStream does not answer (a cluster electing a new leader
/// after losing a node takes seconds), pausing 250 ms doubling to 2 s, for at most
/// [`RETRY_FOR`]; the last error if it never succeeds.
pub(crate) async fn retrying<T, F, Fut>(mut attempt: F) -> Result<T, NatsError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, NatsError>>,
{
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(250);
    loop {
        match attempt().await {
            Ok(t) => return Ok(t),
            Err(e) if start.elapsed() + pause > RETRY_FOR => return Err(e),
            Err(e) => {
                tracing::warn!("{e} (retried)");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(2));
            }
        }
    }
}

/// How long [`retrying`] goes on.
const RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a verb waits for NATS to answer its connection.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::NatsArgs;

    #[test]
    fn urls_are_shown_without_their_secrets() {
        assert_eq!(
            NatsArgs::shown("nats://u:secret@a:4222,nats://b:4222,tok@c:1"),
            "nats://a:4222,nats://b:4222,c:1"
        );
    }
}
