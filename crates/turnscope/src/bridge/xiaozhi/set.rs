//! All the Xiaozhi bridges of one process: built from configuration through an
//! [`UpstreamCatalog`], run side by side (one task each, so one bridge's trouble never
//! touches another), reported for `/healthz`, and stopped together.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::bot::{BOT, bot_upstream};
use super::bridge::{BridgeSettings, RunningBridge, XiaozhiBridge};
use super::mcp_upstream::UpstreamSettings;
use super::mcp_upstream::mcp_upstream;
use super::placement::place;
use super::tools_upstream::tools_upstream;
use super::upstream::Upstream;
use crate::config::McpServerConfig;
use crate::config::XiaozhiEntry;
use crate::observe::event::now_us;
use crate::observe::{BridgeEvent, Bus, Event};
use crate::sessions::Sessions;

/// Turns a bridge's `servers` list into the upstream it relays to.
///
/// This is where the tool-source registry plugs in: a catalog over `[[mcp_servers]]` maps
/// one name to an MCP server and several names to an aggregate upstream.
pub trait UpstreamCatalog: Send + Sync {
    /// The upstream for bridge `bridge` relaying `servers`, started now.
    ///
    /// # Errors
    ///
    /// A name that cannot be served; the error says which and what to do.
    fn upstream(&self, bridge: &str, servers: &[String])
    -> Result<Arc<dyn Upstream>, CatalogError>;
}

/// Why a bridge's `servers` list cannot be relayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// Occurs when `@bot` is named but this command does not run the bot.
    #[error(
        "\"{BOT}\" relays the bot, which this command does not run; use `turnscope bridge xiaozhi --bot` or the main mode"
    )]
    BotNotRunning,
    /// Occurs when the list is empty.
    #[error("servers: empty; name [[mcp_servers]] entries, or \"@bot\"")]
    Empty,
    /// Occurs when `@bot` is listed with MCP servers.
    #[error(
        "servers: \"{BOT}\" cannot be mixed with MCP servers on one bridge; give the bot its own bridge"
    )]
    BotMixed,
    /// Occurs when `[[mcp_servers]]` names are listed but this command has no tool registry.
    #[error(
        "servers: {0} need the bot's tool registry, which this command does not run; \
         use the main mode with [[mcp_servers]] in the config"
    )]
    NoRegistry(String),
    /// Occurs when a listed name is no configured MCP server.
    #[error("servers: no MCP server named {0}; define it under [[mcp_servers]] (or use \"{BOT}\")")]
    Unknown(String),
}

/// The catalog built in: `@bot` (when the bot runs) and MCP servers given by spec.
#[derive(Clone, Default)]
pub struct Catalog {
    /// The bot's sessions, for `@bot`.
    pub sessions: Option<Sessions>,
    /// Servers by name.
    pub servers: BTreeMap<String, McpServerConfig>,
    /// The bot's tools, for bridges that name `[[mcp_servers]]` (one or several).
    pub tools: Option<Arc<dyn crate::tools::Tools>>,
    /// Names of the configured `[[mcp_servers]]` (a server still connecting has no tools yet).
    pub configured: BTreeSet<String>,
    /// Tunables of every upstream it starts.
    pub settings: UpstreamSettings,
}

impl UpstreamCatalog for Catalog {
    fn upstream(
        &self,
        bridge: &str,
        servers: &[String],
    ) -> Result<Arc<dyn Upstream>, CatalogError> {
        match servers {
            [one] if one == BOT => match &self.sessions {
                Some(sessions) => Ok(Arc::new(bot_upstream(sessions.clone(), bridge))),
                None => Err(CatalogError::BotNotRunning),
            },
            [one] if self.servers.contains_key(one) => Ok(Arc::new(mcp_upstream(
                bridge,
                self.servers[one].clone(),
                self.settings.clone(),
            ))),
            [] => Err(CatalogError::Empty),
            names if names.iter().any(|n| n == BOT) => Err(CatalogError::BotMixed),
            names => {
                let Some(tools) = &self.tools else {
                    return Err(CatalogError::NoRegistry(names.join(", ")));
                };
                let known: BTreeSet<String> =
                    tools.specs().iter().map(|s| s.source.clone()).collect();
                let configured = |n: &String| known.contains(n) || self.configured.contains(n);
                let unknown: Vec<&str> = names
                    .iter()
                    .filter(|n| !configured(n))
                    .map(String::as_str)
                    .collect();
                if !unknown.is_empty() {
                    return Err(CatalogError::Unknown(unknown.join(", ")));
                }
                Ok(Arc::new(tools_upstream(
                    tools.clone(),
                    names.iter().cloned().collect(),
                )))
            }
        }
    }
}

/// Read-only access to every bridge's state, cheap to clone (for `/healthz`).
#[derive(Clone, Default)]
pub struct BridgeStatuses {
    states: Arc<Vec<Arc<dyn Fn() -> BridgeEvent + Send + Sync>>>,
}

impl BridgeStatuses {
    /// Each bridge's current state, in start order.
    pub fn all(&self) -> Vec<BridgeEvent> {
        self.states.iter().map(|s| s()).collect()
    }

    /// The states as JSON for `/healthz`.
    pub(crate) fn to_json(&self) -> Value {
        serde_json::to_value(self.all()).unwrap_or(Value::Null)
    }
}

/// The running bridges.
#[derive(Default)]
pub struct XiaozhiBridges {
    running: Vec<RunningBridge>,
    statuses: BridgeStatuses,
}

impl XiaozhiBridges {
    /// Starts `bridges`, publishing on `bus`.
    pub fn start(bridges: Vec<XiaozhiBridge>, bus: &Bus) -> Self {
        let running: Vec<RunningBridge> = bridges.into_iter().map(|b| b.spawn(bus)).collect();
        let states = running
            .iter()
            .map(|r| {
                let state = r.state_handle();
                Arc::new(move || state.snapshot()) as Arc<dyn Fn() -> BridgeEvent + Send + Sync>
            })
            .collect();
        Self {
            running,
            statuses: BridgeStatuses {
                states: Arc::new(states),
            },
        }
    }

    /// Builds and starts the bridges of `[[bridges.xiaozhi]]`. Entries that cannot run (no
    /// endpoint, an unknown server) are skipped; each skip and each endpoint warning is
    /// logged and published, and returned.
    pub(crate) fn from_config(
        entries: &[XiaozhiEntry],
        catalog: &dyn UpstreamCatalog,
        settings: &BridgeSettings,
        bus: &Bus,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> (Self, Vec<String>) {
        let wanted = entries
            .iter()
            .map(|e| (e.name.clone(), e.endpoint.clone(), e))
            .collect();
        let (placed, mut warnings) = place(wanted, env);
        let mut bridges = Vec::new();
        for p in placed {
            if let Err(e) = p.item.tools.check() {
                warnings.push(format!("xiaozhi bridge {}: tools: {e}; skipped", p.name));
                continue;
            }
            let filter = p.item.tools.clone();
            match catalog.upstream(&p.name, &p.item.servers) {
                Ok(upstream) => bridges.push(XiaozhiBridge {
                    name: p.name,
                    endpoint: p.endpoint,
                    upstream,
                    filter,
                    settings: settings.clone(),
                }),
                Err(e) => warnings.push(format!("xiaozhi bridge {}: {e}; skipped", p.name)),
            }
        }
        for w in &warnings {
            tracing::warn!("{w}");
            bus.publish_with(|| Event::Log {
                at_ms: now_us() / 1000,
                level: "warn".into(),
                message: w.clone(),
            });
        }
        (Self::start(bridges, bus), warnings)
    }

    /// How many bridges run.
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// Whether none runs.
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// The running bridges.
    pub fn bridges(&self) -> &[RunningBridge] {
        &self.running
    }

    /// A cloneable view of their states.
    pub fn statuses(&self) -> BridgeStatuses {
        self.statuses.clone()
    }

    /// Stops every bridge at once: sockets closed with 1000, children ended within 5 s.
    pub async fn shutdown(self) {
        futures::future::join_all(self.running.into_iter().map(RunningBridge::shutdown)).await;
    }
}
