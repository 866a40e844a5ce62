//! The HTTP server: MCP `start`/`chat` at `/mcp` (rmcp streamable HTTP, stateful), `/healthz`,
//! the live event stream at `/events`, and whatever routes bridges add — all behind the Host/Origin guard, with request bodies
//! read under a size limit and a deadline, and request heads under a deadline.

mod accept;
pub mod body;
pub mod caller;
pub mod guard;
mod held;
pub mod jsonrpc;
pub mod mcp;
mod mcp_errors;
mod mcp_tasks;
pub mod mcp_text;
mod mcp_tools;
mod openai_errors;
mod owners;
mod param_header;
pub mod resume;
mod tasks_refusals;
pub mod viewers;
mod wire;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use accept::{ConnLimits, DEFAULT_MAX_CONNECTIONS};
pub use body::BodyRules;
pub use guard::GuardConfig;
pub use mcp::BotMcp;

use crate::sessions::Sessions;

/// How often an idle response stream is pinged, which is also how soon a caller that closed
/// its stream is noticed.
const KEEP_ALIVE: Duration = Duration::from_millis(250);

/// The `retry` of every response stream's priming event: how long a client whose stream
/// broke waits before resuming it. Short, so a client whose replica died learns it within
/// about a second (the Python SDK tries twice) instead of six (rmcp's default is 3 s).
const RESUME_RETRY: Duration = Duration::from_millis(500);

/// Extra fields of the `/healthz` answer (e.g. `bridges`), computed per request.
pub(crate) type HealthExtra =
    Arc<dyn Fn() -> serde_json::Map<String, serde_json::Value> + Send + Sync>;

/// How the HTTP app is put together beyond its sessions.
pub struct RouterOptions {
    /// Host/Origin/token checks for every route.
    pub guard: GuardConfig,
    /// Routes bridges add, merged behind the guard.
    pub extra: Router,
    /// Cancelled to end every MCP session (server shutdown).
    pub stop: CancellationToken,
    /// Largest request body (413 beyond) and how long it may take to arrive (408 beyond).
    pub body: BodyRules,
    /// Extra fields of `/healthz` (e.g. bridge states).
    pub health: Option<HealthExtra>,
    /// Counts the `/mcp` `POST` exchanges still open (shutdown waits for their answers).
    pub exchanges: caller::Exchanges,
    /// How long `/events` goes on recording after its last viewer left.
    pub events_linger: Duration,
    /// Most bytes of event lines `/events` keeps for its viewers.
    pub events_queue_bytes: usize,
}

impl RouterOptions {
    /// Defaults: loopback guard, no extra routes, 4 MiB bodies within 30 s, plain `/healthz`.
    pub fn new(stop: CancellationToken) -> Self {
        Self {
            guard: GuardConfig::default(),
            extra: Router::new(),
            stop,
            body: BodyRules::default(),
            health: None,
            exchanges: caller::Exchanges::default(),
            events_linger: viewers::LINGER,
            events_queue_bytes: viewers::QUEUE_BYTES,
        }
    }
}

/// The whole HTTP app for `sessions`: `/mcp`, `/healthz` and the extra routes, all behind
/// the guard.
pub fn router(sessions: Sessions, options: RouterOptions) -> Router {
    let RouterOptions {
        guard,
        extra,
        stop,
        body,
        health,
        exchanges,
        events_linger,
        events_queue_bytes,
    } = options;
    let config = StreamableHttpServerConfig::default()
        .with_max_request_body_bytes(body.max_bytes)
        .with_sse_keep_alive(Some(KEEP_ALIVE))
        .with_sse_retry(Some(RESUME_RETRY))
        .with_cancellation_token(handlers_stop(&stop))
        .disable_allowed_hosts();
    let handler_sessions = sessions.clone();
    // Every event of every response stream goes through the replay store first, so a client
    // whose stream broke resumes it with `Last-Event-ID` (see `resume`).
    let replay = resume::ReplayStore::new(Some(sessions.clone()));
    let mut manager = LocalSessionManager::default().with_event_store(replay.clone());
    // Streams of sessions (`initialize`) take their priming `retry` from here.
    manager.session_config.sse_retry = Some(RESUME_RETRY);
    let session_manager = Arc::new(manager);
    let mcp = StreamableHttpService::new(
        move || Ok(BotMcp::new(handler_sessions.clone())),
        Arc::new(owners::OwnedStreams::new(
            session_manager.clone(),
            replay.clone(),
        )),
        config,
    );
    let health_sessions = sessions.clone();
    let viewers = viewers::Viewers::new(
        sessions.clone(),
        events_linger,
        events_queue_bytes,
        stop.clone(),
    );
    let health_viewers = viewers.clone();
    let events = Router::new()
        .route("/events", get(viewers::serve))
        .with_state(viewers);
    let mcp_routes = Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(
            jsonrpc::Known {
                sessions: session_manager,
                replay,
            },
            jsonrpc::check,
        ))
        .layer(axum::middleware::from_fn_with_state(
            exchanges,
            caller::watch_caller,
        ))
        // Outermost, so it records what the client was answered, the checks' errors included.
        .layer(axum::middleware::from_fn_with_state(
            wire::WireTap::new(sessions.bus().clone()),
            wire::record,
        ));
    // A shared store lets any replica serve any handle: the replica says so on every `/mcp`
    // answer, so the balancer's recipe may keep a request of an MCP session on that session's
    // replica instead of sending it by the handle's tag (examples/haproxy.cfg).
    let mcp_routes = if sessions.store().shared() {
        mcp_routes.layer(axum::middleware::map_response(say_the_store_is_shared))
    } else {
        mcp_routes
    };
    let app = Router::new()
        .route(
            "/healthz",
            get(move || {
                let s = health_sessions.clone();
                let health = health.clone();
                let health_viewers = health_viewers.clone();
                async move {
                    // Draining answers 404 (503 on a shared store, below): HAProxy's soft stop (`http-check disable-on-404`)
                    // sends no new client here, while sticky ones still reach it until it exits.
                    let draining = s.is_draining();
                    let store = s.store_status();
                    let status = match (draining, &store.degraded) {
                        (true, _) => "draining",
                        (false, Some(_)) => "degraded",
                        (false, None) => "ok",
                    };
                    let mut body = json!({
                        "status": status,
                        "store": {
                            "url": store.url,
                            "durable": store.durable,
                            // What the store itself may lose (Redis without appendonly).
                            "caveat": s.store().caveat(),
                            "status": if store.degraded.is_some() { "degraded" } else { "ok" },
                            "error": store.degraded,
                            // Writes go on, yet an operator must act (a second process with this replica's id).
                            "warning": store.warning,
                            "stats": s.store().stats(),
                        },
                        "replica": {"id": s.replica().id(), "tag": s.replica().tag()},
                        "sessions": s.len(),
                        "cap": s.limits().cap,
                        "handle_seconds": s.limits().handle_seconds,
                        "process": crate::observe::process::ProcessStats::sample(),
                        "viewers": {
                            "connected": health_viewers.connected(),
                            "dropped": health_viewers.dropped(),
                            "listening": health_viewers.listening(),
                            "resting": health_viewers.resting(),
                        },
                    });
                    if let (Some(extra), Some(map)) = (health, body.as_object_mut()) {
                        map.extend(extra());
                    }
                    // With a shared store, 503: marked down, so the balancer sends even the
                    // draining replica's handles elsewhere (their conversations are in the store).
                    let status = if draining && s.store().shared() {
                        axum::http::StatusCode::SERVICE_UNAVAILABLE
                    } else if draining {
                        axum::http::StatusCode::NOT_FOUND
                    } else {
                        axum::http::StatusCode::OK
                    };
                    (status, axum::Json(body))
                }
            }),
        )
        .merge(mcp_routes)
        .merge(events)
        .merge(extra);
    protect(app, guard, body)
}

/// The header on every `/mcp` answer of a replica whose store is shared with other replicas
/// (value [`SHARED_STORE`]): what the balancer's recipe learns it from.
pub const STORE_HEADER: &str = "turnscope-store";

/// [`STORE_HEADER`]'s value: any replica of this store serves any handle.
pub const SHARED_STORE: &str = "shared";

async fn say_the_store_is_shared(
    mut response: axum::response::Response,
) -> axum::response::Response {
    response.headers_mut().insert(
        STORE_HEADER,
        axum::http::HeaderValue::from_static(SHARED_STORE),
    );
    response
}

/// How long the MCP handlers go on after `stop`: requests already read when the server stops
/// accepting get their answers in that time (the sessions are closed by then, so a `chat`
/// answers at once); then the open response streams are ended.
const HANDLERS_GRACE: Duration = Duration::from_millis(500);

/// rmcp's token for its handlers: cancelled [`HANDLERS_GRACE`] after `stop`, not with it.
/// rmcp answers every request waiting on a handler when its token is cancelled with a bare
/// 500 ("no response message received from handler"), so cancelling it with `stop` turned a
/// request that arrived as a replica shut down into that 500 instead of its answer.
fn handlers_stop(stop: &CancellationToken) -> CancellationToken {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return stop.clone();
    };
    let handlers = CancellationToken::new();
    let (stop, later) = (stop.clone(), handlers.clone());
    runtime.spawn(async move {
        stop.cancelled().await;
        tokio::time::sleep(HANDLERS_GRACE).await;
        later.cancel();
    });
    handlers
}

/// Puts `app` behind the guard, then the body rules: the guard answers first, so nobody
/// unauthorised makes the server read a body. Every server of the binary wraps its routes
/// this way; under `/v1/` their refusals are told in OpenAI's error envelope.
pub(crate) fn protect(app: Router, guard: GuardConfig, body: BodyRules) -> Router {
    // `read_whole` enforces the limit; this only lifts axum's own 2 MB default for
    // extractors such as `Json` to the same figure.
    app.layer(axum::extract::DefaultBodyLimit::max(body.max_bytes))
        .layer(axum::middleware::from_fn_with_state(body, body::read_whole))
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(guard),
            guard::guard,
        ))
        .layer(axum::middleware::from_fn(openai_errors::as_openai_json))
}

/// A running HTTP server.
pub struct Server {
    /// The address it listens on.
    pub addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Server {
    /// Serves `app` on `listener` until [`Server::shutdown`]; a client gets `header_timeout`
    /// to send each request's head (and an idle keep-alive connection is closed after it);
    /// at most [`DEFAULT_MAX_CONNECTIONS`] connections are open at once.
    pub fn start(
        listener: TcpListener,
        app: Router,
        stop: CancellationToken,
        header_timeout: Duration,
    ) -> std::io::Result<Self> {
        let limits = ConnLimits {
            header_timeout,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        };
        Self::start_with(listener, app, stop, limits)
    }

    /// [`Server::start`] with every connection limit given.
    pub fn start_with(
        listener: TcpListener,
        app: Router,
        stop: CancellationToken,
        limits: ConnLimits,
    ) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let task = tokio::spawn(accept::serve(listener, app, limits, stop.clone()));
        Ok(Self { addr, stop, task })
    }

    /// The MCP endpoint, e.g. `http://127.0.0.1:7870/mcp`.
    pub fn mcp_url(&self) -> String {
        let host = match self.addr.ip() {
            ip if ip.is_unspecified() => "127.0.0.1".to_string(),
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        };
        format!("http://{host}:{}/mcp", self.addr.port())
    }

    /// Stops accepting, lets open responses finish for up to `grace`, then stops.
    pub async fn shutdown(self, grace: Duration) {
        self.stop.cancel();
        let mut task = self.task;
        if tokio::time::timeout(grace, &mut task).await.is_err() {
            task.abort();
        }
    }
}
