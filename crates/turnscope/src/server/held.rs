//! Which bot sessions an MCP client holds: the handles its MCP session started or chatted on,
//! and [`Event::ClientGone`] for each still open when rmcp drops that session's handler (the
//! client sent `DELETE /mcp`, or rmcp closed the session after its idle timeout). Under
//! 2026-07-28 (no MCP session) a closed response stream is a cancel, not a client gone
//! (`Event::CallCancelled`, published by `mcp`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::observe::Event;
use crate::sessions::Sessions;

/// The bot sessions one MCP session opened or chatted on. rmcp makes one handler per MCP
/// session and drops it when that session ends (a `DELETE`, or its idle timeout), so dropping
/// this publishes [`Event::ClientGone`] for each of them still open. Handlers that never
/// served a call inside an MCP session (sessionless revisions, Xiaozhi's `@bot`) publish
/// nothing.
pub(crate) struct Held {
    sessions: Sessions,
    /// Handles, each once (a client holds a few).
    handles: Mutex<Vec<String>>,
    client: Mutex<String>,
    in_mcp_session: AtomicBool,
}

impl Held {
    pub(crate) fn new(sessions: Sessions) -> Self {
        Self {
            sessions,
            handles: Mutex::new(Vec::new()),
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
        let mut handles = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        if handles.iter().any(|h| h == handle) {
            return;
        }
        handles.push(handle.to_string());
        let mut name = self.client.lock().unwrap_or_else(|e| e.into_inner());
        if name.is_empty() {
            name.push_str(client);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let handles = std::mem::take(self.handles.get_mut().unwrap_or_else(|e| e.into_inner()));
        let client = std::mem::take(self.client.get_mut().unwrap_or_else(|e| e.into_inner()));
        for number in handles.iter().filter_map(|h| self.sessions.number_of(h)) {
            self.sessions.bus().publish_with(|| Event::ClientGone {
                session: number,
                client: client.clone(),
                reason: "its MCP session ended (deleted, or closed after its idle timeout)".into(),
                at_us: crate::observe::event::now_us(),
            });
        }
    }
}
