//! One MCP server as an [`Upstream`]: the Xiaozhi view over the [`mcp`](crate::mcp) client
//! stack. A request in flight when the server dies fails at once with [`UpstreamError::Died`];
//! while it is down `tools/list` is served from the last list. Requests keep their params as
//! raw JSON (rmcp custom requests), so fields rmcp does not model reach the server; its
//! progress reports reach the request's sink (see [`progress`](super::progress)).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use rmcp::model::{
    CancelledNotificationParam, ClientConfig, ClientRequest, CustomRequest,
    ProgressNotificationParam, ServerPeerInfo,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, ServiceError};
use rmcp::{ClientHandler, Peer, RoleClient};
use serde_json::Value;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::progress::{ProgressRoutes, ProgressSink};
use super::upstream::{ServerFacts, Upstream, UpstreamChange, UpstreamError, UpstreamStatus};
use crate::config::McpServerConfig;
use crate::mcp::backoff::ReconnectPolicy;
use crate::mcp::clock::{self, Clock};
use crate::mcp::connect::{self, ConnectError, Dial, Session, client_info};
use crate::mcp::spec;
use crate::mcp::supervisor::{self, CLOSE_GRACE, Down, Plan, RESTART, Watcher};
use crate::observe::redact::redact;

/// How long a session may take to open (spawn + MCP handshake) before the attempt counts
/// as failed.
pub(crate) const OPEN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long `tools/list` waits for a server that is still starting.
const STARTING_WAIT: Duration = Duration::from_secs(10);

/// A freshly opened session.
pub type Opened = Session<RelayClient>;

/// Opens one session with the given client handler (called again for every restart).
pub type Opener =
    Arc<dyn Fn(RelayClient) -> BoxFuture<'static, Result<Opened, ConnectError>> + Send + Sync>;

/// An [`McpUpstream`] for the server `config`, started now; `name` labels the child's log
/// lines. The bridge filters and times calls itself, so the entry's own filter and call
/// timeout are not used here.
pub fn mcp_upstream(
    name: &str,
    server: impl Into<McpServerConfig>,
    settings: UpstreamSettings,
) -> McpUpstream {
    let mut config = server.into();
    config.name = name.to_string();
    config.tool_filter = None;
    let label = spec::label(&config);
    McpUpstream::start(label, opener(name, config), settings)
}

/// The [`Opener`] for the server `config` (placeholders already expanded).
pub(crate) fn opener(name: &str, config: McpServerConfig) -> Opener {
    let name: Arc<str> = Arc::from(name);
    let dial = Dial {
        http: None,
        sse_timeout: OPEN_TIMEOUT,
        stderr: Arc::new(move |line: &str| {
            tracing::info!(target: "turnscope::bridge::xiaozhi::child", bridge = %name, "{}", redact(line));
        }),
        stderr_tail: Default::default(),
    };
    let config = Arc::new(config);
    Arc::new(move |handler: RelayClient| {
        let (config, dial) = (config.clone(), dial.clone());
        Box::pin(
            async move { connect::open(&config, handler, &dial, CancellationToken::new()).await },
        )
    })
}

/// The rmcp client handler of a relay: announces itself, passes `tools/list_changed` on and
/// routes progress reports to the requests in flight.
#[derive(Clone)]
pub struct RelayClient {
    info: ClientConfig,
    changes: broadcast::Sender<UpstreamChange>,
    progress: ProgressRoutes,
}

impl ClientHandler for RelayClient {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changes.send(UpstreamChange::ToolsChanged);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.deliver(params);
    }
}

/// Tunables of an [`McpUpstream`].
#[derive(Clone)]
pub struct UpstreamSettings {
    /// Delays between restarts.
    pub restart: ReconnectPolicy,
    /// The clock restarts wait on.
    pub clock: Arc<dyn Clock>,
    /// The client name announced to the server.
    pub client_name: String,
}

impl Default for UpstreamSettings {
    fn default() -> Self {
        Self {
            restart: RESTART,
            clock: clock::system(),
            client_name: "turnscope-xiaozhi-bridge".into(),
        }
    }
}

#[derive(Clone)]
struct Live {
    status: UpstreamStatus,
    peer: Option<Peer<RoleClient>>,
    died: CancellationToken,
    attempts: u64,
    /// The open session's progress routes.
    progress: ProgressRoutes,
}

struct Inner {
    label: String,
    opener: Opener,
    settings: UpstreamSettings,
    live: watch::Sender<Live>,
    tools: Mutex<Option<Arc<Vec<Value>>>>,
    facts: Mutex<Option<ServerFacts>>,
    changes: broadcast::Sender<UpstreamChange>,
    stop: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
    /// Sessions opened so far.
    sessions: AtomicU64,
}

/// One MCP server, restarted when it dies.
#[derive(Clone)]
pub struct McpUpstream {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl McpUpstream {
    /// Starts supervising sessions opened by `opener`; `label` names the server in logs.
    pub fn start(label: String, opener: Opener, settings: UpstreamSettings) -> Self {
        let (live, _) = watch::channel(Live {
            status: UpstreamStatus::Starting,
            peer: None,
            died: CancellationToken::new(),
            attempts: 0,
            progress: ProgressRoutes::default(),
        });
        // 16: the socket only needs to learn that the list changed; a lagging receiver
        // relists once, so older changes may be dropped.
        let (changes, _) = broadcast::channel(16);
        let inner = Arc::new(Inner {
            label,
            opener,
            settings,
            live,
            tools: Mutex::new(None),
            facts: Mutex::new(None),
            changes,
            stop: CancellationToken::new(),
            task: Mutex::new(None),
            sessions: AtomicU64::new(0),
        });
        let plan = Plan {
            attempt_timeout: OPEN_TIMEOUT,
            restart: inner.settings.restart,
            clock: inner.settings.clock.clone(),
        };
        let task = tokio::spawn(supervisor::supervise(
            inner.clone(),
            plan,
            inner.stop.clone(),
        ));
        *lock(&inner.task) = Some(task);
        Self { inner }
    }

    fn live(&self) -> Live {
        self.inner.live.borrow().clone()
    }
}

fn facts_of(info: &ServerPeerInfo) -> ServerFacts {
    ServerFacts {
        server_info: info
            .server_info
            .as_ref()
            .and_then(|i| serde_json::to_value(i).ok())
            .unwrap_or(Value::Null),
        capabilities: serde_json::to_value(&info.capabilities).unwrap_or(Value::Null),
        instructions: info.instructions.clone(),
    }
}

impl Watcher for Inner {
    type Client = RelayClient;

    fn open(&self, _ct: CancellationToken) -> BoxFuture<'_, Result<Opened, ConnectError>> {
        let handler = RelayClient {
            info: client_info(&self.settings.client_name),
            changes: self.changes.clone(),
            progress: ProgressRoutes::default(),
        };
        (self.opener)(handler)
    }

    fn opened<'a>(
        &'a self,
        session: &'a Opened,
        alive: CancellationToken,
    ) -> BoxFuture<'a, Result<(), supervisor::Failure>> {
        Box::pin(async move {
            let sessions = self.sessions.fetch_add(1, Ordering::AcqRel) + 1;
            if let Some(info) = session.service.peer_info() {
                *lock(&self.facts) = Some(facts_of(&info));
            }
            let peer = session.service.peer().clone();
            if let Ok(Ok(tools)) = tokio::time::timeout(STARTING_WAIT, peer.list_all_tools()).await
            {
                let tools = tools
                    .iter()
                    .filter_map(|t| serde_json::to_value(t).ok())
                    .collect();
                *lock(&self.tools) = Some(Arc::new(tools));
            }
            let pid = session.pid;
            let progress = session.service.service().progress.clone();
            self.live.send_modify(|l| {
                l.status = UpstreamStatus::Up { pid };
                l.peer = Some(peer);
                l.died = alive;
                l.attempts += 1;
                l.progress = progress;
            });
            if sessions > 1 {
                let _ = self.changes.send(UpstreamChange::ToolsChanged);
            }
            tracing::info!(server = %self.label, ?pid, "MCP server up");
            Ok(())
        })
    }

    fn down(&self, down: Down, delay: Duration) {
        let (error, failed) = match down {
            Down::Lost { quit } => {
                let how = match quit {
                    Ok(r) => format!("{r:?}"),
                    Err(e) => e.to_string(),
                };
                (format!("MCP server {} exited ({how})", self.label), false)
            }
            Down::Failed {
                failure: supervisor::Failure::TimedOut(limit),
                ..
            } => (
                format!(
                    "MCP server {} did not finish the MCP handshake within {} s",
                    self.label,
                    limit.as_secs()
                ),
                true,
            ),
            Down::Failed { failure, .. } => (
                format!(
                    "MCP server {} did not start: {}",
                    self.label,
                    redact(&failure.to_string())
                ),
                true,
            ),
        };
        tracing::warn!(server = %self.label, "{error}; restarting in {:.1} s", delay.as_secs_f64());
        self.live.send_modify(|l| {
            l.status = UpstreamStatus::Restarting { error };
            l.peer = None;
            l.attempts += u64::from(failed);
        });
    }

    fn closed(&self) {
        self.live.send_modify(|l| {
            l.status = UpstreamStatus::Stopped;
            l.peer = None;
            l.died.cancel();
        });
    }
}

fn service_error(e: ServiceError, label: &str) -> UpstreamError {
    match e {
        ServiceError::McpError(e) => UpstreamError::Rpc {
            code: i64::from(e.code.0),
            message: e.message.into_owned(),
            data: e.data,
        },
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
            UpstreamError::Died(format!(
                "MCP server {label} went away while the request was in flight; it is being restarted"
            ))
        }
        other => UpstreamError::Rpc {
            code: super::jsonrpc::INTERNAL_ERROR,
            message: format!("MCP server {label}: {}", redact(&other.to_string())),
            data: None,
        },
    }
}

#[async_trait]
impl Upstream for McpUpstream {
    fn label(&self) -> String {
        self.inner.label.clone()
    }

    fn status(&self) -> UpstreamStatus {
        self.inner.live.borrow().status.clone()
    }

    fn facts(&self) -> Option<ServerFacts> {
        lock(&self.inner.facts).clone()
    }

    async fn ready(&self, limit: Duration) -> bool {
        let mut rx = self.inner.live.subscribe();
        let done = rx.wait_for(|l| l.attempts > 0 || l.status == UpstreamStatus::Stopped);
        let _ = tokio::time::timeout(limit, done).await;
        self.status().is_up()
    }

    async fn list_tools(&self) -> Result<Vec<Value>, UpstreamError> {
        if self.status() == UpstreamStatus::Starting {
            self.ready(STARTING_WAIT).await;
        }
        let live = self.live();
        let cached = lock(&self.inner.tools).clone();
        let Some(peer) = live.peer.filter(|_| live.status.is_up()) else {
            return match cached {
                Some(tools) => Ok((*tools).clone()),
                None => Err(UpstreamError::Unavailable(down_message(
                    &self.inner.label,
                    &live.status,
                ))),
            };
        };
        let listed = tokio::select! {
            r = peer.list_all_tools() => r,
            _ = live.died.cancelled() => return match cached {
                Some(tools) => Ok((*tools).clone()),
                None => Err(UpstreamError::Died(down_message(&self.inner.label, &self.status()))),
            },
        };
        let tools: Vec<Value> = listed
            .map_err(|e| service_error(e, &self.inner.label))?
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect();
        *lock(&self.inner.tools) = Some(Arc::new(tools.clone()));
        Ok(tools)
    }

    async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        cancel: &CancellationToken,
        progress: Option<ProgressSink>,
    ) -> Result<Value, UpstreamError> {
        let live = self.live();
        let Some(peer) = live.peer.filter(|_| live.status.is_up()) else {
            return Err(UpstreamError::Unavailable(down_message(
                &self.inner.label,
                &live.status,
            )));
        };
        let request = ClientRequest::CustomRequest(CustomRequest::new(method, params));
        let handle = peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| service_error(e, &self.inner.label))?;
        let id = handle.id.clone();
        let _route =
            progress.map(|sink| live.progress.register(handle.progress_token.clone(), sink));
        tokio::select! {
            r = handle.await_response() => {
                let result = r.map_err(|e| service_error(e, &self.inner.label))?;
                serde_json::to_value(result).map_err(|e| UpstreamError::Rpc {
                    code: super::jsonrpc::INTERNAL_ERROR,
                    message: format!("MCP server {}: unreadable result: {e}", self.inner.label),
                    data: None,
                })
            }
            _ = live.died.cancelled() => Err(UpstreamError::Died(format!(
                "MCP server {} exited while the request was in flight; it is being restarted",
                self.inner.label
            ))),
            _ = cancel.cancelled() => {
                let param = CancelledNotificationParam::new(Some(id), Some("cancelled by the Xiaozhi endpoint".into()));
                let _ = peer.notify_cancelled(param).await;
                Err(UpstreamError::Cancelled)
            }
        }
    }

    fn changes(&self) -> broadcast::Receiver<UpstreamChange> {
        self.inner.changes.subscribe()
    }

    async fn shutdown(&self) {
        self.inner.stop.cancel();
        let task = lock(&self.inner.task).take();
        if let Some(mut task) = task
            && tokio::time::timeout(CLOSE_GRACE + Duration::from_millis(500), &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

fn down_message(label: &str, status: &UpstreamStatus) -> String {
    match status {
        UpstreamStatus::Starting => {
            format!("MCP server {label} is still starting; try again in a moment")
        }
        UpstreamStatus::Restarting { error } => {
            format!("MCP server {label} is restarting ({error}); try again in a moment")
        }
        UpstreamStatus::Stopped => {
            format!("MCP server {label} is stopped (the bridge is shutting down)")
        }
        UpstreamStatus::Up { .. } => {
            format!("MCP server {label} closed its session; it is being restarted")
        }
    }
}
