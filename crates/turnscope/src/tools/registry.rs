//! The tool registry: built-ins, the bot's own Rust tools and MCP servers merged into one
//! [`Tools`] set by the naming rules of [`merge`](super::merge), with the response-size cap on
//! MCP results. [`ToolRegistry`] says how servers join late and how `scope = "session"` servers
//! get a registry per session.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use serde_json::Value;

use super::builtin::{self, RESERVED_NAMES};
use super::limits::{McpLimits, cap_response};
use super::mcp_source::{MIN_ATTEMPT_TIMEOUT, McpSource, SourceOptions, SourceStatus};
use super::merge::{Merged, Route, ServerTools, Skip, SkipReason, SourceTool, merge};
use super::policy::Policy;
use super::{CallContext, FnTool, ToolOutcome, ToolSpec, Tools, ToolsFactory};
use crate::config::{McpServerConfig, Scope};
use crate::observe::event::now_us;
use crate::observe::{Bus, Event};

/// Builds a [`ToolRegistry`].
pub struct RegistryBuilder {
    bus: Bus,
    builtins: Vec<FnTool>,
    own: Vec<FnTool>,
    servers: Vec<McpServerConfig>,
    policy: Policy,
    limits: McpLimits,
}

impl RegistryBuilder {
    /// Adds the standard built-ins (`clock`, `echo`, `end_session`).
    pub fn builtins(mut self) -> Self {
        self.builtins.extend(builtin::all());
        self
    }

    /// Adds one built-in (first in precedence).
    pub fn builtin(mut self, tool: FnTool) -> Self {
        self.builtins.push(tool.with_source("builtin"));
        self
    }

    /// Adds one of the bot's own tools (after the built-ins, before MCP servers).
    pub fn tool(mut self, tool: FnTool) -> Self {
        self.own.push(tool);
        self
    }

    /// The MCP servers, in precedence order.
    pub fn servers(mut self, servers: &[McpServerConfig]) -> Self {
        self.servers.extend_from_slice(servers);
        self
    }

    /// The policy servers are checked against (default: everything allowed).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// The limits (default: [`McpLimits::default`]).
    pub fn limits(mut self, limits: McpLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Starts every shared server and waits for them, all together, at most the connect
    /// budget. Refused servers are skipped (event and log); the rest load.
    pub async fn start(self) -> Arc<ToolRegistry> {
        let policy = Arc::new(self.policy);
        let changes = Arc::new(tokio::sync::watch::Sender::new(0));
        let options = SourceOptions {
            attempt_timeout: self.limits.connect_budget.max(MIN_ATTEMPT_TIMEOUT),
            session: None,
            changes: Some(changes.clone()),
            ..SourceOptions::default()
        };
        let mut entries = Vec::new();
        let mut order = Vec::new();
        for config in &self.servers {
            if config.disabled {
                tracing::info!(server = %config.name, "MCP server disabled in the config; left out");
                continue;
            }
            match config.scope {
                Scope::Shared => {
                    if let Ok(source) =
                        McpSource::start(config, &policy, options.clone(), &self.bus)
                    {
                        order.push(Slot::Shared(entries.len()));
                        entries.push(Entry {
                            source,
                            owned: true,
                        });
                    }
                }
                Scope::Session => {
                    if McpSource::check(config, &policy, &self.bus).is_ok() {
                        order.push(Slot::Session(Box::new(config.clone())));
                    }
                }
            }
        }
        let waiting = futures::future::join_all(entries.iter().map(|e| e.source.first_attempt()));
        if tokio::time::timeout(self.limits.connect_budget, waiting)
            .await
            .is_err()
        {
            for entry in entries.iter().filter(|e| !e.source.first_attempt_done()) {
                entry
                    .source
                    .report_missed_budget(self.limits.connect_budget);
            }
        }
        let mut local = self.builtins;
        local.extend(self.own);
        let local_specs: Arc<[ToolSpec]> = local.iter().map(|t| t.spec().clone()).collect();
        let registry = ToolRegistry {
            local: Arc::new(local),
            local_specs,
            entries,
            order,
            policy,
            limits: self.limits,
            bus: self.bus,
            session: None,
            changes,
            ready_by: None,
            snapshot: RwLock::new(Arc::new(Snapshot::default())),
            rebuild: Mutex::new(()),
        };
        registry.current();
        Arc::new(registry)
    }
}

/// Built-ins, the bot's own tools and MCP servers as one tool set.
///
/// [`RegistryBuilder::start`] connects to every shared server in parallel under one start-up
/// budget; a server that misses it, or fails, contributes nothing yet and joins when its
/// background retry succeeds. The merged list is rebuilt only when a source's tool list
/// changes, so [`Tools::specs`] is an `Arc` clone on the hot path.
///
/// Servers with `scope = "session"` are not connected by the shared registry: as a
/// [`ToolsFactory`] it makes each session its own registry, which shares the other servers'
/// connections, opens its own ones, waits for them (bounded by the budget) before the first
/// model request, and closes them when the session ends.
pub struct ToolRegistry {
    local: Arc<Vec<FnTool>>,
    local_specs: Arc<[ToolSpec]>,
    /// Live sources in config order.
    entries: Vec<Entry>,
    /// Config order including session-scope servers (shared registry only).
    order: Vec<Slot>,
    policy: Arc<Policy>,
    limits: McpLimits,
    bus: Bus,
    session: Option<u64>,
    /// Moves whenever a source's tool list is replaced (shared with the session registries).
    changes: Arc<tokio::sync::watch::Sender<u64>>,
    ready_by: Option<tokio::time::Instant>,
    snapshot: RwLock<Arc<Snapshot>>,
    rebuild: Mutex<()>,
}

struct Entry {
    source: McpSource,
    /// Whether this registry opened it (and closes it).
    owned: bool,
}

enum Slot {
    Shared(usize),
    /// Boxed: a config is large beside an index.
    Session(Box<McpServerConfig>),
}

#[derive(Default)]
struct Snapshot {
    /// False only for the placeholder before the first merge.
    built: bool,
    generations: Vec<u64>,
    specs: Arc<[ToolSpec]>,
    merged: Merged,
}

impl ToolRegistry {
    /// Starts building a registry that publishes on `bus`.
    pub fn builder(bus: Bus) -> RegistryBuilder {
        RegistryBuilder {
            bus,
            builtins: Vec::new(),
            own: Vec::new(),
            servers: Vec::new(),
            policy: Policy::open(),
            limits: McpLimits::default(),
        }
    }

    /// The MCP sources this set uses, in config order.
    pub fn sources(&self) -> Vec<McpSource> {
        self.entries.iter().map(|e| e.source.clone()).collect()
    }

    /// The source called `name`, if this set uses one.
    pub fn source(&self, name: &str) -> Option<McpSource> {
        self.entries
            .iter()
            .find(|e| e.source.name() == name)
            .map(|e| e.source.clone())
    }

    /// Whether some servers open one connection per session.
    pub(crate) fn has_session_servers(&self) -> bool {
        self.order.iter().any(|s| matches!(s, Slot::Session(_)))
    }

    /// The limits in force.
    pub fn limits(&self) -> &McpLimits {
        &self.limits
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// What the last merge left out.
    pub fn skipped(&self) -> Vec<Skip> {
        self.current().merged.skipped.clone()
    }

    /// The registry for one session: shared connections reused, session-scope servers
    /// connected anew (in the background; [`Tools::ready`] waits for them).
    pub(crate) fn for_session(&self, session: u64) -> ToolRegistry {
        let options = SourceOptions {
            attempt_timeout: self.limits.connect_budget.max(MIN_ATTEMPT_TIMEOUT),
            session: Some(session),
            changes: Some(self.changes.clone()),
            ..SourceOptions::default()
        };
        let mut entries = Vec::new();
        for slot in &self.order {
            match slot {
                Slot::Shared(i) => entries.push(Entry {
                    source: self.entries[*i].source.clone(),
                    owned: false,
                }),
                Slot::Session(config) => {
                    if let Ok(source) =
                        McpSource::start(config, &self.policy, options.clone(), &self.bus)
                    {
                        entries.push(Entry {
                            source,
                            owned: true,
                        });
                    }
                }
            }
        }
        ToolRegistry {
            local: self.local.clone(),
            local_specs: self.local_specs.clone(),
            entries,
            order: Vec::new(),
            policy: self.policy.clone(),
            limits: self.limits,
            bus: self.bus.clone(),
            session: Some(session),
            changes: self.changes.clone(),
            ready_by: Some(tokio::time::Instant::now() + self.limits.connect_budget),
            snapshot: RwLock::new(Arc::new(Snapshot::default())),
            rebuild: Mutex::new(()),
        }
    }

    /// The merged set, rebuilt first if a source's tool list changed.
    fn current(&self) -> Arc<Snapshot> {
        let fresh = |snap: &Snapshot| {
            snap.built
                && self
                    .entries
                    .iter()
                    .zip(&snap.generations)
                    .all(|(e, g)| e.source.generation() == *g)
        };
        let snap = self.read_snapshot();
        if fresh(&snap) {
            return snap;
        }
        let _one_at_a_time = self.rebuild.lock().unwrap_or_else(|p| p.into_inner());
        let snap = self.read_snapshot();
        if fresh(&snap) {
            return snap;
        }
        let generations: Vec<u64> = self.entries.iter().map(|e| e.source.generation()).collect();
        let tools: Vec<Arc<[SourceTool]>> = self.entries.iter().map(|e| e.source.tools()).collect();
        let servers: Vec<ServerTools<'_>> = self
            .entries
            .iter()
            .zip(&tools)
            .map(|(e, t)| ServerTools {
                server: e.source.name(),
                tools: t,
            })
            .collect();
        let merged = merge(&self.local_specs, RESERVED_NAMES, &servers, &self.limits);
        self.log_new_skips(&snap.merged.skipped, &merged.skipped);
        let next = Arc::new(Snapshot {
            built: true,
            generations,
            specs: merged.specs.clone().into(),
            merged,
        });
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = next.clone();
        next
    }

    fn read_snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Logs (and publishes) what this merge left out that the last one did not: one line per
    /// name collision, one line per server for the caps.
    fn log_new_skips(&self, before: &[Skip], now: &[Skip]) {
        let known: HashSet<&Skip> = before.iter().collect();
        let fresh: Vec<&Skip> = now.iter().filter(|s| !known.contains(s)).collect();
        let scope = self
            .session
            .map(|s| format!("session {s}: "))
            .unwrap_or_default();
        let mut capped: Vec<(&str, &SkipReason, Vec<&str>)> = Vec::new();
        for skip in fresh {
            match &skip.reason {
                SkipReason::PerServerCap(_) | SkipReason::TotalCap(_) => {
                    match capped
                        .iter_mut()
                        .find(|(s, r, _)| *s == skip.source && *r == &skip.reason)
                    {
                        Some((_, _, names)) => names.push(&skip.tool),
                        None => capped.push((&skip.source, &skip.reason, vec![&skip.tool])),
                    }
                }
                _ => self.warn(format!("{scope}{skip}")),
            }
        }
        for (source, reason, names) in capped {
            let (cap, var) = match reason {
                SkipReason::PerServerCap(cap) => (cap, "MCP_MAX_TOOLS_PER_SERVER"),
                SkipReason::TotalCap(cap) => (cap, "MCP_MAX_TOOLS_TOTAL"),
                _ => continue,
            };
            self.warn(format!(
                "{scope}{} tools of {source} left out by the cap of {cap} ({var}): {}; narrow the server with tool_filter",
                names.len(),
                names.join(", ")
            ));
        }
    }

    fn warn(&self, message: String) {
        tracing::warn!("{message}");
        self.bus.publish_with(|| Event::Log {
            at_ms: now_us() / 1000,
            level: "warn".into(),
            message,
        });
    }

    /// Closes the connections this set opened (shared ones stay for the other sessions).
    pub async fn shutdown(&self) {
        futures::future::join_all(
            self.entries
                .iter()
                .filter(|e| e.owned)
                .map(|e| e.source.close()),
        )
        .await;
    }
}

#[async_trait]
impl Tools for ToolRegistry {
    fn specs(&self) -> Arc<[ToolSpec]> {
        self.current().specs.clone()
    }

    fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.changes.subscribe())
    }

    async fn call(&self, name: &str, arguments: Value) -> ToolOutcome {
        self.call_in(name, arguments, &CallContext::detached())
            .await
    }

    async fn call_in(&self, name: &str, arguments: Value, cx: &CallContext) -> ToolOutcome {
        let snap = self.current();
        match snap.merged.routes.get(name) {
            Some(Route::Local(i)) => self.local[*i].run(arguments, cx).await,
            Some(Route::Mcp { server, original }) => {
                let outcome = self.entries[*server].source.call(original, arguments).await;
                cap_response(outcome, self.limits.response_bytes)
            }
            None => {
                let known: Vec<&str> = snap.specs.iter().map(|s| s.name.as_str()).collect();
                ToolOutcome::error(format!(
                    "unknown tool `{name}`; this bot has: {}. Call one of those.",
                    if known.is_empty() {
                        "no tools".to_string()
                    } else {
                        known.join(", ")
                    }
                ))
            }
        }
    }

    async fn ready(&self) {
        let Some(deadline) = self.ready_by else {
            return;
        };
        let pending = self
            .entries
            .iter()
            .filter(|e| e.owned && !e.source.first_attempt_done())
            .map(|e| e.source.first_attempt());
        let _ = tokio::time::timeout_at(deadline, futures::future::join_all(pending)).await;
    }

    async fn close(&self) {
        self.shutdown().await;
    }
}

impl ToolsFactory for ToolRegistry {
    fn open(&self, session: u64) -> Option<Arc<dyn Tools>> {
        self.has_session_servers()
            .then(|| Arc::new(self.for_session(session)) as Arc<dyn Tools>)
    }
}

/// One line per source for logs and the console: `name (transport): status`.
pub fn describe_sources(registry: &ToolRegistry) -> Vec<String> {
    registry
        .sources()
        .iter()
        .map(|s| {
            let status = match s.status() {
                SourceStatus::Connecting => "connecting".to_string(),
                SourceStatus::Up { tools, pid } => format!(
                    "up, {tools} tools{}",
                    pid.map(|p| format!(", pid {p}")).unwrap_or_default()
                ),
                SourceStatus::Down { error, attempts } => {
                    let noun = if attempts == 1 { "attempt" } else { "attempts" };
                    format!("down after {attempts} {noun}: {error}")
                }
                SourceStatus::Closed => "closed".to_string(),
            };
            format!("{} ({}): {status}", s.name(), s.transport().as_str())
        })
        .collect()
}
