//! Errors of `start` and `chat`, each worded the same way: the field first, then what was
//! expected or why, then the next call to make.

use std::fmt;
use std::sync::Arc;

/// Why a `start` or `chat` call could not be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatError {
    /// The handle has the wrong length.
    HandleLength {
        /// Characters received.
        received: usize,
    },
    /// No session has this handle: it ended (idle too long, closed), or this server restarted
    /// since it was issued and keeps nothing (`kept` false: a memory store).
    NoSession {
        /// The idle lifetime in force.
        handle_seconds: u64,
        /// Whether conversations outlive a restart here (a durable store).
        kept: bool,
        /// Whether replicas share the store (any of them would have found it).
        shared: bool,
    },
    /// The handle's conversation was ended here (by its bot's `end_session`, the idle sweep,
    /// the console), a while ago.
    Ended {
        /// Why, as the session's close said it.
        reason: String,
        /// How long ago, in seconds.
        ago_seconds: u64,
    },
    /// The session cap is reached.
    Cap {
        /// The cap.
        cap: usize,
        /// The idle lifetime in force.
        handle_seconds: u64,
    },
    /// The caller cancelled; the turn runs on.
    Cancelled,
    /// The handle ends in another replica's tag: that replica issued it (or is gone). Only a
    /// server run as one of several (a replica id configured) says so.
    Foreign {
        /// The tag the handle ends in.
        tag: String,
        /// This replica's id.
        replica: Arc<str>,
        /// This replica's tag.
        own_tag: String,
        /// The idle lifetime in force.
        handle_seconds: u64,
    },
    /// This replica is draining (shutting down): no new session, no new line.
    Draining {
        /// This replica's id.
        replica: Arc<str>,
        /// Whether its conversations are in a store the other replicas share (they go on
        /// there at the next call).
        shared: bool,
        /// Whether it runs as one of several replicas (`server.replica_id` set): only then
        /// is there another to send the client to.
        one_of_several: bool,
    },
    /// Another replica runs a turn of this conversation (holds its lease in the shared
    /// store), and did not finish within the wait.
    Busy {
        /// The replica holding the lease.
        holder: String,
        /// How long this call waited, in seconds.
        waited_seconds: u64,
    },
    /// The turn ran, but the shared store could not save it (retried with backoff).
    Unsaved {
        /// What the store said (names the store and what to do).
        message: String,
    },
    /// The session changed in the store since this server loaded it (another server wrote
    /// it, or it was deleted); the next call reloads it.
    Stale,
    /// A turn ran here while another replica went on with the conversation (the shared
    /// store stalled past the lease, which lapsed, and a call there took it and reported
    /// this turn as cut off): its reply is not part of the conversation.
    Overtaken {
        /// The turn's id here.
        turn: u64,
        /// What the bot replied (said in the error, not kept anywhere else).
        reply: String,
    },
    /// A turn ran here, but the shared store no longer held the conversation when its
    /// record was written (deleted meanwhile, or lost by a Redis restarted without
    /// persistence): nothing keeps it, and the next call must `start` anew.
    Forgotten {
        /// The turn's id here.
        turn: u64,
        /// What the bot replied (said in the error, not kept anywhere else).
        reply: String,
    },
    /// The store could not give the session back.
    Store {
        /// What the store said (names the store and what to do).
        message: String,
    },
    /// `start` on a shared store that did not take the new session: no handle is given
    /// (no replica could serve it).
    NotStarted {
        /// What the store said (names the store and what to do).
        message: String,
    },
    /// A shared store did not answer before anything ran (taking the lease, writing the
    /// mark a turn begins with): the call did nothing.
    StoreAway {
        /// What the store said (names the store and what to do).
        message: String,
    },
}

impl fmt::Display for ChatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChatError::HandleLength { received } => write!(
                f,
                "handle: no live session. Expected the handle one start call gives, 36 characters; received {received}."
            ),
            ChatError::NoSession {
                handle_seconds,
                kept: false,
                ..
            } => write!(
                f,
                "handle: no live session has this handle. Its conversation ended (after {handle_seconds} seconds \
                 with no chat call, or it was closed), or this server restarted since start gave it: this server \
                 keeps conversations in memory only (--store memory), so handles do not survive a restart. Call \
                 start for a new handle."
            ),
            ChatError::NoSession {
                handle_seconds,
                kept: true,
                shared: true,
            } => write!(
                f,
                "handle: no session has this handle in the session store the replicas share. Its conversation \
                 ended (after {handle_seconds} seconds with no chat call, or it was closed or deleted), or the \
                 store lost it (a Redis restarted without persistence keeps no conversation; see `appendonly` in \
                 the README's \"Replicas with a shared store\"). Call start for a new handle."
            ),
            ChatError::NoSession {
                handle_seconds,
                kept: true,
                shared: false,
            } => write!(
                f,
                "handle: no session has this handle. Its conversation ended (after {handle_seconds} seconds with no \
                 chat call, or it was closed or deleted), or another server gave it. Call start for a new handle."
            ),
            ChatError::Ended {
                reason,
                ago_seconds,
            } => write!(
                f,
                "handle: this conversation has ended ({reason}, {}); no line goes into it any \
                 more. Call start for a new handle.",
                match ago_seconds {
                    0 => "just now".to_string(),
                    n => format!("{n} s ago"),
                }
            ),
            ChatError::Stale => f.write_str(
                "handle: this conversation changed in the session store since this server loaded it (another server \
                 wrote it, or it was deleted). Call chat again: it is loaded afresh.",
            ),
            ChatError::Overtaken { turn, reply } => write!(
                f,
                "handle: turn {turn} ran on this replica, but while it ran another replica went on with this \
                 conversation (the session store did not answer for longer than the conversation's lease, which \
                 lapsed, and a call there took it and reported this turn as cut off). Its reply is not part of the \
                 conversation, so it is not answered as a turn; it was: «{reply}». Call chat with an empty line to \
                 read where the conversation is now, or with your next line."
            ),
            ChatError::Forgotten { turn, reply } => write!(
                f,
                "handle: turn {turn} ran, but the session store no longer holds this conversation (it was \
                 deleted, or the store lost it: a Redis restarted without persistence keeps nothing). Nothing \
                 keeps this turn; its reply was: «{reply}». Call start to begin a new conversation."
            ),
            ChatError::Store { message } => write!(
                f,
                "handle: the conversation could not be read back from the session store: {message}. \
                 Call chat again in a while; if it still fails, call start for a new conversation."
            ),
            ChatError::NotStarted { message } => write!(
                f,
                "store: no conversation was started: the session store did not take it, and a handle no replica \
                 could serve is not given: {}. Call start again once it answers.",
                message.trim_end_matches('.')
            ),
            ChatError::StoreAway { message } => write!(
                f,
                "store: the session store did not take this line (it did not answer, or refused it), so nothing \
                 ran and the conversation is as it was: {message}. Call chat again (with the same line) once it \
                 takes writes."
            ),
            ChatError::Cap { cap, handle_seconds } => write!(
                f,
                "sessions: no free session. This server holds {cap} open session{}, its cap \
                 (--sessions, [server] sessions). A session with no chat call for {handle_seconds} \
                 seconds ends (not one a running console opened: it ends when closed there with \
                 d, d, or as the console quits); call start again then, or raise the cap.",
                if *cap == 1 { "" } else { "s" }
            ),
            ChatError::Foreign {
                tag,
                replica,
                own_tag,
                handle_seconds,
            } => write!(
                f,
                "handle: no live session on this replica. The handle belongs to another replica (the one whose \
                 handles end in {tag}; this is replica {replica}, whose handles end in {own_tag}) or that replica \
                 is gone, or the session ended after {handle_seconds} seconds with no chat call. A session lives \
                 only in the replica that started it: behind a load balancer, route each chat by its handle's tag \
                 (examples/haproxy.cfg; `turnscope replicas haproxy` prints the lines). Call start for a new handle."
            ),
            ChatError::Draining {
                replica,
                shared: true,
                one_of_several: true,
            } => write!(
                f,
                "replica {replica} is draining (shutting down): it takes no new line. This conversation is kept in \
                 the shared session store, so another replica goes on with it: call chat again (the load balancer \
                 sends the call elsewhere); a turn in flight here still finishes and is saved first."
            ),
            ChatError::Busy {
                holder,
                waited_seconds,
            } => write!(
                f,
                "handle: replica {holder} is running a turn of this conversation (it holds its lease in the shared \
                 session store) and did not finish within {waited_seconds} s. Calls on one conversation run one at a \
                 time; call chat again with an empty line to read that turn, or later with your line."
            ),
            ChatError::Unsaved { message } => write!(
                f,
                "store: this turn ran but could not be saved, so it is not answered as if it were: {message}. This \
                 replica keeps it unread: once the store answers, call chat with an empty line (or this same line \
                 again) to read its reply (it is saved then), or with your next line (its reply carries this turn as \
                 unread)."
            ),
            ChatError::Draining {
                replica,
                one_of_several: true,
                ..
            } => write!(
                f,
                "replica {replica} is draining (shutting down): it takes no new conversation and no new line; a turn in \
                 flight still finishes and an empty line reads it. Open a new MCP session if your client keeps one, and \
                 call start: the load balancer sends it to another replica."
            ),
            ChatError::Draining { .. } => f.write_str(
                "this server is shutting down: it takes no new conversation and no new line; a turn in flight still \
                 finishes and an empty line reads it. Call start again once it is back (its conversations go on \
                 then if it keeps them in a store).",
            ),
            ChatError::Cancelled => f.write_str(
                "chat: the caller cancelled. The turn runs on; call chat with an empty line to read its reply.",
            ),
        }
    }
}

impl std::error::Error for ChatError {}

/// Most bytes of an overtaken turn's reply its error quotes.
const OVERTAKEN_QUOTED: usize = 8 * 1024;

impl ChatError {
    /// What the caller of `turn` is told when its write found the shared store had gone on
    /// without it: another replica went on with the conversation ([`ChatError::Overtaken`]), or
    /// the store no longer holds it (`gone`: [`ChatError::Forgotten`]); its reply quoted (at
    /// most [`OVERTAKEN_QUOTED`]).
    pub(in crate::sessions) fn unkept(turn: &crate::bot::Turn, gone: bool) -> Self {
        let record = turn.snapshot();
        let mut reply = record.reply;
        shorten(&mut reply, OVERTAKEN_QUOTED);
        if gone {
            return ChatError::Forgotten {
                turn: record.id,
                reply,
            };
        }
        ChatError::Overtaken {
            turn: record.id,
            reply,
        }
    }
}

/// `text` cut to `limit` bytes on a character boundary, with `…` where it was cut: a quote
/// in a message, kept short.
pub(in crate::sessions) fn shorten(text: &mut String, limit: usize) {
    if text.len() <= limit {
        return;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
}
