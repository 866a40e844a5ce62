//! The live event stream at `GET /events`: every bus event as one JSON line, the lines
//! `--events` writes, to any number of viewers (`turnscope attach`, or `curl -N` into a file
//! that `turnscope replay` opens). The route sits behind the same guard as `/mcp` (bind,
//! Host/Origin, bearer token).
//!
//! One hub task listens on the bus while someone watches (and a linger after the last viewer
//! left, [`LINGER`] unless `[server] events_linger_seconds` says otherwise, so a viewer that
//! was dropped and reconnects finds what it missed); with nobody watching it lets go of the
//! bus, which is then free again. The hub writes each event once into a shared line and keeps
//! the newest lines, numbered, up to [`QUEUE_BYTES`] (`[server] events_queue_kib`): each
//! viewer reads them from there at its own pace (woken when lines come), and a viewer that
//! connects is first sent the newest [`HISTORY_BYTES`] of them. A viewer whose next line was let go is dropped: its stream ends
//! with a `warn` log line saying so (it reconnects); one that stops reading altogether has its
//! connection closed after [`STALL`]. So what watching keeps is one byte budget, however many
//! viewers there are and however slow, and the server never waits for a viewer: the bus is
//! lossy and the kept lines are let go oldest first.
//!
//! Nor does it record for nobody: when every viewer has lines waiting and none has read for
//! [`REST_AFTER`] (a viewer that stopped reading, its socket full), the hub rests: it lets go
//! of the bus, so the server builds no events, as with nobody watching. The first viewer that
//! reads again (or a new one) wakes it; waking lets go of the kept lines (what they began may
//! have ended unseen), so a viewer that had not read them all is dropped, told why, and sent
//! the sessions as they are now when it reconnects.
//!
//! On connect a viewer gets, before the live lines: the replica, the tool set the bot offers
//! its model now, each open session of the table with its kept turns that the history does
//! not hold from their start (finished ones whole, the one in flight as started: its reply
//! from the moment of connecting), then the history (`welcome.rs`).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::observe::event::{Event, now_us};
use crate::observe::line::write_line;
use crate::observe::{Bus, Subscription};
use crate::sessions::Sessions;

mod welcome;
use welcome::{Skip, Tag};

/// Most bytes of recent lines a viewer that connects is sent first.
pub const HISTORY_BYTES: usize = 1024 * 1024;
/// Most bytes of lines the hub keeps for its viewers to read, unless configured (each line
/// counted with what keeping it costs); a viewer that falls further behind is dropped.
pub const QUEUE_BYTES: usize = crate::config::DEFAULT_EVENTS_QUEUE_KIB * 1024;
/// How long the hub keeps listening after the last viewer left, unless configured.
pub const LINGER: Duration = Duration::from_secs(crate::config::DEFAULT_EVENTS_LINGER_SECONDS);
/// How long a dropped viewer that reads nothing keeps its connection.
pub const STALL: Duration = Duration::from_secs(5);
/// How long every viewer may go without reading, lines waiting for each, before the hub
/// rests (stops recording until one reads again).
pub const REST_AFTER: Duration = Duration::from_secs(1);
/// How often the hub checks its viewers (stalled, resting) and its linger.
const TICK: Duration = Duration::from_millis(250);
/// Most bytes sent in one write of the stream.
const CHUNK_BYTES: usize = 64 * 1024;
/// How long a viewer that has read every kept line waits before it takes the next ones: a
/// busy server keeps lines many times a millisecond, and writing each batch as it comes cost
/// a wake-up and a write per viewer each time (on the server, and a read on the viewer's
/// side). A viewer that is behind (its last chunk was full) does not wait. Far below what a
/// person watching can notice. Only with a queue of at least [`GAP_MIN_QUEUE`]: lines keep
/// coming while a viewer waits, and a small queue (`[server] events_queue_kib` goes down to
/// 64) could let them go before it reads them, dropping a viewer that was keeping up.
const WRITE_GAP: Duration = Duration::from_millis(20);
/// The smallest queue a viewer waits [`WRITE_GAP`] with (the default is 8 MiB, ~200 ms of
/// a two-core server's busiest stream).
const GAP_MIN_QUEUE: usize = 4 * 1024 * 1024;
/// Most events the hub folds in under one lock.
const HUB_BATCH: usize = 1024;
/// How long a stream waits, once the server stops, for the hub to keep the server's last
/// events before it sends them and ends.
const LAST_LINES: Duration = Duration::from_millis(50);

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
    /// Most bytes of lines kept ([`QUEUE_BYTES`] unless configured).
    queue_bytes: usize,
    hub: Mutex<Hub>,
    connected: AtomicUsize,
    dropped: AtomicU64,
    /// Tells the hub task a subscription waits for it in [`Hub::woken`].
    wake_hub: Arc<Notify>,
    /// When the server started (µs since the epoch), told in each viewer's first line.
    started_us: u64,
    /// Cancelled when the server stops: each stream then sends what is kept and ends, so the
    /// server's shutdown does not wait out its grace for streams that never end.
    stop: CancellationToken,
}

/// The hub's shared state: whether it runs, the lines kept for the viewers, the wake-up.
struct Hub {
    running: bool,
    /// The newest lines, oldest first, within the queue's bytes.
    kept: VecDeque<Line>,
    /// Bytes `kept` costs ([`Line::cost`]).
    kept_bytes: usize,
    /// The number of `kept`'s first line; lines are numbered from 0 for the server's life.
    first_seq: u64,
    /// The number the next line will have ([`Hub::seq`]), sent to the viewers after each
    /// batch, which wakes them.
    wake: watch::Sender<u64>,
    /// When the last viewer left (`None` while one watches).
    idle_since: Option<Instant>,
    slots: Vec<Weak<Slot>>,
    /// While the hub rests (no viewer reads): since when.
    resting_since: Option<Instant>,
    /// The subscription a viewer took for the hub when it woke it (taken under the lock, so
    /// nothing published after the wake is missed), until the hub task picks it up.
    woken: Option<Subscription>,
    /// The latest rest: the number of the first line after it, and how long it lasted.
    last_rest: Option<(u64, Duration)>,
    /// Viewers cut off for reading nothing (by the id they sent, at most [`CUT_REMEMBERED`]),
    /// with the lines they had not read: told so when they connect again, as their closed
    /// socket could not be.
    cut: VecDeque<(Box<str>, u64)>,
}

/// Viewers cut off that the hub remembers, to tell them when they connect again.
const CUT_REMEMBERED: usize = 64;

/// The header a viewer names itself by (any text up to 64 bytes it keeps across its
/// connects), so a viewer that was cut off is told so when it connects again.
pub const VIEWER_HEADER: &str = "x-turnscope-viewer";

/// One event as a line (a frame's journey as one line per crossing, kept together), with
/// what the connect-time filter needs to know of it.
#[derive(Clone)]
struct Line {
    bytes: Bytes,
    tag: Tag,
}

impl Line {
    /// What keeping the line costs: its bytes, its place in the queue and the allocation's
    /// header.
    fn cost(&self) -> usize {
        self.bytes.len() + std::mem::size_of::<Line>() + 32
    }
}

/// A viewer as the hub sees it: how far it read, when it last did, how to cut it off.
struct Slot {
    taken: AtomicU64,
    last_read_ms: AtomicU64,
    born: Instant,
    closer: Option<CancellationToken>,
    /// The id the viewer named itself by ([`VIEWER_HEADER`]).
    viewer: Option<Box<str>>,
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
    /// goes on listening `linger` after the last viewer left and keeps `queue_bytes` of lines.
    /// Once `stop` is cancelled (the server stops) every stream ends after its last lines.
    pub fn new(
        sessions: Sessions,
        linger: Duration,
        queue_bytes: usize,
        stop: CancellationToken,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                bus: sessions.bus().clone(),
                sessions,
                linger,
                queue_bytes,
                hub: Mutex::new(Hub::new()),
                connected: AtomicUsize::new(0),
                dropped: AtomicU64::new(0),
                wake_hub: Arc::new(Notify::new()),
                started_us: now_us(),
                stop,
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

    /// Whether the hub listens on the bus now (it runs and does not rest).
    pub fn listening(&self) -> bool {
        let hub = self.inner.lock();
        hub.running && hub.resting_since.is_none()
    }

    /// Whether the hub rests: viewers are connected but none reads, so nothing is recorded.
    pub fn resting(&self) -> bool {
        self.inner.lock().resting_since.is_some()
    }

    /// A new viewer: what it gets first (replica, sessions, history) and its live stream.
    fn join(&self, closer: Option<CancellationToken>, viewer: Option<Box<str>>) -> ViewerStream {
        let inner = &self.inner;
        let mut hub = inner.lock();
        if !hub.running {
            hub.running = true;
            hub.let_go();
            // Subscribed under the lock, before the table is read below: nothing published
            // from here on is missed.
            let sub = inner.bus.subscribe_whole();
            tokio::spawn(run_hub(Arc::downgrade(inner), sub, inner.wake_hub.clone()));
        }
        // Woken before the table is read below: nothing published from here on is missed.
        inner.wake_up(&mut hub);
        hub.idle_since = None;
        let (mut first, skip) = welcome::preamble(&inner.sessions, inner.started_us, hub.history());
        // A viewer cut off for reading nothing is told so first: its socket was full then.
        if let Some(viewer) = &viewer
            && let Some(at) = hub.cut.iter().position(|(v, _)| v == viewer)
            && let Some((_, missed)) = hub.cut.remove(at)
        {
            first.push_front(cut_off_line(missed));
        }
        let slot = Arc::new(Slot {
            taken: AtomicU64::new(hub.seq()),
            last_read_ms: AtomicU64::new(0),
            born: Instant::now(),
            closer,
            viewer,
        });
        hub.slots.retain(|s| s.strong_count() > 0);
        hub.slots.push(Arc::downgrade(&slot));
        let wake = hub.wake.subscribe();
        let next = hub.seq();
        drop(hub);
        inner.connected.fetch_add(1, Ordering::Relaxed);
        ViewerStream {
            first,
            wake,
            skip,
            next,
            slot,
            viewers: self.clone(),
            ended: false,
            buf: BytesMut::new(),
            caught_up_at: None,
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Hub> {
        self.hub.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ends the hub's rest, if it rests: subscribes for it (under the lock the caller holds)
    /// and tells the hub task. The kept lines are let go: what they began (a turn, a session)
    /// may have ended unseen in the rest, so a viewer that had not read them all is dropped
    /// and told why, and its reconnect (like a new viewer's connect) is sent the state as the
    /// session table has it now.
    fn wake_up(&self, hub: &mut Hub) {
        let Some(since) = hub.resting_since.take() else {
            return;
        };
        hub.woken = Some(self.bus.subscribe_whole());
        hub.forget_lines();
        hub.last_rest = Some((hub.first_seq, since.elapsed()));
        let seq = hub.seq();
        hub.wake.send_replace(seq);
        self.wake_hub.notify_one();
    }
}

/// The hub: reads the bus, writes each event once as a line, keeps the history, hands lines
/// to the viewers; stops (letting go of the bus) its linger after the last viewer left.
async fn run_hub(inner: Weak<Inner>, sub: Subscription, woken: Arc<Notify>) {
    // `None` while the hub rests.
    let mut sub = Some(sub);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut marked = 0u64;
    let mut batch: Vec<Line> = Vec::with_capacity(64);
    let mut writer = LineWriter::default();
    loop {
        tokio::select! {
            event = next_event(&mut sub) => {
                let Some(event) = event else { break };
                let Some(sub) = sub.as_mut() else { continue };
                batch.push(writer.line_of(&event));
                retell_restored(&inner, &event, &mut batch, &mut writer);
                while batch.len() < HUB_BATCH {
                    match sub.try_recv() {
                        Some(event) => {
                            batch.push(writer.line_of(&event));
                            retell_restored(&inner, &event, &mut batch, &mut writer);
                        }
                        None => break,
                    }
                }
                let missed = sub.missed();
                if missed > marked {
                    batch.push(writer.line_of(&Event::Log {
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
                    hub.push(line, inner.queue_bytes);
                }
                let seq = hub.seq();
                hub.wake.send_replace(seq);
            }
            _ = woken.notified() => {
                let Some(inner) = inner.upgrade() else { break };
                if let Some(fresh) = inner.lock().woken.take() {
                    sub = Some(fresh);
                    marked = 0;
                }
            }
            _ = tick.tick() => {
                let Some(inner) = inner.upgrade() else { break };
                let mut hub = inner.lock();
                let cut = hub.cut_off_stalled();
                inner.dropped.fetch_add(cut, Ordering::Relaxed);
                if sub.is_some() && hub.woken.is_none() && hub.nobody_reads() {
                    // Letting go of the subscription frees the bus: nothing is built.
                    sub = None;
                    hub.resting_since = Some(Instant::now());
                }
                let idle = hub.idle_since.is_some_and(|t| t.elapsed() >= inner.linger);
                if idle && inner.connected.load(Ordering::Relaxed) == 0 {
                    hub.running = false;
                    hub.let_go();
                    break;
                }
            }
        }
    }
}

/// After the opening of a session reopened from the store, its finished kept turns as lines
/// ([`welcome::retell_restored`]).
fn retell_restored(
    inner: &Weak<Inner>,
    event: &Event,
    batch: &mut Vec<Line>,
    writer: &mut LineWriter,
) {
    if let Some(number) = welcome::reopened(event)
        && let Some(inner) = inner.upgrade()
    {
        welcome::retell_restored(&inner.sessions, number, |told| {
            batch.push(writer.line_of(told));
        });
    }
}

/// What `--events` writes after an event besides it (`observe::recorder::Retell`): after the
/// opening of a session of `sessions` reopened from the store, its finished kept turns, as a
/// viewer is told them, so the recording holds the conversation whole.
pub fn retell_reopened(sessions: Sessions) -> crate::observe::recorder::Retell {
    Arc::new(move |event, push| {
        if let Some(number) = welcome::reopened(event) {
            welcome::retell_restored(&sessions, number, |told| push(told));
        }
    })
}

/// What opens each new piece of an `--events` recording that passed its size
/// (`observe::recorder::Opening`): the server as a connecting viewer is told it (the replica,
/// the bot's tools, each open session with its kept turns), so each piece replays whole.
pub fn open_pieces(sessions: Sessions) -> crate::observe::recorder::Opening {
    let started_us = now_us();
    Arc::new(move |push| welcome::opening(&sessions, started_us, push))
}

/// The next event of the bus, or never while the hub rests (`None` subscription).
async fn next_event(sub: &mut Option<Subscription>) -> Option<Arc<Event>> {
    match sub {
        Some(sub) => sub.recv().await,
        None => std::future::pending().await,
    }
}

impl Hub {
    /// A hub that does not run yet and keeps nothing.
    fn new() -> Self {
        Hub {
            running: false,
            kept: VecDeque::new(),
            kept_bytes: 0,
            first_seq: 0,
            wake: watch::Sender::new(0),
            idle_since: None,
            slots: Vec::new(),
            resting_since: None,
            woken: None,
            last_rest: None,
            cut: VecDeque::new(),
        }
    }

    /// Keeps `line`, letting the oldest go beyond `most` bytes (the viewers are woken by the
    /// caller, once per batch).
    fn push(&mut self, line: Line, most: usize) {
        self.kept_bytes += line.cost();
        self.kept.push_back(line);
        while self.kept_bytes > most
            && let Some(old) = self.kept.pop_front()
        {
            self.kept_bytes -= old.cost();
            self.first_seq += 1;
        }
    }

    /// Lets go of every kept line (the numbering goes on), and of a rest.
    fn let_go(&mut self) {
        self.forget_lines();
        self.resting_since = None;
        self.woken = None;
    }

    /// Lets go of every kept line; the numbering goes on.
    fn forget_lines(&mut self) {
        self.first_seq = self.seq();
        self.kept.clear();
        self.kept_bytes = 0;
    }

    /// Whether some viewer is connected and none reads: each has lines waiting and read
    /// nothing for [`REST_AFTER`].
    fn nobody_reads(&self) -> bool {
        let seq = self.seq();
        let mut any = false;
        for slot in self.slots.iter().filter_map(Weak::upgrade) {
            if slot.taken.load(Ordering::Relaxed) >= seq || slot.unread_for() < REST_AFTER {
                return false;
            }
            any = true;
        }
        any
    }

    /// The number the next line will have.
    fn seq(&self) -> u64 {
        self.first_seq + self.kept.len() as u64
    }

    /// The newest kept lines, within [`HISTORY_BYTES`]: what a viewer that connects is sent.
    fn history(&self) -> impl Iterator<Item = &Line> + Clone {
        let mut bytes = 0;
        let newest = self
            .kept
            .iter()
            .rev()
            .take_while(|line| {
                bytes += line.bytes.len();
                bytes <= HISTORY_BYTES
            })
            .count();
        self.kept.range(self.kept.len() - newest..)
    }

    /// Closes the connection of each viewer whose next line was let go and that read nothing
    /// for [`STALL`]: it would be dropped at its next read, which may never come.
    fn cut_off_stalled(&mut self) -> u64 {
        let first = self.first_seq;
        let seq = self.seq();
        let mut cut = 0;
        let mut told = Vec::new();
        self.slots.retain(|slot| {
            let Some(slot) = slot.upgrade() else {
                return false;
            };
            let taken = slot.taken.load(Ordering::Relaxed);
            if taken < first && slot.unread_for() >= STALL {
                if let Some(closer) = &slot.closer {
                    closer.cancel();
                }
                if let Some(viewer) = &slot.viewer {
                    told.push((viewer.clone(), seq - taken));
                }
                cut += 1;
                return false;
            }
            true
        });
        for viewer in told {
            if self.cut.len() == CUT_REMEMBERED {
                self.cut.pop_front();
            }
            self.cut.push_back(viewer);
        }
        cut
    }
}

/// Writes the hub's lines: each into a scratch buffer first, then copied to the end of a
/// block that many lines share ([`BLOCK_BYTES`], more for a longer line), so a line costs no
/// allocation of its own (two per line, and their frees on another thread, were a large
/// part of what watching cost the server). A block is freed once its last line is let go;
/// lines are let go oldest first, so what the kept lines hold beyond their own bytes is at
/// most the one block the oldest of them shares with lines already gone.
#[derive(Default)]
struct LineWriter {
    scratch: Vec<u8>,
    block: BytesMut,
}

/// Bytes of a block the hub's lines are written into (see [`LineWriter`]).
const BLOCK_BYTES: usize = 16 * 1024;

impl LineWriter {
    fn line_of(&mut self, event: &Event) -> Line {
        self.scratch.clear();
        write_line(&mut self.scratch, event);
        if self.block.capacity() < self.scratch.len() {
            // A new block: the old one lives on in the lines already split off it.
            self.block = BytesMut::with_capacity(BLOCK_BYTES.max(self.scratch.len()));
        }
        self.block.extend_from_slice(&self.scratch);
        Line {
            bytes: self.block.split().freeze(),
            tag: Tag::of(event),
        }
    }
}

/// One viewer's stream: the preamble, then live lines in chunks; its end (a drop, the hub
/// gone) ends the response.
struct ViewerStream {
    first: VecDeque<Bytes>,
    /// Changes when the hub kept new lines.
    wake: watch::Receiver<u64>,
    skip: Skip,
    /// The number of the next line this viewer reads.
    next: u64,
    slot: Arc<Slot>,
    viewers: Viewers,
    ended: bool,
    /// Where chunks are put together. Each chunk is split off it, and once the connection
    /// has written a chunk and let go of it, `reserve` takes the same memory back: a viewer
    /// does not take (and the allocator hand back and the kernel zero) fresh pages for every
    /// chunk.
    buf: BytesMut,
    /// When this viewer last took every kept line (its chunk was not full): it takes the
    /// next ones [`WRITE_GAP`] after.
    caught_up_at: Option<tokio::time::Instant>,
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
            self.slot.read_now(self.next);
            return self.cut(chunk);
        }
        loop {
            if let Some(at) = self.caught_up_at.take()
                && at.elapsed() < WRITE_GAP
            {
                tokio::time::sleep_until(at + WRITE_GAP).await;
            }
            // Marked seen before the lines are read: a batch kept after this wakes the wait below.
            self.wake.borrow_and_update();
            let lagged = self.take_kept(&mut chunk);
            if chunk.len() < CHUNK_BYTES && self.viewers.inner.queue_bytes >= GAP_MIN_QUEUE {
                self.caught_up_at = Some(tokio::time::Instant::now());
            }
            self.slot.read_now(self.next);
            if let Some(lagged) = lagged {
                self.ended = true;
                self.viewers.inner.dropped.fetch_add(1, Ordering::Relaxed);
                chunk.extend_from_slice(&lagged.line(self.viewers.inner.queue_bytes));
                return self.cut(chunk);
            }
            if !chunk.is_empty() {
                return self.cut(chunk);
            }
            let stop = &self.viewers.inner.stop;
            let woken = tokio::select! {
                woken = self.wake.changed() => woken.is_ok(),
                () = stop.cancelled() => false,
            };
            if stop.is_cancelled() {
                // The server stops: what it told last (its sessions closing) reaches the hub
                // within [`LAST_LINES`]; this viewer gets it, then the stream ends.
                tokio::time::sleep(LAST_LINES).await;
                self.ended = true;
                let _ = self.take_kept(&mut chunk);
                return if chunk.is_empty() {
                    None
                } else {
                    self.cut(chunk)
                };
            }
            if !woken {
                self.ended = true;
                return None;
            }
        }
    }

    /// Copies the kept lines from this viewer's next one into `chunk`, up to [`CHUNK_BYTES`];
    /// `Some` when its next line was already let go.
    fn take_kept(&mut self, chunk: &mut BytesMut) -> Option<Lagged> {
        let inner = &self.viewers.inner;
        let mut hub = inner.lock();
        // Reading again: the hub records again.
        inner.wake_up(&mut hub);
        if self.next < hub.first_seq {
            return Some(Lagged {
                missed: hub.first_seq - self.next,
                rested: hub
                    .last_rest
                    .filter(|(after, _)| self.next < *after)
                    .map(|(_, lasted)| lasted),
            });
        }
        let from = (self.next - hub.first_seq) as usize;
        for line in hub.kept.range(from.min(hub.kept.len())..) {
            self.next += 1;
            if !self.skip.drops(&line.tag) {
                chunk.extend_from_slice(&line.bytes);
                if chunk.len() >= CHUNK_BYTES {
                    break;
                }
            }
        }
        None
    }

    /// The chunk written so far, split off `chunk`, which stays this viewer's buffer.
    fn cut(&mut self, mut chunk: BytesMut) -> Option<Bytes> {
        let out = chunk.split().freeze();
        self.buf = chunk;
        Some(out)
    }
}

/// Why a viewer's next line was let go: it fell behind the kept lines, or they were let go
/// when a rest ended.
struct Lagged {
    /// Lines it had not read.
    missed: u64,
    /// How long the rest lasted, when a rest's end let them go.
    rested: Option<Duration>,
}

impl Lagged {
    /// The last line the dropped viewer reads.
    fn line(&self, queue_bytes: usize) -> Bytes {
        let missed = self.missed;
        let message = match self.rested {
            Some(lasted) => format!(
                "{DROPPED_MARK}: no viewer read the stream, so the server rested (recorded \
                 nothing) for {:.1} s and let go of the {missed} events this viewer had not \
                 read; reconnect for the sessions as they are now (what happened meanwhile is \
                 not in the stream)",
                lasted.as_secs_f64()
            ),
            None => format!(
                "{DROPPED_MARK}: this viewer fell {missed} events behind the server (past the {} \
                 KiB of events it keeps for its viewers) and was dropped so the server never \
                 waits for it; reconnect to go on (the events it missed are lost to it)",
                queue_bytes / 1024
            ),
        };
        warn_line(message)
    }
}

/// A `warn` log event as a stream line: what a viewer is told of its own stream.
fn warn_line(message: String) -> Bytes {
    let mut line = serde_json::to_vec(&Event::Log {
        at_ms: now_us() / 1000,
        level: "warn".into(),
        message,
    })
    .unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// How the line telling a viewer it was dropped begins (a client reconnects on it).
pub const DROPPED_MARK: &str = "event stream dropped";

/// How the line telling a viewer, as it connects again, that it was cut off begins.
pub const CUT_OFF_MARK: &str = "event stream cut off";

/// The first line a viewer cut off for reading nothing gets when it connects again.
fn cut_off_line(missed: u64) -> Bytes {
    let message = format!(
        "{CUT_OFF_MARK}: this viewer read nothing for {} s while the server's events came, so the \
         server closed its connection (it never waits for a viewer); the {missed} events it had \
         not read then are lost to it, and the sessions are as they are now",
        STALL.as_secs()
    );
    warn_line(message)
}

/// `GET /events`: the stream, as `application/x-ndjson`.
pub async fn serve(State(viewers): State<Viewers>, request: Request) -> Response {
    let closer = request
        .extensions()
        .get::<ConnectionCloser>()
        .map(|c| c.0.clone());
    // Any text the viewer keeps across its connects (bounded): the id it is told by.
    let viewer = request
        .headers()
        .get(VIEWER_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64)
        .map(Box::from);
    let stream = viewers.join(closer, viewer);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn line(bytes: usize) -> Line {
        Line {
            bytes: Bytes::from(vec![b'x'; bytes]),
            tag: Tag::default(),
        }
    }

    /// The kept lines stay within the budget, oldest let go first, numbered on; a new viewer
    /// is sent the newest within `HISTORY_BYTES`; a stalled viewer past the oldest is cut.
    #[test]
    fn kept_lines_stay_within_their_bytes_and_the_numbering_goes_on() {
        let mut hub = Hub::new();
        let most = 3 * 1024 * 1024;
        for _ in 0..10_000 {
            hub.push(line(1_000), most);
        }
        assert!(hub.kept_bytes <= most);
        assert_eq!(hub.seq(), 10_000);
        assert!(hub.first_seq > 0, "the oldest were let go");
        let history: usize = hub.history().map(|l| l.bytes.len()).sum();
        assert!(history <= HISTORY_BYTES && history > HISTORY_BYTES - 1_000);

        let closer = CancellationToken::new();
        let stalled = Arc::new(Slot {
            taken: AtomicU64::new(hub.first_seq - 1),
            last_read_ms: AtomicU64::new(0),
            born: Instant::now() - STALL,
            closer: Some(closer.clone()),
            viewer: Some("viewer-1".into()),
        });
        let reading = Arc::new(Slot {
            taken: AtomicU64::new(hub.first_seq),
            last_read_ms: AtomicU64::new(0),
            born: Instant::now() - STALL,
            closer: None,
            viewer: None,
        });
        hub.slots = vec![Arc::downgrade(&stalled), Arc::downgrade(&reading)];
        assert_eq!(hub.cut_off_stalled(), 1);
        assert!(closer.is_cancelled());
        assert_eq!(hub.slots.len(), 1);
        // Remembered by its id, with what it had not read, to be told when it connects again.
        assert_eq!(
            hub.cut.iter().collect::<Vec<_>>(),
            [&("viewer-1".into(), 10_000 - (hub.first_seq - 1))]
        );

        // Nobody reads only while some viewer is connected and every one is behind and
        // silent for `REST_AFTER`.
        let seq = hub.seq();
        let behind = |read_ago: Duration| {
            Arc::new(Slot {
                taken: AtomicU64::new(seq - 1),
                last_read_ms: AtomicU64::new(0),
                born: Instant::now() - read_ago,
                closer: None,
                viewer: None,
            })
        };
        let silent = behind(REST_AFTER);
        hub.slots = vec![Arc::downgrade(&silent)];
        assert!(hub.nobody_reads());
        let fresh = behind(Duration::ZERO);
        hub.slots.push(Arc::downgrade(&fresh));
        assert!(!hub.nobody_reads(), "one read just now");
        let caught_up = behind(REST_AFTER);
        caught_up.taken.store(seq, Ordering::Relaxed);
        hub.slots = vec![Arc::downgrade(&silent), Arc::downgrade(&caught_up)];
        assert!(!hub.nobody_reads(), "one has nothing waiting");
        hub.slots.clear();
        assert!(
            !hub.nobody_reads(),
            "nobody connected is not nobody reading"
        );

        hub.let_go();
        assert_eq!((hub.kept.len(), hub.kept_bytes), (0, 0));
        assert_eq!(hub.seq(), 10_000, "the numbering goes on");
    }
}
