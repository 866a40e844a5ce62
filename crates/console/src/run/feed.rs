//! The live feed: what the console reads from the running server. Events come through its own
//! bus [`Subscription`] (bounded and lossy: the server never waits, misses are counted); each tick
//! also snapshots the session table and the selected session's turns, which stay exact when
//! events were missed. Finished turns are cached, so a tick copies only the turn in flight.

use std::collections::HashMap;
use std::sync::Arc;

use turnscope::app::Reloader;
use turnscope::bot::TurnEnd;
use turnscope::bridge::xiaozhi::BridgeStatuses;
use turnscope::observe::event::now_us;
use turnscope::observe::{Event, Subscription};
use turnscope::sessions::Sessions;
use turnscope::tools::ToolSpec;
use turnscope::tools::registry::{ToolRegistry, describe_sources};

use super::kept_handles::KeptHandles;
use super::stored::StoredSessions;
use crate::state::{Activity, ConsoleState, SessionRow, TurnView};

/// What a task the console started hands back to the loop.
pub enum Done {
    /// A chat call ended: (session, line, reply or error text).
    Chat(
        u64,
        String,
        Box<Result<turnscope::sessions::ChatReply, String>>,
    ),
    /// A session opened for the person (or could not be): `replacing` the person's own
    /// session that had ended, `chatting` when a line goes to it next.
    Opened {
        /// The new session's number, or why it could not open.
        result: Result<u64, String>,
        /// The person's own session that had ended, when this one takes its place.
        replacing: Option<u64>,
        /// Whether a line goes to it next.
        chatting: bool,
        /// The line that was to go to it, given back to the input line when it could not open.
        unsent: Option<String>,
    },
    /// A hand call of an attached bot's tool ended (made over MCP, or why it was not).
    Hand(crate::run::workbench::HandDone),
    /// A stored conversation of the person's was reopened to take their line: `stored` its
    /// row's number, `number` its number as an open session, `prefix` its handle's prefix.
    Reopened {
        /// The stored row it was shown as.
        stored: u64,
        /// Its number now that it is open.
        number: u64,
        /// Its handle's first 8 characters.
        prefix: String,
    },
    /// Something worth the person's notice that a task met (an error when `error`).
    Notice {
        /// What to say.
        text: String,
        /// Whether it is an error.
        error: bool,
    },
}

/// What the loop asks of a bot this process does not run (`run::attach` implements it): the
/// header's facts each tick, what finished since, and the person's actions.
pub trait Attachment: Send + Sync {
    /// Lays what the attachment knows now over `state` (the header's view line); whether
    /// that changed it.
    fn refresh(&self, state: &mut ConsoleState) -> bool;
    /// Brings what finished since the last tick into the console (a session opened).
    fn settle(&self, console: &mut crate::view::console::Console);
    /// Does what an input asks; chat results come back through `chat_tx`.
    fn perform(
        self: Arc<Self>,
        action: crate::input::actions::Action,
        console: &mut crate::view::console::Console,
        chat_tx: &tokio::sync::mpsc::UnboundedSender<Done>,
    );
}

/// Most events folded in one go before the loop looks at the terminal again.
pub const BATCH: usize = 4096;

/// The console's view of a running server.
pub struct LiveFeed {
    sub: Subscription,
    /// The session table, when the server runs in this process (`None` when attached).
    sessions: Option<Sessions>,
    /// The attached bot (`turnscope attach`), when this console is attached.
    pub remote: Option<Arc<dyn Attachment>>,
    done: HashMap<(u64, u64), TurnView>,
    cached_for: Option<u64>,
    bridges: Option<BridgeStatuses>,
    registry: Option<Arc<ToolRegistry>>,
    specs: Option<Arc<[ToolSpec]>>,
    /// The selected session as last seen, for one final snapshot once it has closed.
    held: Option<Arc<turnscope::sessions::Session>>,
    /// What reloads the server's config (the `R` key).
    reloader: Option<Reloader>,
    /// The sessions the store keeps that are not open here.
    stored: Option<StoredSessions>,
    /// The handles of the person's console conversations, kept across restarts.
    kept: Option<KeptHandles>,
}

impl LiveFeed {
    /// A feed over `sessions`, reading events from `sub`.
    pub fn new(sub: Subscription, sessions: Sessions) -> Self {
        Self {
            stored: Some(StoredSessions::new(sessions.store().clone())),
            sub,
            sessions: Some(sessions),
            remote: None,
            done: HashMap::new(),
            cached_for: None,
            bridges: None,
            registry: None,
            specs: None,
            held: None,
            reloader: None,
            kept: None,
        }
    }

    /// A feed of an attached bot: events only (no session table in this process).
    pub fn attached(sub: Subscription, remote: Arc<dyn Attachment>) -> Self {
        Self {
            sub,
            sessions: None,
            stored: None,
            remote: Some(remote),
            done: HashMap::new(),
            cached_for: None,
            bridges: None,
            registry: None,
            specs: None,
            held: None,
            reloader: None,
            kept: None,
        }
    }

    /// Goes on with the person's stored console conversations whose handles `kept` holds
    /// (their rows are the person's, and a line sent into one reopens it).
    pub fn with_kept_handles(mut self, kept: KeptHandles) -> Self {
        if let Some(stored) = &mut self.stored {
            let holds = kept.clone();
            stored.set_kept(Arc::new(move |id| holds.holds(id)));
        }
        self.kept = Some(kept);
        self
    }

    /// The handles of the person's console conversations, kept across restarts.
    pub fn kept_handles(&self) -> Option<&KeptHandles> {
        self.kept.as_ref()
    }

    /// Reloads the config with `reloader` when asked (`R`).
    pub fn with_reloader(mut self, reloader: Reloader) -> Self {
        self.reloader = Some(reloader);
        self
    }

    /// What reloads the server's config, when this feed has it.
    pub fn reloader(&self) -> Option<&Reloader> {
        self.reloader.as_ref()
    }

    /// Also shows these bridges' states.
    pub fn with_bridges(mut self, bridges: BridgeStatuses) -> Self {
        self.bridges = Some(bridges);
        self
    }

    /// Also shows this registry's sources and skipped tools.
    pub fn with_registry(mut self, registry: Option<Arc<ToolRegistry>>) -> Self {
        self.registry = registry;
        self
    }

    /// Sets the tool list (and the sources and skips) when the bot's tools changed since the
    /// last call: an MCP server came up late or refreshed its list.
    pub fn refresh_tools(&mut self, state: &mut ConsoleState) -> bool {
        let Some(sessions) = &self.sessions else {
            return false;
        };
        let specs = sessions.bot().tools().specs();
        if self.specs.as_ref().is_some_and(|s| Arc::ptr_eq(s, &specs)) {
            return false;
        }
        match &self.registry {
            Some(registry) => {
                state.set_tools_and_skips(&specs, &registry.skipped());
                state.set_tool_sources(describe_sources(registry));
            }
            None => state.set_tools(&specs),
        }
        self.specs = Some(specs);
        true
    }

    /// The session table, when the server runs in this process.
    pub fn sessions(&self) -> Option<&Sessions> {
        self.sessions.as_ref()
    }

    /// Waits for the next event.
    ///
    /// # Cancel safety
    /// Cancel safe: an event is either returned or left on the bus.
    pub async fn next(&mut self) -> Option<Arc<Event>> {
        self.sub.recv().await
    }

    /// Folds `first` and then every event ready now, up to [`BATCH`]; returns how many.
    pub fn fold(&mut self, state: &mut ConsoleState, first: &Arc<Event>) -> usize {
        state.apply_shared(first);
        let mut n = 1;
        while n < BATCH {
            let Some(event) = self.sub.try_recv() else {
                break;
            };
            state.apply_shared(&event);
            n += 1;
        }
        state.events_missed = self.sub.missed();
        n
    }

    /// Folds every event ready now, up to [`BATCH`]; returns how many.
    pub fn fold_ready(&mut self, state: &mut ConsoleState) -> usize {
        match self.sub.try_recv() {
            Some(first) => self.fold(state, &first),
            None => 0,
        }
    }

    /// Lays a snapshot of the session table, and of `selected`'s turns, over `state`.
    /// Whether it laid something that no event announced (the store's answer, the attached
    /// view's header, the tool set): the loop draws again for it at once, not at its
    /// once-a-second redraw.
    pub fn refresh(
        &mut self,
        state: &mut ConsoleState,
        selected: Option<u64>,
        own: Option<u64>,
    ) -> bool {
        let now = now_us();
        state.now_us = state.now_us.max(now);
        if let Some(bridges) = &self.bridges {
            state.set_bridges(bridges.all());
        }
        let mut unannounced = self.refresh_tools(state);
        let Some(sessions) = self.sessions.clone() else {
            if let Some(remote) = &self.remote {
                unannounced |= remote.refresh(state);
            }
            state.age_rows();
            return unannounced;
        };
        let degraded = sessions.store_degraded();
        if state.header.store_degraded != degraded {
            state.header.store_degraded = degraded;
            unannounced = true;
        }
        let handle_seconds = sessions.limits().handle_seconds;
        let open = sessions.list();
        if let Some(stored) = &mut self.stored {
            let ids = open.iter().map(|s| s.id()).collect();
            unannounced |= stored.refresh(state, &ids, handle_seconds);
        }
        let rows = open
            .into_iter()
            .map(|s| {
                let current = s.bot().current_turn();
                let activity = match &current {
                    Some(t) if !t.is_done() => Activity::InTurn,
                    Some(t) if t.with_record(|r| r.end == Some(TurnEnd::Interrupted)) => {
                        Activity::Interrupted
                    }
                    _ => Activity::Idle,
                };
                let mut row = SessionRow {
                    number: s.number,
                    handle_prefix: s.handle_prefix(),
                    opener: s.opener.clone(),
                    // Every session this process's console opened is the person's (`n` opens
                    // more than one), not only the one their lines go to now.
                    mine: Some(s.number) == own
                        || (self.remote.is_none()
                            && s.opener == turnscope::observe::SessionOpener::Console),
                    // The conversation's count: a session reopened from the store (after a
                    // restart, or taken over from another replica) has no turn of its own yet.
                    turns: s.bot().next_turn_id().saturating_sub(1),
                    activity,
                    // Frames count from its opening here, its age from the conversation's
                    // start (before a restart, for one reopened since).
                    opened_us: now.saturating_sub(s.opened.elapsed().as_micros() as u64),
                    began_us: s.began_before_opening_us(),
                    age_s: 0,
                    // The console's own never idle out (`Session::expired`).
                    idle_left_s: (!s.in_call() && !s.held_by_console())
                        .then(|| handle_seconds.saturating_sub(s.idle().as_secs())),
                    taken_from: s.taken_from.clone(),
                    greeting: crate::state::Greeting::Unknown,
                };
                row.age_s = now.saturating_sub(row.age_from_us()) / 1_000_000;
                row
            })
            .collect();
        state.sync_sessions(rows);
        if self.cached_for != selected || self.done.len() > 2 * crate::state::TURNS_KEPT {
            self.done.clear();
            self.cached_for = selected;
        }
        state.keep_live_turns_of(selected);
        let Some(number) = selected else {
            if let Some(stored) = &mut self.stored {
                stored.unshow();
            }
            return unannounced;
        };
        if let Some(stored) = &mut self.stored {
            if stored.holds(number) {
                return unannounced | stored.show_turns(state, number);
            }
            stored.unshow();
        }
        // A session that just closed is read one last time from the handle kept at the last
        // tick, so its transcript ends as the turn did, not as the previous tick caught it.
        let session = match sessions.by_number(number) {
            Some(s) => {
                self.held = Some(s.clone());
                s
            }
            None => match self.held.take() {
                Some(s) if s.number == number => s,
                _ => return unannounced,
            },
        };
        let views = session
            .turns()
            .iter()
            .map(|turn| {
                if let Some(view) = self.done.get(&(number, turn.id)) {
                    return view.clone();
                }
                let view = turn.with_record(TurnView::of_record);
                if view.end.is_some() {
                    self.done.insert((number, turn.id), view.clone());
                }
                view
            })
            .collect::<Vec<_>>();
        state
            .wire
            .tally_restored(number, session.restored_turns, &views);
        state.sync_turns(number, views);
        unannounced
    }
}
