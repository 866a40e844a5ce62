//! Which bot sessions an MCP client holds: the handles its MCP session started or chatted on,
//! and [`Event::ClientGone`] for each still open when rmcp drops that session's handler (the
//! client sent `DELETE /mcp`, or rmcp closed the session after its idle timeout), unless
//! another client opened or chatted on it since: a bot session is held by the MCP client that
//! opened it or last chatted on it (its mark on the session, `Session::held_by`), and only
//! that client's going leaves it without one. Under 2026-07-28 (no MCP session) a closed
//! response stream is a cancel, not a client gone (`Event::CallCancelled`, published by
//! `mcp`), and a call outside an MCP session takes the mark too (held by no MCP session).

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::observe::Event;
use crate::sessions::Sessions;
use crate::store::HandleId;

/// Why a client no longer holds a session, as [`Event::ClientGone`] says it.
pub(crate) const CLIENT_GONE: &str =
    "its MCP session ended (deleted, or closed after its idle timeout)";

/// Most handles one MCP session is remembered to hold; past it the oldest is forgotten (no
/// `ClientGone` for it), so a client opening sessions without end costs bounded memory.
pub(crate) const HELD_MAX: usize = 256;

/// The next [`Held`]'s mark (0 is no MCP session's: calls outside one).
static NEXT_MARK: AtomicU64 = AtomicU64::new(1);

/// The handles held, each once, by their keyed hash (no secret kept here): a set for the
/// one-hash check, the order for dropping the oldest.
#[derive(Default)]
struct HeldIds {
    set: HashSet<HandleId>,
    order: VecDeque<HandleId>,
}

/// The bot sessions one MCP session opened or chatted on. rmcp makes one handler per MCP
/// session and drops it when that session ends (a `DELETE`, or its idle timeout), so dropping
/// this publishes [`Event::ClientGone`] for each of them still open and still held by this
/// MCP session (nobody opened or chatted on it since). Handlers that never served a call
/// inside an MCP session (sessionless revisions, Xiaozhi's `@bot`) publish nothing; their
/// calls take the sessions they touch from whoever held them.
pub(crate) struct Held {
    sessions: Sessions,
    /// This MCP session's mark on the sessions it holds (unique in the process).
    mark: u64,
    ids: Mutex<HeldIds>,
    client: Mutex<String>,
    in_mcp_session: AtomicBool,
}

impl Held {
    pub(crate) fn new(sessions: Sessions) -> Self {
        Self {
            sessions,
            mark: NEXT_MARK.fetch_add(1, Ordering::Relaxed),
            ids: Mutex::new(HeldIds::default()),
            client: Mutex::new(String::new()),
            in_mcp_session: AtomicBool::new(false),
        }
    }

    /// The handler served a call inside an MCP session: its handles are held from now on.
    pub(crate) fn in_mcp_session(&self) {
        self.in_mcp_session.store(true, Ordering::Relaxed);
    }

    /// `client` opened or chatted on `handle`: it holds it now, whoever did before. Outside
    /// an MCP session that leaves it held by none (no `ClientGone` for it then).
    pub(crate) fn hold(&self, handle: &str, client: &str) {
        let Some(id) = self.sessions.id_of(handle) else {
            return;
        };
        let in_mcp_session = self.in_mcp_session.load(Ordering::Relaxed);
        if let Some(session) = self.sessions.by_id(&id) {
            session.held_by(if in_mcp_session { self.mark } else { 0 });
        }
        if !in_mcp_session {
            return;
        }
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        if !ids.set.insert(id) {
            return;
        }
        ids.order.push_back(id);
        if ids.order.len() > HELD_MAX
            && let Some(oldest) = ids.order.pop_front()
        {
            ids.set.remove(&oldest);
        }
        drop(ids);
        let mut name = self.client.lock().unwrap_or_else(|e| e.into_inner());
        if name.is_empty() {
            name.push_str(client);
        }
    }

    /// How many handles are held (for tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .order
            .len()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let ids = std::mem::take(&mut self.ids.get_mut().unwrap_or_else(|e| e.into_inner()).order);
        let client = std::mem::take(self.client.get_mut().unwrap_or_else(|e| e.into_inner()));
        let held = ids
            .iter()
            .filter_map(|id| self.sessions.by_id(id))
            // Another client opened or chatted on it since: that one holds it.
            .filter(|session| session.is_held_by(self.mark));
        for session in held {
            // Kept on the session too: a viewer that connects later is told it.
            let at_us = crate::observe::event::now_us();
            session.client_went(&client, at_us);
            self.sessions.bus().publish_with(|| Event::ClientGone {
                session: session.number,
                client: client.clone(),
                reason: CLIENT_GONE.into(),
                at_us,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bot::Bot;
    use crate::model::{ModelClient, ModelConfig};
    use crate::observe::Bus;
    use crate::sessions::SessionLimits;

    #[tokio::test]
    async fn a_client_holds_a_bounded_set_of_handles_each_once() {
        let bot = Bot::builder(ModelClient::new(ModelConfig::new(
            "http://127.0.0.1:9/v1",
            "m",
        )))
        .build();
        let sessions = Sessions::new(bot, Bus::default(), SessionLimits::default());
        let held = Held::new(sessions);
        held.hold(&uuid::Uuid::new_v4().to_string(), "c");
        assert_eq!(held.len(), 0, "nothing outside an MCP session");
        held.in_mcp_session();
        let first = uuid::Uuid::new_v4().to_string();
        held.hold(&first, "c");
        held.hold(&first, "c");
        held.hold("not a handle", "c");
        assert_eq!(held.len(), 1);
        for _ in 0..HELD_MAX + 10 {
            held.hold(&uuid::Uuid::new_v4().to_string(), "c");
        }
        assert_eq!(held.len(), HELD_MAX);
        let ids = held.ids.lock().unwrap();
        assert!(
            !ids.set.contains(&held.sessions.id_of(&first).unwrap()),
            "the oldest went"
        );
        assert_eq!(ids.set.len(), HELD_MAX);
    }
}
