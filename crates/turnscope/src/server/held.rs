//! Which bot sessions an MCP client holds: the handles its MCP session started or chatted on,
//! and [`Event::ClientGone`] for each still open when rmcp drops that session's handler (the
//! client sent `DELETE /mcp`, or rmcp closed the session after its idle timeout). Under
//! 2026-07-28 (no MCP session) a closed response stream is a cancel, not a client gone
//! (`Event::CallCancelled`, published by `mcp`).

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::observe::Event;
use crate::sessions::Sessions;
use crate::store::HandleId;

/// Why a client no longer holds a session, as [`Event::ClientGone`] says it.
pub(crate) const CLIENT_GONE: &str =
    "its MCP session ended (deleted, or closed after its idle timeout)";

/// Most handles one MCP session is remembered to hold; past it the oldest is forgotten (no
/// `ClientGone` for it), so a client opening sessions without end costs bounded memory.
pub(crate) const HELD_MAX: usize = 256;

/// The handles held, each once, by their keyed hash (no secret kept here): a set for the
/// one-hash check, the order for dropping the oldest.
#[derive(Default)]
struct HeldIds {
    set: HashSet<HandleId>,
    order: VecDeque<HandleId>,
}

/// The bot sessions one MCP session opened or chatted on. rmcp makes one handler per MCP
/// session and drops it when that session ends (a `DELETE`, or its idle timeout), so dropping
/// this publishes [`Event::ClientGone`] for each of them still open. Handlers that never
/// served a call inside an MCP session (sessionless revisions, Xiaozhi's `@bot`) publish
/// nothing.
pub(crate) struct Held {
    sessions: Sessions,
    ids: Mutex<HeldIds>,
    client: Mutex<String>,
    in_mcp_session: AtomicBool,
}

impl Held {
    pub(crate) fn new(sessions: Sessions) -> Self {
        Self {
            sessions,
            ids: Mutex::new(HeldIds::default()),
            client: Mutex::new(String::new()),
            in_mcp_session: AtomicBool::new(false),
        }
    }

    /// The handler served a call inside an MCP session: its handles are held from now on.
    pub(crate) fn in_mcp_session(&self) {
        self.in_mcp_session.store(true, Ordering::Relaxed);
    }

    /// `client` opened or chatted on `handle` (nothing outside an MCP session).
    pub(crate) fn hold(&self, handle: &str, client: &str) {
        if !self.in_mcp_session.load(Ordering::Relaxed) {
            return;
        }
        let Some(id) = self.sessions.id_of(handle) else {
            return;
        };
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
        for session in ids.iter().filter_map(|id| self.sessions.by_id(id)) {
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
