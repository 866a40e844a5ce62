//! What a tool call knows about where it runs: its session and turn, and a [`SessionControl`]
//! through which a tool (the built-in `end_session`) asks to end the conversation. Asking never
//! ends the session inside the call: the turn finishes (the model still says goodbye), then the
//! session table closes it. A call outside any session gets `CallContext::detached`.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// The context one tool call runs in.
#[derive(Clone, Default)]
pub struct CallContext {
    /// Session number (0 when the call belongs to no session).
    pub session: u64,
    /// Turn id within the session (0 when none).
    pub turn: u64,
    /// The session's control handle, when the call runs inside a session.
    pub control: Option<SessionControl>,
}

impl CallContext {
    /// A call outside any session.
    pub(crate) fn detached() -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("session", &self.session)
            .field("turn", &self.turn)
            .field("control", &self.control.is_some())
            .finish()
    }
}

/// A handle on one session's lifetime, shared by its pipeline, its tools and the session
/// table. Cheap to clone.
#[derive(Clone, Default)]
pub struct SessionControl {
    inner: Arc<ControlInner>,
}

#[derive(Default)]
struct ControlInner {
    end: CancellationToken,
    reason: Mutex<Option<String>>,
    closed: CancellationToken,
}

impl SessionControl {
    /// A control for a new session.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks for the session to end once its turn in flight is over. The first reason given
    /// is kept; later requests change nothing.
    pub(crate) fn request_end(&self, reason: impl Into<String>) {
        let mut slot = self.inner.reason.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(reason.into());
        }
        drop(slot);
        self.inner.end.cancel();
    }

    /// Whether an end was asked for (one atomic load).
    pub(crate) fn is_end_requested(&self) -> bool {
        self.inner.end.is_cancelled()
    }

    /// The reason given, when an end was asked for.
    pub(crate) fn end_requested(&self) -> Option<String> {
        if !self.inner.end.is_cancelled() {
            return None;
        }
        self.inner
            .reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits until an end is asked for and returns the reason.
    pub(crate) async fn wait_end_requested(&self) -> String {
        self.inner.end.cancelled().await;
        self.end_requested().unwrap_or_default()
    }

    /// Marks the session closed (its pipeline stopped).
    pub(crate) fn mark_closed(&self) {
        self.inner.closed.cancel();
    }

    /// Whether the session is closed.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.is_cancelled()
    }

    /// Waits until the session is closed.
    pub async fn closed(&self) {
        self.inner.closed.cancelled().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_reason_wins_and_waiters_wake() {
        let control = SessionControl::new();
        assert_eq!(control.end_requested(), None);
        let waiter = tokio::spawn({
            let control = control.clone();
            async move { control.wait_end_requested().await }
        });
        control.request_end("user said goodbye");
        control.request_end("second");
        assert_eq!(waiter.await.unwrap(), "user said goodbye");
        assert_eq!(
            control.end_requested().as_deref(),
            Some("user said goodbye")
        );
        assert!(!control.is_closed());
        control.mark_closed();
        control.closed().await;
        assert!(control.is_closed());
    }
}
