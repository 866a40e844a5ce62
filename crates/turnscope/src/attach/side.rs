//! What the attached console's MCP client and its event stream must know of each other when
//! a balancer stands between them and the replicas: the client's MCP session (sent along with
//! the `/events` request, so a balancer that keeps an MCP session on one replica, as
//! examples/haproxy.cfg does, shows the console the replica its own sessions live on), the
//! replica that session lives on (from `initialize`'s or `start`'s `_meta`), and the replica
//! the stream comes from. When the two differ (a balancer that does not follow the session,
//! or the session's replica died), the console's sessions are shown as its client sees them
//! at once (no waiting for a stream that will never show them) and its own MCP exchanges are
//! published by the tap, since the watched replica's stream does not carry them. A session
//! that is new since the stream connected (its old replica died) is followed: the stream is
//! woken to connect again with it, once per session, so a balancer that keeps sessions on
//! their replica moves the stream there.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// The shared facts; one per attached target, held by the tap, the target and the stream.
#[derive(Debug, Default)]
pub struct ClientSide {
    /// The event stream is open (it carries every MCP exchange of the replica it comes from).
    streaming: AtomicBool,
    replicas: Mutex<Replicas>,
    /// Wakes the stream to connect again with the client's session ([`Self::follow`]).
    follow: Notify,
}

#[derive(Debug, Default)]
struct Replicas {
    /// The client's MCP session id, as last sent.
    session: Option<String>,
    /// The replica the client's MCP session lives on, when the target said.
    own: Option<String>,
    /// The replica the event stream comes from, once its first line said.
    watched: Option<String>,
    /// The MCP session id the stream's latest request carried.
    streamed: Option<String>,
    /// A follow was asked and the stream has not connected again since.
    following: bool,
}

impl ClientSide {
    fn replicas(&self) -> std::sync::MutexGuard<'_, Replicas> {
        self.replicas.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The client sent a request in MCP session `id`, or was given it. A new session (rmcp
    /// opens one when the server lost the old: its replica died) may live elsewhere: its
    /// replica is not known until its `initialize` answer says.
    pub fn session_used(&self, id: &str) {
        let mut r = self.replicas();
        if r.session.as_deref() != Some(id) {
            r.session = Some(id.to_string());
            r.own = None;
        }
    }

    /// The client's MCP session id, as last used (the stream reads it by [`Self::stream_asking`]).
    #[cfg(test)]
    fn session(&self) -> Option<String> {
        self.replicas().session.clone()
    }

    /// The target said which replica the client's MCP session lives on.
    pub fn own_replica(&self, id: &str) {
        self.replicas().own = Some(id.to_string());
    }

    /// The event stream asks for a connection now, with the client's session (returned, to
    /// send along): any follow asked before is answered by it.
    pub fn stream_asking(&self) -> Option<String> {
        let mut r = self.replicas();
        r.streamed = r.session.clone();
        r.following = false;
        r.streamed.clone()
    }

    /// Wakes the event stream to connect again with the client's MCP session when that
    /// session lives on another replica than the stream comes from and the stream has not
    /// been asked with it yet (the session is new: the replica of the old one died). A
    /// balancer that keeps each session on its replica then moves the stream there. False
    /// when there is nothing to follow, or the stream already carried this session and still
    /// came from elsewhere (a balancer that spreads `/events`: asking again would not help).
    pub fn follow(&self) -> bool {
        {
            let mut r = self.replicas();
            let elsewhere = matches!((&r.own, &r.watched), (Some(o), Some(w)) if o != w);
            if !elsewhere || r.session.is_none() || r.session == r.streamed {
                return false;
            }
            r.following = true;
        }
        self.follow.notify_one();
        true
    }

    /// Resolves when [`Self::follow`] woke the stream; then [`Self::follow_waiting`] says
    /// whether it still must connect again.
    pub async fn follow_asked(&self) {
        self.follow.notified().await;
    }

    /// Whether a follow is waiting for the stream to connect again (not answered by a
    /// connection made since it was asked).
    pub fn follow_waiting(&self) -> bool {
        self.replicas().following
    }

    /// The event stream opened.
    pub fn stream_opened(&self) {
        self.streaming.store(true, Ordering::Relaxed);
    }

    /// The event stream's first line named the replica it comes from.
    pub fn watching(&self, id: &str) {
        self.replicas().watched = Some(id.to_string());
    }

    /// The replica the client's sessions live on, when it is known not to be the one the
    /// stream comes from (so the stream will not show them).
    pub fn elsewhere(&self) -> Option<String> {
        let r = self.replicas();
        match (&r.own, &r.watched) {
            (Some(own), Some(watched)) if own != watched => Some(own.clone()),
            _ => None,
        }
    }

    /// The replica the stream comes from, once known.
    pub fn watched(&self) -> Option<String> {
        self.replicas().watched.clone()
    }

    /// Whether the event stream carries the client's own MCP exchanges: it is open and comes
    /// from the replica the client's session lives on (or either is not known: a server that
    /// is not behind a balancer does not say, and is the one watched).
    pub fn stream_carries_own(&self) -> bool {
        self.streaming.load(Ordering::Relaxed) && self.elsewhere().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_exchanges_come_by_the_stream_unless_it_watches_another_replica() {
        let side = ClientSide::default();
        assert!(!side.stream_carries_own(), "no stream yet");
        side.stream_opened();
        assert!(side.stream_carries_own(), "replicas not known: one server");
        side.session_used("s1");
        side.own_replica("r1");
        assert!(
            side.stream_carries_own(),
            "the stream's replica not known yet"
        );
        side.watching("r2");
        assert!(!side.stream_carries_own());
        assert_eq!(side.elsewhere().as_deref(), Some("r1"));
        side.watching("r1");
        assert!(side.stream_carries_own());
        assert_eq!(side.elsewhere(), None);
        // A new MCP session (the old one's replica died): where it lives is not known until
        // its `initialize` answer says.
        side.watching("r3");
        side.session_used("s1");
        assert_eq!(side.elsewhere().as_deref(), Some("r1"), "the same session");
        side.session_used("s2");
        assert_eq!(side.elsewhere(), None);
        assert_eq!(side.session().as_deref(), Some("s2"));
        side.own_replica("r3");
        assert!(side.stream_carries_own());
    }

    #[test]
    fn a_new_session_elsewhere_is_followed_once_and_a_stream_asked_with_it_is_not_woken_again() {
        let side = ClientSide::default();
        side.session_used("s1");
        assert_eq!(side.stream_asking().as_deref(), Some("s1"));
        side.own_replica("r1");
        side.watching("r2");
        assert!(
            !side.follow(),
            "the stream carried s1 and came from r2 all the same: the balancer spreads it"
        );
        // s1's replica died; the client's new session lives on r3.
        side.session_used("s2");
        side.own_replica("r3");
        assert!(side.follow());
        assert!(side.follow_waiting());
        assert_eq!(side.stream_asking().as_deref(), Some("s2"));
        assert!(!side.follow_waiting(), "the new connection answered it");
        assert!(!side.follow(), "asked once per session");
        side.watching("r3");
        assert!(!side.follow(), "nothing to follow");
    }
}
