//! The live event stream at `GET /events`: every bus event as one JSON line, the lines
//! `--events` writes, to any number of viewers (`turnscope attach`, or `curl -N` into a file
//! that `turnscope replay` opens). The route sits behind the same guard as `/mcp` (bind,
//! Host/Origin, bearer token).
//!
//! One hub task listens on the bus while someone watches (and a linger after the last viewer
//! left, [`LINGER`] unless `[server] events_linger_seconds` says otherwise, so a viewer that
//! was dropped and reconnects finds what it missed); with nobody watching it lets go of the
//! bus, which is then free again. The hub writes each event once into a shared line, keeps
//! the newest lines up to [`HISTORY_BYTES`], and hands them to the viewers through a
//! broadcast of [`VIEWER_QUEUE`] lines. A viewer that falls that far behind
//! is dropped: its stream ends with a `warn` log line saying so (it reconnects); one that stops
//! reading altogether has its connection closed after [`STALL`]. The server never waits for
//! a viewer: the bus and the broadcast are both lossy.
//!
//! On connect a viewer gets, before the live lines: the replica, each open session of the
//! table with its kept turns that the history does not hold from their start (finished ones
//! whole, the one in flight as started: its reply from the moment of connecting), then the
//! history.

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::observe::event::{
    Event, FrameEvent, ReplicaEvent, SessionEvent, ToolCallEvent, carried, now_us,
};
use crate::observe::line::write_line;
use crate::observe::{Bus, Subscription};
use crate::sessions::{Session, Sessions};

/// Most bytes of recent lines the hub keeps for a viewer that connects.
pub const HISTORY_BYTES: usize = 1024 * 1024;
/// Lines a viewer may fall behind the hub before it is dropped.
pub const VIEWER_QUEUE: usize = 4096;
/// How long the hub keeps listening after the last viewer left, unless configured.
pub const LINGER: Duration = Duration::from_secs(crate::config::DEFAULT_EVENTS_LINGER_SECONDS);
/// How long a dropped viewer that reads nothing keeps its connection.
pub const STALL: Duration = Duration::from_secs(5);
/// Most bytes sent in one write of the stream.
const CHUNK_BYTES: usize = 64 * 1024;
/// Most events the hub folds in under one lock.
const HUB_BATCH: usize = 1024;

/// A connection's closer: the accept loop puts one in every request's extensions, and ends the
/// connection when it is cancelled (a viewer that stopped reading is cut off this way).
#[derive(Clone, Debug, Default)]
pub struct ConnectionCloser(pub CancellationToken);

/// The viewers of one server's event stream, and the hub that feeds them.
#[derive(Clone)]
pub struct Viewers {
    inner: Arc<Inner>,
}

struct Inner {
    bus: Bus,
    sessions: Sessions,
    linger: Duration,
    hub: Mutex<Hub>,
    connected: AtomicUsize,
    dropped: AtomicU64,
}

/// The hub's shared state: whether it runs, its history, the broadcast to viewers.
struct Hub {
    running: bool,
    history: VecDeque<Line>,
    history_bytes: usize,
    lines: broadcast::Sender<Line>,
    /// Lines sent since the hub started.
    seq: u64,
    /// When the last viewer left (`None` while one watches).
    idle_since: Option<Instant>,
    slots: Vec<Weak<Slot>>,
}

/// One event as a line, with what the connect-time filter needs to know of it.
#[derive(Clone)]
struct Line {
    bytes: Bytes,
    tag: Tag,
}

/// Which session and turn a line belongs to, and whether it opens one of them.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Tag {
    session: u64,
    turn: u64,
    opens: Opens,
}

#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum Opens {
    #[default]
    Nothing,
    Session,
    Turn,
}

impl Tag {
    fn of(event: &Event) -> Tag {
        let (session, turn, opens) = match event {
            Event::Frame(f) => (f.session, f.turn, Opens::Nothing),
            Event::Session(s) if s.closed.is_none() => (s.session, 0, Opens::Session),
            Event::Session(s) => (s.session, 0, Opens::Nothing),
            Event::TurnStarted { session, turn, .. } => (*session, *turn, Opens::Turn),
            Event::TurnEnded(t) => (t.session, t.turn, Opens::Nothing),
            Event::ToolCall(c) => (c.session, c.turn, Opens::Nothing),
            Event::ModelRequest { session, turn, .. } => (*session, *turn, Opens::Nothing),
            _ => (0, 0, Opens::Nothing),
        };
        Tag {
            session,
            turn,
            opens,
        }
    }
}

/// A viewer as the hub sees it: how far it read, when it last did, how to cut it off.
struct Slot {
    taken: AtomicU64,
    last_read_ms: AtomicU64,
    born: Instant,
    closer: Option<CancellationToken>,
}

impl Slot {
    fn read_now(&self, seq: u64) {
        self.taken.store(seq, Ordering::Relaxed);
        self.last_read_ms
            .store(self.born.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn unread_for(&self) -> Duration {
        self.born.elapsed().saturating_sub(Duration::from_millis(
            self.last_read_ms.load(Ordering::Relaxed),
        ))
    }
}

impl Viewers {
    /// The viewers of `sessions`' server (nobody watches yet; the bus stays free); the hub
    /// goes on listening `linger` after the last viewer left.
    pub fn new(sessions: Sessions, linger: Duration) -> Self {
        let (lines, _) = broadcast::channel(VIEWER_QUEUE);
        Self {
            inner: Arc::new(Inner {
                bus: sessions.bus().clone(),
                sessions,
                linger,
                hub: Mutex::new(Hub {
                    running: false,
                    history: VecDeque::new(),
                    history_bytes: 0,
                    lines,
                    seq: 0,
                    idle_since: None,
                    slots: Vec::new(),
                }),
                connected: AtomicUsize::new(0),
                dropped: AtomicU64::new(0),
            }),
        }
    }

    /// Viewers connected now.
    pub fn connected(&self) -> usize {
        self.inner.connected.load(Ordering::Relaxed)
    }

    /// Viewers dropped for falling behind, since start.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    /// Whether the hub listens on the bus now.
    pub fn listening(&self) -> bool {
        self.inner.lock().running
    }

    /// A new viewer: what it gets first (replica, sessions, history) and its live stream.
    fn join(&self, closer: Option<CancellationToken>) -> ViewerStream {
        let inner = &self.inner;
        let mut hub = inner.lock();
        if !hub.running {
            hub.running = true;
            hub.history.clear();
            hub.history_bytes = 0;
            // Subscribed under the lock, before the table is read below: nothing published
            // from here on is missed.
            let sub = inner.bus.subscribe();
            tokio::spawn(run_hub(Arc::downgrade(inner), sub));
        }
        hub.idle_since = None;
        let (first, skip) = self.preamble(&hub.history);
        let slot = Arc::new(Slot {
            taken: AtomicU64::new(hub.seq),
            last_read_ms: AtomicU64::new(0),
            born: Instant::now(),
            closer,
        });
        hub.slots.retain(|s| s.strong_count() > 0);
        hub.slots.push(Arc::downgrade(&slot));
        let rx = hub.lines.subscribe();
        let seq = hub.seq;
        drop(hub);
        inner.connected.fetch_add(1, Ordering::Relaxed);
        ViewerStream {
            first,
            rx,
            skip,
            seq,
            slot,
            viewers: self.clone(),
            ended: false,
            buf: BytesMut::new(),
        }
    }

    /// The lines a viewer gets before the live ones, and which later lines they make
    /// redundant.
    fn preamble(&self, history: &VecDeque<Line>) -> (VecDeque<Bytes>, Skip) {
        let sessions = &self.inner.sessions;
        let mut first = VecDeque::new();
        let mut push = |event: &Event| {
            let mut line = Vec::with_capacity(256);
            if write_line(&mut line, event) {
                first.push_back(Bytes::from(line));
            }
        };
        let replica = sessions.replica();
        push(&Event::Replica(ReplicaEvent {
            id: replica.id().to_string(),
            tag: replica.tag().to_string(),
            state: if sessions.is_draining() {
                "draining"
            } else {
                "serving"
            }
            .into(),
            at_us: now_us(),
        }));
        let opened_in_history: HashSet<u64> = history
            .iter()
            .filter(|l| l.tag.opens == Opens::Session)
            .map(|l| l.tag.session)
            .collect();
        let started_in_history: HashSet<(u64, u64)> = history
            .iter()
            .filter(|l| l.tag.opens == Opens::Turn)
            .map(|l| (l.tag.session, l.tag.turn))
            .collect();
        let mut skip = Skip::default();
        let now = now_us();
        for session in sessions.list() {
            if !opened_in_history.contains(&session.number) {
                skip.sessions.insert(session.number);
                push(&Event::Session(SessionEvent {
                    session: session.number,
                    handle_prefix: session.handle_prefix(),
                    opener: session.opener.clone(),
                    closed: None,
                    at_us: now.saturating_sub(session.opened.elapsed().as_micros() as u64),
                    restored: session.restored,
                    taken_from: session.taken_from.clone(),
                }));
            }
            for turn in session.turns() {
                if started_in_history.contains(&(session.number, turn.id)) {
                    continue;
                }
                let finished = turn.is_done();
                skip.turns.insert((session.number, turn.id), finished);
                let started_us = now.saturating_sub(turn.started().elapsed().as_micros() as u64);
                turn.with_record(|r| {
                    for event in turn_events(&session, r, started_us, finished) {
                        push(&event);
                    }
                });
            }
        }
        for line in history {
            if !skip.drops(&line.tag) {
                first.push_back(line.bytes.clone());
            }
        }
        (first, skip)
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Hub> {
        self.hub.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A kept turn as events: its start, and when it finished its reply (as one `model → output`
/// piece, the way a client's recording carries it), its tool calls and its end.
fn turn_events(
    session: &Session,
    r: &crate::bot::TurnRecord,
    started_us: u64,
    finished: bool,
) -> Vec<Event> {
    let number = session.number;
    let mut events = vec![Event::TurnStarted {
        session: number,
        turn: r.id,
        line: r.line.clone(),
        at_us: started_us,
    }];
    if !finished {
        return events;
    }
    if !r.reply.is_empty() {
        events.push(Event::Frame(FrameEvent {
            id: 0,
            session: number,
            turn: r.id,
            kind: "data".into(),
            name: "TextPiece".into(),
            from: "model".into(),
            to: "output".into(),
            direction: "down".into(),
            at_us: started_us + r.first_piece.map_or(0, |d| d.as_micros() as u64),
            detail: r.reply.clone(),
            depth: 0,
        }));
    }
    for call in &r.tool_calls {
        let error = call.outcome.is_error.then(|| call.outcome.text.clone());
        events.push(Event::ToolCall(ToolCallEvent {
            session: number,
            turn: r.id,
            name: call.call.name.clone(),
            duration_us: call.duration.as_micros() as u64,
            result_bytes: call.outcome.text.len(),
            result: if error.is_some() {
                String::new()
            } else {
                carried(&call.outcome.text)
            },
            error,
            arguments: call.call.arguments.clone(),
            started_us: 0,
        }));
    }
    events.push(Event::TurnEnded(r.end_event(number)));
    events
}

/// Which later lines the preamble made redundant: a session it opened, a finished turn it
/// gave whole (every line of it), a turn in flight it started (only its start).
#[derive(Default)]
struct Skip {
    sessions: HashSet<u64>,
    /// (session, turn) → whether the preamble gave it finished.
    turns: HashMap<(u64, u64), bool>,
}

impl Skip {
    fn drops(&self, tag: &Tag) -> bool {
        match tag.opens {
            Opens::Session => self.sessions.contains(&tag.session),
            Opens::Turn => self.turns.contains_key(&(tag.session, tag.turn)),
            Opens::Nothing => {
                tag.turn != 0
                    && self
                        .turns
                        .get(&(tag.session, tag.turn))
                        .copied()
                        .unwrap_or(false)
            }
        }
    }
}

/// The hub: reads the bus, writes each event once as a line, keeps the history, hands lines
/// to the viewers; stops (letting go of the bus) its linger after the last viewer left.
async fn run_hub(inner: Weak<Inner>, mut sub: Subscription) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut marked = 0u64;
    let mut batch: Vec<Line> = Vec::with_capacity(64);
    loop {
        tokio::select! {
            event = sub.recv() => {
                let Some(event) = event else { break };
                batch.push(line_of(&event));
                while batch.len() < HUB_BATCH {
                    match sub.try_recv() {
                        Some(event) => batch.push(line_of(&event)),
                        None => break,
                    }
                }
                let missed = sub.missed();
                if missed > marked {
                    batch.push(line_of(&Event::Log {
                        at_ms: now_us() / 1000,
                        level: "warn".into(),
                        message: format!(
                            "{} events are missing here: the event stream fell behind the bus",
                            missed - marked
                        ),
                    }));
                    marked = missed;
                }
                let Some(inner) = inner.upgrade() else { break };
                let mut hub = inner.lock();
                for line in batch.drain(..) {
                    hub.push(line);
                }
            }
            _ = tick.tick() => {
                let Some(inner) = inner.upgrade() else { break };
                let mut hub = inner.lock();
                let cut = hub.cut_off_stalled();
                inner.dropped.fetch_add(cut, Ordering::Relaxed);
                let idle = hub.idle_since.is_some_and(|t| t.elapsed() >= inner.linger);
                if idle && inner.connected.load(Ordering::Relaxed) == 0 {
                    hub.running = false;
                    hub.history.clear();
                    hub.history_bytes = 0;
                    break;
                }
            }
        }
    }
}

impl Hub {
    fn push(&mut self, line: Line) {
        self.seq += 1;
        self.history_bytes += line.bytes.len();
        self.history.push_back(line.clone());
        while self.history_bytes > HISTORY_BYTES
            && let Some(old) = self.history.pop_front()
        {
            self.history_bytes -= old.bytes.len();
        }
        let _ = self.lines.send(line);
    }

    /// Closes the connection of each viewer that fell a whole queue behind and read nothing
    /// for [`STALL`]: it would be dropped at its next read, which may never come.
    fn cut_off_stalled(&mut self) -> u64 {
        let seq = self.seq;
        let mut cut = 0;
        self.slots.retain(|slot| {
            let Some(slot) = slot.upgrade() else {
                return false;
            };
            let behind = seq.saturating_sub(slot.taken.load(Ordering::Relaxed));
            if behind > VIEWER_QUEUE as u64 && slot.unread_for() >= STALL {
                if let Some(closer) = &slot.closer {
                    closer.cancel();
                }
                cut += 1;
                return false;
            }
            true
        });
        cut
    }
}

fn line_of(event: &Event) -> Line {
    let mut bytes = Vec::with_capacity(256);
    write_line(&mut bytes, event);
    Line {
        bytes: Bytes::from(bytes),
        tag: Tag::of(event),
    }
}

/// One viewer's stream: the preamble, then live lines in chunks; its end (a drop, the hub
/// gone) ends the response.
struct ViewerStream {
    first: VecDeque<Bytes>,
    rx: broadcast::Receiver<Line>,
    skip: Skip,
    seq: u64,
    slot: Arc<Slot>,
    viewers: Viewers,
    ended: bool,
    /// Where chunks are put together. Each chunk is split off it, and once the connection
    /// has written a chunk and let go of it, `reserve` takes the same memory back: a viewer
    /// does not take (and the allocator hand back and the kernel zero) fresh pages for every
    /// chunk.
    buf: BytesMut,
}

impl Drop for ViewerStream {
    fn drop(&mut self) {
        let inner = &self.viewers.inner;
        if inner.connected.fetch_sub(1, Ordering::Relaxed) == 1 {
            inner.lock().idle_since = Some(Instant::now());
        }
    }
}

impl ViewerStream {
    /// The next chunk to write, `None` at the end.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if self.ended {
            return None;
        }
        let mut chunk = std::mem::take(&mut self.buf);
        chunk.reserve(CHUNK_BYTES);
        while let Some(line) = self.first.pop_front() {
            chunk.extend_from_slice(&line);
            if chunk.len() >= CHUNK_BYTES {
                break;
            }
        }
        if !chunk.is_empty() {
            self.slot.read_now(self.seq);
            return self.cut(chunk);
        }
        loop {
            let received = self.rx.recv().await;
            match self.take(received, &mut chunk) {
                Taken::Lagged(n) => {
                    self.ended = true;
                    self.viewers.inner.dropped.fetch_add(1, Ordering::Relaxed);
                    chunk.extend_from_slice(&dropped_line(n));
                    return self.cut(chunk);
                }
                Taken::Closed => {
                    self.ended = true;
                    return if chunk.is_empty() {
                        None
                    } else {
                        self.cut(chunk)
                    };
                }
                Taken::Line => {}
            }
            while chunk.len() < CHUNK_BYTES {
                let received = match self.rx.try_recv() {
                    Ok(line) => Ok(line),
                    Err(broadcast::error::TryRecvError::Empty) => break,
                    Err(broadcast::error::TryRecvError::Lagged(n)) => {
                        Err(broadcast::error::RecvError::Lagged(n))
                    }
                    Err(broadcast::error::TryRecvError::Closed) => {
                        Err(broadcast::error::RecvError::Closed)
                    }
                };
                match self.take(received, &mut chunk) {
                    Taken::Line => {}
                    Taken::Lagged(n) => {
                        self.ended = true;
                        self.viewers.inner.dropped.fetch_add(1, Ordering::Relaxed);
                        chunk.extend_from_slice(&dropped_line(n));
                        break;
                    }
                    Taken::Closed => {
                        self.ended = true;
                        break;
                    }
                }
            }
            self.slot.read_now(self.seq);
            if !chunk.is_empty() {
                return self.cut(chunk);
            }
        }
    }

    /// The chunk written so far, split off `chunk`, which stays this viewer's buffer.
    fn cut(&mut self, mut chunk: BytesMut) -> Option<Bytes> {
        let out = chunk.split().freeze();
        self.buf = chunk;
        Some(out)
    }

    fn take(
        &mut self,
        received: Result<Line, broadcast::error::RecvError>,
        chunk: &mut BytesMut,
    ) -> Taken {
        match received {
            Ok(line) => {
                self.seq += 1;
                if !self.skip.drops(&line.tag) {
                    chunk.extend_from_slice(&line.bytes);
                }
                Taken::Line
            }
            Err(broadcast::error::RecvError::Lagged(n)) => Taken::Lagged(n),
            Err(broadcast::error::RecvError::Closed) => Taken::Closed,
        }
    }
}

enum Taken {
    Line,
    Lagged(u64),
    Closed,
}

/// The last line a dropped viewer reads.
fn dropped_line(lagged: u64) -> Bytes {
    let mut line = serde_json::to_vec(&Event::Log {
        at_ms: now_us() / 1000,
        level: "warn".into(),
        message: format!(
            "{DROPPED_MARK}: this viewer fell {lagged} events behind the server (more than {VIEWER_QUEUE} \
             queued for it) and was dropped so the server never waits for it; reconnect to go on \
             (the events it missed are lost to it)"
        ),
    })
    .unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// How the line telling a viewer it was dropped begins (a client reconnects on it).
pub const DROPPED_MARK: &str = "event stream dropped";

/// `GET /events`: the stream, as `application/x-ndjson`.
pub async fn serve(State(viewers): State<Viewers>, request: Request) -> Response {
    let closer = request
        .extensions()
        .get::<ConnectionCloser>()
        .map(|c| c.0.clone());
    let stream = viewers.join(closer);
    let body = futures::stream::unfold(stream, |mut stream| async move {
        let chunk = stream.next_chunk().await?;
        Some((Ok::<_, Infallible>(chunk), stream))
    });
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
