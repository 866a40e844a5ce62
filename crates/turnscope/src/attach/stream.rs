//! The watched turnscope's event stream (`GET /events`, see `server::viewers`) read into the
//! local bus: one JSON event per line, republished as is, so the console folds a remote server
//! exactly as its own. The reader reconnects (0.5 s, doubling to 5 s) when the stream ends or
//! the server dropped it for falling behind; lines it already had (the server's history comes
//! again on each connect) are recognised by a hash of their bytes and skipped, and what a
//! connect retells of sessions and turns already shown by [`super::retold`]. A target without
//! the endpoint (not a turnscope, or an older one) is said once and not asked again. Behind a
//! balancer, the reader connects again at once when the console's MCP client asks it to follow
//! a new session to its replica ([`ClientSide::follow`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::mcp::connect::chain;
use crate::observe::event::{SessionEvent, SessionOpener, now_us};
use crate::observe::{Bus, Event};
use crate::server::viewers::{CUT_OFF_MARK, DROPPED_MARK, VIEWER_HEADER};

use super::retold::{Recent, Retold};
use super::side::ClientSide;

/// The first wait before connecting again.
const FIRST_PAUSE: Duration = Duration::from_millis(500);
/// The longest wait between attempts (the wait doubles from [`FIRST_PAUSE`]).
const LAST_PAUSE: Duration = Duration::from_secs(5);
/// Lines remembered to skip on a reconnect.
const REMEMBERED: usize = 65_536;
/// Longest line read; a longer one is skipped and counted.
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// Sessions remembered by handle prefix (for matching the console's own).
const PREFIXES: usize = 4096;

/// What the reader knows of the stream, for the header and the session matching.
#[derive(Debug, Default, Clone)]
pub struct StreamState {
    /// `None` until the first answer; `Some(false)` when the target serves no stream.
    pub available: Option<bool>,
    /// Whether a stream is open now.
    pub connected: bool,
    /// The replica the stream comes from (its `Replica` event).
    pub replica: Option<String>,
    /// Connections made.
    pub connects: u64,
    /// Times the server dropped this viewer for falling behind.
    pub dropped: u64,
    /// Of those, the times since the watched server last restarted (the header's count: a
    /// new server has not dropped this viewer).
    pub dropped_here: u64,
    /// The server refuses this console's token (401) now; asked again until it takes it.
    pub refused: bool,
    /// Lines that were not events (or too long), skipped.
    pub bad_lines: u64,
    /// Times the watched server was seen to have restarted (its start time changed).
    pub restarts: u64,
    /// At the last of those, the replica the stream came from before, when it was another
    /// (behind a balancer the stream went on from another replica).
    pub moved_from: Option<String>,
    /// The last of those was the stream following the console's MCP session to its replica
    /// (asked by [`ClientSide::follow`]), not a replica that went away.
    pub followed: bool,
    /// The connection (by [`Self::connects`]) whose first line named its replica last.
    pub replica_read: u64,
    /// The current connection was made to follow the console's MCP session.
    following: bool,
    /// Open sessions by handle prefix (8 characters) → number.
    prefixes: HashMap<String, u64>,
    prefix_order: VecDeque<String>,
    /// When the watched server started (its first line says, on each connect).
    server_started: Option<u64>,
    /// The console's MCP client, told which replica the stream comes from.
    side: Option<Arc<ClientSide>>,
}

impl StreamState {
    /// The session whose handle starts with `prefix`, when the stream showed it.
    pub fn session_of(&self, prefix: &str) -> Option<u64> {
        self.prefixes.get(prefix).copied()
    }

    fn saw_session(&mut self, prefix: &str, number: u64) {
        if prefix.is_empty() || self.prefixes.contains_key(prefix) {
            return;
        }
        if self.prefix_order.len() == PREFIXES
            && let Some(old) = self.prefix_order.pop_front()
        {
            self.prefixes.remove(&old);
        }
        self.prefix_order.push_back(prefix.to_string());
        self.prefixes.insert(prefix.to_string(), number);
    }

    /// Whether a connect's `started` (the server's start time) tells a restart since the
    /// last connect; remembers it.
    fn restarted(&mut self, started: Option<u64>) -> bool {
        let Some(started) = started else {
            return false;
        };
        self.server_started
            .replace(started)
            .is_some_and(|before| before != started)
    }

    /// Forgets the sessions it knew that are not in `open` (the server's list on a
    /// connect); returns their numbers.
    fn keep_only(&mut self, open: &[u64]) -> Vec<u64> {
        let open: HashSet<u64> = open.iter().copied().collect();
        let mut gone = Vec::new();
        self.prefixes.retain(|_, number| {
            let keep = open.contains(number);
            if !keep {
                gone.push(*number);
            }
            keep
        });
        let prefixes = &self.prefixes;
        self.prefix_order.retain(|p| prefixes.contains_key(p));
        gone.sort_unstable();
        gone
    }
}

/// The reader's shared state.
pub type Shared = Arc<Mutex<StreamState>>;

/// The `/events` URL of a target whose MCP URL is `mcp_url` (its path's last segment replaced).
pub fn events_url(mcp_url: &str) -> Option<String> {
    let mut url = reqwest::Url::parse(mcp_url).ok()?;
    let path = url.path().trim_end_matches('/');
    let base = path.rsplit_once('/').map_or("", |(base, _)| base);
    url.set_path(&format!("{base}/events"));
    url.set_query(None);
    Some(url.to_string())
}

/// Reads `url` into `bus` until `stop`; its state in the returned handle.
pub fn spawn(
    url: String,
    token: Option<String>,
    bus: Bus,
    side: Option<Arc<ClientSide>>,
    stop: CancellationToken,
) -> Shared {
    let shared: Shared = Arc::new(Mutex::new(StreamState {
        side: side.clone(),
        ..StreamState::default()
    }));
    let state = shared.clone();
    tokio::spawn(async move {
        let client = reqwest::Client::new();
        // Kept across this viewer's connects: a server that cut it off tells it so when it
        // connects again (its socket was full when it was cut off).
        let viewer = uuid::Uuid::new_v4().simple().to_string();
        let mut seen = Seen::default();
        let mut pause = FIRST_PAUSE;
        let mut lost: Option<Lost> = None;
        loop {
            let connects = lock(&state).connects;
            let mut request = client.get(&url).header(VIEWER_HEADER, &viewer);
            if let Some(t) = &token {
                request = request.bearer_auth(t);
            }
            let ended = tokio::select! {
                ended = read_once(request, &url, &bus, &state, &mut seen, side.as_deref(), &mut lost) => ended,
                () = stop.cancelled() => return,
            };
            let was_open = {
                let mut state = lock(&state);
                state.connected = false;
                state.connects > connects
            };
            if was_open {
                pause = FIRST_PAUSE;
            }
            match ended {
                Ended::Follow => {
                    lock(&state).following = true;
                    continue;
                }
                Ended::NoStream(why) => {
                    lock(&state).available = Some(false);
                    tell_untold(&bus, &mut lost);
                    log(&bus, "info", why);
                    return;
                }
                // The token refused: the server may have restarted with another one, and may
                // again with this one (a watch must not need a restart of `attach`). Said once,
                // tried again at the longest pause.
                Ended::Refused(why) => {
                    let first = {
                        let mut state = lock(&state);
                        let first = !state.refused;
                        state.refused = true;
                        state.available = Some(false);
                        first
                    };
                    tell_untold(&bus, &mut lost);
                    if first {
                        log(&bus, "warn", why);
                    }
                    if lost.is_none() {
                        lost = Some(Lost::since_now(None));
                    }
                    if let Some(lost) = &mut lost {
                        lost.attempts += 1;
                    }
                    pause = LAST_PAUSE;
                }
                // The server said why (its last line, in the Log): the Log says when it is
                // back, as for any loss (it did not after a rest).
                Ended::Dropped => {
                    {
                        let mut state = lock(&state);
                        state.dropped += 1;
                        state.dropped_here += 1;
                    }
                    lost = Some(Lost::since_now(None));
                }
                // Said once per loss, not at each attempt (a server away for an hour would
                // fill the Log): the header says it is reconnecting, the Log when it is back.
                Ended::Closed(why) => {
                    let said = format!(
                        "event stream {url}: {why}; reconnecting (every {:.1} s at first, then at \
                         most {} s apart; the Log says when it is back)",
                        pause.as_secs_f64(),
                        LAST_PAUSE.as_secs()
                    );
                    match &mut lost {
                        Some(lost) if !was_open => {
                            lost.attempts += 1;
                            // The connect after a break failed too: the break is said now.
                            if let Some((at_ms, said)) = lost.untold.take() {
                                log_at(&bus, at_ms, "warn", said);
                            }
                        }
                        // A stream that broke is not a failed attempt, and is said only if the
                        // next connect does not say why: a server that cut this viewer off
                        // (it read nothing for a while: suspended) says so as it comes back,
                        // and the transport's words for the same break read like a bug.
                        _ if was_open => lost = Some(Lost::since_now(Some(said))),
                        _ => {
                            log(&bus, "warn", said);
                            lost = Some(Lost {
                                attempts: 1,
                                ..Lost::since_now(None)
                            });
                        }
                    }
                }
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                // The client's new session: connecting with it may reach a live replica.
                () = follow_asked(side.as_deref()) => {
                    lock(&state).following = side.as_deref().is_some_and(ClientSide::follow_waiting);
                }
                () = stop.cancelled() => return,
            }
            pause = (pause * 2).min(LAST_PAUSE);
        }
    });
    shared
}

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, StreamState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

fn log(bus: &Bus, level: &'static str, message: String) {
    log_at(bus, now_us() / 1000, level, message);
}

fn log_at(bus: &Bus, at_ms: u64, level: &'static str, message: String) {
    bus.publish(Event::Log {
        at_ms,
        level: level.into(),
        message,
    });
}

/// Says the break of a `lost` stream not said yet (at the time it broke).
fn tell_untold(bus: &Bus, lost: &mut Option<Lost>) {
    if let Some((at_ms, said)) = lost.as_mut().and_then(|l| l.untold.take()) {
        log_at(bus, at_ms, "warn", said);
    }
}

/// A loss of the stream not yet made good: since when, and the attempts that failed.
struct Lost {
    since: Instant,
    attempts: u32,
    /// How the stream broke (when, ms since the epoch, and the Log's words), not said yet:
    /// said unless the next connect's first line says why (the server cut this viewer off).
    untold: Option<(u64, String)>,
}

impl Lost {
    /// A loss from now, with no attempt failed yet; `untold`, how it broke, when not said.
    fn since_now(untold: Option<String>) -> Self {
        Self {
            since: Instant::now(),
            attempts: 0,
            untold: untold.map(|said| (now_us() / 1000, said)),
        }
    }

    /// Says the stream is back: how it broke first, unless `said_why` (the first line said
    /// why it was lost).
    fn back(mut self, bus: &Bus, url: &str, said_why: bool) {
        if said_why {
            self.untold = None;
        }
        let mut lost = Some(self);
        tell_untold(bus, &mut lost);
        let Some(lost) = lost else {
            return;
        };
        log(
            bus,
            "info",
            format!(
                "event stream {url}: connected again after {:.1} s ({})",
                lost.since.elapsed().as_secs_f64(),
                match lost.attempts {
                    0 => "at the first attempt".to_string(),
                    1 => "1 attempt failed".to_string(),
                    n => format!("{n} attempts failed"),
                }
            ),
        );
    }
}

enum Ended {
    /// The target serves no event stream (404, 405): not asked again.
    NoStream(String),
    /// The token was refused (401): asked again, at the longest pause.
    Refused(String),
    Dropped,
    Closed(String),
    /// Asked to connect again with the console's new MCP session.
    Follow,
}

/// Resolves when the console's MCP client asks the stream to follow its session (never
/// without a client).
async fn follow_asked(side: Option<&ClientSide>) {
    match side {
        Some(side) => side.follow_asked().await,
        None => std::future::pending().await,
    }
}

/// What this viewer has read: hashes of the lines read lately (the server's history comes
/// again on each connect), and the sessions and turns shown (a connect retells them anew).
struct Seen {
    lines: Recent<u64>,
    retold: Retold,
}

impl Default for Seen {
    fn default() -> Self {
        Self {
            lines: Recent::new(REMEMBERED),
            retold: Retold::default(),
        }
    }
}

impl Seen {
    /// True the first time `line` is seen (among the last [`REMEMBERED`]).
    fn first(&mut self, line: &[u8]) -> bool {
        let mut h = DefaultHasher::new();
        line.hash(&mut h);
        self.lines.insert(h.finish())
    }
}

/// One connection: `request` (the `/events` GET at `url`, its token set) sent with the
/// client's MCP session, its lines read onto `bus` until it ends; a `lost` stream is said to
/// be back once it connects.
async fn read_once(
    mut request: reqwest::RequestBuilder,
    url: &str,
    bus: &Bus,
    state: &Shared,
    seen: &mut Seen,
    side: Option<&ClientSide>,
    lost: &mut Option<Lost>,
) -> Ended {
    // The console's MCP session goes along: a balancer that keeps a session on its replica
    // (examples/haproxy.cfg) then shows the console the replica its own sessions live on.
    if let Some(session) = side.and_then(ClientSide::stream_asking) {
        request = request.header("mcp-session-id", session);
    }
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => return Ended::Closed(format!("cannot connect: {}", chain(&e))),
    };
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND || status == reqwest::StatusCode::METHOD_NOT_ALLOWED
    {
        return Ended::NoStream(format!(
            "{url} answered {status}: this target serves no turnscope event stream, so the console \
             shows what this client sees: the sessions it starts, their replies, progress and \
             times, and its MCP exchanges (other clients' sessions are not visible)"
        ));
    }
    if status == reqwest::StatusCode::UNAUTHORIZED {
        return Ended::Refused(format!(
            "{url} refused the token (401): pass the server's token with --auth-token (a server \
             restarted with another token refuses this one); the console shows only what this \
             client sees, and asks again every {} s",
            LAST_PAUSE.as_secs()
        ));
    }
    if !status.is_success() {
        return Ended::Closed(format!("answered {status}"));
    }
    {
        let mut s = lock(state);
        s.available = Some(true);
        s.refused = false;
        s.connected = true;
        s.connects += 1;
    }
    if let Some(side) = side {
        side.stream_opened();
    }
    // Said back at the first line, which may say why it was lost (cut off).
    let mut back = lost.take();
    seen.retold.connected();
    let mut body = response.bytes_stream();
    let mut buffer: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut skipping = false;
    let mut dropped = false;
    let mut follow = std::pin::pin!(follow_asked(side));
    loop {
        let next = tokio::select! {
            next = body.next() => next,
            () = &mut follow => {
                if side.is_some_and(ClientSide::follow_waiting) {
                    // Not back yet: the next connection says it.
                    *lost = back.take();
                    return Ended::Follow;
                }
                follow.set(follow_asked(side));
                continue;
            }
        };
        let chunk = match next {
            Some(Ok(chunk)) => chunk,
            ended => {
                if let Some(back) = back.take() {
                    back.back(bus, url, false);
                }
                return match ended {
                    Some(Err(e)) => Ended::Closed(format!("the stream broke: {}", chain(&e))),
                    _ if dropped => Ended::Dropped,
                    _ => Ended::Closed("the server ended the stream".into()),
                };
            }
        };
        let mut rest = &chunk[..];
        while let Some(end) = rest.iter().position(|b| *b == b'\n') {
            if skipping {
                skipping = false;
            } else {
                buffer.extend_from_slice(&rest[..end]);
                let cut_off = back.is_some() && is_cut_off(&buffer);
                if !cut_off && let Some(back) = back.take() {
                    back.back(bus, url, false);
                }
                dropped |= take_line(&buffer, bus, state, seen);
                if let Some(back) = back.take() {
                    back.back(bus, url, true);
                }
            }
            buffer.clear();
            rest = &rest[end + 1..];
        }
        if !skipping {
            buffer.extend_from_slice(rest);
            if buffer.len() > MAX_LINE {
                buffer.clear();
                skipping = true;
                lock(state).bad_lines += 1;
            }
        }
    }
}

/// Whether `line` is the server's word that it cut this viewer off (its first line on a
/// connect after that).
fn is_cut_off(line: &[u8]) -> bool {
    matches!(serde_json::from_slice::<Event>(line),
        Ok(Event::Log { message, .. }) if message.starts_with(CUT_OFF_MARK))
}

/// Publishes one line's event (unless seen already); true when it tells this viewer it was
/// dropped.
fn take_line(line: &[u8], bus: &Bus, state: &Shared, seen: &mut Seen) -> bool {
    if line.is_empty() || !seen.first(line) {
        return false;
    }
    let Ok(event) = serde_json::from_slice::<Event>(line) else {
        lock(state).bad_lines += 1;
        return false;
    };
    if seen.retold.told_before(&event) {
        return false;
    }
    let dropped = matches!(&event, Event::Log { message, .. } if message.starts_with(DROPPED_MARK));
    if matches!(&event, Event::Log { message, .. } if message.starts_with(CUT_OFF_MARK)) {
        // Told as it connected again: the drop that ended the last connection.
        let mut state = lock(state);
        state.dropped += 1;
        state.dropped_here += 1;
    }
    match &event {
        Event::Replica(r) => {
            let (gone, restarted, moved_from, followed) = {
                let mut state = lock(state);
                let before = state.replica.replace(r.id.clone());
                state.replica_read = state.connects;
                if let Some(side) = &state.side {
                    side.watching(&r.id);
                }
                let following = std::mem::take(&mut state.following);
                if state.restarted(r.started_us) {
                    state.restarts += 1;
                    state.dropped_here = 0;
                    state.moved_from = before.filter(|b| *b != r.id);
                    // Said only when the stream did reach the session's replica.
                    let reached = state.side.as_ref().is_none_or(|s| s.elsewhere().is_none());
                    state.followed = following && reached && state.moved_from.is_some();
                    let followed = state.followed;
                    (
                        state.keep_only(&[]),
                        true,
                        state.moved_from.clone(),
                        followed,
                    )
                } else {
                    let gone = r.open_sessions.as_deref().map(|open| state.keep_only(open));
                    (gone.unwrap_or_default(), false, None, false)
                }
            };
            let reason = match (restarted, moved_from) {
                // Its numbers start again: nothing this viewer saw is told again.
                (true, Some(before)) => {
                    *seen = Seen::default();
                    let why = if followed {
                        ", where this console's MCP session lives"
                    } else {
                        ""
                    };
                    format!(
                        "the event stream now comes from replica {}{why} ({before} before); a \
                         session it numbers so now is another one",
                        r.id
                    )
                }
                (true, None) => {
                    *seen = Seen::default();
                    "the watched server restarted; a session it numbers so now is another one"
                        .to_string()
                }
                (false, _) => "closed on the watched server while this viewer was away".to_string(),
            };
            // Sessions that ended while this viewer was away (dropped, or the server rested
            // or restarted): their closing was never seen, so it is said now.
            for number in gone {
                bus.publish(Event::Session(SessionEvent {
                    session: number,
                    handle_prefix: String::new(),
                    opener: SessionOpener::Api,
                    closed: Some(reason.clone()),
                    at_us: r.at_us,
                    restored: false,
                    began_us: None,
                    taken_from: None,
                    greeting: None,
                }));
            }
        }
        Event::Session(s) if s.closed.is_none() => {
            lock(state).saw_session(&s.handle_prefix, s.session)
        }
        _ => {}
    }
    bus.publish(event);
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::event::ReplicaEvent;

    #[test]
    fn the_events_url_sits_beside_the_mcp_path() {
        assert_eq!(
            events_url("http://127.0.0.1:7870/mcp").as_deref(),
            Some("http://127.0.0.1:7870/events")
        );
        assert_eq!(
            events_url("http://h:1/bots/a/mcp/?x=1").as_deref(),
            Some("http://h:1/bots/a/events")
        );
    }

    /// Session `number` opened by an API caller, its handle starting `prefix`.
    fn opened(number: u64, prefix: &str) -> Event {
        Event::Session(SessionEvent {
            session: number,
            handle_prefix: prefix.into(),
            opener: SessionOpener::Api,
            closed: None,
            at_us: 1,
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: None,
        })
    }

    /// A reconnect's first line lists the sessions open on the server: those this viewer
    /// knew and that are not listed ended while it was away, and are closed with a reason.
    #[test]
    fn sessions_that_ended_while_away_are_closed_on_reconnect() {
        let bus = Bus::default();
        let mut sub = bus.subscribe();
        let state = Shared::default();
        let mut seen = Seen::default();
        let line = |event: Event| serde_json::to_vec(&event).unwrap();
        for number in 1..=3 {
            take_line(
                &line(opened(number, &format!("prefix0{number}"))),
                &bus,
                &state,
                &mut seen,
            );
        }
        take_line(
            &line(Event::Replica(ReplicaEvent {
                id: "r".into(),
                tag: "0000".into(),
                state: "serving".into(),
                at_us: 2,
                open_sessions: Some(vec![2]),
                started_us: None,
                handle_seconds: None,
                console_holds: None,
            })),
            &bus,
            &state,
            &mut seen,
        );
        let mut closed = Vec::new();
        while let Some(event) = sub.try_recv() {
            if let Event::Session(s) = &*event
                && let Some(reason) = &s.closed
            {
                assert!(reason.contains("while this viewer was away"), "{reason}");
                closed.push(s.session);
            }
        }
        assert_eq!(closed, vec![1, 3]);
        let state = lock(&state);
        assert_eq!(state.session_of("prefix02"), Some(2));
        assert_eq!(state.session_of("prefix01"), None);
    }

    /// A connection's first line: replica `id`, started at `started`, `open` sessions open.
    fn first_line(id: &str, started: u64, open: Vec<u64>) -> Vec<u8> {
        serde_json::to_vec(&Event::Replica(ReplicaEvent {
            id: id.into(),
            tag: "0000".into(),
            state: "serving".into(),
            at_us: started,
            open_sessions: Some(open),
            started_us: Some(started),
            handle_seconds: None,
            console_holds: None,
        }))
        .unwrap()
    }

    /// The watched server restarted (its first line gives another start time): the sessions
    /// known before are closed, and its new session 1 with its turn 1 is shown, not taken
    /// for the one shown before. Behind a balancer the stream may go on from another replica:
    /// the same, said as such.
    #[test]
    fn after_a_restart_or_a_move_to_another_replica_the_same_numbers_are_other_sessions() {
        use crate::observe::event::TurnEndEvent;
        let bus = Bus::default();
        let mut sub = bus.subscribe();
        let state = Shared::default();
        let mut seen = Seen::default();
        let connect = |id: &str, started: u64, seen: &mut Seen| {
            seen.retold.connected();
            take_line(&first_line(id, started, vec![1]), &bus, &state, seen);
        };
        let one_turn = |prefix: &str, seen: &mut Seen| {
            let events = [
                opened(1, prefix),
                Event::TurnStarted {
                    session: 1,
                    turn: 1,
                    line: format!("said to {prefix}"),
                    at_us: 2,
                },
                Event::TurnEnded(TurnEndEvent {
                    session: 1,
                    turn: 1,
                    reason: "completed".into(),
                    ..TurnEndEvent::default()
                }),
            ];
            for event in events {
                take_line(&serde_json::to_vec(&event).unwrap(), &bus, &state, seen);
            }
        };
        connect("r", 100, &mut seen);
        one_turn("before01", &mut seen);
        connect("r", 200, &mut seen);
        one_turn("after001", &mut seen);
        connect("r2", 300, &mut seen);
        one_turn("moved001", &mut seen);
        assert!(!lock(&state).followed);
        // The console's MCP client asked the stream to follow its new session to r3.
        lock(&state).following = true;
        connect("r3", 400, &mut seen);
        one_turn("follow01", &mut seen);
        let mut told = Vec::new();
        while let Some(event) = sub.try_recv() {
            match &*event {
                Event::Session(s) => told.push(match &s.closed {
                    Some(reason) => format!("closed {}: {reason}", s.session),
                    None => format!("opened {} {}", s.session, s.handle_prefix),
                }),
                Event::TurnStarted { line, .. } => told.push(format!("turn: {line}")),
                _ => {}
            }
        }
        assert_eq!(
            told,
            [
                "opened 1 before01",
                "turn: said to before01",
                "closed 1: the watched server restarted; a session it numbers so now is another one",
                "opened 1 after001",
                "turn: said to after001",
                "closed 1: the event stream now comes from replica r2 (r before); a session it \
                 numbers so now is another one",
                "opened 1 moved001",
                "turn: said to moved001",
                "closed 1: the event stream now comes from replica r3, where this console's MCP \
                 session lives (r2 before); a session it numbers so now is another one",
                "opened 1 follow01",
                "turn: said to follow01",
            ]
        );
        let state = lock(&state);
        assert_eq!(state.session_of("follow01"), Some(1));
        assert_eq!(state.restarts, 3);
        assert_eq!(state.moved_from.as_deref(), Some("r2"));
        assert!(state.followed && !state.following);
    }

    /// A follow that reached another replica than the session's (the balancer's fallback) is
    /// a move like any other: it is not said to show the console's session.
    #[test]
    fn a_follow_that_lands_elsewhere_is_not_said_to_reach_the_session() {
        let bus = Bus::default();
        let side = Arc::new(ClientSide::default());
        let state: Shared = Arc::new(Mutex::new(StreamState {
            side: Some(side.clone()),
            ..StreamState::default()
        }));
        let mut seen = Seen::default();
        let connect = |id: &str, started: u64, seen: &mut Seen| {
            seen.retold.connected();
            take_line(&first_line(id, started, vec![]), &bus, &state, seen);
        };
        side.session_used("s2");
        side.own_replica("r1");
        connect("r2", 100, &mut seen);
        lock(&state).following = true;
        connect("r3", 200, &mut seen);
        {
            let s = lock(&state);
            assert_eq!((s.restarts, s.followed), (1, false));
        }
        lock(&state).following = true;
        connect("r1", 300, &mut seen);
        let s = lock(&state);
        assert_eq!((s.restarts, s.followed), (2, true));
        assert_eq!(s.moved_from.as_deref(), Some("r3"));
    }

    /// How a scripted `/events` connection ends.
    #[derive(Clone, Copy)]
    enum End {
        /// The socket closed mid-body: reqwest says the body could not be decoded.
        Break,
        /// The body ends.
        Clean,
        /// Left open.
        Hold,
    }

    /// An `/events` server on a loopback port answering its nth connection with `script[n]`
    /// (its lines, then how it ends; the last one again past the end), over real HTTP/1.1.
    async fn scripted(script: Vec<(Vec<Vec<u8>>, End)>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/events", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let mut n = 0;
            while let Ok((mut tcp, _)) = listener.accept().await {
                let (lines, end) = script[n.min(script.len() - 1)].clone();
                n += 1;
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tcp.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(k) => request.extend_from_slice(&buf[..k]),
                        }
                    }
                    let mut out = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\n\
                                    transfer-encoding: chunked\r\n\r\n"
                        .to_vec();
                    for mut line in lines {
                        line.push(b'\n');
                        out.extend_from_slice(format!("{:x}\r\n", line.len()).as_bytes());
                        out.extend_from_slice(&line);
                        out.extend_from_slice(b"\r\n");
                    }
                    if matches!(end, End::Clean) {
                        out.extend_from_slice(b"0\r\n\r\n");
                    }
                    let _ = tcp.write_all(&out).await;
                    match end {
                        End::Hold => {
                            let _ = tcp.read(&mut buf).await;
                        }
                        End::Break => {
                            // Half a chunk, then gone.
                            let _ = tcp.write_all(b"40\r\n{").await;
                        }
                        End::Clean => {}
                    }
                });
            }
        });
        url
    }

    fn warn_line_of(message: &str) -> Vec<u8> {
        serde_json::to_vec(&Event::Log {
            at_ms: now_us() / 1000,
            level: "warn".into(),
            message: message.into(),
        })
        .unwrap()
    }

    /// Reads `url` until the Log says it connected again (or 10 s); its Log lines and state.
    async fn read_until_back(url: String) -> (Vec<String>, StreamState) {
        let bus = Bus::default();
        let mut sub = bus.subscribe();
        let stop = CancellationToken::new();
        let state = spawn(url, None, bus, None, stop.clone());
        let mut said = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !said.iter().any(|l: &String| l.contains("connected again")) {
            assert!(Instant::now() < deadline, "never back: {said:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
            while let Some(event) = sub.try_recv() {
                if let Event::Log { message, .. } = &*event {
                    said.push(message.clone());
                }
            }
        }
        // Whatever else the connection tells.
        tokio::time::sleep(Duration::from_millis(200)).await;
        while let Some(event) = sub.try_recv() {
            if let Event::Log { message, .. } = &*event {
                said.push(message.clone());
            }
        }
        stop.cancel();
        let state = lock(&state).clone();
        (said, state)
    }

    /// A viewer the server cut off (it read nothing for a while: suspended) finds its stream
    /// broken, and the server says why as it connects again: the Log says that reason and
    /// that it is back, not the transport's words for the same break first (tour T: "the
    /// stream broke: error decoding response body …", then the real reason).
    #[tokio::test]
    async fn a_viewer_cut_off_is_told_why_once_not_with_the_transports_words_first() {
        let cut_off = warn_line_of(&format!("{CUT_OFF_MARK}: this viewer read nothing for 5 s"));
        let url = scripted(vec![
            (vec![first_line("r", 100, vec![])], End::Break),
            (vec![cut_off, first_line("r", 100, vec![])], End::Hold),
        ])
        .await;
        let (said, state) = read_until_back(url).await;
        assert!(!said.iter().any(|l| l.contains("broke")), "{said:?}");
        let at = |needle: &str| said.iter().position(|l| l.contains(needle));
        assert!(at(CUT_OFF_MARK) < at("connected again"), "{said:?}");
        assert_eq!(said.len(), 2, "{said:?}");
        assert_eq!(state.dropped, 1);
    }

    /// A stream that broke and came back without a word of why is said to have broken (at
    /// the time it broke), then to be back.
    #[tokio::test]
    async fn a_break_the_server_does_not_explain_is_said_then_its_return() {
        let url = scripted(vec![
            (vec![first_line("r", 100, vec![])], End::Break),
            (vec![first_line("r", 100, vec![])], End::Hold),
        ])
        .await;
        let (said, _) = read_until_back(url).await;
        let at = |needle: &str| said.iter().position(|l| l.contains(needle));
        assert!(at("the stream broke").is_some(), "{said:?}");
        assert!(at("the stream broke") < at("connected again"), "{said:?}");
    }

    /// Dropped while the server rested (its last line says why, then the stream ends), the
    /// viewer connects again and the Log says it is back (it said nothing: tour T). The
    /// server it comes back to restarted meanwhile: the header's count of drops is that
    /// server's (none), the figures' still counts it.
    #[tokio::test]
    async fn after_a_drop_the_log_says_the_stream_is_back_and_a_new_server_has_no_drops() {
        let dropped = warn_line_of(&format!("{DROPPED_MARK}: no viewer read the stream"));
        let url = scripted(vec![
            (vec![first_line("r", 100, vec![]), dropped], End::Clean),
            (vec![first_line("r", 200, vec![])], End::Hold),
        ])
        .await;
        let (said, state) = read_until_back(url).await;
        assert!(said.iter().any(|l| l.starts_with(DROPPED_MARK)), "{said:?}");
        assert_eq!((state.dropped, state.dropped_here), (1, 0));
    }

    #[test]
    fn a_line_seen_again_is_skipped() {
        let mut seen = Seen::default();
        assert!(seen.first(b"a"));
        assert!(!seen.first(b"a"));
        assert!(seen.first(b"b"));
    }
}
