//! The tool registry: built-ins, the bot's own Rust tools and MCP servers merged into one
//! [`Tools`] set by the naming rules of [`merge`](super::merge), with the response-size cap on
//! MCP results. [`ToolRegistry`] says how servers join late, how `scope = "session"` servers
//! get a registry per session, and how a config reload replaces its sources
//! ([`reconfigure`](super::reconfigure)).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use arc_swap::ArcSwap;
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
    /// The one tool the caller needs, when it needs only one: [`RegistryBuilder::start`]
    /// stops waiting once it is known which server answers for it.
    needed: Option<String>,
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

    /// Waits only until the server that answers for the tool `name` has listed it (the
    /// servers before it in precedence have ended their first attempt), not for every
    /// server: a one-shot call of one tool does not wait on an unrelated slow server. The
    /// others go on connecting.
    pub fn needing(mut self, name: &str) -> Self {
        self.needed = Some(name.to_string());
        self
    }

    /// Starts every shared server and waits for them, all together, at most the connect
    /// budget. Refused servers are skipped (event and log); the rest load.
    pub async fn start(self) -> Arc<ToolRegistry> {
        let builtins_on = !self.builtins.is_empty();
        // Turning the built-ins on by a reload needs them at hand.
        let builtins = if builtins_on {
            self.builtins
        } else {
            builtin::all()
        };
        let core = Core {
            builtins: builtins.into_iter().map(Arc::new).collect(),
            own_tools: self.own.into_iter().map(Arc::new).collect(),
            set: ArcSwap::from_pointee(SharedSet::default()),
            limits: self.limits,
            bus: self.bus,
            changes: Arc::new(tokio::sync::watch::Sender::new(0)),
            merged: MergeCell::default(),
            children: Mutex::new(Vec::new()),
            reconfiguring: Arc::default(),
        };
        let policy = Arc::new(self.policy);
        let (slots, fresh, _) = core.start_slots(&self.servers, &policy, &[], true);
        let local_answers = self.needed.as_ref().is_some_and(|name| {
            let builtins = core.builtins.iter().filter(|_| builtins_on);
            builtins
                .chain(&core.own_tools)
                .any(|t| t.spec().name == *name)
        });
        if !local_answers {
            core.await_first_attempts(&fresh, self.needed.as_deref())
                .await;
        }
        core.set.store(Arc::new(SharedSet {
            version: 1,
            builtins_on,
            local: core.local(builtins_on),
            policy,
            slots,
        }));
        let registry = ToolRegistry {
            core: Arc::new(core),
            own: None,
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
/// changes or the sources are replaced, so [`Tools::specs`] is an `Arc` clone on the hot path.
///
/// Servers with `scope = "session"` are not connected by the shared registry: as a
/// [`ToolsFactory`] it makes each session its own registry, which shares the other servers'
/// connections, opens its own ones, waits for them (bounded by the budget) before the first
/// model request, and closes them when the session ends. A session registry with no server of
/// its own is the shared set (no copy of it).
///
/// [`ToolRegistry::reconfigure`] replaces the servers (a config reload): added and changed ones
/// connect, unchanged ones are kept as they are, removed ones close once no turn uses them
/// (each turn keeps the set it started with, [`Tools::pinned`]).
pub struct ToolRegistry {
    pub(super) core: Arc<Core>,
    /// A session's own registry: its `scope = "session"` sources (none: the shared registry).
    pub(super) own: Option<Arc<Own>>,
}

/// What the shared registry and the session registries it made have in common.
pub(super) struct Core {
    /// The built-ins, offered while the set says so.
    pub(super) builtins: Vec<Arc<FnTool>>,
    /// The bot's own Rust tools.
    pub(super) own_tools: Vec<Arc<FnTool>>,
    /// The sources in config order; a reconfiguration replaces it whole.
    pub(super) set: ArcSwap<SharedSet>,
    pub(super) limits: McpLimits,
    pub(super) bus: Bus,
    /// Moves whenever a source's tool list is replaced or the sources are.
    pub(super) changes: Arc<tokio::sync::watch::Sender<u64>>,
    /// The shared set merged.
    merged: MergeCell,
    /// The session registries made so far (dead ones dropped as new ones come).
    pub(super) children: Mutex<Vec<Weak<Own>>>,
    /// One reconfiguration at a time.
    pub(super) reconfiguring: Arc<tokio::sync::Mutex<()>>,
}

/// The shared registry's sources at one moment.
#[derive(Default)]
pub(super) struct SharedSet {
    /// One more per reconfiguration that changed something.
    pub(super) version: u64,
    pub(super) builtins_on: bool,
    pub(super) local: Arc<Local>,
    pub(super) policy: Arc<Policy>,
    /// Every server in config order.
    pub(super) slots: Vec<Slot>,
}

/// One `[[mcp_servers]]` entry of the set.
pub(super) enum Slot {
    /// Connected once for every session.
    Shared {
        config: McpServerConfig,
        source: McpSource,
    },
    /// Connected by each session's own registry.
    Session(McpServerConfig),
}

impl Slot {
    pub(super) fn config(&self) -> &McpServerConfig {
        match self {
            Slot::Shared { config, .. } | Slot::Session(config) => config,
        }
    }
}

impl SharedSet {
    /// The sources every session shares, in config order.
    fn shared_sources(&self) -> impl Iterator<Item = &McpSource> {
        self.slots.iter().filter_map(|slot| match slot {
            Slot::Shared { source, .. } => Some(source),
            Slot::Session(_) => None,
        })
    }
}

/// The local tools (built-ins first, then the bot's own) and their specs.
#[derive(Default)]
pub(super) struct Local {
    tools: Vec<Arc<FnTool>>,
    specs: Arc<[ToolSpec]>,
}

/// A session registry's own sources.
pub(super) struct Own {
    pub(super) session: u64,
    pub(super) set: ArcSwap<OwnSet>,
    merged: MergeCell,
    /// Set when its session ended: a reconfiguration opens nothing more for it.
    pub(super) closed: AtomicBool,
}

/// A session registry's sources at one moment: one per `scope = "session"` slot of the shared
/// set it follows.
#[derive(Default)]
pub(super) struct OwnSet {
    pub(super) version: u64,
    pub(super) sources: Vec<(McpServerConfig, McpSource)>,
    /// The first turn after these were opened waits for them until then.
    pub(super) ready_by: Option<tokio::time::Instant>,
}

/// A merged set: what [`Tools::specs`] offers and where each name is dispatched. It is also
/// the fixed view one turn keeps ([`Tools::pinned`]).
#[derive(Default)]
pub(super) struct Snapshot {
    /// False only for the placeholder before the first merge.
    built: bool,
    /// The shared set's and the own set's versions it was merged from.
    versions: (u64, u64),
    generations: Vec<u64>,
    /// The sources in merge order (routes index them).
    sources: Vec<McpSource>,
    local: Arc<Local>,
    specs: Arc<[ToolSpec]>,
    merged: Merged,
    response_bytes: usize,
}

/// A merged set kept until its sources change, rebuilt by one caller at a time.
#[derive(Default)]
struct MergeCell {
    snapshot: RwLock<Arc<Snapshot>>,
    rebuild: Mutex<()>,
}

impl MergeCell {
    fn read(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The snapshot merged from the sets of `versions`: the kept one while it is fresh, else
    /// `build`'s (given the one it replaces), kept from now on.
    fn get(
        &self,
        versions: (u64, u64),
        build: impl FnOnce(&Snapshot) -> Snapshot,
    ) -> Arc<Snapshot> {
        let snap = self.read();
        if snap.fresh(versions) {
            return snap;
        }
        let _one_at_a_time = self.rebuild.lock().unwrap_or_else(|p| p.into_inner());
        let snap = self.read();
        if snap.fresh(versions) {
            return snap;
        }
        let next = Arc::new(build(&snap));
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = next.clone();
        next
    }

    /// Forgets the kept snapshot (it held clones of sources that may be gone).
    fn clear(&self) {
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = Arc::default();
    }
}

impl Snapshot {
    fn fresh(&self, versions: (u64, u64)) -> bool {
        self.built
            && self.versions == versions
            && self
                .sources
                .iter()
                .zip(&self.generations)
                .all(|(s, g)| s.generation() == *g)
    }
}

#[async_trait]
impl Tools for Snapshot {
    fn specs(&self) -> Arc<[ToolSpec]> {
        self.specs.clone()
    }

    async fn call(&self, name: &str, arguments: Value) -> ToolOutcome {
        self.call_in(name, arguments, &CallContext::detached())
            .await
    }

    async fn call_in(&self, name: &str, arguments: Value, cx: &CallContext) -> ToolOutcome {
        match self.merged.routes.get(name) {
            Some(Route::Local(i)) => self.local.tools[*i].run(arguments, cx).await,
            Some(Route::Mcp { server, original }) => {
                let outcome = self.sources[*server].call(original, arguments).await;
                cap_response(outcome, self.response_bytes)
            }
            None => {
                let known: Vec<&str> = self.specs.iter().map(|s| s.name.as_str()).collect();
                let mut text = format!(
                    "unknown tool `{name}`; the tools offered here are: {}. Call one of those.",
                    if known.is_empty() {
                        "no tools".to_string()
                    } else {
                        known.join(", ")
                    }
                );
                for why in self.not_serving() {
                    text.push(' ');
                    text.push_str(&why);
                }
                ToolOutcome::error(text)
            }
        }
    }

    fn not_serving(&self) -> Vec<String> {
        not_serving(&self.sources)
    }
}

/// Why each of `sources` that is not up is not serving (see [`Tools::not_serving`]).
fn not_serving(sources: &[McpSource]) -> Vec<String> {
    sources
        .iter()
        .filter(|s| !matches!(s.status(), SourceStatus::Up { .. }))
        .map(McpSource::not_serving_why)
        .collect()
}

impl Core {
    /// The local tools with the built-ins on or off.
    pub(super) fn local(&self, builtins_on: bool) -> Arc<Local> {
        let tools: Vec<Arc<FnTool>> = if builtins_on {
            self.builtins
                .iter()
                .chain(&self.own_tools)
                .cloned()
                .collect()
        } else {
            self.own_tools.clone()
        };
        let specs = tools.iter().map(|t| t.spec().clone()).collect();
        Arc::new(Local { tools, specs })
    }

    pub(super) fn shared_options(&self, session: Option<u64>) -> SourceOptions {
        SourceOptions {
            attempt_timeout: self.limits.connect_budget.max(MIN_ATTEMPT_TIMEOUT),
            session,
            changes: Some(self.changes.clone()),
            ..SourceOptions::default()
        }
    }

    /// The slots for `servers` under `policy`: a shared server whose entry is in `before`
    /// unchanged (and `reuse`) keeps its source, the others start connecting (returned second);
    /// refused and disabled servers are left out. Third: the names that were refused.
    pub(super) fn start_slots(
        &self,
        servers: &[McpServerConfig],
        policy: &Arc<Policy>,
        before: &[Slot],
        reuse: bool,
    ) -> (Vec<Slot>, Vec<McpSource>, Vec<String>) {
        let mut slots = Vec::new();
        let mut fresh = Vec::new();
        let mut refused = Vec::new();
        for config in servers {
            if config.disabled {
                tracing::info!(server = %config.name, "MCP server disabled in the config; left out");
                continue;
            }
            let kept = before.iter().find_map(|slot| match slot {
                Slot::Shared { config: c, source } if reuse && c == config => Some(source),
                _ => None,
            });
            match (config.scope, kept) {
                (Scope::Shared, Some(source)) => slots.push(Slot::Shared {
                    config: config.clone(),
                    source: source.clone(),
                }),
                (Scope::Shared, None) => {
                    match McpSource::start(config, policy, self.shared_options(None), &self.bus) {
                        Ok(source) => {
                            fresh.push(source.clone());
                            slots.push(Slot::Shared {
                                config: config.clone(),
                                source,
                            });
                        }
                        Err(_) => refused.push(config.name.clone()),
                    }
                }
                (Scope::Session, _) => {
                    if McpSource::check(config, policy, &self.bus).is_ok() {
                        slots.push(Slot::Session(config.clone()));
                    } else {
                        refused.push(config.name.clone());
                    }
                }
            }
        }
        (slots, fresh, refused)
    }

    /// Waits for the first connection attempt of `sources`, all together, at most the connect
    /// budget; those still connecting then are reported and join when they come up.
    pub(super) async fn await_first_attempts(&self, sources: &[McpSource], needed: Option<&str>) {
        use futures::StreamExt;
        let budget = self.limits.connect_budget;
        let waiting = async {
            let mut attempts: futures::stream::FuturesUnordered<_> =
                sources.iter().map(McpSource::first_attempt).collect();
            while attempts.next().await.is_some() {
                if needed.is_some_and(|name| answered_by_one_done(sources, name)) {
                    break;
                }
            }
        };
        if tokio::time::timeout(budget, waiting).await.is_err() {
            for source in sources.iter().filter(|s| !s.first_attempt_done()) {
                source.report_missed_budget(budget);
            }
        }
    }

    /// The shared set merged, rebuilt first if it changed.
    fn current_shared(&self) -> Arc<Snapshot> {
        let set = self.set.load();
        self.merged.get((set.version, 0), |before| {
            let sources = set.shared_sources().cloned().collect();
            self.merge(before, (set.version, 0), sources, &set.local, None)
        })
    }

    /// Merges `sources` with `local` and logs what the merge left out that `before` did not.
    fn merge(
        &self,
        before: &Snapshot,
        versions: (u64, u64),
        sources: Vec<McpSource>,
        local: &Arc<Local>,
        session: Option<u64>,
    ) -> Snapshot {
        let snapshot = Snapshot {
            versions,
            ..self.merge_quietly(local, sources)
        };
        self.log_new_skips(&before.merged.skipped, &snapshot.merged.skipped, session);
        snapshot
    }

    /// `sources` merged among themselves alone (no local tool), with nothing logged: a
    /// bridge's view of some servers, built when it asks (their lists are short, its calls
    /// rare).
    fn merged_alone(&self, sources: Vec<McpSource>) -> Snapshot {
        let local = Arc::new(Local::default());
        self.merge_quietly(&local, sources)
    }

    /// [`Core::merge`] without a `before` to log against.
    fn merge_quietly(&self, local: &Arc<Local>, sources: Vec<McpSource>) -> Snapshot {
        let generations: Vec<u64> = sources.iter().map(McpSource::generation).collect();
        let tools: Vec<Arc<[SourceTool]>> = sources.iter().map(McpSource::tools).collect();
        let unusable: Vec<Arc<[(String, String)]>> =
            sources.iter().map(McpSource::unusable).collect();
        let servers: Vec<ServerTools<'_>> = sources
            .iter()
            .zip(tools.iter().zip(&unusable))
            .map(|(s, (t, u))| ServerTools {
                server: s.name(),
                tools: t,
                unusable: u,
            })
            .collect();
        let merged = merge(&local.specs, RESERVED_NAMES, &servers, &self.limits);
        Snapshot {
            built: true,
            versions: (0, 0),
            generations,
            sources,
            local: local.clone(),
            specs: merged.specs.clone().into(),
            merged,
            response_bytes: self.limits.response_bytes,
        }
    }

    /// Logs (and publishes) what this merge left out that the last one did not: one line per
    /// name collision, one line per server for the caps.
    fn log_new_skips(&self, before: &[Skip], now: &[Skip], session: Option<u64>) {
        let known: HashSet<&Skip> = before.iter().collect();
        let fresh: Vec<&Skip> = now.iter().filter(|s| !known.contains(s)).collect();
        let scope = session
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
}

impl Own {
    pub(super) fn new(session: u64, set: OwnSet) -> Self {
        Self {
            session,
            set: ArcSwap::from_pointee(set),
            merged: MergeCell::default(),
            closed: AtomicBool::new(false),
        }
    }

    /// Forgets the merge of a set that had sources of its own (it held clones of them).
    pub(super) fn drop_snapshot(&self) {
        self.merged.clear();
    }
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
            needed: None,
        }
    }

    /// The MCP sources this set uses, in config order.
    pub fn sources(&self) -> Vec<McpSource> {
        self.current().sources.clone()
    }

    /// The source called `name`, if this set uses one.
    pub fn source(&self, name: &str) -> Option<McpSource> {
        self.current()
            .sources
            .iter()
            .find(|s| s.name() == name)
            .cloned()
    }

    /// The limits in force.
    pub fn limits(&self) -> &McpLimits {
        &self.core.limits
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.core.set.load().policy.clone()
    }

    /// What the last merge left out.
    pub fn skipped(&self) -> Vec<Skip> {
        self.current().merged.skipped.clone()
    }

    /// The registry for one session: shared connections reused, session-scope servers
    /// connected anew (in the background; [`Tools::ready`] waits for them).
    pub(crate) fn for_session(&self, session: u64) -> ToolRegistry {
        let set = self.core.set.load();
        let own = Arc::new(Own::new(session, self.core.own_sources(session, &set, &[])));
        let mut children = self.core.children.lock().unwrap_or_else(|p| p.into_inner());
        children.retain(|c| c.strong_count() > 0);
        children.push(Arc::downgrade(&own));
        drop(children);
        ToolRegistry {
            core: self.core.clone(),
            own: Some(own),
        }
    }

    /// The merged set, rebuilt first if a source's tool list changed or the sources did.
    pub(super) fn current(&self) -> Arc<Snapshot> {
        let Some(own) = &self.own else {
            return self.core.current_shared();
        };
        let own_set = own.set.load();
        if own_set.sources.is_empty() {
            return self.core.current_shared();
        }
        let set = self.core.set.load();
        let versions = (set.version, own_set.version);
        own.merged.get(versions, |before| {
            // Config order: the shared sources with this session's own in their places.
            let sources = set
                .slots
                .iter()
                .filter_map(|slot| match slot {
                    Slot::Shared { source, .. } => Some(source.clone()),
                    Slot::Session(config) => own_set
                        .sources
                        .iter()
                        .find(|(c, _)| c.name == config.name)
                        .map(|(_, s)| s.clone()),
                })
                .collect();
            self.core
                .merge(before, versions, sources, &set.local, Some(own.session))
        })
    }

    /// Closes the connections this set opened (shared ones stay for the other sessions).
    pub async fn shutdown(&self) {
        let sources: Vec<McpSource> = match &self.own {
            Some(own) => {
                own.closed.store(true, Ordering::Release);
                let set = own.set.swap(Arc::new(OwnSet::default()));
                own.drop_snapshot();
                set.sources.iter().map(|(_, s)| s.clone()).collect()
            }
            None => self.core.set.load().shared_sources().cloned().collect(),
        };
        futures::future::join_all(sources.iter().map(McpSource::close)).await;
    }
}

#[async_trait]
impl Tools for ToolRegistry {
    fn specs(&self) -> Arc<[ToolSpec]> {
        self.current().specs.clone()
    }

    fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.core.changes.subscribe())
    }

    async fn call(&self, name: &str, arguments: Value) -> ToolOutcome {
        self.call_in(name, arguments, &CallContext::detached())
            .await
    }

    async fn call_in(&self, name: &str, arguments: Value, cx: &CallContext) -> ToolOutcome {
        self.current().call_in(name, arguments, cx).await
    }

    async fn ready(&self) {
        let Some(own) = &self.own else {
            return;
        };
        let set = own.set.load_full();
        let Some(deadline) = set.ready_by else {
            return;
        };
        let pending = set
            .sources
            .iter()
            .filter(|(_, s)| !s.first_attempt_done())
            .map(|(_, s)| s.first_attempt());
        let _ = tokio::time::timeout_at(deadline, futures::future::join_all(pending)).await;
    }

    async fn close(&self) {
        self.shutdown().await;
    }

    fn pinned(&self) -> Option<Arc<dyn Tools>> {
        Some(self.current())
    }

    fn not_serving(&self) -> Vec<String> {
        not_serving(&self.current().sources)
    }

    fn of_sources(&self, sources: &std::collections::BTreeSet<String>) -> Option<Arc<dyn Tools>> {
        let chosen: Vec<McpSource> = self
            .current()
            .sources
            .iter()
            .filter(|s| sources.contains(s.name()))
            .cloned()
            .collect();
        Some(Arc::new(self.core.merged_alone(chosen)))
    }
}

impl ToolsFactory for ToolRegistry {
    /// Every session gets a registry of its own (a reload may add `scope = "session"`
    /// servers to sessions already open); with no such server it is the shared set.
    fn open(&self, session: u64) -> Option<Arc<dyn Tools>> {
        self.own
            .is_none()
            .then(|| Arc::new(self.for_session(session)) as Arc<dyn Tools>)
    }
}

/// Whether it is known which of `sources` (in precedence order) answers for the tool `name`:
/// one has listed it and every one before it has ended its first attempt.
fn answered_by_one_done(sources: &[McpSource], name: &str) -> bool {
    for source in sources {
        if !source.first_attempt_done() {
            return false;
        }
        if source.tools().iter().any(|t| t.name == name) {
            return true;
        }
    }
    false
}

/// A source that is down, as every listing says it: `down after 2 attempts: ERROR`.
pub fn down_after(attempts: u32, error: &str) -> String {
    let noun = if attempts == 1 { "attempt" } else { "attempts" };
    format!("down after {attempts} {noun}: {error}")
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
                SourceStatus::Down { error, attempts } => down_after(attempts, &error),
                SourceStatus::Closed => "closed".to_string(),
            };
            format!("{} ({}): {status}", s.name(), s.transport().as_str())
        })
        .collect()
}
