//! One MCP server as an [`Upstream`]: an rmcp client session that is reopened whenever it
//! dies.
//!
//! A supervisor task owns the session. When the server exits (stdio child gone, HTTP
//! stream broken) every request in flight fails at once with [`UpstreamError::Died`], the
//! status turns `restarting`, and a new session opens after a backoff (0.5 s doubling to
//! 30 s, reset after a session that lived a minute) measured on the injected clock. While it
//! is down, `tools/list` is served from the last list. Requests keep their params as raw
//! JSON (sent as rmcp custom requests) so fields rmcp does not model reach the server; the
//! server's progress reports for a request reach the request's sink (see
//! [`progress`](super::progress)).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use rmcp::model::{
    CancelledNotificationParam, ClientConfig, ClientRequest, CustomRequest,
    ProgressNotificationParam, ServerPeerInfo,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService, ServiceError};
use rmcp::{ClientHandler, Peer, RoleClient};
use serde_json::Value;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::backoff::{Backoff, ReconnectPolicy, SessionEnd};
use super::clock::{self, Clock};
use super::progress::{ProgressRoutes, ProgressSink};
use super::redact::redact;
use super::upstream::{ServerFacts, Upstream, UpstreamChange, UpstreamError, UpstreamStatus};

/// How long a session may take to open (spawn + MCP handshake) before the attempt counts
/// as failed.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a stopping session is waited for. rmcp closes a stdio child's stdin, sends
/// SIGTERM after 3 s and SIGKILL after 6 s; past this wait that continues in the background,
/// and a child still running when the process exits is killed (`kill_on_drop`).
pub const CLOSE_GRACE: Duration = Duration::from_secs(4);

/// How long `tools/list` waits for a server that is still starting.
const STARTING_WAIT: Duration = Duration::from_secs(10);

/// A freshly opened session.
pub struct Opened {
    /// The running rmcp client.
    pub service: RunningService<RoleClient, RelayClient>,
    /// The child's process id, for stdio servers.
    pub pid: Option<u32>,
}

/// Opens one session with the given client handler (called again for every restart).
pub type Opener =
    Arc<dyn Fn(RelayClient) -> BoxFuture<'static, Result<Opened, String>> + Send + Sync>;

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
            restart: ReconnectPolicy {
                initial: Duration::from_millis(500),
                max: Duration::from_secs(30),
                jitter: Duration::from_millis(300),
                after_clean_close: Duration::from_millis(500),
                healthy_after: Duration::from_secs(60),
            },
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
        });
        let task = tokio::spawn(supervise(inner.clone()));
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

async fn supervise(inner: Arc<Inner>) {
    let settings = inner.settings.clone();
    let mut backoff = Backoff::new(settings.restart);
    let mut sessions = 0u64;
    loop {
        let progress = ProgressRoutes::default();
        let handler = RelayClient {
            info: crate::tools::client_config(settings.client_name.clone()),
            changes: inner.changes.clone(),
            progress: progress.clone(),
        };
        let attempt = tokio::time::timeout(OPEN_TIMEOUT, (inner.opener)(handler));
        let opened = tokio::select! {
            r = attempt => r,
            _ = inner.stop.cancelled() => break,
        };
        let (error, uptime) = match opened {
            Ok(Ok(Opened { service, pid })) => {
                sessions += 1;
                if let Some(info) = service.peer_info() {
                    *lock(&inner.facts) = Some(facts_of(&info));
                }
                let peer = service.peer().clone();
                if let Ok(Ok(tools)) =
                    tokio::time::timeout(STARTING_WAIT, peer.list_all_tools()).await
                {
                    let tools = tools
                        .iter()
                        .filter_map(|t| serde_json::to_value(t).ok())
                        .collect();
                    *lock(&inner.tools) = Some(Arc::new(tools));
                }
                let died = CancellationToken::new();
                inner.live.send_modify(|l| {
                    l.status = UpstreamStatus::Up { pid };
                    l.peer = Some(peer);
                    l.died = died.clone();
                    l.attempts += 1;
                    l.progress = progress;
                });
                if sessions > 1 {
                    let _ = inner.changes.send(UpstreamChange::ToolsChanged);
                }
                tracing::info!(server = %inner.label, ?pid, "MCP server up");
                let started = settings.clock.now();
                let ct = service.cancellation_token();
                let mut waiting = Box::pin(service.waiting());
                let ended = tokio::select! {
                    r = &mut waiting => Some(r),
                    _ = inner.stop.cancelled() => None,
                };
                died.cancel();
                inner.live.send_modify(|l| l.peer = None);
                match ended {
                    None => {
                        ct.cancel();
                        if tokio::time::timeout(CLOSE_GRACE, waiting).await.is_err() {
                            tracing::warn!(server = %inner.label, "MCP server did not close in time; killing it");
                        }
                        break;
                    }
                    Some(reason) => {
                        let how = match reason {
                            Ok(r) => format!("{r:?}"),
                            Err(e) => e.to_string(),
                        };
                        (
                            format!("MCP server {} exited ({how})", inner.label),
                            Some(settings.clock.now().saturating_duration_since(started)),
                        )
                    }
                }
            }
            Ok(Err(e)) => (
                format!("MCP server {} did not start: {}", inner.label, redact(&e)),
                None,
            ),
            Err(_) => (
                format!(
                    "MCP server {} did not finish the MCP handshake within {} s",
                    inner.label,
                    OPEN_TIMEOUT.as_secs()
                ),
                None,
            ),
        };
        let delay = backoff.delay(SessionEnd::Abnormal, uptime);
        tracing::warn!(server = %inner.label, "{error}; restarting in {:.1} s", delay.as_secs_f64());
        inner.live.send_modify(|l| {
            l.status = UpstreamStatus::Restarting { error };
            l.attempts += u64::from(uptime.is_none());
        });
        tokio::select! {
            _ = settings.clock.sleep(delay) => {}
            _ = inner.stop.cancelled() => break,
        }
    }
    inner.live.send_modify(|l| {
        l.status = UpstreamStatus::Stopped;
        l.peer = None;
        l.died.cancel();
    });
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
