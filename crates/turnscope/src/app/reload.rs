//! Live reload: the config file read again while the server runs (its watcher, SIGHUP, the
//! console's key) and applied from the next turn of every session, sessions and histories kept.
//!
//! ```text
//! file ─▶ Config::from_file_text ──refused──▶ event `refused` (FILE:LINE: KEY: why); nothing changes
//!                 │
//!                 ▼ changes_from(running) ── restart-only keys: named, running value kept
//!        adopt_live ─▶ what can fail first: [policy], the model (an embedded one started)
//!                 ─▶ tool sources prepared (new and changed ones connect, within the budget)
//!                 ─▶ commit at once: tools, Bot::set_settings (version + 1), session limits,
//!                    [wire] ─▶ event `applied`
//! ```
//!
//! A turn reads the bot's settings once, when its line is said ([`crate::bot::BotSettings`]),
//! and keeps its tool set to its end ([`crate::tools::Tools::pinned`]): a turn in flight
//! finishes on the config it started with. One reload at a time.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::bot::{BotSettings, TurnLimits};
use crate::config::{AtRoundCap, Config, ConfigChanges, Overrides};
use crate::model::{EmbeddedModel, ScriptSettings};
use crate::observe::event::now_us;
use crate::observe::{Bus, ConfigReloadEvent, Event};
use crate::sessions::{SessionLimits, Sessions};
use crate::tools::policy::Policy;
use crate::tools::reconfigure::SourceChanges;
use crate::tools::registry::ToolRegistry;

use super::{ModelInfo, model_client, params_line, remote_model};

/// Where a reload reads the config again: the file (`None`: `./turnscope.toml` when it
/// exists) and the command-line values laid over it, as at start.
#[derive(Debug, Clone, Default)]
pub struct ConfigSource {
    /// The file given to `--config`, or the one found at start.
    pub path: Option<PathBuf>,
    /// The flags, laid over the file again on every reload (a flag keeps winning).
    pub overrides: Overrides,
    /// The store URL a file that names none means in this mode (`default`, the file per
    /// listening address, for the console and `--headless`), so a reload does not see the
    /// mode's default as a `store.url` changed.
    pub default_store: Option<String>,
}

impl ConfigSource {
    /// The file a reload reads: the one given, else `./turnscope.toml`.
    pub fn file(&self) -> PathBuf {
        self.path
            .clone()
            .unwrap_or_else(|| PathBuf::from("turnscope.toml"))
    }

    /// `config` with this mode's defaults filled in, as at start.
    fn complete(&self, mut config: Config) -> Config {
        if config.store.url.is_none() {
            config.store.url.clone_from(&self.default_store);
        }
        config
    }
}

/// What asked for a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadCause {
    /// The watched file changed.
    File,
    /// SIGHUP.
    Signal,
    /// The console's key.
    Console,
    /// A program (`Reloader::apply`).
    Api,
}

impl ReloadCause {
    /// `file`, `signal`, `console` or `api`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadCause::File => "file",
            ReloadCause::Signal => "signal",
            ReloadCause::Console => "console",
            ReloadCause::Api => "api",
        }
    }
}

/// Reloads a running app's config; cheap to clone (every front end and the file watcher hold
/// one).
#[derive(Clone)]
pub struct Reloader {
    inner: Arc<Inner>,
}

/// Called with every reload's outcome (a headless server prints it as one stderr line).
pub type OnReload = Arc<dyn Fn(&ConfigReloadEvent) + Send + Sync>;

struct Inner {
    sessions: Sessions,
    registry: Option<Arc<ToolRegistry>>,
    bus: Bus,
    source: Mutex<Option<ConfigSource>>,
    on_reload: Mutex<Option<OnReload>>,
    running: tokio::sync::Mutex<Running>,
    version: AtomicU64,
    /// Set as the app shuts down: a reload then changes nothing.
    closed: AtomicBool,
}

/// What the app runs on now.
struct Running {
    config: Config,
    model: ModelInfo,
    /// The embedded model in use, with the settings it was started with.
    embedded: Option<(Arc<EmbeddedModel>, ScriptSettings)>,
    /// The text last read from the file, to tell a save that changed nothing.
    text: Option<String>,
}

/// The model a reload moves to.
struct NextModel {
    info: ModelInfo,
    embedded: Option<(Arc<EmbeddedModel>, ScriptSettings)>,
}

impl Reloader {
    pub(super) fn new(
        config: &Config,
        sessions: Sessions,
        registry: Option<Arc<ToolRegistry>>,
        model: ModelInfo,
        embedded: Option<Arc<EmbeddedModel>>,
    ) -> Self {
        let script = ScriptSettings {
            pace: config.model.pace,
            words: config.model.words,
        };
        Self {
            inner: Arc::new(Inner {
                bus: sessions.bus().clone(),
                sessions,
                registry,
                source: Mutex::new(None),
                on_reload: Mutex::new(None),
                running: tokio::sync::Mutex::new(Running {
                    config: config.clone(),
                    model,
                    embedded: embedded.map(|e| (e, script)),
                    text: None,
                }),
                version: AtomicU64::new(1),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// The config version in force: 1 as started, one more per reload that changed something.
    pub fn version(&self) -> u64 {
        self.inner.version.load(Ordering::Acquire)
    }

    /// Where [`Reloader::reload`] reads the config (set by the front end that loaded it).
    pub fn set_source(&self, source: ConfigSource) {
        *lock(&self.inner.source) = Some(source);
    }

    /// The file reloads read, when a source is set.
    pub fn file(&self) -> Option<PathBuf> {
        lock(&self.inner.source).as_ref().map(ConfigSource::file)
    }

    /// Calls `f` with the outcome of every reload (besides the bus event).
    pub fn on_reload(&self, f: OnReload) {
        *lock(&self.inner.on_reload) = Some(f);
    }

    /// How long a drain waits (`server.drain_seconds`, as reloaded).
    pub(super) async fn drain_bound(&self) -> Duration {
        let running = self.inner.running.lock().await;
        Duration::from_secs_f64(running.config.server.drain_seconds)
    }

    /// From now on a reload changes nothing (the app is shutting down).
    pub(super) fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
    }

    /// Reads the config file again and applies what changed from the next turn (see the
    /// module doc); a file that does not load is refused and the running config stays. The
    /// outcome is published (`Event::ConfigReload`) and returned.
    pub async fn reload(&self, cause: ReloadCause) -> ConfigReloadEvent {
        self.reload_inner(cause)
            .await
            .unwrap_or_else(|| self.unchanged(cause, None))
    }

    /// For the file watcher: like [`Reloader::reload`], but nothing at all (no event) when the
    /// file is missing (an editor that saves by rename is between its two steps) or holds the
    /// text last read (a save that changed nothing).
    pub(super) async fn reload_changed_file(&self) -> Option<ConfigReloadEvent> {
        self.reload_inner(ReloadCause::File).await
    }

    async fn reload_inner(&self, cause: ReloadCause) -> Option<ConfigReloadEvent> {
        let Some(source) = lock(&self.inner.source).clone() else {
            return Some(self.refused(
                cause,
                None,
                "this server was not started from a config file the reload can read again".into(),
            ));
        };
        let path = source.file();
        let shown = Some(path.display().to_string());
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && cause == ReloadCause::File => {
                return None;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && source.path.is_none() => {
                // No ./turnscope.toml: the defaults and the flags, as at start.
                return Some(match Config::load(None, &source.overrides) {
                    Ok((config, _)) => {
                        self.apply_from(source.complete(config), cause, None, None)
                            .await
                    }
                    Err(e) => self.refused(cause, None, e.brief()),
                });
            }
            Err(e) => {
                return Some(self.refused(
                    cause,
                    shown,
                    format!(
                        "cannot read {}: {e}; the running config stays",
                        path.display()
                    ),
                ));
            }
        };
        if cause == ReloadCause::File
            && self.inner.running.lock().await.text.as_deref() == Some(text.as_str())
        {
            return None;
        }
        let loaded = Config::from_file_text(&path, &text, &source.overrides);
        Some(match loaded {
            Ok(config) => {
                self.apply_from(source.complete(config), cause, shown, Some(text))
                    .await
            }
            Err(e) => {
                self.inner.running.lock().await.text = Some(text);
                self.refused(cause, shown, e.brief())
            }
        })
    }

    /// Applies an already loaded `config` as a reload would (for programs and tests).
    pub async fn apply(&self, config: Config) -> ConfigReloadEvent {
        self.apply_from(config, ReloadCause::Api, None, None).await
    }

    async fn apply_from(
        &self,
        new: Config,
        cause: ReloadCause,
        file: Option<String>,
        text: Option<String>,
    ) -> ConfigReloadEvent {
        let mut running = self.inner.running.lock().await;
        if text.is_some() {
            running.text = text;
        }
        let mut changes = new.changes_from(&running.config);
        let mut adopted = match running.config.adopt_live(&new) {
            Ok(adopted) => adopted,
            Err(e) => return self.refused(cause, file, e.brief()),
        };
        if self.inner.registry.is_none() {
            self.keep_given_tools(&mut changes, &mut adopted, &running.config);
        }
        if changes.live.is_empty() || self.inner.closed.load(Ordering::Acquire) {
            let event = self.event(cause, file, "unchanged", &changes, &running);
            drop(running);
            return self.publish(event);
        }
        match self.commit(&mut running, adopted, &changes).await {
            Ok(notes) => {
                let mut event = self.event(cause, file, "applied", &changes, &running);
                event.notes = notes;
                drop(running);
                self.publish(event)
            }
            Err(error) => {
                drop(running);
                self.refused(cause, file, error)
            }
        }
    }

    /// A bot whose tools were given in code has no sources a reload can replace: those keys
    /// wait for a restart like the listening address.
    fn keep_given_tools(
        &self,
        changes: &mut ConfigChanges,
        adopted: &mut Config,
        running: &Config,
    ) {
        let fixed = |k: &String| {
            ["mcp_servers", "policy", "bot.builtin_tools"]
                .iter()
                .any(|p| k == p || k.starts_with(&format!("{p}.")))
        };
        let (kept, live): (Vec<String>, Vec<String>) =
            changes.live.drain(..).partition(|k| fixed(k));
        changes.live = live;
        changes.restart.extend(kept);
        changes.restart.sort();
        adopted.mcp_servers.clone_from(&running.mcp_servers);
        adopted.policy.clone_from(&running.policy);
        adopted.bot.builtin_tools = running.bot.builtin_tools;
    }

    /// Puts `adopted` in force: first what can fail (the policy, the model), then the tool
    /// sources prepared, then everything at once. Returns notes on the tool sources.
    async fn commit(
        &self,
        running: &mut Running,
        adopted: Config,
        changes: &ConfigChanges,
    ) -> Result<Vec<String>, String> {
        let policy = if changes.touches("policy") {
            Some(Policy::from_config(&adopted.policy).map_err(|e| format!("policy: {e}"))?)
        } else {
            None
        };
        let next_model = if changes.touches("model") {
            Some(next_model(&adopted, running).await?)
        } else {
            None
        };
        let tools_changed = changes.touches("mcp_servers")
            || changes.touches("policy")
            || changes.touches("bot.builtin_tools");
        let prepared = match (&self.inner.registry, tools_changed) {
            (Some(registry), true) => Some(
                registry
                    .prepare(&adopted.mcp_servers, policy, adopted.bot.builtin_tools)
                    .await,
            ),
            _ => None,
        };
        if self.inner.closed.load(Ordering::Acquire) {
            return Err("the server is shutting down".into());
        }
        // From here on nothing awaits: the new config goes in force at once.
        let sources = match (&self.inner.registry, prepared) {
            (Some(registry), Some(prepared)) => registry.commit(prepared),
            _ => SourceChanges::default(),
        };
        let version = self.version() + 1;
        let bot = self.inner.sessions.bot();
        let current = bot.settings();
        let (model, embedded) = match next_model {
            Some(next) => {
                let client = model_client(&adopted, &next.info);
                running.model = next.info;
                running.embedded = next.embedded;
                (client, running.embedded.as_ref().map(|(e, _)| e.clone()))
            }
            None => (current.model.clone(), current.embedded.clone()),
        };
        let b = &adopted.bot;
        bot.set_settings(BotSettings {
            version,
            system_prompt: b.system_prompt.clone(),
            greeting: b.greeting.clone(),
            model,
            limits: TurnLimits {
                round_cap: b.round_cap,
                tool_timeout: Duration::from_secs_f64(b.tool_timeout_seconds),
                answer_at_cap: b.at_round_cap == AtRoundCap::Answer,
            },
            history_window: b.history_messages,
            embedded,
        });
        // The task keys are restart-only: `adopted` holds their running values.
        self.inner
            .sessions
            .set_limits(SessionLimits::of(&adopted.server));
        self.inner
            .bus
            .wire()
            .set(adopted.wire.max_kib.saturating_mul(1024));
        running.config = adopted;
        self.inner.version.store(version, Ordering::Release);
        Ok(source_notes(&sources))
    }

    fn event(
        &self,
        cause: ReloadCause,
        file: Option<String>,
        outcome: &'static str,
        changes: &ConfigChanges,
        running: &Running,
    ) -> ConfigReloadEvent {
        let params = self
            .inner
            .sessions
            .bot()
            .settings()
            .model
            .config()
            .params
            .clone();
        ConfigReloadEvent {
            version: self.version(),
            outcome: outcome.into(),
            cause: cause.as_str().into(),
            file,
            applied: if outcome == "applied" {
                changes.live.clone()
            } else {
                Vec::new()
            },
            restart: changes.restart.clone(),
            error: None,
            notes: Vec::new(),
            model: running.model.describe(),
            model_short: running.model.short(),
            model_params: params_line(&params),
            at_us: now_us(),
        }
    }

    fn unchanged(&self, cause: ReloadCause, file: Option<String>) -> ConfigReloadEvent {
        ConfigReloadEvent {
            version: self.version(),
            outcome: "unchanged".into(),
            cause: cause.as_str().into(),
            file,
            at_us: now_us(),
            ..ConfigReloadEvent::default()
        }
    }

    fn refused(
        &self,
        cause: ReloadCause,
        file: Option<String>,
        error: String,
    ) -> ConfigReloadEvent {
        self.publish(ConfigReloadEvent {
            version: self.version(),
            outcome: "refused".into(),
            cause: cause.as_str().into(),
            file,
            error: Some(error),
            at_us: now_us(),
            ..ConfigReloadEvent::default()
        })
    }

    fn publish(&self, event: ConfigReloadEvent) -> ConfigReloadEvent {
        if event.is_refused() {
            tracing::debug!(error = ?event.error, "config reload refused");
        }
        self.inner
            .bus
            .publish_with(|| Event::ConfigReload(event.clone()));
        let report = lock(&self.inner.on_reload).clone();
        if let Some(report) = report {
            report(&event);
        }
        event
    }
}

/// The model `config` names: a remote server, or the embedded model (the running one when
/// its pace and words are the same, else a new one on a free loopback port).
async fn next_model(config: &Config, running: &Running) -> Result<NextModel, String> {
    if let Some(info) = remote_model(config).map_err(|e| e.to_string())? {
        return Ok(NextModel {
            info,
            embedded: None,
        });
    }
    let script = ScriptSettings {
        pace: config.model.pace,
        words: config.model.words,
    };
    let embedded = match &running.embedded {
        Some((model, settings)) if *settings == script => model.clone(),
        _ => Arc::new(EmbeddedModel::start(0, script.clone()).await.map_err(|e| {
            format!("cannot start the embedded scripted model on a loopback port: {e}")
        })?),
    };
    Ok(NextModel {
        info: ModelInfo {
            url: embedded.base_url(),
            name: crate::model::server::MODEL_NAME.into(),
            embedded: true,
        },
        embedded: Some((embedded, script)),
    })
}

/// What a reload did to the tool sources, for the event's notes.
fn source_notes(changes: &SourceChanges) -> Vec<String> {
    let mut notes = Vec::new();
    for (what, names) in [
        ("tool sources added", &changes.added),
        ("reconnected", &changes.changed),
        ("closed", &changes.removed),
        ("refused (see Log)", &changes.refused),
    ] {
        if !names.is_empty() {
            notes.push(format!("{what}: {}", names.join(", ")));
        }
    }
    if let Some(on) = changes.builtins {
        notes.push(format!("built-in tools {}", if on { "on" } else { "off" }));
    }
    notes
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
