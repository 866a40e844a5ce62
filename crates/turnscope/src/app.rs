//! The `App`: one value that owns the bus, the model, the bot, the sessions and the HTTP
//! server. The console and the headless mode are two front ends over it. [`reload`] applies
//! the config file again while it runs ([`watch`] watches the file, [`hangup`] tells a
//! reload's SIGHUP from a terminal's).

pub mod hangup;
pub mod reload;
mod stopped;
pub mod watch;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::bot::{Bot, BotSettings, TurnLimits};
use crate::bridge::xiaozhi::{BridgeSettings, Catalog, XiaozhiBridges};
use crate::config::{AtRoundCap, Config, StoreUrl};
use crate::model::{EmbeddedModel, ModelClient, ModelConfig, ScriptSettings};
use crate::observe::{Bus, Event, ReplicaEvent};
use crate::server::{GuardConfig, Server};
use crate::sessions::{Replica, SessionLimits, Sessions};
use crate::store::{SessionStore, memory::MemoryStore, sqlite::SqliteStore};
use crate::tools::limits::{LimitsError, McpLimits};
use crate::tools::policy::{Policy, PolicyError};
use crate::tools::registry::{RegistryBuilder, ToolRegistry};
use crate::tools::{FnTool, Tools, ToolsFactory};

pub use reload::{ConfigSource, ReloadCause, Reloader};
pub use stopped::{StopCause, Stopped};

/// Why the app did not start.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Occurs when `[policy]`, or the environment laid over it, does not parse.
    #[error("tool policy: {0}")]
    Policy(#[from] PolicyError),
    /// Occurs when a tool limit from the environment does not parse.
    #[error("tool limits: {0}")]
    Limits(#[from] LimitsError),
    /// Occurs when the embedded scripted model cannot listen on a loopback port.
    #[error("cannot start the embedded scripted model on a loopback port: {0}")]
    EmbeddedModel(#[source] std::io::Error),
    /// Occurs when the server would listen beyond loopback with no token and no proxy said to
    /// be in front.
    #[error("{0}")]
    OpenBind(String),
    /// Occurs when `OPENAI_BASE_URL` carries user info (`[model] url` and `--model-url` are
    /// checked with the config).
    #[error("{0}")]
    ModelUrl(String),
    /// Occurs when the session store cannot be opened (held by another process, read-only,
    /// full, damaged, from a newer turnscope); the message names it and says what to do.
    #[error("{0}")]
    Store(String),
    /// Occurs when the server's address cannot be bound (taken, not this machine's, a name
    /// that does not resolve, a port that needs privileges).
    #[error("cannot listen on {host}:{port}: {source}; {}", crate::net::bind_advice(.source, "turnscope"))]
    Listen {
        /// The host asked for.
        host: String,
        /// The port asked for.
        port: u16,
        /// What the system said.
        source: std::io::Error,
    },
}

/// How [`ModelInfo::describe`] starts for the embedded scripted model.
const EMBEDDED_DESCRIPTION: &str = "embedded scripted model";

/// Whether `description` (a [`ModelInfo::describe`], as a config reload event carries it)
/// names the embedded scripted model.
pub fn describes_embedded(description: &str) -> bool {
    description.starts_with(EMBEDDED_DESCRIPTION)
}

/// Which model the bot talks to, for display.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    /// Base URL.
    pub url: String,
    /// Model name.
    pub name: String,
    /// Whether it is the embedded scripted model.
    pub embedded: bool,
}

impl ModelInfo {
    /// `embedded scripted model (http://...)` or `NAME at URL`.
    pub fn describe(&self) -> String {
        if self.embedded {
            format!("{EMBEDDED_DESCRIPTION} ({})", self.url)
        } else {
            format!("{} at {}", self.name, self.url)
        }
    }

    /// A few words for a narrow screen: `scripted`, or the model's name.
    pub fn short(&self) -> String {
        if self.embedded {
            "scripted".into()
        } else {
            self.name.clone()
        }
    }
}

impl App {
    /// The model as the console header shows it: [`ModelInfo::describe`], then the request
    /// parameters `[model]` sets (`max_tokens=64 temperature=0.2 …`), when any.
    pub fn model_line(&self) -> String {
        model_line(&self.model, &self.sessions.bot().model().config().params)
    }

    /// The request parameters `[model]` sets, as `max_tokens=64 temperature=0.2`; empty when
    /// none.
    pub fn model_params(&self) -> String {
        params_line(&self.sessions.bot().model().config().params)
    }
}

/// `params` as `key=value`, space-separated (see [`App::model_params`]).
fn params_line(params: &serde_json::Map<String, serde_json::Value>) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `model` described, then `params` as `key=value` (see [`App::model_line`]).
pub(crate) fn model_line(
    model: &ModelInfo,
    params: &serde_json::Map<String, serde_json::Value>,
) -> String {
    let params = params_line(params);
    if params.is_empty() {
        model.describe()
    } else {
        format!("{} · {params}", model.describe())
    }
}

/// The running application.
pub struct App {
    /// The event bus everything publishes on.
    pub bus: Bus,
    /// The session table.
    pub sessions: Sessions,
    /// The model in use.
    pub model: ModelInfo,
    /// The HTTP server.
    pub server: Server,
    /// The Xiaozhi bridges of `[[bridges.xiaozhi]]`.
    pub bridges: XiaozhiBridges,
    /// The bot's tool registry (built-ins and MCP servers), when [`App::start`] built it.
    pub tool_registry: Option<Arc<ToolRegistry>>,
    /// Whether MCP clients must send a bearer token (`--auth-token`): the connect lines say
    /// how, never the token.
    pub wants_token: bool,
    /// The MCP `POST` exchanges still open ([`App::shutdown`] waits for their answers).
    exchanges: crate::server::caller::Exchanges,
    /// Applies the config again while the app runs (see [`reload`]).
    reloader: Reloader,
    /// The config file's watch, once [`App::watch_config`] started it.
    watch: Option<watch::ConfigWatch>,
    sweeper: JoinHandle<()>,
}

impl App {
    /// Starts everything `config` describes: the tools (built-ins and MCP servers, connected
    /// within the start-up budget), the model (embedded unless configured), the bot, the
    /// session table and its sweep, and the HTTP server.
    pub async fn start(config: &Config, bus: Bus) -> Result<App, AppError> {
        let registry = Self::tool_registry(config, &bus, Vec::new()).await?;
        Self::start_bot(config, bus, registry).await
    }

    /// Builds the tool registry `config` describes: the built-ins (unless turned off), the
    /// bot's `own` tools, and the MCP servers under the `[policy]` (overlaid by the
    /// environment) and the [`McpLimits`] (from the environment). Waits at most the connect
    /// budget; servers that miss it join later.
    ///
    /// # Errors
    /// A policy or limit setting that does not parse.
    pub async fn tool_registry(
        config: &Config,
        bus: &Bus,
        own: Vec<FnTool>,
    ) -> Result<Arc<ToolRegistry>, AppError> {
        Ok(Self::tool_registry_builder(config, bus, own)?.start().await)
    }

    /// The builder of [`App::tool_registry`], for a caller that starts it its own way
    /// (`turnscope tools call` waits only for the server of the tool it calls).
    ///
    /// # Errors
    /// A policy or limit setting that does not parse.
    pub fn tool_registry_builder(
        config: &Config,
        bus: &Bus,
        own: Vec<FnTool>,
    ) -> Result<RegistryBuilder, AppError> {
        let policy = Policy::from_config(&config.policy)?;
        let limits = McpLimits::from_env()?;
        if !config.mcp_servers.is_empty() {
            tracing::info!(policy = %policy.describe(), servers = config.mcp_servers.len(), "connecting to MCP servers");
        }
        let mut builder = ToolRegistry::builder(bus.clone())
            .policy(policy)
            .limits(limits)
            .servers(&config.mcp_servers);
        if config.bot.builtin_tools {
            builder = builder.builtins();
        }
        for tool in own {
            builder = builder.tool(tool);
        }
        Ok(builder)
    }

    /// Like [`App::start`] with the bot's tools given.
    pub async fn start_with_tools(
        config: &Config,
        bus: Bus,
        tools: Arc<dyn Tools>,
    ) -> Result<App, AppError> {
        let (model, embedded) = pick_model(config).await?;
        let bot = Self::bot_for(config, &model, tools, None);
        Self::serve_with(config, bus, bot, model, embedded, None).await
    }

    async fn start_bot(
        config: &Config,
        bus: Bus,
        registry: Arc<ToolRegistry>,
    ) -> Result<App, AppError> {
        let (model, embedded) = pick_model(config).await?;
        let factory: Arc<dyn ToolsFactory> = registry.clone();
        let bot = Self::bot_for(config, &model, registry.clone(), Some(factory));
        Self::serve_with(config, bus, bot, model, embedded, Some(registry)).await
    }

    /// The bot `config` describes, talking to `model` with `tools`.
    fn bot_for(
        config: &Config,
        model: &ModelInfo,
        tools: Arc<dyn Tools>,
        factory: Option<Arc<dyn ToolsFactory>>,
    ) -> Bot {
        let mut bot = Bot::builder(model_client(config, model))
            .tools(tools)
            .limits(TurnLimits {
                round_cap: config.bot.round_cap,
                tool_timeout: Duration::from_secs_f64(config.bot.tool_timeout_seconds),
                answer_at_cap: config.bot.at_round_cap == AtRoundCap::Answer,
            })
            .history_window(config.bot.history_messages)
            .identity(config.bot.name.clone(), config.bot.description.clone());
        if let Some(prompt) = &config.bot.system_prompt {
            bot = bot.system_prompt(prompt.clone());
        }
        if let Some(greeting) = &config.bot.greeting {
            bot = bot.greeting(greeting.clone());
        }
        if let Some(factory) = factory {
            bot = bot.tools_factory(factory);
        }
        bot.build()
    }

    /// Serves an already built bot (the library entry point: see `examples/custom_bot.rs`).
    pub async fn serve(
        config: &Config,
        bus: Bus,
        bot: Bot,
        model: ModelInfo,
        embedded: Option<EmbeddedModel>,
    ) -> Result<App, AppError> {
        Self::serve_with(config, bus, bot, model, embedded, None).await
    }

    async fn serve_with(
        config: &Config,
        bus: Bus,
        bot: Bot,
        model: ModelInfo,
        embedded: Option<EmbeddedModel>,
        registry: Option<Arc<ToolRegistry>>,
    ) -> Result<App, AppError> {
        let embedded = embedded.map(Arc::new);
        if embedded.is_some() {
            // The settings keep the embedded model they talk to running (see `reload`).
            let mut settings = BotSettings::clone(&bot.settings());
            settings.embedded.clone_from(&embedded);
            bot.set_settings(settings);
        }
        let s = &config.server;
        bus.wire().set(config.wire.max_kib.saturating_mul(1024));
        crate::config::check_open_bind(&s.host, s.auth_token.is_some(), s.allow_open_bind)
            .map_err(AppError::OpenBind)?;
        let mut guard = GuardConfig {
            enabled: s.host_check,
            auth_token: s.auth_token.clone(),
            ..GuardConfig::default()
        };
        guard.hosts.extend(s.allowed_hosts.iter().cloned());
        guard.origins.extend(s.allowed_origins.iter().cloned());
        let listener = crate::net::listen(&s.host, s.port)
            .await
            .map_err(|source| AppError::Listen {
                host: s.host.clone(),
                port: s.port,
                source,
            })?;
        let replica = match &s.replica_id {
            Some(id) => Replica::new(id.clone()),
            None => Replica::alone(default_replica_id(&listener)),
        };
        bus.publish_with(|| Event::Replica(replica_event(&replica, "serving")));
        let store = open_store(config, &listener, &replica).await?;
        if let Some(warning) = crate::config::task_poll_warning(&config.server) {
            tracing::warn!("{warning}");
            bus.publish(Event::Log {
                at_ms: crate::observe::event::now_us() / 1000,
                level: "warn".into(),
                message: warning,
            });
        }
        if let Some(caveat) = store.caveat() {
            tracing::warn!("{caveat}");
            bus.publish(Event::Log {
                at_ms: crate::observe::event::now_us() / 1000,
                level: "warn".into(),
                message: caveat,
            });
        }
        let sessions = Sessions::with_store(bot, bus.clone(), SessionLimits::of(s), replica, store);
        sessions.drop_abandoned_console_sessions().await;
        let catalog = Catalog {
            sessions: Some(sessions.clone()),
            tools: Some(sessions.bot().tools().clone()),
            configured: config.mcp_servers.iter().map(|s| s.name.clone()).collect(),
            ..Catalog::default()
        };
        let (bridges, _warnings) = XiaozhiBridges::from_config(
            &config.bridges.xiaozhi,
            &catalog,
            &BridgeSettings::default(),
            &bus,
            &|name| std::env::var(name).ok(),
        );
        let statuses = bridges.statuses();
        let health: crate::server::HealthExtra = Arc::new(move || {
            let mut extra = serde_json::Map::new();
            extra.insert(
                "bridges".into(),
                serde_json::json!({ "xiaozhi": statuses.to_json() }),
            );
            extra
        });
        let stop = CancellationToken::new();
        let exchanges = crate::server::caller::Exchanges::default();
        // The OpenAI bridge (/v1/tools, /v1/execute, /v1/chat/completions, /v1/models) on the
        // same server, behind the same guard.
        let openai = crate::bridge::openai::OpenAiBridge::for_sessions(&sessions);
        let app = crate::server::router(
            sessions.clone(),
            crate::server::RouterOptions {
                guard,
                extra: openai.routes(),
                body: crate::server::BodyRules {
                    max_bytes: s.max_body_bytes,
                    timeout: Duration::from_secs_f64(s.body_timeout_seconds),
                },
                health: Some(health),
                exchanges: exchanges.clone(),
                events_linger: Duration::from_secs_f64(s.events_linger_seconds),
                events_queue_bytes: s.events_queue_kib * 1024,
                ..crate::server::RouterOptions::new(stop.clone())
            },
        );
        let limits = crate::server::ConnLimits {
            header_timeout: Duration::from_secs_f64(s.header_timeout_seconds),
            max_connections: s.max_connections,
        };
        let server =
            Server::start_with(listener, app, stop, limits).map_err(|source| AppError::Listen {
                host: s.host.clone(),
                port: s.port,
                source,
            })?;
        let sweeper = sessions.spawn_sweeper();
        if !model.embedded {
            check_model_server(sessions.bot().model().clone(), bus.clone());
        }
        let reloader = Reloader::new(
            config,
            sessions.clone(),
            registry.clone(),
            model.clone(),
            embedded,
        );
        Ok(App {
            wants_token: config.server.auth_token.is_some(),
            bus,
            sessions,
            exchanges,
            model,
            server,
            bridges,
            tool_registry: registry,
            reloader,
            watch: None,
            sweeper,
        })
    }

    /// What reloads the config while the app runs (SIGHUP, a console key, the file watcher).
    pub fn reloader(&self) -> Reloader {
        self.reloader.clone()
    }

    /// Makes [`Reloader::reload`] read `source` again: the file the app was started from and
    /// the flags laid over it.
    pub fn reload_from(&self, source: ConfigSource) {
        self.reloader.set_source(source);
    }

    /// Watches the config file (see [`reload_from`](App::reload_from)) and reloads it when it
    /// changes, until [`App::shutdown`].
    ///
    /// # Errors
    /// No source was set, or the file's folder cannot be watched (the reload still works by
    /// SIGHUP and the console's key).
    pub fn watch_config(&mut self) -> Result<(), watch::WatchError> {
        let Some(path) = self.reloader.file() else {
            return Ok(());
        };
        self.watch = Some(watch::watch(self.reloader.clone(), &path)?);
        Ok(())
    }

    /// Drains this replica (SIGTERM): `/healthz` answers `draining` (404) at once, `start`
    /// and new lines are refused with an error saying so, and turns in flight finish and are
    /// read, for at most `server.drain_seconds`: it is over when no turn runs, no task result
    /// waits for its poll, and every MCP `POST` answer has been handed whole to its
    /// connection (a turn's call returns before its answer is written out). Returns whether
    /// it drained within that bound; [`App::shutdown`] comes next.
    pub async fn drain(&self) -> bool {
        let replica = self.sessions.replica();
        self.bus
            .publish_with(|| Event::Replica(replica_event(replica, "draining")));
        let bound = self.drain_bound().await;
        self.sessions.begin_drain();
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            if self.sessions.quiet() && self.exchanges.open() == 0 {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// How long [`App::drain`] waits for turns in flight (`server.drain_seconds`, as the config
    /// was last reloaded).
    pub async fn drain_bound(&self) -> Duration {
        self.reloader.drain_bound().await
    }

    /// Stops the bridges (sockets closed with 1000, children ended), ends every session (each
    /// turn in flight ends: see [`Stopped::cut`]) and stops the server. After a drain
    /// ([`App::drain`]) clients get [`CLIENT_GRACE`] first to read their answers and send
    /// what they send after one; a stop with no drain (the console's quit) stops at once.
    pub async fn shutdown(self) -> Stopped {
        let grace = if self.sessions.is_draining() {
            CLIENT_GRACE
        } else {
            Duration::ZERO
        };
        self.shutdown_with(grace).await
    }

    /// [`App::shutdown`] with no grace for clients after the answers are written out, even
    /// after a drain (a second signal: stop at once).
    pub async fn shutdown_now(self) -> Stopped {
        self.shutdown_with(Duration::ZERO).await
    }

    async fn shutdown_with(mut self, grace: Duration) -> Stopped {
        self.reloader.close();
        self.watch = None;
        self.bridges.shutdown().await;
        self.sweeper.abort();
        let cut = self
            .sessions
            .close_all("server shut down", Duration::from_secs(1))
            .await;
        // The answers just handed back still have to be written to their response streams:
        // wait (at most 1 s) until every MCP `POST` exchange has sent its body.
        self.exchanges.settled(Duration::from_secs(1)).await;
        // A client that just read its answer often asks once more at once (the Python SDK
        // lists the tools to check a result, and ends its MCP session): the port stays open,
        // and the GET streams with it, until no such request came for `grace`.
        self.exchanges.linger(grace, grace * 3).await;
        self.server.shutdown(Duration::from_secs(2)).await;
        // An answer not handed whole to its connection by now is not delivered: its reply
        // stays unread in the store, for an empty line after the restart to read.
        let abandoned = self.exchanges.abandon();
        if abandoned > 0 {
            tracing::warn!(
                abandoned,
                "MCP answers not written out whole before the server stopped: their replies are kept unread"
            );
        }
        self.sessions
            .undelivered_settled(Duration::from_secs(2))
            .await;
        let kept = self.sessions.store_status().durable;
        // Every write handed to the store is on disk before the process ends.
        self.sessions.store().close().await;
        if let Some(registry) = &self.tool_registry {
            registry.shutdown().await;
        }
        Stopped { cut, kept }
    }
}

/// How long a drained server stays open for clients after the last MCP answer went out
/// ([`App::shutdown`]): what a client sends right after reading its answer finds the port
/// open (each such request starts it again, three times it at most).
pub const CLIENT_GRACE: Duration = Duration::from_secs(1);

/// Opens the store `config.store` names (`memory` when unset): `default` is the file of the
/// address `listener` is bound to in the state directory, or memory when the port was 0 (a
/// random port has no file to come back to). The file store opens on the blocking pool; a
/// Redis store connects (as `replica`, the lease holder's name) and fails when Redis cannot be
/// reached, naming the URL with its credentials masked.
async fn open_store(
    config: &Config,
    listener: &TcpListener,
    replica: &Replica,
) -> Result<Arc<dyn SessionStore>, AppError> {
    let url = config
        .store
        .resolve(StoreUrl::Memory)
        .map_err(AppError::Store)?;
    let path = match url {
        StoreUrl::Memory => return Ok(Arc::new(MemoryStore::new())),
        StoreUrl::Default if config.server.port == 0 => return Ok(Arc::new(MemoryStore::new())),
        StoreUrl::Default => {
            let addr = listener.local_addr().map_err(|e| {
                AppError::Store(format!("store: the listening address is unknown: {e}"))
            })?;
            crate::store::default_path(addr, &|name| std::env::var(name).ok())
                .map_err(AppError::Store)?
        }
        StoreUrl::Sqlite(path) => path,
        StoreUrl::Redis(url) => {
            let settings = crate::store::redis::RedisSettings {
                replica: replica.id().to_string(),
                idle: Duration::from_secs(config.server.handle_seconds),
            };
            let store = crate::store::redis::RedisStore::open(&url, settings)
                .await
                .map_err(|e| AppError::Store(e.to_string()))?;
            return Ok(Arc::new(store));
        }
    };
    let store = tokio::task::spawn_blocking(move || SqliteStore::open(&path))
        .await
        .map_err(|e| AppError::Store(format!("store: opening stopped: {e}")))?
        .map_err(|e| AppError::Store(e.to_string()))?;
    Ok(Arc::new(store))
}

/// `host:port` as bound; a wildcard address is named by the machine's host name.
fn default_replica_id(listener: &TcpListener) -> String {
    match listener.local_addr() {
        Ok(addr) if addr.ip().is_unspecified() => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "host".into());
            format!("{host}:{}", addr.port())
        }
        Ok(addr) => addr.to_string(),
        Err(_) => "local".into(),
    }
}

/// Checks the model server once in the background ([`crate::model::probe`]): a warning on
/// stderr (headless) and in the console's Log when it is down, refuses the key or does not
/// list the model. Nothing waits for it: the server is ready at once, and a model server may
/// start later.
fn check_model_server(client: crate::model::ModelClient, bus: Bus) {
    tokio::spawn(async move {
        let probe = crate::model::probe::probe(&client, crate::model::probe::PROBE_TIMEOUT);
        if let Some(warning) = probe.await {
            tracing::warn!("{warning}");
            bus.publish_with(|| Event::Log {
                at_ms: crate::observe::event::now_us() / 1000,
                level: "warn".into(),
                message: warning,
            });
        }
    });
}

fn replica_event(replica: &Replica, state: &'static str) -> ReplicaEvent {
    ReplicaEvent {
        id: replica.id().to_string(),
        tag: replica.tag(),
        state: state.into(),
        at_us: crate::observe::event::now_us(),
        open_sessions: None,
        started_us: None,
        handle_seconds: None,
        console_holds: None,
    }
}

/// A client for `model` with the config's headers and timeouts, and `OPENAI_API_KEY` for a
/// remote server.
pub fn model_client(config: &Config, model: &ModelInfo) -> ModelClient {
    let mut model_config = ModelConfig::new(model.url.clone(), model.name.clone());
    model_config.api_key = if model.embedded {
        None
    } else {
        std::env::var("OPENAI_API_KEY")
            .ok()
            .filter(|k| !k.is_empty())
    };
    model_config.headers = config.model.headers.clone().into_iter().collect();
    model_config.first_byte_timeout =
        Duration::from_secs_f64(config.model.first_byte_timeout_seconds);
    model_config.idle_timeout = Duration::from_secs_f64(config.model.idle_timeout_seconds);
    model_config.max_response_bytes = config.model.max_response_kib.saturating_mul(1024);
    model_config.max_response_time = Duration::from_secs_f64(config.model.max_response_seconds);
    model_config.params = config.model.request_fields();
    model_config.include_usage = config.model.include_usage;
    ModelClient::new(model_config)
}

/// The remote model `config` names: `[model] url` / `--model-url`, then `OPENAI_BASE_URL`,
/// then OpenAI when `OPENAI_API_KEY` is set; `None` = the embedded scripted model. An error
/// when `OPENAI_BASE_URL` carries user info (a key in the URL would reach events and logs).
pub(crate) fn remote_model(config: &Config) -> Result<Option<ModelInfo>, AppError> {
    let env_url = std::env::var("OPENAI_BASE_URL")
        .ok()
        .filter(|u| !u.is_empty());
    if config.model.url.is_none()
        && let Some(url) = &env_url
    {
        crate::config::check_model_url("OPENAI_BASE_URL", url).map_err(AppError::ModelUrl)?;
    }
    let has_key = std::env::var("OPENAI_API_KEY").is_ok_and(|k| !k.is_empty());
    let Some(url) = config
        .model
        .url
        .clone()
        .or(env_url)
        .or_else(|| has_key.then(|| "https://api.openai.com/v1".to_string()))
    else {
        return Ok(None);
    };
    Ok(Some(ModelInfo {
        url,
        name: config
            .model
            .name
            .clone()
            .unwrap_or_else(|| "gpt-4o-mini".into()),
        embedded: false,
    }))
}

/// Picks the model: `[model] url` / `--model-url`, then `OPENAI_BASE_URL`, then OpenAI when
/// `OPENAI_API_KEY` is set, else the embedded scripted model on a loopback port.
pub async fn pick_model(config: &Config) -> Result<(ModelInfo, Option<EmbeddedModel>), AppError> {
    match remote_model(config)? {
        Some(info) => Ok((info, None)),
        None => {
            let embedded = EmbeddedModel::start(
                0,
                ScriptSettings {
                    pace: config.model.pace,
                    words: config.model.words,
                },
            )
            .await
            .map_err(AppError::EmbeddedModel)?;
            Ok((
                ModelInfo {
                    url: embedded.base_url(),
                    name: crate::model::server::MODEL_NAME.into(),
                    embedded: true,
                },
                Some(embedded),
            ))
        }
    }
}
