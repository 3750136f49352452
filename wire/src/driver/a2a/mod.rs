//! The A2A wire (spec §6.5, §11.1; issue 14): a remote agent reached over A2A's
//! JSON-RPC binding, in the [`Shape::Connect`] shape — no process of ours; the loss of
//! the peer is the death, and a restart reconnects.
//!
//! Starting reads the agent card under `fast_path.a2a_serve_at` ([`http`]), refuses
//! one without the `cap-protocol/v1` extension unless `[x-a2a] plain = true`, picks
//! the JSON-RPC interface and the spelling (1.0 over 0.3), sticky per peer for the
//! process ([`negotiated`]), and takes the auth the card's schemes ask for
//! ([`auth`]). The output task ([`conn`]) makes the requests and maps each turn's SSE
//! stream (bounded per event, [`sse`]) through the binding's frame mapper. Started
//! with a resume id (a [`ResumePoint`]), it goes on in that conversation and takes up
//! the cut turn's task.

mod auth;
mod conn;
pub(crate) mod error;
mod http;
mod negotiated;
mod sse;

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::wire::{Interrupt, OutputTask, Peer, Start, Started, Wire};
use super::{LaunchError, LaunchSpec, Shape};
use crate::bindings::a2a::{Card, Choice, FrameMapper, ResumePoint};
use crate::chaos::conn::Route;
use crate::events::trace::traceparent;
use crate::manifest::AddressFastPath;
use crate::process::stderr_ring::StderrRing;
use crate::protocol::{Decision, Meta};
use conn::{Cmd, Conn, Reply};
pub(crate) use error::A2aError;
pub use http::crypto_provider;

/// Commands in flight to the output task (they come from the session, one per
/// prompt or answer, never from the agent).
const COMMANDS: usize = 8;

/// The `_meta` key of `cap.session.ready` naming the A2A peer and its spelling.
pub(crate) const META_A2A: &str = "capfleet.a2a";

/// The A2A wire of one connection.
pub(crate) struct A2aWire {
    commands: Option<mpsc::Sender<Cmd>>,
    urn: String,
}

/// The base URL the manifest names.
pub(crate) fn base_url(launch: &LaunchSpec) -> Result<&str, LaunchError> {
    match &launch.manifest.fast_path.a2a_serve_at {
        AddressFastPath::Address(url) => Ok(url),
        AddressFastPath::Unsupported => Err(LaunchError::NoCommand {
            urn: launch.urn.clone(),
            binding: "a2a_serve_at",
        }),
    }
}

/// The address a peer's base URL names (its host resolved, the scheme's port by
/// default), for the [`Shape::Connect`] the A2A binding is reached in; `None` when the
/// URL is not one or its host does not resolve now (the start then says why).
pub fn connect_addr(base: &str) -> Option<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    let url = reqwest::Url::parse(base).ok()?;
    let host = url
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = url.port_or_known_default()?;
    (host, port).to_socket_addrs().ok()?.next()
}

/// The shape an A2A session is reached in: no process of ours, a connection to the
/// peer the manifest's URL (`fast_path.a2a_serve_at`) names. An unresolvable host
/// keeps the unspecified address; the start says why.
pub(crate) fn connect_shape(manifest: &crate::manifest::Manifest) -> Shape {
    let base = match &manifest.fast_path.a2a_serve_at {
        AddressFastPath::Address(url) => url.as_str(),
        AddressFastPath::Unsupported => "",
    };
    let addr = connect_addr(base).unwrap_or_else(|| std::net::SocketAddr::from(([0, 0, 0, 0], 0)));
    Shape::Connect(addr)
}

/// What `capfleet resolve` shows of a peer: its card and the choice made.
pub struct Discovery {
    pub card: Card,
    pub choice: Choice,
}

/// Reads and checks the card of the peer at `base` (what `start` does first).
pub async fn discover(
    base: &str,
    opts: &crate::manifest::a2a::A2aOptions,
) -> Result<Discovery, A2aError> {
    discover_via(base, opts, None).await
}

/// [`discover`], through a chaos run's fault proxy when `route` says so.
async fn discover_via(
    base: &str,
    opts: &crate::manifest::a2a::A2aOptions,
    route: Option<&Route>,
) -> Result<Discovery, A2aError> {
    let http = http::Http::new(opts, None, false, route.cloned())?;
    let card = http.card(base).await?;
    card.check_extension(opts.plain)?;
    let choice = negotiated::choose(base, &card)?;
    Ok(Discovery { card, choice })
}

/// The first pause before trying again a peer that is coming back (then doubling).
const COMEBACK_FIRST: Duration = Duration::from_millis(50);
/// The longest pause between two tries of a peer that is coming back.
const COMEBACK_MAX: Duration = Duration::from_secs(1);

/// [`discover`] for a start. A peer this process has reached before (a restart after
/// its loss) whose connection fails is on its way back — restarted by its own
/// supervisor, not listening yet: it is tried again, with doubling pauses, until the
/// agent's init timeout (`startup.init_timeout_seconds`), so that one loss of the
/// peer is one restart, not one per try. A peer never reached fails at once.
async fn rediscover(
    launch: &LaunchSpec,
    base: &str,
    route: Option<&Route>,
) -> Result<Discovery, A2aError> {
    let opts = &launch.manifest.a2a;
    let coming_back = negotiated::sticky(base).is_some();
    let init = Duration::from_secs(launch.manifest.startup.init_timeout_seconds);
    let deadline = Instant::now() + init;
    let mut pause = COMEBACK_FIRST;
    loop {
        match discover_via(base, opts, route).await {
            Err(e @ A2aError::Transport(_)) if coming_back && Instant::now() + pause < deadline => {
                tracing::info!(urn = %launch.urn, %base, ?pause, "the A2A peer is not back yet: {e}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(COMEBACK_MAX);
            }
            found => return found,
        }
    }
}

/// A chaos run's connection faults on this session: the route through its fault
/// proxy (started on the first start, kept across restarts). A peer the proxy cannot
/// stand in front of is reached directly, said once per start.
async fn chaos_route(launch: &LaunchSpec, base: &str) -> Option<Route> {
    let faults = launch.conn_faults.as_ref()?;
    match faults.route(base).await {
        Ok(route) => Some(route),
        Err(e) => {
            tracing::warn!(urn = %launch.urn, "chaos: no connection faults on this peer: {e}");
            None
        }
    }
}

fn config_error(launch: &LaunchSpec, e: impl std::fmt::Display) -> LaunchError {
    LaunchError::Config {
        urn: launch.urn.clone(),
        message: e.to_string(),
    }
}

/// The connection's death when the peer cannot be reached (restarted per policy),
/// a refusal otherwise (the card, its extension, its auth: no restart changes it).
fn start_error(launch: &LaunchSpec, addr: std::net::SocketAddr, e: A2aError) -> LaunchError {
    if e.is_unreachable() {
        LaunchError::Connect {
            urn: launch.urn.clone(),
            addr,
            source: std::io::Error::new(std::io::ErrorKind::ConnectionRefused, e.to_string()),
        }
    } else {
        config_error(launch, e)
    }
}

impl Wire for A2aWire {
    const WHO: &'static str = "A2A peer";
    const READY_AT_START: bool = true;

    fn admits(shape: &Shape) -> bool {
        matches!(shape, Shape::Connect(_))
    }

    /// A conversation to go on with (and maybe the cut turn's task to take up).
    fn resumes(_launch: &LaunchSpec, resume_id: Option<&str>) -> bool {
        resume_id.is_some()
    }

    fn ready_meta(launch: &LaunchSpec) -> Option<Meta> {
        let base = base_url(launch).ok()?;
        let spelling = negotiated::sticky(base)?;
        let mut meta = Meta::new();
        meta.insert(
            META_A2A.into(),
            json!({ "url": base, "spelling": spelling.as_str() }),
        );
        Some(meta)
    }

    async fn start(start: Start<'_, Self>) -> Result<Started<Self>, LaunchError> {
        let Start {
            launch,
            sink,
            resume_id,
            retake,
            ..
        } = start;
        let point = resume_id.map(ResumePoint::parse).unwrap_or_default();
        let Shape::Connect(addr) = launch.shape else {
            return Err(config_error(
                launch,
                "the A2A wire needs a connection shape",
            ));
        };
        let base = base_url(launch)?;
        let opts = &launch.manifest.a2a;
        let route = chaos_route(launch, base).await;
        let Discovery { card, choice } = rediscover(launch, base, route.as_ref())
            .await
            .map_err(|e| start_error(launch, addr, e))?;
        let secret = |var: &str| {
            launch
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == var)
                .map(|(_, v)| v.clone())
                .or_else(|| crate::process::environ::inherited(var))
        };
        let auth = auth::Auth::for_card(&card, opts.secret_env.as_deref(), secret)
            .map_err(|e| config_error(launch, e))?;
        let http = http::Http::new(opts, auth, card.has_cap_extension(), route)
            .map_err(|e| config_error(launch, e))?;
        let endpoint = http
            .url(&choice.endpoint)
            .map_err(|e| config_error(launch, e))?;
        tracing::info!(urn = %launch.urn, card = %card.card_url, %endpoint, spelling = choice.spelling.as_str(), "A2A peer chosen");
        let (tx, rx) = mpsc::channel(COMMANDS);
        let conn = Conn {
            http,
            endpoint,
            spelling: choice.spelling,
            plain: !card.has_cap_extension(),
            sink: sink.clone(),
            max_event: launch.max_line,
            mapper: FrameMapper::new(!card.has_cap_extension(), launch.max_line),
            task: None,
            context: point.context,
            rejoin: point.task.filter(|_| retake),
            open: false,
            paused: false,
            ids: 0,
        };
        let output: OutputTask = Box::pin(conn.run(rx));
        Ok(Started {
            wire: A2aWire {
                commands: Some(tx),
                urn: launch.urn.clone(),
            },
            peer: Peer::Connection(addr),
            stderr: StderrRing::default(),
            output,
        })
    }

    async fn prompt(&mut self, text: String) {
        let tp = traceparent(&tracing::Span::current());
        self.command(Cmd::Prompt(text, tp)).await;
    }

    async fn permission(&mut self, req_id: String, decision: Decision, _message: Option<String>) {
        let tp = traceparent(&tracing::Span::current());
        self.command(Cmd::Answer(Reply::Permission { req_id, decision }, tp))
            .await;
    }

    async fn answer(&mut self, ask_id: String, value: Option<Value>) {
        let tp = traceparent(&tracing::Span::current());
        self.command(Cmd::Answer(Reply::Ask { ask_id, value }, tp))
            .await;
    }

    async fn interrupt(&mut self) -> Interrupt {
        let tp = traceparent(&tracing::Span::current());
        self.command(Cmd::Cancel(tp)).await;
        Interrupt::Sent
    }

    fn close(&mut self, _peer: &Peer) -> &'static str {
        self.commands = None;
        "the end of its connection"
    }
}

impl A2aWire {
    async fn command(&mut self, cmd: Cmd) {
        let Some(tx) = &self.commands else {
            return;
        };
        if tx.send(cmd).await.is_err() {
            tracing::debug!(urn = %self.urn, "the A2A connection is gone; command dropped");
        }
    }
}
