//! One MCP server as a tool source: the tools view over the [`mcp`](crate::mcp) client stack.
//! The server's *listing* is its tools through the entry's `tool_filter`, renamed for OpenAI
//! and with `$ref`s inlined; it is replaced on `tools/list_changed` and kept offered while the
//! server reconnects (calls meanwhile, or in flight when it goes, get an error outcome at once).
//! A call past `timeout_seconds` is an error outcome and rmcp tells the server
//! `notifications/cancelled`. Every change is a [`ToolSourceEvent`] on the bus and a log line.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{CallToolRequestParams, ClientConfig, Tool};
use rmcp::service::{NotificationContext, QuitReason, ServiceError};
use rmcp::{ClientHandler, Peer, RoleClient};
use serde_json::{Map, Value};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::limits;
use super::mcp_content::outcome_of;
use super::merge::SourceTool;
use super::openai_shape::names::NameMap;
use super::openai_shape::schema;
use super::policy::{GuardedClient, Policy};
use super::{ToolOutcome, Unanswered};
use crate::config::env::expand_env;
use crate::config::{McpServerConfig, ToolFilter, TransportKind};
use crate::mcp::clock;
use crate::mcp::connect::{self, ConnectError, Dial, Session, chain, client_info};
use crate::mcp::stdio_child::{MAX_LINE_BYTES, reply_too_large};
use crate::mcp::supervisor::{self, Down, Failure, Plan, RESTART, Watcher};
use crate::observe::event::now_us;
use crate::observe::{Bus, Event, ToolSourceEvent, ToolSourceState};

/// Shortest time one connection attempt (handshake and `tools/list`) may take before it is
/// abandoned and retried; slow first starts (`npx -y` downloading a package) need it.
pub(crate) const MIN_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// Prefix of a failure detail that repeats the previous one (logged at debug only; the
/// console counts it on the earlier entry).
pub const REPEAT_MARK: &str = "(again) ";

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
    pub(crate) attempt_timeout: Duration,
    /// The session owning the connection (`scope = "session"`), for events.
    pub session: Option<u64>,
    /// Bumped (besides the source's own generation) whenever its tool list is replaced: the
    /// registry's change signal ([`Tools::changes`](super::Tools::changes)).
    pub changes: Option<Arc<tokio::sync::watch::Sender<u64>>>,
    /// The name the client gives in `initialize` (`turnscope`: the bot is the client).
    pub client_name: &'static str,
}

impl Default for SourceOptions {
    fn default() -> Self {
        Self {
            attempt_timeout: MIN_ATTEMPT_TIMEOUT,
            session: None,
            changes: None,
            client_name: "turnscope",
        }
    }
}

impl SourceOptions {
    /// The same options with the client named `name` in `initialize`.
    pub fn with_client_name(mut self, name: &'static str) -> Self {
        self.client_name = name;
        self
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
    /// The entry with its placeholders expanded.
    pub(super) config: McpServerConfig,
    pub(super) http: GuardedClient,
    pub(super) dial: Dial,
    pub(super) attempt_timeout: Duration,
    /// The name the client gives in `initialize`.
    pub(super) client_name: &'static str,
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
    /// Tools the server listed whose input schema cannot be used: (name, why).
    pub(super) unusable: Arc<[(String, String)]>,
    pub(super) link: Option<Link>,
    /// Why the connection was let go from this side (a call could not reach the server), said
    /// when it is reported down.
    pub(super) lost: Option<String>,
    /// The server's names of tools it refused to run except as MCP tasks: left out of its
    /// listings until its next session (which may be a newer server).
    pub(super) needs_task: Vec<String>,
    /// The last stderr lines of the stdio process connected now, to say why it ended.
    pub(super) stderr: Option<connect::StderrTail>,
}

/// Why a tool the server runs only as an MCP task is not offered.
const NEEDS_TASK: &str = "the server runs it only as an MCP task (task augmentation, \
                          `taskSupport: required`), which turnscope's MCP client does not do";

/// Whether `message` is a server's refusal of a tool call that was not task-augmented (the
/// 2025-11-25 tasks: a tool whose `execution.taskSupport` is `required`, a field rmcp's `Tool`
/// does not keep, so this is only learnt from the refusal).
fn refuses_untasked(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    message.contains("requires task augmentation")
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
    ) -> Result<McpSource, Refused> {
        let transport = config.transport_kind();
        let expanded = admit(config, policy).inspect_err(|reason| {
            publish(
                bus,
                &config.name,
                transport,
                options.session,
                ToolSourceState::Skipped,
                0,
                reason.to_string(),
            );
        })?;
        let http = policy.http_client();
        let server: Arc<str> = config.name.as_str().into();
        let inner = Arc::new(Inner {
            name: server.clone(),
            transport,
            call_timeout: Duration::from_secs_f64(config.timeout_seconds),
            config: expanded,
            http: http.clone(),
            dial: Dial {
                http: Some(http.client.clone()),
                sse_timeout: options.attempt_timeout,
                stderr: Arc::new(move |line: &str| {
                    tracing::debug!(target: "turnscope::mcp_stderr", server = %server, "{line}");
                }),
                stderr_tail: Default::default(),
            },
            attempt_timeout: options.attempt_timeout,
            client_name: options.client_name,
            session: options.session,
            bus: bus.clone(),
            state: RwLock::new(State {
                status: SourceStatus::Connecting,
                tools: Arc::from(Vec::new()),
                unusable: Arc::from(Vec::new()),
                link: None,
                lost: None,
                needs_task: Vec::new(),
                stderr: None,
            }),
            generation: AtomicU64::new(0),
            changes: options.changes.clone(),
            first_attempt: CancellationToken::new(),
            stop: CancellationToken::new(),
            list_changed: Arc::new(Notify::new()),
            task: Mutex::new(None),
        });
        let plan = Plan {
            attempt_timeout: options.attempt_timeout,
            restart: RESTART,
            clock: clock::system(),
        };
        let task = tokio::spawn(supervisor::supervise(
            inner.clone(),
            plan,
            inner.stop.clone(),
        ));
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
    pub fn check(config: &McpServerConfig, policy: &Policy, bus: &Bus) -> Result<(), Refused> {
        admit(config, policy).map(|_| ()).inspect_err(|reason| {
            publish(
                bus,
                &config.name,
                config.transport_kind(),
                None,
                ToolSourceState::Skipped,
                0,
                reason.to_string(),
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

    /// The tools it listed that were left out because their input schema cannot be used,
    /// each with why (the registry reports them with the other skipped tools).
    pub fn unusable(&self) -> Arc<[(String, String)]> {
        self.inner.read().unusable.clone()
    }

    /// Increases whenever the tool list changes.
    pub(crate) fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }

    /// Where it stands.
    pub fn status(&self) -> SourceStatus {
        self.inner.read().status.clone()
    }

    /// Why no call can go out now, as a caller (a model, a client) is told it.
    pub fn not_serving_why(&self) -> String {
        self.inner.unavailable().1
    }

    /// Waits until the first connection attempt has ended (either way).
    pub async fn first_attempt(&self) {
        self.inner.first_attempt.cancelled().await;
    }

    /// Whether the first connection attempt has ended.
    pub(crate) fn first_attempt_done(&self) -> bool {
        self.inner.first_attempt.is_cancelled()
    }

    /// Calls the server's tool `original` (its own name for it). Every failure — not
    /// connected, timeout, protocol error, the server going away — is an error outcome.
    pub async fn call(&self, original: &str, arguments: Value) -> ToolOutcome {
        let inner = &self.inner;
        let link = inner.read().link.clone();
        let Some(link) = link else {
            let (detail, text) = inner.unavailable();
            return ToolOutcome::unanswered(
                Unanswered::Unreachable {
                    server: inner.name.to_string(),
                    detail,
                },
                text,
            );
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
                Ok(Ok(result)) => {
                    let outcome = outcome_of(&result);
                    // The TypeScript SDK answers such a call with an error result rather than
                    // a JSON-RPC error.
                    if outcome.is_error && refuses_untasked(&outcome.text) {
                        inner.refused_untasked(original)
                    } else {
                        outcome
                    }
                }
                Ok(Err(error)) => inner.call_failed(original, &error, &link).await,
                Err(_) => ToolOutcome::unanswered(
                    Unanswered::timed_out(
                        inner.call_timeout,
                        format!("timeout_seconds of [[mcp_servers]] {}", inner.name),
                    ),
                    format!(
                        "tool `{original}` on MCP server `{}` took longer than {:.1} s (its timeout_seconds); \
                         the call was cancelled. Answer without it or try again",
                        inner.name,
                        inner.call_timeout.as_secs_f64()
                    ),
                ),
            },
            () = link.alive.cancelled() => ToolOutcome::unanswered(
                Unanswered::Lost {
                    server: inner.name.to_string(),
                    detail: if inner.transport == TransportKind::Stdio {
                        "its process exited during the call".into()
                    } else {
                        "the connection ended during the call".into()
                    },
                },
                format!(
                    "MCP server `{}` went away during the call to `{original}`{}; \
                     it is being reconnected. The tool may have run: check before calling it \
                     again if it changes anything",
                    inner.name,
                    if inner.transport == TransportKind::Stdio { " (its process exited)" } else { "" }
                ),
            ),
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

    pub(super) fn set_tools(
        &self,
        tools: Vec<SourceTool>,
        unusable: Vec<(String, String)>,
    ) -> usize {
        let offered = store_tools(&mut self.write(), tools, unusable);
        self.tools_changed();
        offered
    }

    /// Tells the registry the tools changed.
    fn tools_changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Some(changes) = &self.changes {
            changes.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// The server refused to run its tool `original` except as an MCP task: said so, and the
    /// tool is left out of its listings until its next session.
    fn refused_untasked(&self, original: &str) -> ToolOutcome {
        self.leave_out_needing_task(original);
        ToolOutcome::unanswered(
            Unanswered::Refused {
                server: self.name.to_string(),
                detail: format!("{NEEDS_TASK}; it is no longer offered"),
            },
            format!(
                "MCP server `{}` refused the call to `{original}`: {NEEDS_TASK}. The tool is no \
                 longer offered; answer without it",
                self.name
            ),
        )
    }

    fn leave_out_needing_task(&self, original: &str) {
        {
            // Under one lock: a list that came meanwhile (list_changed) is not overwritten.
            let mut state = self.write();
            if state.needs_task.iter().any(|t| t == original) {
                return;
            }
            state.needs_task.push(original.to_string());
            let (tools, unusable) = (state.tools.to_vec(), state.unusable.to_vec());
            store_tools(&mut state, tools, unusable);
        }
        self.tools_changed();
    }

    /// Why no call can go out now: (for a person, for the model).
    fn unavailable(&self) -> (String, String) {
        match &self.read().status {
            SourceStatus::Connecting => (
                "still connecting".into(),
                format!(
                    "MCP server `{}` is still connecting; try again in a moment",
                    self.name
                ),
            ),
            SourceStatus::Down { error, .. } => (
                format!("not connected: {error}"),
                format!(
                    "MCP server `{}` is not connected ({error}); it is being retried. Answer without it or try again later",
                    self.name
                ),
            ),
            SourceStatus::Closed => (
                "closed".into(),
                format!("MCP server `{}` is closed", self.name),
            ),
            SourceStatus::Up { .. } => (
                "between connections".into(),
                format!(
                    "MCP server `{}` is between connections; try again",
                    self.name
                ),
            ),
        }
    }

    /// A call the transport or the server failed. A connection that can no longer carry
    /// requests (an HTTP server gone, a stream closed) is let go, so the supervisor says so
    /// and reconnects; otherwise an HTTP source stays "connected" to nothing until the next
    /// call fails too.
    async fn call_failed(&self, tool: &str, error: &ServiceError, link: &Link) -> ToolOutcome {
        let server = self.name.to_string();
        match error {
            ServiceError::McpError(e) if refuses_untasked(&e.message) => {
                self.refused_untasked(tool)
            }
            ServiceError::McpError(e) if reply_too_large(e).is_some() => {
                let size = reply_too_large(e).unwrap_or_default();
                limits::cap_response_dropped(size, MAX_LINE_BYTES)
            }
            ServiceError::McpError(e) => ToolOutcome::unanswered(
                Unanswered::Refused {
                    server,
                    detail: format!("{} (JSON-RPC error {})", e.message, e.code.0),
                },
                format!(
                    "MCP server `{}` refused the call to `{tool}`: {} (JSON-RPC error {})",
                    self.name, e.message, e.code.0
                ),
            ),
            ServiceError::TransportClosed => {
                self.let_go(link, "it closed the connection during a call");
                ToolOutcome::unanswered(
                    Unanswered::Lost {
                        server,
                        detail: if self.transport == TransportKind::Stdio {
                            "its process closed its output during the call".into()
                        } else {
                            "it closed the connection during the call".into()
                        },
                    },
                    format!(
                        "MCP server `{}` closed the connection during the call to `{tool}`; it is being reconnected. \
                         The tool may have run: check before calling it again if it changes anything",
                        self.name
                    ),
                )
            }
            ServiceError::TransportSend(e) => {
                let mut detail = chain(e);
                // The request could not be sent at all (reqwest's words for a connection that
                // failed): the link is dead, let it go now, before anything else can drop this
                // call. An HTTP status (a 429, a proxy's 502) is one bad reply on a live
                // session, and is not.
                let unsent = detail.contains("error sending request");
                if unsent {
                    self.let_go(link, &format!("a call could not reach it ({detail})"));
                }
                // rmcp's words drop the cause: ask the network what it was (2 s at most; the
                // call has failed already).
                if let Some(url) = self.config.url.as_deref()
                    && unsent
                    && let Some(plain) = connect::unreached_reason(url).await
                {
                    detail = plain;
                }
                ToolOutcome::unanswered(
                    Unanswered::Unreachable {
                        server,
                        detail: detail.clone(),
                    },
                    format!(
                        "MCP server `{}` could not be reached for the call to `{tool}` ({detail}); it may be down \
                         or restarting. Try again in a moment",
                        self.name,
                    ),
                )
            }
            other => ToolOutcome::error(format!(
                "the call to `{tool}` on MCP server `{}` failed: {other}",
                self.name
            )),
        }
    }

    /// Ends the connection `link` (once), saying `why` when the source reports it down. The
    /// check and the reason are written under the state's lock, so a reason is never left
    /// for a later session's end (`opened` clears it too).
    fn let_go(&self, link: &Link, why: &str) {
        let mut state = self.write();
        if link.alive.is_cancelled() {
            return;
        }
        state.lost = Some(why.to_string());
        link.alive.cancel();
    }
}

/// The rmcp client handler of a source: it wakes the supervisor on
/// `notifications/tools/list_changed`.
#[derive(Clone)]
pub(crate) struct SourceClient {
    list_changed: Arc<Notify>,
    name: &'static str,
}

impl ClientHandler for SourceClient {
    fn get_info(&self) -> ClientConfig {
        client_info(self.name)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.notify_one();
    }
}

impl Watcher for Inner {
    type Client = SourceClient;

    fn open(
        &self,
        ct: CancellationToken,
    ) -> BoxFuture<'_, Result<Session<SourceClient>, ConnectError>> {
        Box::pin(async move {
            let client = SourceClient {
                list_changed: self.list_changed.clone(),
                name: self.client_name,
            };
            connect::open(&self.config, client, &self.dial, ct)
                .await
                // A refused redirect hides behind a generic HTTP error; say what really happened.
                .map_err(|error| match self.http.take_refusal() {
                    Some(refusal) => ConnectError::Refused {
                        refusal,
                        source: Box::new(error),
                    },
                    None => error,
                })
        })
    }

    fn opened<'a>(
        &'a self,
        session: &'a Session<SourceClient>,
        alive: CancellationToken,
    ) -> BoxFuture<'a, Result<(), Failure>> {
        Box::pin(async move {
            let peer = session.service.peer().clone();
            let listed = peer
                .list_all_tools()
                .await
                .map_err(|e| Failure::Listing(chain(&e)))?;
            let (tools, unusable) = prepare_tools(&listed, self.config.tool_filter.as_ref());
            let count = tools.len();
            let pid = session.pid;
            let server_name = peer
                .peer_info()
                .and_then(|i| i.server_info.clone())
                // A server that gives no version is named alone ("py-interop , pid 7945").
                .map(|i| format!("{} {}", i.name, i.version).trim_end().to_string())
                .unwrap_or_else(|| "unknown server".into());
            {
                let mut state = self.write();
                state.status = SourceStatus::Up { tools: count, pid };
                state.link = Some(Link { peer, alive });
                state.lost = None;
                state.stderr = session.stderr.clone();
                // A new session may be a new version of the server: its tools are offered
                // again until one refuses again.
                state.needs_task.clear();
            }
            self.set_tools(tools, unusable);
            // Only now: whoever waited for the first attempt sees the server up with its tools.
            self.first_attempt.cancel();
            self.publish(
                ToolSourceState::Connected,
                count,
                format!(
                    "{server_name}{}",
                    pid.map(|p| format!(", pid {p}")).unwrap_or_default()
                ),
            );
            Ok(())
        })
    }

    fn list_changed(&self) -> Option<Arc<Notify>> {
        Some(self.list_changed.clone())
    }

    fn refresh<'a>(&'a self, peer: &'a Peer<RoleClient>) -> BoxFuture<'a, ()> {
        Box::pin(self.refresh_tools(peer))
    }

    fn down(&self, down: Down, delay: Duration) {
        let (state, tools, detail, error, attempts) = match down {
            Down::Lost { quit } => {
                let let_go = self.write().lost.take();
                let mut reason = match quit {
                    _ if let_go.is_some() => let_go.unwrap_or_default(),
                    Ok(QuitReason::Closed) if self.transport == TransportKind::Stdio => {
                        "the server process exited (or closed its stdout)".to_string()
                    }
                    Ok(QuitReason::Closed) => "the server closed the connection".to_string(),
                    Ok(other) => format!("the connection ended ({other:?})"),
                    Err(e) => format!("the connection task failed ({e})"),
                };
                // A stdio server's last words say why it ended, when it wrote any (whether a
                // call in flight or the supervisor saw the end first).
                if self.transport == TransportKind::Stdio {
                    let said = self.read().stderr.as_ref().map(|t| t.text());
                    if let Some(said) = said.filter(|s| !s.is_empty()) {
                        reason.push_str(&format!("; its stderr ended with: {said}"));
                    }
                }
                let again = if self.transport == TransportKind::Stdio {
                    "respawning"
                } else {
                    "reconnecting"
                };
                let detail = format!("{reason}; {again} in {:.2} s", delay.as_secs_f64());
                let tools = self.read().tools.len();
                (ToolSourceState::Disconnected, tools, detail, reason, 0)
            }
            Down::Failed {
                failure,
                attempts,
                repeated,
            } => {
                let mut error = failure.to_string();
                // An attempt that timed out was dropped with its own report: its child's last
                // words usually say why it hung (a key not set, a prompt waiting for input).
                if matches!(failure, Failure::TimedOut(_)) {
                    // The tool sources' attempts are as long as the start-up budget, at least
                    // MIN_ATTEMPT_TIMEOUT.
                    error.push_str(&format!(
                        " (MCP_CONNECT_TIMEOUT_SECONDS, at least {} s)",
                        MIN_ATTEMPT_TIMEOUT.as_secs()
                    ));
                    let said = self.dial.stderr_tail.text();
                    if !said.is_empty() {
                        error.push_str(&format!(". Its stderr ended with: {said}"));
                    }
                }
                let again = if repeated { REPEAT_MARK } else { "" };
                let detail = format!("{again}{error}; retrying in {:.2} s", delay.as_secs_f64());
                (ToolSourceState::Failed, 0, detail, error, attempts)
            }
        };
        self.publish(state, tools, detail);
        {
            let mut state = self.write();
            state.status = SourceStatus::Down { error, attempts };
            state.link = None;
        }
        self.first_attempt.cancel();
    }

    fn closed(&self) {
        {
            let mut state = self.write();
            state.status = SourceStatus::Closed;
            state.link = None;
        }
        self.first_attempt.cancel();
        self.publish(ToolSourceState::Closed, 0, "closed".into());
    }
}

/// Keeps `tools` (less those the server runs only as tasks, added to `unusable`) as the
/// source's list, and its status's count; returns the count.
fn store_tools(
    state: &mut State,
    mut tools: Vec<SourceTool>,
    mut unusable: Vec<(String, String)>,
) -> usize {
    if !state.needs_task.is_empty() {
        tools.retain(|tool| {
            let keep = !state.needs_task.contains(&tool.original);
            if !keep {
                unusable.push((tool.name.clone(), NEEDS_TASK.into()));
            }
            keep
        });
    }
    let offered = tools.len();
    if let SourceStatus::Up { tools: count, .. } = &mut state.status {
        *count = offered;
    }
    state.tools = tools.into();
    state.unusable = unusable.into();
    offered
}

impl Inner {
    /// Lists the tools again after `notifications/tools/list_changed`.
    async fn refresh_tools(&self, peer: &Peer<RoleClient>) {
        match tokio::time::timeout(self.attempt_timeout, peer.list_all_tools()).await {
            Ok(Ok(listed)) => {
                let (tools, unusable) = prepare_tools(&listed, self.config.tool_filter.as_ref());
                let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
                let detail = names.join(", ");
                let count = self.set_tools(tools, unusable);
                self.publish(ToolSourceState::Refreshed, count, detail);
            }
            Ok(Err(e)) => {
                tracing::warn!(server = %self.name, error = %e, "tools/list after list_changed failed; keeping the old list")
            }
            Err(_) => {
                tracing::warn!(server = %self.name, "tools/list after list_changed timed out; keeping the old list")
            }
        }
    }
}

/// A server's listing as the model will see it: through its `tool_filter`, names made valid
/// for OpenAI (mapped back on call), `$ref`s inlined. A tool whose schema cannot be converted
/// is left out (named, with why, in the second list); the others stay.
pub(crate) fn prepare_tools(
    listed: &[Tool],
    filter: Option<&ToolFilter>,
) -> (Vec<SourceTool>, Vec<(String, String)>) {
    let admitted: Vec<&Tool> = listed
        .iter()
        .filter(|t| filter.is_none_or(|f| f.admits(&t.name)))
        .collect();
    let names = NameMap::new(admitted.iter().map(|t| t.name.as_ref()));
    let limits = schema::Limits::default();
    let mut tools = Vec::with_capacity(admitted.len());
    let mut rejected = Vec::new();
    for tool in admitted {
        let raw = Value::Object((*tool.input_schema).clone());
        match schema::to_openai_parameters(Some(&raw), &limits) {
            Ok(parameters) => tools.push(SourceTool {
                name: names
                    .openai_name(&tool.name)
                    .unwrap_or(&tool.name)
                    .to_string(),
                original: tool.name.to_string(),
                description: tool
                    .description
                    .as_deref()
                    .or(tool.title.as_deref())
                    .unwrap_or_default()
                    .to_string(),
                parameters,
            }),
            Err(e) => rejected.push((tool.name.to_string(), e.to_string())),
        }
    }
    (tools, rejected)
}

/// Checks the policy and expands placeholders: the config to connect with, or why not.
/// Why a server is not started at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Occurs when the policy refuses the server (URL not allowed, stdio off, command not
    /// on the allowlist); the policy's reason.
    #[error("{0}")]
    Policy(String),
    /// Occurs when a `${VAR}` placeholder in `field` (`url`, `env.KEY`, `headers.KEY`)
    /// cannot be expanded (an unset variable).
    #[error("{field}: {reason}")]
    Placeholder {
        /// The entry's field.
        field: String,
        /// What is wrong with the placeholder.
        reason: String,
    },
}

fn placeholder(field: String) -> impl FnOnce(String) -> Refused {
    move |reason| Refused::Placeholder { field, reason }
}

fn admit(config: &McpServerConfig, policy: &Policy) -> Result<McpServerConfig, Refused> {
    let lookup = |name: &str| std::env::var(name).ok();
    let mut expanded = config.clone();
    match config.transport_kind() {
        TransportKind::Stdio => {
            let command = config.command.as_deref().unwrap_or_default();
            policy
                .check_stdio(command, &config.args)
                .map_err(Refused::Policy)?;
            for (key, value) in &mut expanded.env {
                *value = expand_env(value, &lookup).map_err(placeholder(format!("env.{key}")))?;
            }
        }
        TransportKind::Http | TransportKind::Sse => {
            let url = expand_env(config.url.as_deref().unwrap_or_default(), &lookup)
                .map_err(placeholder("url".into()))?;
            policy.check_url(&url).map_err(Refused::Policy)?;
            expanded.url = Some(url);
            for (key, value) in &mut expanded.headers {
                *value =
                    expand_env(value, &lookup).map_err(placeholder(format!("headers.{key}")))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> Tool {
        let Value::Object(map) = schema else {
            panic!("object schema")
        };
        Tool::new(name.to_string(), format!("{name} tool"), Arc::new(map))
    }

    #[test]
    fn filter_names_and_schemas() {
        let listed = [
            tool(
                "read_file",
                json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            ),
            tool("self.audio.set_volume", json!({"type": "object"})),
            tool(
                "loop",
                json!({"$ref": "#/$defs/A", "$defs": {"A": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}}}),
            ),
            tool("write_file", json!({"type": "object"})),
        ];
        let filter = ToolFilter {
            allow: vec![],
            deny: vec!["write_file".into()],
        };
        let (tools, rejected) = prepare_tools(&listed, Some(&filter));
        let names: Vec<(&str, &str)> = tools
            .iter()
            .map(|t| (t.name.as_str(), t.original.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("read_file", "read_file"),
                ("self_audio_set_volume", "self.audio.set_volume")
            ]
        );
        assert_eq!(rejected.len(), 1);
        assert_eq!(rejected[0].0, "loop", "{rejected:?}");
        assert_eq!(tools[0].description, "read_file tool");
    }

    #[test]
    fn an_allow_list_hides_the_rest_and_deny_beats_allow() {
        let listed = [
            tool("a", json!({"type": "object"})),
            tool("b", json!({"type": "object"})),
        ];
        let only_a = ToolFilter {
            allow: vec!["a".into()],
            deny: vec![],
        };
        let (tools, _) = prepare_tools(&listed, Some(&only_a));
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].name, "a");
        let both = ToolFilter {
            allow: vec!["a".into(), "b".into()],
            deny: vec!["a".into()],
        };
        let (tools, _) = prepare_tools(&listed, Some(&both));
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].name, "b");
        let empty = ToolFilter::default();
        assert_eq!(prepare_tools(&listed, Some(&empty)).0.len(), 2);
    }

    /// A stdio server that hangs before the handshake is reported with the attempt's limit
    /// named and its last stderr lines (tour I: only "no answer within 30.0 s").
    #[tokio::test]
    async fn a_server_hanging_before_the_handshake_is_reported_with_its_stderr() {
        let config = McpServerConfig::stdio(
            "hangs",
            "sh",
            &[
                "-c",
                "echo 'config error: FOO_API_KEY is not set' >&2; exec sleep 300",
            ],
        );
        let bus = Bus::default();
        let mut events = bus.subscribe();
        let options = SourceOptions {
            attempt_timeout: Duration::from_millis(600),
            ..SourceOptions::default()
        };
        let source = McpSource::start(&config, &Arc::new(Policy::default()), options, &bus)
            .expect("admitted");
        let detail = loop {
            let event = tokio::time::timeout(Duration::from_secs(20), events.recv())
                .await
                .expect("the attempt fails")
                .expect("the bus is open");
            if let Event::ToolSource(s) = &*event
                && s.state == ToolSourceState::Failed
            {
                break s.detail.clone();
            }
        };
        assert!(
            detail.contains("MCP_CONNECT_TIMEOUT_SECONDS")
                && detail.contains("Its stderr ended with: config error: FOO_API_KEY is not set"),
            "{detail}"
        );
        drop(source);
    }
}
