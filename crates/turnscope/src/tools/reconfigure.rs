//! A config reload's tool sources: [`ToolRegistry::prepare`] starts the servers a new config
//! adds or changes and waits for them (at most the connect budget) while the running set
//! still serves; [`ToolRegistry::commit`] then puts the new set in place at once, for the
//! shared registry and every session's own registry. Unchanged servers keep their source (its
//! connection, its child process); removed ones are dropped, which closes them once no turn
//! still holds them ([`Tools::pinned`](super::Tools::pinned)).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::mcp_source::McpSource;
use super::policy::Policy;
use super::registry::{Core, OwnSet, SharedSet, Slot, ToolRegistry};
use crate::config::McpServerConfig;

/// What a reconfiguration did to the tool sources, by server name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceChanges {
    /// Servers that were not there and now connect.
    pub added: Vec<String>,
    /// Servers whose entry changed (or that the new `[policy]` admits again): reconnected.
    pub changed: Vec<String>,
    /// Servers that are gone: closed once no turn uses them.
    pub removed: Vec<String>,
    /// Servers the policy or their entry refused (a `skipped` event says why).
    pub refused: Vec<String>,
    /// Whether the built-ins were turned on or off.
    pub builtins: Option<bool>,
}

/// A new set of sources, connected (or given up on within the budget), not yet in use.
pub struct PreparedSources {
    set: SharedSet,
    changes: SourceChanges,
    policy_changed: bool,
    _one_at_a_time: tokio::sync::OwnedMutexGuard<()>,
}

impl PreparedSources {
    /// What committing it will change.
    pub fn changes(&self) -> &SourceChanges {
        &self.changes
    }
}

impl ToolRegistry {
    /// Starts the sources `servers` adds or changes against the running set (all of them under
    /// a new `policy`, when given) and waits for their first connection attempts, at most the
    /// connect budget; `builtins` turns the built-in tools on or off. Nothing changes for
    /// callers until [`commit`](ToolRegistry::commit); one preparation at a time (a second
    /// waits for the first to be committed or dropped).
    pub async fn prepare(
        &self,
        servers: &[McpServerConfig],
        policy: Option<Policy>,
        builtins: bool,
    ) -> PreparedSources {
        let one_at_a_time = self.core.reconfiguring.clone().lock_owned().await;
        let before = self.core.set.load_full();
        let policy_changed = policy.is_some();
        let policy = policy.map_or_else(|| before.policy.clone(), Arc::new);
        let (slots, fresh, refused) =
            self.core
                .start_slots(servers, &policy, &before.slots, !policy_changed);
        self.core.await_first_attempts(&fresh, None).await;
        let mut changes = SourceChanges {
            refused,
            builtins: (builtins != before.builtins_on).then_some(builtins),
            ..SourceChanges::default()
        };
        for slot in &slots {
            let config = slot.config();
            match before.slots.iter().find(|b| b.config().name == config.name) {
                None => changes.added.push(config.name.clone()),
                Some(b) if b.config() != config || policy_changed => {
                    changes.changed.push(config.name.clone());
                }
                Some(_) => {}
            }
        }
        for b in &before.slots {
            if !slots.iter().any(|s| s.config().name == b.config().name) {
                changes.removed.push(b.config().name.clone());
            }
        }
        let local = if builtins == before.builtins_on {
            before.local.clone()
        } else {
            self.core.local(builtins)
        };
        PreparedSources {
            set: SharedSet {
                version: before.version + 1,
                builtins_on: builtins,
                local,
                policy,
                slots,
            },
            changes,
            policy_changed,
            _one_at_a_time: one_at_a_time,
        }
    }

    /// Puts a prepared set in place: from now on every turn that starts offers its tools.
    /// Each open session's own `scope = "session"` servers follow it (kept, opened, dropped);
    /// the merge is redone at once so nothing still holds a removed source but the turns in
    /// flight; the change signal moves.
    pub fn commit(&self, prepared: PreparedSources) -> SourceChanges {
        let PreparedSources {
            set,
            changes,
            policy_changed,
            _one_at_a_time,
        } = prepared;
        let set = Arc::new(set);
        self.core.set.store(set.clone());
        let children: Vec<_> = {
            let mut list = self.core.children.lock().unwrap_or_else(|p| p.into_inner());
            list.retain(|c| c.strong_count() > 0);
            list.iter().filter_map(std::sync::Weak::upgrade).collect()
        };
        for own in children {
            if own.closed.load(Ordering::Acquire) {
                continue;
            }
            let before = own.set.load_full();
            let keep: &[(McpServerConfig, McpSource)] =
                if policy_changed { &[] } else { &before.sources };
            let mut next = self.core.own_sources(own.session, &set, keep);
            next.version = before.version + 1;
            own.set.store(Arc::new(next));
            own.drop_snapshot();
        }
        self.current();
        self.core.changes.send_modify(|n| *n = n.wrapping_add(1));
        changes
    }

    /// [`prepare`](ToolRegistry::prepare) and [`commit`](ToolRegistry::commit) in one.
    pub async fn reconfigure(
        &self,
        servers: &[McpServerConfig],
        policy: Option<Policy>,
        builtins: bool,
    ) -> SourceChanges {
        let prepared = self.prepare(servers, policy, builtins).await;
        self.commit(prepared)
    }
}

impl Core {
    /// The own sources of `session` for `set`: an entry of `keep` whose config is unchanged
    /// keeps its source, the other `scope = "session"` slots start connecting (the session's
    /// next turn waits for them, at most the connect budget).
    pub(super) fn own_sources(
        &self,
        session: u64,
        set: &SharedSet,
        keep: &[(McpServerConfig, McpSource)],
    ) -> OwnSet {
        let mut started = false;
        let sources = set
            .slots
            .iter()
            .filter_map(|slot| {
                let Slot::Session(config) = slot else {
                    return None;
                };
                if let Some((c, s)) = keep.iter().find(|(c, _)| c == config) {
                    return Some((c.clone(), s.clone()));
                }
                let options = self.shared_options(Some(session));
                let source = McpSource::start(config, &set.policy, options, &self.bus).ok()?;
                started = true;
                Some((config.clone(), source))
            })
            .collect();
        OwnSet {
            version: 1,
            sources,
            ready_by: started.then(|| tokio::time::Instant::now() + self.limits.connect_budget),
        }
    }
}
