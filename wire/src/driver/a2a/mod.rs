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
//!
//! # The card and the spelling
//!
//! The card is read from `.well-known/agent-card.json`, else `.well-known/agent.json`,
//! beneath the base URL's path as the SDKs' resolvers look, then at the host's root
//! (`card.rs` reads 1.0's `supportedInterfaces` and 0.3's `url` / `preferredTransport` /
//! `protocolVersion`). The chosen interface is shown in `resolve` and in the session's
//! `cap.session.ready` as `_meta."capfleet.a2a"` (`url`, `spelling`). `spelling.rs` (in
//! `bindings::a2a`) holds everything the two spellings differ in (method names,
//! `A2A-Version`, `A2A-Extensions` / `X-A2A-Extensions`, states, roles, `kind`
//! discriminators). A card with the CAP extension has it activated on every request: the
//! official SDKs hand an agent the extensions its client asked for.
//!
//! # The output task
//!
//! [`conn`] owns the HTTP client (reqwest on rustls with ring; connect and first-byte
//! timeouts from `[x-a2a]`, defaults 10 s and 30 s; no timeout on a turn, the session's
//! turn timeout rules; redirects only on the same host; plain `http://` only to loopback
//! unless `allow_http`). It takes the session's commands (prompt, answer, cancel) from a
//! channel of 8, sends streaming messages in the conversation's `contextId`, and maps each
//! SSE frame (`bindings::sse::lines` cuts whole lines, at most `max_line_bytes` per
//! event; eventsource-stream parses each line once) with the frame mapper: text parts ->
//! `cap.text_chunk`; data parts marked `_meta."cap.kind"` -> that CAP event;
//! `input-required` -> the marked ask or permission request, answered by a message to the
//! same task carrying a marked answer part (asked once per connection:
//! `bindings/a2a/asked.rs`); an `input-required` that asks nothing ends the turn and keeps
//! the task (Gemini CLI's A2A server ends every turn so); Gemini CLI's tool-call data
//! parts -> `cap.permission.request` / `cap.tool_call.*`; `auth-required` ->
//! `auth_error`; artifact updates -> `cap.artifact` (chunks joined); terminal states end
//! the turn. A stream that drops mid-turn is resumed with `SubscribeToTask` /
//! `tasks/resubscribe` (4 tries, 100 ms doubling); then, or when the peer cannot be
//! reached, the connection's death, restarted per policy. A restart finding a peer this
//! process reached before not listening yet tries again, 50 ms doubling to 1 s, until the
//! init timeout. `cap.cancel` is `CancelTask` / `tasks/cancel`. A 401/403 is `auth_error`
//! naming the scheme and the variable, never the value. Every request carries the turn
//! span's W3C `traceparent`.
//!
//! The simulator serves the same (`sim --mode a2a`), and so does `capfleet serve
//! --expose`, both building frames and cards with `bindings/a2a/outbound.rs`. Proven
//! against real servers (`tests/all/a2a_peers.rs`): the official Python SDK (a2a-sdk,
//! 1.0 routes and 0.3 compat), the JS SDK (@a2a-js/sdk) and Gemini CLI's own A2A server.
//! A2A is written here over reqwest rather than on an SDK: no Rust A2A SDK speaks both
//! spellings the peers use.

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
