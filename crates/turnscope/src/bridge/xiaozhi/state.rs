//! The live state of one bridge: counters the socket loop bumps, and the snapshot
//! ([`BridgeEvent`]) published on the bus and served in `/healthz`.
//!
//! Counting is a relaxed atomic add; building and publishing a snapshot happens only when
//! somebody listens (see `Bus::publish_with`), on connection changes at once and on a
//! one-second tick for counters.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::observe::event::now_us;
use crate::observe::{BridgeEvent, Bus, Event};

use super::upstream::Upstream;
use crate::observe::redact::redact;

/// One bridge's state.
pub struct BridgeState {
    name: String,
    endpoint: String,
    upstream: Arc<dyn Upstream>,
    bus: Bus,
    connected: AtomicBool,
    token_rejected: AtomicBool,
    reconnects: AtomicU64,
    frames_in: AtomicU64,
    frames_out: AtomicU64,
    malformed: AtomicU64,
    blocked: AtomicU64,
    last_error: Mutex<Option<String>>,
    last_published: Mutex<Option<BridgeEvent>>,
}

impl BridgeState {
    /// A fresh state; `endpoint` must already be redacted.
    pub fn new(name: String, endpoint: String, upstream: Arc<dyn Upstream>, bus: Bus) -> Self {
        Self {
            name,
            endpoint,
            upstream,
            bus,
            connected: AtomicBool::new(false),
            token_rejected: AtomicBool::new(false),
            reconnects: AtomicU64::new(0),
            frames_in: AtomicU64::new(0),
            frames_out: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            blocked: AtomicU64::new(0),
            last_error: Mutex::new(None),
            last_published: Mutex::new(None),
        }
    }

    /// The bridge's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bus it publishes on.
    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    /// A frame came in.
    pub(crate) fn frame_in(&self) {
        self.frames_in.fetch_add(1, Ordering::Relaxed);
    }

    /// A frame went out.
    pub(crate) fn frame_out(&self) {
        self.frames_out.fetch_add(1, Ordering::Relaxed);
    }

    /// A frame was dropped as malformed.
    pub fn malformed(&self) {
        self.malformed.fetch_add(1, Ordering::Relaxed);
    }

    /// A tool call was refused by the filter.
    pub fn blocked(&self) {
        self.blocked.fetch_add(1, Ordering::Relaxed);
    }

    /// The socket opened.
    pub fn connected(&self) {
        self.connected.store(true, Ordering::Relaxed);
        self.token_rejected.store(false, Ordering::Relaxed);
        self.publish();
    }

    /// The socket closed (or never opened) with `error`; `rejected` when the token was refused.
    pub fn disconnected(&self, error: &str, rejected: bool) {
        self.connected.store(false, Ordering::Relaxed);
        self.token_rejected.store(rejected, Ordering::Relaxed);
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(redact(error).into_owned());
        self.publish();
    }

    /// A new dial is about to start after an earlier one.
    pub fn reconnecting(&self) {
        self.reconnects.fetch_add(1, Ordering::Relaxed);
    }

    /// The current state.
    pub fn snapshot(&self) -> BridgeEvent {
        let status = self.upstream.status();
        BridgeEvent {
            kind: "xiaozhi".into(),
            name: self.name.clone(),
            endpoint: self.endpoint.clone(),
            upstream: self.upstream.label(),
            upstream_state: status.label().into(),
            connected: self.connected.load(Ordering::Relaxed),
            reconnects: self.reconnects.load(Ordering::Relaxed),
            frames_in: self.frames_in.load(Ordering::Relaxed),
            frames_out: self.frames_out.load(Ordering::Relaxed),
            malformed: self.malformed.load(Ordering::Relaxed),
            blocked: self.blocked.load(Ordering::Relaxed),
            last_error: self
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            token_rejected: self.token_rejected.load(Ordering::Relaxed),
            at_us: now_us(),
        }
    }

    /// Publishes the snapshot now (when somebody listens).
    pub fn publish(&self) {
        self.bus.publish_with(|| {
            let snap = self.snapshot();
            *self
                .last_published
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(snap.clone());
            Event::Bridge(snap)
        });
    }

    /// Publishes the snapshot if anything but the time changed since the last one.
    pub(crate) fn publish_if_changed(&self) {
        if !self.bus.is_listened() {
            return;
        }
        let mut snap = self.snapshot();
        let mut last = self
            .last_published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let changed = match last.as_ref() {
            Some(prev) => {
                let at = snap.at_us;
                snap.at_us = prev.at_us;
                let changed = *prev != snap;
                snap.at_us = at;
                changed
            }
            None => true,
        };
        if changed {
            *last = Some(snap.clone());
            drop(last);
            self.bus.publish(Event::Bridge(snap));
        }
    }

    /// A log line for the person watching: to tracing and, as [`Event::Log`], to the bus.
    /// The text is redacted first.
    pub fn log(&self, level: tracing::Level, message: &str) {
        let message = format!("xiaozhi bridge {}: {}", self.name, redact(message));
        match level {
            tracing::Level::ERROR => tracing::error!("{message}"),
            tracing::Level::WARN => tracing::warn!("{message}"),
            _ => tracing::info!("{message}"),
        }
        self.bus.publish_with(|| Event::Log {
            at_ms: now_us() / 1000,
            level: match level {
                tracing::Level::ERROR => "error",
                tracing::Level::WARN => "warn",
                _ => "info",
            }
            .into(),
            message,
        });
    }
}
