//! One MCP server as a tool source, kept alive by a supervisor task.
//!
//! The supervisor connects (see [`mcp_connect`](super::mcp_connect)), then watches the
//! connection: on `notifications/tools/list_changed` it lists the tools again; when the
//! connection ends (a stdio server exits) it reconnects — respawning the child — with
//! exponential backoff (0.25 s doubling to 30 s, reset after a connection that stayed up 30 s).
//! A server that fails to connect is retried the same way, forever, until the source is
//! closed; its tools join as soon as it comes up. Every change is published on the bus as a
//! [`ToolSourceEvent`] and logged.
//!
//! While a server is reconnecting its last tool list stays offered (so a quick respawn is
//! invisible to the model); calls made meanwhile get an error result saying so. A call in
//! flight when the connection ends gets an error result at once. A call that exceeds the
//! server's `timeout_seconds` gets an error result, and a `notifications/cancelled` goes
//! upstream (rmcp sends it when the pending request is dropped).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::ServiceError;
use rmcp::{Peer, RoleClient};
use serde_json::{Map, Value};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ToolOutcome;
use super::mcp_connect::Target;
use super::mcp_content::outcome_of;
use super::merge::SourceTool;
use super::policy::Policy;
use crate::config::env::expand_env;
use crate::config::{McpServerConfig, TransportKind};
use crate::observe::event::now_us;
use crate::observe::{Bus, Event, ToolSourceEvent, ToolSourceState};

/// Shortest time one connection attempt (handshake and `tools/list`) may take before it is
/// abandoned and retried; slow first starts (`npx -y` downloading a package) need it.
pub const MIN_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// First delay before a retry or respawn; it doubles up to [`MAX_BACKOFF`].
pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// Longest delay between retries.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A connection that stayed up this long resets the backoff.
pub(super) const STABLE_AFTER: Duration = Duration::from_secs(30);

/// Prefix of a failure detail that repeats the previous one (logged at debug only).
pub(super) const REPEAT_MARK: &str = "(again) ";

/// Where a source stands, for the console and tests.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceStatus {
    /// The first attempt is running.
    Connecting,
    /// Connected.
    Up {
        /// Tools offered.
        tools: usize,
        /// The child's process id (stdio).
        pid: Option<u32>,
    },
    /// Not connected; retried in the background.
    Down {
        /// Why the last attempt or connection failed.
        error: String,
        /// Failed attempts since the last success.
        attempts: u32,
    },
    /// Closed on purpose; never retried.
    Closed,
}

/// How a source is run.
#[derive(Debug, Clone)]
pub struct SourceOptions {
    /// Longest one connection attempt may take.
    pub attempt_timeout: Duration,
    /// The session owning the connection (`scope = "session"`), for events.
    pub session: Option<u64>,
    /// Bumped (besides the source's own generation) whenever its tool list is replaced: the
    /// registry's change signal ([`Tools::changes`](super::Tools::changes)).
    pub changes: Option<Arc<tokio::sync::watch::Sender<u64>>>,
}

impl Default for SourceOptions {
    fn default() -> Self {
        Self {
            attempt_timeout: MIN_ATTEMPT_TIMEOUT,
            session: None,
            changes: None,
        }
    }
}

/// One MCP server's tools, kept connected. Cheap to clone; when the last clone is dropped
/// the connection is closed.
#[derive(Clone)]
pub struct McpSource {
    inner: Arc<Inner>,
    _stop_on_drop: Arc<StopOnDrop>,
}

/// Stops the supervisor when the last [`McpSource`] handle goes (the task itself only holds
/// the inner state).
struct StopOnDrop(CancellationToken);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

pub(super) struct Inner {
    pub(super) name: Arc<str>,
    pub(super) transport: TransportKind,
    pub(super) call_timeout: Duration,
    pub(super) target: Target,
    pub(super) attempt_timeout: Duration,
    pub(super) session: Option<u64>,
    pub(super) bus: Bus,
    pub(super) state: RwLock<State>,
    pub(super) generation: AtomicU64,
    pub(super) changes: Option<Arc<tokio::sync::watch::Sender<u64>>>,
    pub(super) first_attempt: CancellationToken,
    pub(super) stop: CancellationToken,
    pub(super) list_changed: Arc<Notify>,
    pub(super) task: Mutex<Option<JoinHandle<()>>>,
}

pub(super) struct State {
    pub(super) status: SourceStatus,
    pub(super) tools: Arc<[SourceTool]>,
    pub(super) link: Option<Link>,
}

/// The live connection calls go through.
#[derive(Clone)]
pub(super) struct Link {
    pub(super) peer: Peer<RoleClient>,
    /// Cancelled when the connection ends.
    pub(super) alive: CancellationToken,
}

impl McpSource {
    /// Checks `config` against `policy`, expands its `${VAR}` placeholders from the
    /// environment and starts connecting in the background.
    ///
    /// # Errors
    /// The server is refused (policy, or a placeholder naming an unset variable); the reason
    /// is published as a `skipped` event and logged before it is returned.
    pub fn start(
        config: &McpServerConfig,
        policy: &Arc<Policy>,
        options: SourceOptions,
        bus: &Bus,
    ) -> Result<McpSource, String> {
        let transport = config.transport_kind();
        let expanded = admit(config, policy).inspect_err(|reason| {
            publish(
                bus,
                &config.name,
                transport,
                options.session,
                ToolSourceState::Skipped,
                0,
                reason.clone(),
            );
        })?;
        let inner = Arc::new(Inner {
            name: config.name.as_str().into(),
            transport,
            call_timeout: Duration::from_secs_f64(config.timeout_seconds),
            target: Target {
                config: expanded,
                http: policy.http_client(),
                handshake_timeout: options.attempt_timeout,
            },
            attempt_timeout: options.attempt_timeout,
            session: options.session,
            bus: bus.clone(),
            state: RwLock::new(State {
                status: SourceStatus::Connecting,
                tools: Arc::from(Vec::new()),
                link: None,
            }),
            generation: AtomicU64::new(0),
            changes: options.changes.clone(),
            first_attempt: CancellationToken::new(),
            stop: CancellationToken::new(),
            list_changed: Arc::new(Notify::new()),
            task: Mutex::new(None),
        });
        let task = tokio::spawn(super::mcp_supervisor::supervise(inner.clone()));
        *inner.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        Ok(McpSource {
            _stop_on_drop: Arc::new(StopOnDrop(inner.stop.clone())),
            inner,
        })
    }

    /// Checks `config` against `policy` and its placeholders against the environment without
    /// connecting; a refusal is published as a `skipped` event and returned.
    ///
    /// # Errors
    /// Why the server is refused.
    pub fn check(config: &McpServerConfig, policy: &Policy, bus: &Bus) -> Result<(), String> {
        admit(config, policy).map(|_| ()).inspect_err(|reason| {
            publish(
                bus,
                &config.name,
                config.transport_kind(),
                None,
                ToolSourceState::Skipped,
                0,
                reason.clone(),
            );
        })
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Its transport.
    pub fn transport(&self) -> TransportKind {
        self.inner.transport
    }

    /// Its tools now, in listing order (through its `tool_filter`).
    pub fn tools(&self) -> Arc<[SourceTool]> {
        self.inner.read().tools.clone()
    }

    /// Increases whenever the tool list changes.
    pub fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }

    /// Where it stands.
    pub fn status(&self) -> SourceStatus {
        self.inner.read().status.clone()
    }

    /// Waits until the first connection attempt has ended (either way).
    pub async fn first_attempt(&self) {
        self.inner.first_attempt.cancelled().await;
    }

    /// Whether the first connection attempt has ended.
    pub fn first_attempt_done(&self) -> bool {
        self.inner.first_attempt.is_cancelled()
    }

    /// Calls the server's tool `original` (its own name for it). Every failure — not
    /// connected, timeout, protocol error, the server going away — is an error outcome.
    pub async fn call(&self, original: &str, arguments: Value) -> ToolOutcome {
        let inner = &self.inner;
        let link = inner.read().link.clone();
        let Some(link) = link else {
            return ToolOutcome::error(inner.unavailable());
        };
        let arguments = match arguments {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return ToolOutcome::error(format!(
                    "the arguments for `{original}` must be a JSON object, got {other}"
                ));
            }
        };
        let params = CallToolRequestParams::new(original.to_string()).with_arguments(arguments);
        let call = tokio::time::timeout(inner.call_timeout, link.peer.call_tool(params));
        tokio::select! {
            biased;
            result = call => match result {
                Ok(Ok(result)) => outcome_of(&result),
                Ok(Err(error)) => ToolOutcome::error(inner.call_error(original, &error)),
                Err(_) => ToolOutcome::error(format!(
                    "tool `{original}` on MCP server `{}` took longer than {:.1} s (its timeout_seconds); \
                     the call was cancelled. Answer without it or try again",
                    inner.name,
                    inner.call_timeout.as_secs_f64()
                )),
            },
            () = link.alive.cancelled() => ToolOutcome::error(format!(
                "MCP server `{}` went away during the call to `{original}`{}; \
                 it is being reconnected. Try again in a moment",
                inner.name,
                if inner.transport == TransportKind::Stdio { " (its process exited)" } else { "" }
            )),
        }
    }

    /// Closes the connection and stops retrying. Waits for the supervisor to finish.
    pub async fn close(&self) {
        self.inner.stop.cancel();
        let task = self
            .inner
            .task
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(task) = task {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }

    /// Publishes that the source missed the start-up budget.
    pub(crate) fn report_missed_budget(&self, budget: Duration) {
        let inner = &self.inner;
        inner.publish(
            ToolSourceState::MissedBudget,
            0,
            format!(
                "not connected within the {:.1} s start-up budget (MCP_CONNECT_TIMEOUT_SECONDS); \
                 the bot started without its tools, which join when it comes up",
                budget.as_secs_f64()
            ),
        );
    }
}

impl Inner {
    pub(super) fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn publish(&self, state: ToolSourceState, tools: usize, detail: String) {
        publish(
            &self.bus,
            &self.name,
            self.transport,
            self.session,
            state,
            tools,
            detail,
        );
    }

    pub(super) fn set_tools(&self, tools: Vec<SourceTool>) {
        self.write().tools = tools.into();
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Some(changes) = &self.changes {
            changes.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    fn unavailable(&self) -> String {
        match &self.read().status {
            SourceStatus::Connecting => format!(
                "MCP server `{}` is still connecting; try again in a moment",
                self.name
            ),
            SourceStatus::Down { error, .. } => format!(
                "MCP server `{}` is not connected ({error}); it is being retried. Answer without it or try again later",
                self.name
            ),
            SourceStatus::Closed => format!("MCP server `{}` is closed", self.name),
            SourceStatus::Up { .. } => format!(
                "MCP server `{}` is between connections; try again",
                self.name
            ),
        }
    }

    fn call_error(&self, tool: &str, error: &ServiceError) -> String {
        match error {
            ServiceError::McpError(e) => format!(
                "MCP server `{}` refused the call to `{tool}`: {} (JSON-RPC error {})",
                self.name, e.message, e.code.0
            ),
            ServiceError::TransportClosed => format!(
                "MCP server `{}` closed the connection during the call to `{tool}`; it is being reconnected. \
                 Try again in a moment",
                self.name
            ),
            ServiceError::TransportSend(e) => format!(
                "MCP server `{}` could not be reached for the call to `{tool}` ({}); it may be down \
                 or restarting. Try again in a moment",
                self.name,
                super::mcp_connect::chain(e)
            ),
            other => format!(
                "the call to `{tool}` on MCP server `{}` failed: {other}",
                self.name
            ),
        }
    }
}

/// Checks the policy and expands placeholders: the config to connect with, or why not.
fn admit(config: &McpServerConfig, policy: &Policy) -> Result<McpServerConfig, String> {
    let lookup = |name: &str| std::env::var(name).ok();
    let mut expanded = config.clone();
    match config.transport_kind() {
        TransportKind::Stdio => {
            let command = config.command.as_deref().unwrap_or_default();
            policy.check_stdio(command, &config.args)?;
            for (key, value) in &mut expanded.env {
                *value = expand_env(value, &lookup).map_err(|e| format!("env.{key}: {e}"))?;
            }
        }
        TransportKind::Http | TransportKind::Sse => {
            let url = expand_env(config.url.as_deref().unwrap_or_default(), &lookup)
                .map_err(|e| format!("url: {e}"))?;
            policy.check_url(&url)?;
            expanded.url = Some(url);
            for (key, value) in &mut expanded.headers {
                *value = expand_env(value, &lookup).map_err(|e| format!("headers.{key}: {e}"))?;
            }
        }
    }
    Ok(expanded)
}

fn publish(
    bus: &Bus,
    server: &str,
    transport: TransportKind,
    session: Option<u64>,
    state: ToolSourceState,
    tools: usize,
    detail: String,
) {
    let scope = session
        .map(|s| format!(", session {s}"))
        .unwrap_or_default();
    let what = match state {
        ToolSourceState::Connected => "connected",
        ToolSourceState::Refreshed => "tool list refreshed",
        ToolSourceState::Failed => "failed",
        ToolSourceState::MissedBudget => "missed the start-up budget",
        ToolSourceState::Disconnected => "disconnected",
        ToolSourceState::Skipped => "skipped",
        ToolSourceState::Closed => "closed",
    };
    let line = format!(
        "MCP server `{server}` ({}{scope}) {what}: {detail}",
        transport.as_str()
    );
    match state {
        ToolSourceState::Connected | ToolSourceState::Refreshed => {
            tracing::info!(tools, "{line}")
        }
        ToolSourceState::Closed => tracing::debug!("{line}"),
        // A server that keeps failing the same way is logged once at warn, then quietly.
        ToolSourceState::Failed if detail.starts_with(REPEAT_MARK) => {
            tracing::debug!("{}", line.replacen(REPEAT_MARK, "", 1))
        }
        _ => tracing::warn!("{line}"),
    }
    let detail = detail
        .strip_prefix(REPEAT_MARK)
        .map(str::to_string)
        .unwrap_or(detail);
    bus.publish_with(|| {
        Event::ToolSource(ToolSourceEvent {
            server: server.to_string(),
            transport: transport.as_str().into(),
            session,
            state,
            tools,
            detail,
            at_us: now_us(),
        })
    });
}
