//! The MCP server: the tools (each with its input and output schema), the resources
//! (a run's journal and artifacts), and around every tool call its accounting
//! ([`FleetTools::call_tool`]): who calls (the local user, or the caller the server's
//! auth put on the HTTP request), an `execute_tool <tool>` span (OpenTelemetry GenAI
//! conventions), the call counted by tool and result, and an `mcp_call` record in
//! the journal of the run it touches ([`crate::journal`]). Each tool checks its
//! caller's access first: reading needs `read`, starting and cancelling `run`,
//! answering `approve`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::handler::server::common::Extension;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::{IntoCallToolResult, ToolCallContext};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Json, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use serde_json::Value;
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::fleets::{Access, Caller, Fleets, ToolError};
use crate::metrics::McpMetrics;
use crate::resources;
use crate::types::{
    AnswerAsk, Answered, AskList, Diff, FleetSource, RunList, RunRef, RunStatus, SessionRef,
    StartRun, Started, WaitRun,
};
use capfleet_engine::run::calls::OutsideCall;
use capfleet_wire::events::trace;

/// How often `wait_run` looks at its run.
const WAIT_POLL: Duration = Duration::from_millis(200);
/// `wait_run`'s default and longest wait.
const WAIT_DEFAULT_S: u64 = 60;
const WAIT_MAX_S: u64 = 600;

/// What the server tells clients about itself.
const INSTRUCTIONS: &str = "capfleet runs fleets of command-line AI agents. start_run starts a fleet (a fleet.toml's path or text) and returns its run id at once; run_status and wait_run follow it; list_asks and answer_ask handle what its sessions wait on; session_diff shows what a coding session changed; cancel_run stops it. Each run's journal and artifacts are resources.";

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResult::structured_error(self.body()).into())
    }
}

/// The tools over a [`Fleets`]. One per client connection (clones share the
/// backend and the metrics).
#[derive(Clone)]
pub struct FleetTools {
    fleets: Arc<dyn Fleets>,
    /// Who calls when no request names a caller: the local user of `capfleet mcp`.
    /// Over HTTP there is none: a request without a caller is refused.
    local: Option<Caller>,
    metrics: McpMetrics,
    tool_router: ToolRouter<FleetTools>,
}

impl FleetTools {
    /// The tools over `fleets`; `local`: the caller of every request (stdio), or
    /// none (each HTTP request names its own).
    pub fn new(fleets: Arc<dyn Fleets>, local: Option<Caller>, metrics: McpMetrics) -> FleetTools {
        FleetTools {
            fleets,
            local,
            metrics,
            tool_router: FleetTools::tool_router(),
        }
    }

    /// The request's caller: the one the server's auth put on the HTTP request, else
    /// the local user.
    fn caller(&self, context: &RequestContext<RoleServer>) -> Option<Caller> {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<Caller>())
            .or(self.local.as_ref())
            .cloned()
    }
}

#[tool_router]
impl FleetTools {
    /// Every run of the data dir: state, cost, sessions.
    #[tool(
        description = "List the runs (oldest first): each run's id, fleet, state (queued, running, completed, failed, interrupted), outcome, cost in USD and number of sessions."
    )]
    async fn list_runs(
        &self,
        Extension(caller): Extension<Caller>,
    ) -> Result<Json<RunList>, ToolError> {
        caller.allowed("list_runs", Access::Read)?;
        Ok(Json(self.fleets.runs().await?))
    }

    /// Start a fleet in the background: its run id at once.
    #[tool(
        description = "Start a fleet: `fleet_path` (a fleet.toml, relative to the server's working directory; capfleet mcp only) or `fleet_toml` (the fleet's text, with `files` beside it). It is validated as `capfleet run --dry-run` does, then runs in the background; the run id comes back at once. Needs the `run` role."
    )]
    async fn start_run(
        &self,
        Extension(caller): Extension<Caller>,
        Parameters(p): Parameters<StartRun>,
    ) -> Result<Json<Started>, ToolError> {
        caller.allowed("start_run", Access::Run)?;
        let source = match (p.fleet_path, p.fleet_toml) {
            (Some(path), None) if p.files.is_empty() => FleetSource::Path(path),
            (None, Some(fleet)) => FleetSource::Toml {
                fleet,
                files: p.files,
            },
            _ => {
                return Err(ToolError::BadRequest(
                    "give either `fleet_path`, or `fleet_toml` with its `files`".into(),
                ));
            }
        };
        Ok(Json(self.fleets.start(source, p.task, caller).await?))
    }

    /// A run's state and each session's last lines.
    #[tool(
        description = "A run's state, outcome, cost, and each session's state, turns, cost and last lines of output."
    )]
    async fn run_status(
        &self,
        Extension(caller): Extension<Caller>,
        Parameters(r): Parameters<RunRef>,
    ) -> Result<Json<RunStatus>, ToolError> {
        caller.allowed("run_status", Access::Read)?;
        Ok(Json(self.fleets.status(r.run).await?))
    }

    /// Wait for a run's end (or the timeout), with progress notifications.
    #[tool(
        description = "Wait until a run has ended, at most `timeout_s` seconds (default 60, at most 600), then return its status. With a progress token, each change of the run (state, turns) is a progress notification."
    )]
    async fn wait_run(
        &self,
        Extension(caller): Extension<Caller>,
        Parameters(w): Parameters<WaitRun>,
        context: RequestContext<RoleServer>,
    ) -> Result<Json<RunStatus>, ToolError> {
        caller.allowed("wait_run", Access::Read)?;
        let timeout =
            Duration::from_secs(w.timeout_s.unwrap_or(WAIT_DEFAULT_S).clamp(1, WAIT_MAX_S));
        let deadline = Instant::now() + timeout;
        let token = context.meta.get_progress_token();
        let (mut step, mut said) = (0u32, None);
        loop {
            let status = self.fleets.status(w.run.clone()).await?;
            let turns: u32 = status.sessions.iter().map(|s| s.turns).sum();
            let ended = !matches!(status.state.as_str(), "queued" | "running");
            if ended || Instant::now() >= deadline {
                return Ok(Json(status));
            }
            let now = (status.state.clone(), turns);
            if let Some(t) = &token
                && said.as_ref() != Some(&now)
            {
                step += 1;
                let message = format!("{}: {turns} turns done", status.state);
                let progress = ProgressNotificationParam::new(t.clone(), f64::from(step))
                    .with_message(message);
                if context.peer.notify_progress(progress).await.is_err() {
                    tracing::debug!("the client took no progress notification");
                }
                said = Some(now);
            }
            tokio::select! {
                () = tokio::time::sleep(WAIT_POLL) => {}
                () = context.ct.cancelled() => return Ok(Json(status)),
            }
        }
    }

    /// What a run's sessions wait on.
    #[tool(
        description = "The open permission requests and asks of a run (its sessions' turns wait on them), oldest first: each with the `ask_id` answer_ask names."
    )]
    async fn list_asks(
        &self,
        Extension(caller): Extension<Caller>,
        Parameters(r): Parameters<RunRef>,
    ) -> Result<Json<AskList>, ToolError> {
        caller.allowed("list_asks", Access::Read)?;
        Ok(Json(self.fleets.asks(r.run).await?))
    }

    /// Answer one open question.
    #[tool(
        description = "Answer an open question of a run: a permission with `decision` (allow_once, allow_always, deny), an ask with `answer` (what its form takes) or `decline: true`. The answer is journaled with who gave it. Needs the `approve` role."
    )]
    async fn answer_ask(
        &self,
        Extension(caller): Extension<Caller>,
        Parameters(a): Parameters<AnswerAsk>,
    ) -> Result<Json<Answered>, ToolError> {
        caller.allowed("answer_ask", Access::Approve)?;
        Ok(Json(self.fleets.answer(a, caller).await?))
    }

    /// A session's workspace diff.
    #[tool(
        description = "What a coding session of a run changed: its workspace's unified diff against its base (stored when the run collects its workspaces, at its end)."
    )]
    async fn session_diff(
        &self,
        Extension(caller): Extension<Caller>,
        Parameters(s): Parameters<SessionRef>,
    ) -> Result<Json<Diff>, ToolError> {
        caller.allowed("session_diff", Access::Read)?;
        Ok(Json(self.fleets.diff(s.run, s.session).await?))
    }

    /// Cancel a run.
    #[tool(
        description = "Cancel a run: a queued one never starts, a running one stops (every turn cancelled, journaled with who cancelled it). Needs the `run` role."
    )]
    async fn cancel_run(
        &self,
        Extension(caller): Extension<Caller>,
        Parameters(r): Parameters<RunRef>,
    ) -> Result<Json<RunStatus>, ToolError> {
        caller.allowed("cancel_run", Access::Run)?;
        Ok(Json(self.fleets.cancel(r.run, caller).await?))
    }
}

/// How a call ended: its result's code (`ok`, or the refusal's), and the run it
/// touched.
fn outcome(
    response: &Result<CallToolResponse, ErrorData>,
    run: Option<String>,
) -> (String, Option<String>) {
    let CallToolResponse::Complete(result) = (match response {
        Ok(r) => r,
        Err(e) => return (format!("protocol_{}", e.code.0.unsigned_abs()), run),
    }) else {
        return ("ok".into(), run);
    };
    let field = |k: &str| {
        result
            .structured_content
            .as_ref()
            .and_then(|v| v.get(k))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if result.is_error == Some(true) {
        return (field("code").unwrap_or_else(|| "tool_error".into()), run);
    }
    // A started run is named by the result.
    ("ok".into(), run.or_else(|| field("run")))
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for FleetTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("capfleet", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS.to_owned())
    }

    /// Every tool call: its caller, its span, its count and its journal record.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        // A client's string is no label: an unknown tool counts as `unknown`.
        let tool = if self.tool_router.has_route(&name) {
            name.clone()
        } else {
            "unknown".to_owned()
        };
        let args = request.arguments.as_ref();
        let args_bytes = args.map_or(0, |a| serde_json::to_vec(a).map_or(0, |v| v.len()));
        let run = args
            .and_then(|a| a.get("run"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let caller = self.caller(&context);
        let span = tracing::info_span!(
            "mcp.tool_call",
            otel.name = %format_args!("execute_tool {tool}"),
            otel.kind = "server",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %tool,
            gen_ai.tool.call.id = %context.id,
            gen_ai.tool.type = "function",
            cap.mcp.caller = caller.as_ref().map_or("", |c| c.name.as_str()),
            cap.mcp.args_bytes = args_bytes,
            cap.run.id = Empty,
        );
        let response = match &caller {
            Some(c) => {
                context.extensions.insert(c.clone());
                let tcc = ToolCallContext::new(self, request, context);
                self.tool_router.call(tcc).instrument(span.clone()).await
            }
            None => ToolError::Unauthorized.into_call_tool_result(),
        };
        let (result, run) = outcome(&response, run);
        if let Some(run) = &run {
            span.record("cap.run.id", run.as_str());
        }
        if result != "ok" {
            trace::fail(&span, &result, "the tool call was refused");
        }
        trace::end(&span);
        self.metrics.count(&tool, &result);
        if let Some(run) = run {
            let call = OutsideCall {
                by: caller.map_or_else(String::new, |c| c.name),
                tool,
                args_bytes,
                error: (result != "ok").then_some(result),
            };
            self.fleets.journal(&run, call);
        }
        response
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let runs = self
            .fleets
            .runs()
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let listed = resources::list(self.fleets.as_ref(), &runs).await;
        Ok(ListResourcesResult::with_all_items(listed))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        resources::read(self.fleets.as_ref(), &request.uri)
            .await
            .map(Into::into)
    }
}
