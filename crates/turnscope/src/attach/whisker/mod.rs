//! Pipecat's whisker feed (`pipecat-ai-whisker`, protocol "1") read into the local bus. Whisker
//! hosts a WebSocket server that takes **one** client: a second one is closed at once, before
//! any message, which this reader tells apart from a feed that ended (and says who holds it).
//! Its port opens only once the bot's first session started, so the reader keeps dialling
//! (0.5 s, doubling to 5 s). The first client gets the whole pre-connect buffer in one message:
//! messages of up to [`MAX_MESSAGE`] bytes are read, records decoded one at a time
//! ([`decode`]), unknown record types skipped and counted. A worker that appears soon after the
//! console started a session is paired with it ([`Pairing`]), so the session shows the
//! worker's frames and turns; so is one a later snapshot lists as added when a session started
//! that stopped waiting (whisker was held by another client then).

pub mod decode;
pub mod fold;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;

use super::target::Target;
use crate::observe::event::now_us;
use crate::observe::{Bus, Event};
use decode::{Record, Skip};
use fold::Fold;

/// Largest WebSocket message read (whisker's first one carries everything since the bot
/// started); a larger one ends the connection, which is said, and the reader dials again.
pub const MAX_MESSAGE: usize = 256 * 1024 * 1024;
/// Why the sessions of a bot's workers closed when the bot restarted (their close reason).
pub const BOT_RESTARTED: &str = "the bot restarted (its whisker went away and came back)";
/// The protocol version this reader knows.
pub const PROTOCOL: &str = "1";

/// What the reader knows of the feed.
#[derive(Debug, Default, Clone)]
pub struct WhiskerState {
    /// Whether a connection is open now.
    pub connected: bool,
    /// Connections that got whisker's snapshot.
    pub connects: u64,
    /// Connections whisker closed before its snapshot (another client holds it).
    pub refused: u64,
    /// Whether the latest attempt was refused so (another client holds whisker now).
    pub held_elsewhere: bool,
    /// The HTTP status the latest attempt got instead of a WebSocket (not whisker's port).
    pub not_whisker: Option<String>,
    /// pipecat's and whisker's versions, from the snapshot.
    pub versions: String,
    /// Records read.
    pub records: u64,
    /// Records of a type this version does not know, skipped.
    pub unknown: u64,
    /// Records skipped as too large or malformed.
    pub bad: u64,
    /// The largest message read, in bytes.
    pub largest_message: usize,
}

/// The reader's shared state.
pub type Shared = Arc<Mutex<WhiskerState>>;

/// How far apart, by this console's clock, a session's start and a worker's addition may be
/// for a worker that shows up after the session stopped waiting (whisker was held by another
/// client, or not up yet) to be taken as that session's: pipecat-mcp-transport adds a
/// session's worker as its `start` returns. The closest one within it is taken.
pub const LATE_PAIR_WITHIN: Duration = Duration::from_secs(3);
/// Sessions kept for a late pairing; past it the oldest is dropped (shown by its client for
/// good, as before it stopped waiting).
const LATE_KEPT: usize = 64;

/// Sessions the console started that wait for a whisker worker, with when each started (µs
/// since the epoch, this console's clock).
#[derive(Clone, Default)]
pub struct Pairing {
    waiting: Arc<Mutex<Waiting>>,
}

#[derive(Default)]
struct Waiting {
    /// Waiting now, oldest first: the next worker added is the oldest one's.
    now: VecDeque<(u64, u64)>,
    /// Stopped waiting with no worker (whisker refused this console, or did not answer), so
    /// shown by their client meanwhile: a worker that shows up later and was added as one of
    /// them started ([`LATE_PAIR_WITHIN`]) is that one's.
    late: VecDeque<(u64, u64)>,
}

/// A session a worker was paired with ([`Pairing::take_for`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Paired {
    number: u64,
    /// Whether the session had stopped waiting (its client showed its turns meanwhile).
    late: bool,
}

impl Pairing {
    /// `number`, started at `started_us`, waits for a worker.
    pub fn wait(&self, number: u64, started_us: u64) {
        self.lock().now.push_back((number, started_us));
    }

    /// The session a worker belongs to, taken: the oldest waiting one, else the late one
    /// (stopped waiting) that started closest to `added_us` (when the bot added the worker,
    /// by this console's clock) within [`LATE_PAIR_WITHIN`]. A worker listed in a snapshot
    /// (`listed`: it may be one of long ago) is not the one of a waiting session that
    /// started more than [`LATE_PAIR_WITHIN`] after it was added.
    fn take_for(&self, added_us: Option<u64>, listed: bool) -> Option<Paired> {
        let within = LATE_PAIR_WITHIN.as_micros() as u64;
        let mut w = self.lock();
        let too_old =
            |started: u64| listed && added_us.is_some_and(|a| a.saturating_add(within) < started);
        if let Some(i) = w.now.iter().position(|(_, started)| !too_old(*started)) {
            return w.now.remove(i).map(|(number, _)| Paired {
                number,
                late: false,
            });
        }
        let added = added_us?;
        let (i, _) = w
            .late
            .iter()
            .enumerate()
            .map(|(i, (_, started))| (i, started.abs_diff(added)))
            .filter(|(_, apart)| *apart <= within)
            .min_by_key(|(_, apart)| *apart)?;
        w.late
            .remove(i)
            .map(|(number, _)| Paired { number, late: true })
    }

    /// Stops `number` waiting now: a worker that shows up later may still be its
    /// ([`Self::take_for`]). True when it was waiting.
    pub fn stop_waiting(&self, number: u64) -> bool {
        let mut w = self.lock();
        let Some(i) = w.now.iter().position(|(n, _)| *n == number) else {
            return false;
        };
        if let Some(session) = w.now.remove(i) {
            if w.late.len() == LATE_KEPT {
                w.late.pop_front();
            }
            w.late.push_back(session);
        }
        true
    }

    /// Stops `number` waiting for good (its session ended); true when it was waiting now.
    pub fn give_up(&self, number: u64) -> bool {
        let mut w = self.lock();
        w.late.retain(|(n, _)| *n != number);
        let before = w.now.len();
        w.now.retain(|(n, _)| *n != number);
        w.now.len() != before
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Reads `url` into `bus` until `stop`. Workers not paired with a console session are numbered
/// from `numbers`.
pub fn spawn(
    url: String,
    bus: Bus,
    numbers: Arc<AtomicU64>,
    pairing: Pairing,
    target: Option<Target>,
    stop: CancellationToken,
) -> Shared {
    let shared: Shared = Arc::default();
    let state = shared.clone();
    tokio::spawn(async move {
        let mut reader = Reader {
            bus,
            state,
            fold: Fold::default(),
            numbers,
            pairing,
            target,
            restarted: false,
            bot_ahead_us: None,
        };
        // A feed that ended, then a port that refused connections: the bot's process went
        // away (a restart), not only its connection.
        let mut lost = false;
        let mut pause = Duration::from_millis(500);
        let mut said_waiting = false;
        // Said once while another client holds whisker (the header says so meanwhile).
        let mut said_refused = false;
        loop {
            let ended = tokio::select! {
                ended = reader.read_once(&url) => ended,
                () = stop.cancelled() => return,
            };
            reader.lock().connected = false;
            match ended {
                Ended::CannotConnect(why, port_refused) => {
                    {
                        let mut state = reader.lock();
                        state.held_elsewhere = false;
                        state.not_whisker = None;
                    }
                    // Only a port that refused after the feed ended is a process gone: a
                    // timeout or a name not resolved may be the network's.
                    if lost && port_refused {
                        reader.restarted = true;
                        lost = false;
                    }
                    if !said_waiting {
                        reader.log(
                            "info",
                            format!(
                                "whisker {url}: {why}; dialling again until it answers (whisker opens \
                                 its port when the bot's first session starts)"
                            ),
                        );
                        said_waiting = true;
                    }
                }
                Ended::NotWhisker(status) => {
                    let first = reader.lock().not_whisker.replace(status.clone()).is_none();
                    if first {
                        reader.log(
                            "error",
                            format!(
                                "whisker {url}: the port answers HTTP ({status}) and refuses the \
                                 WebSocket upgrade, so it is not pipecat's whisker feed (another \
                                 server's port?). Whisker's port is the one the bot's \
                                 WhiskerObserver listens on (9090 by default); turnscope dials \
                                 again (every 5 s at most) in case it is whisker's, not yet up"
                            ),
                        );
                    }
                }
                Ended::Refused => {
                    // Its port answers: the same process, held by another client.
                    lost = false;
                    {
                        let mut state = reader.lock();
                        state.refused += 1;
                        state.held_elsewhere = true;
                    }
                    if !said_refused {
                        said_refused = true;
                        reader.log(
                            "error",
                            format!(
                                "whisker {url} closed the connection before sending anything: \
                                 whisker serves one client at a time and another one holds it (the \
                                 whisker web UI, `pipecat tail`, or another turnscope). Close that \
                                 one; turnscope dials again (every 5 s at most; the header says \
                                 while it is refused)"
                            ),
                        );
                    }
                }
                Ended::Closed(why) => {
                    lost = true;
                    said_waiting = false;
                    said_refused = false;
                    pause = Duration::from_millis(500);
                    reader.log(
                        "warn",
                        format!(
                            "whisker {url}: {why}; dialling again (whisker sends a client that comes back \
                             only what happens from then on)"
                        ),
                    );
                }
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stop.cancelled() => return,
            }
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    });
    shared
}

enum Ended {
    /// Why, and whether the port refused the connection.
    CannotConnect(String, bool),
    /// Its port answers HTTP (this status) and refuses the WebSocket upgrade.
    NotWhisker(String),
    Refused,
    Closed(String),
}

struct Reader {
    bus: Bus,
    state: Shared,
    fold: Fold,
    numbers: Arc<AtomicU64>,
    pairing: Pairing,
    target: Option<Target>,
    /// Whether the bot went away since the last connection: its workers on the next one
    /// are new ones, though their ids are the same (`PipelineTask#0` again).
    restarted: bool,
    /// How far the bot's clock runs ahead of this console's (µs, negative when behind), from
    /// the latest snapshot's time: when the bot added a worker, by this console's clock.
    bot_ahead_us: Option<i64>,
}

impl Reader {
    fn lock(&self) -> std::sync::MutexGuard<'_, WhiskerState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn log(&self, level: &'static str, message: String) {
        self.bus.publish(Event::Log {
            at_ms: now_us() / 1000,
            level: level.into(),
            message,
        });
    }

    async fn read_once(&mut self, url: &str) -> Ended {
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE));
        let (mut socket, _) =
            match tokio_tungstenite::connect_async_with_config(url, Some(config), true).await {
                Ok(s) => s,
                Err(e) => {
                    // The port refused: nothing listens there (the bot's process is gone, or
                    // its whisker not up yet), unlike a timeout or a name not resolved.
                    let refused = matches!(&e, tokio_tungstenite::tungstenite::Error::Io(io)
                        if io.kind() == std::io::ErrorKind::ConnectionRefused);
                    // Something answers there in HTTP, and it is not a WebSocket server.
                    // (A 5xx may be a proxy's while the bot restarts: dialled again as any.)
                    if let tokio_tungstenite::tungstenite::Error::Http(response) = &e
                        && response.status().is_client_error()
                    {
                        return Ended::NotWhisker(response.status().to_string());
                    }
                    return Ended::CannotConnect(e.to_string(), refused);
                }
            };
        let mut got_any = false;
        loop {
            let message = match socket.next().await {
                Some(Ok(m)) => m,
                Some(Err(e)) if !got_any => {
                    return Ended::Closed(format!(
                        "the connection failed before the snapshot: {e}"
                    ));
                }
                Some(Err(e)) => return Ended::Closed(format!("the connection failed: {e}")),
                None if got_any => return Ended::Closed("whisker closed the connection".into()),
                None => return Ended::Refused,
            };
            let bytes = match message {
                Message::Binary(b) => b,
                Message::Close(_) if !got_any => return Ended::Refused,
                Message::Close(_) => return Ended::Closed("whisker closed the connection".into()),
                Message::Text(t) => {
                    self.lock().bad += 1;
                    self.log(
                        "warn",
                        format!(
                            "whisker sent a text message ({} bytes); protocol {PROTOCOL} sends msgpack: skipped",
                            t.len()
                        ),
                    );
                    continue;
                }
                _ => continue,
            };
            if !got_any {
                got_any = true;
                {
                    let mut s = self.lock();
                    s.connected = true;
                    s.connects += 1;
                    s.held_elsewhere = false;
                    s.not_whisker = None;
                }
                if std::mem::take(&mut self.restarted) {
                    self.forget_workers();
                }
            }
            self.take_message(&bytes);
        }
    }

    /// Folds one message's records into events on the bus.
    fn take_message(&mut self, bytes: &[u8]) {
        {
            let mut s = self.lock();
            s.largest_message = s.largest_message.max(bytes.len());
        }
        for record in decode::records(bytes) {
            let events = match record {
                Ok(record) => self.take_record(&record),
                Err(skip) => {
                    self.lock().bad += 1;
                    if let Skip::Malformed(why) = skip {
                        self.log(
                            "warn",
                            format!("whisker sent a message that is not msgpack ({why}); the rest of it was skipped"),
                        );
                    }
                    Vec::new()
                }
            };
            for event in events {
                self.bus.publish(event);
            }
        }
    }

    fn take_record(&mut self, record: &Record) -> Vec<Event> {
        self.lock().records += 1;
        match record {
            Record::Snapshot {
                protocol,
                versions,
                workers,
                at_us,
            } => {
                self.bot_ahead_us = (*at_us > 0).then(|| *at_us as i64 - now_us() as i64);
                if protocol != PROTOCOL {
                    self.log(
                        "warn",
                        format!(
                            "whisker speaks protocol {protocol:?}; this turnscope knows {PROTOCOL:?}: \
                             records it does not know are skipped and counted"
                        ),
                    );
                }
                self.lock().versions = versions.clone();
                // Said in the Log, as its refusals and losses are.
                self.log(
                    "info",
                    format!(
                        "whisker connected ({}): {} running",
                        if versions.is_empty() {
                            "versions not given"
                        } else {
                            versions
                        },
                        match workers.len() {
                            1 => "1 pipeline".to_string(),
                            n => format!("{n} pipelines"),
                        }
                    ),
                );
                if !workers.is_empty() {
                    // Whisker's snapshot lists every pipeline the bot added, ended or not, and
                    // sends what they did before only to its first client.
                    self.log(
                        "info",
                        "whisker's snapshot lists the pipelines the bot added without saying \
                         which still run, and whisker sends their earlier frames (their ends \
                         among them) only to its first client: if this console is not that one, \
                         a pipeline that ended before it connected stays listed as open"
                            .into(),
                    );
                }
                let mut out = Vec::new();
                for worker in workers {
                    out.extend(self.add_worker(worker, true));
                }
                out
            }
            Record::WorkerAdded(worker) => self.add_worker(worker, false),
            Record::Frame(frame) => self.fold.frame(frame),
            Record::Bus { .. } => self.fold.other(record),
            Record::Unknown(_) => {
                self.lock().unknown += 1;
                Vec::new()
            }
        }
    }

    /// Closes the sessions of the workers of a bot that restarted (its new ones are sessions
    /// of their own), and says so.
    fn forget_workers(&mut self) {
        let why = BOT_RESTARTED;
        for event in self.fold.forget_workers(why, now_us()) {
            self.bus.publish(event);
        }
        self.log(
            "warn",
            format!("{why}: its earlier sessions are closed; what it shows now is new sessions"),
        );
    }

    /// Follows `worker` (`listed` in a snapshot, else just added): as the session of the
    /// console it pairs with ([`Pairing::take_for`]), else as a session of its own.
    fn add_worker(&mut self, worker: &decode::Worker, listed: bool) -> Vec<Event> {
        if self.fold.knows(&worker.id) {
            return self.fold.add_worker(worker, 0, 0, false);
        }
        let added_us = match self.bot_ahead_us {
            Some(ahead) if worker.added_us > 0 => {
                u64::try_from(worker.added_us as i64 - ahead).ok()
            }
            _ => None,
        };
        let Some(paired) = self.pairing.take_for(added_us, listed) else {
            let number = self.numbers.fetch_add(1, Ordering::Relaxed) + 1;
            return self.fold.add_worker(worker, number, now_us(), true);
        };
        let number = paired.number;
        // The turns its client showed meanwhile keep their numbers: the worker's next turn
        // is numbered after them.
        let turns = self.target.as_ref().map_or(0, |t| t.turns_of(number));
        if let Some(target) = &self.target {
            target.show_elsewhere(number);
        }
        let out = self.fold.add_worker(worker, number, now_us(), false);
        if paired.late {
            self.fold.continue_after(&worker.id, turns);
            self.log(
                "info",
                format!(
                    "#{number}: whisker's worker {} was added as #{number} started, so it is \
                     #{number}'s: its frames, turns and tool calls show there from now on (its \
                     earlier turns stay as this client saw them)",
                    worker.id
                ),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNAPSHOT: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fuzz_corpus/whisker/snapshot.msgpack"
    ));
    const TWO_TURNS: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fuzz_corpus/whisker/two_turns_with_a_tool_call.msgpack"
    ));

    fn reader(bus: &Bus) -> Reader {
        Reader {
            bus: bus.clone(),
            state: Shared::default(),
            fold: Fold::default(),
            numbers: Arc::default(),
            pairing: Pairing::default(),
            target: None,
            restarted: false,
            bot_ahead_us: None,
        }
    }

    fn drain(sub: &mut crate::observe::Subscription) -> Vec<Event> {
        let mut out = Vec::new();
        while let Some(e) = sub.try_recv() {
            out.push((*e).clone());
        }
        out
    }

    /// The records of a real pipecat 1.14 text bot (pipecat-mcp-transport, whisker 2.0.1):
    /// a plain turn and a tool turn become a session, two turns with their lines, the tool
    /// call with its arguments and result, and frames per link with pipecat's names.
    #[tokio::test]
    async fn a_real_feed_becomes_a_session_its_turns_and_its_frames() {
        let bus = Bus::new(65_536);
        let mut sub = bus.subscribe();
        let mut r = reader(&bus);
        r.take_message(SNAPSHOT);
        r.take_message(TWO_TURNS);
        let events = drain(&mut sub);
        let state = r.lock().clone();
        assert_eq!((state.bad, state.unknown), (0, 0), "{state:?}");
        assert_eq!(state.versions, "pipecat 1.14.0 · whisker 2.0.1");
        assert!(events.iter().any(|e| matches!(e,
            Event::Log { message, .. } if message.starts_with("whisker connected (pipecat 1.14.0 · whisker 2.0.1): "))));
        // The snapshot lists pipelines without their state: said.
        assert!(events.iter().any(|e| matches!(e,
            Event::Log { message, .. } if message.contains("a pipeline that ended before it connected stays listed as open"))));
        let lines: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                Event::TurnStarted { line, .. } => Some(line.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(lines, ["hello there", "echo hi"]);
        let ends: Vec<(u64, &str, u32, bool)> = events
            .iter()
            .filter_map(|e| match e {
                Event::TurnEnded(t) => Some((
                    t.turn,
                    t.reason.as_str(),
                    t.rounds,
                    t.total_us > 0
                        && t.first_piece_us.is_some_and(|f| f <= t.total_us)
                        && t.clock == Some(crate::observe::TurnClock::Whisker),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(ends, [(1, "completed", 0, true), (2, "completed", 1, true)]);
        let calls: Vec<(&str, &str, &str, u64)> = events
            .iter()
            .filter_map(|e| match e {
                Event::ToolCall(c) => Some((
                    c.name.as_str(),
                    c.arguments.as_str(),
                    c.result.as_str(),
                    c.turn,
                )),
                _ => None,
            })
            .collect();
        assert_eq!(calls, [("echo", r#"{"text":"hi"}"#, "hi", 2)]);
        let reply: String = events
            .iter()
            .filter_map(|e| match e {
                Event::Frame(f)
                    if f.name == "LLMTextFrame"
                        && f.to == "McpOutputTransport#0"
                        && f.turn == 2 =>
                {
                    Some(f.detail.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(reply, "The echo tool says: \"hi\".");
        assert!(events.iter().any(|e| matches!(e,
            Event::Frame(f) if f.from == "Pipeline#0::Source" && f.to == "McpInputTransport#0")));
        // A pipecat frame's crossings share one id, link after link (its path), as a local
        // frame's journey does; two frames never share one.
        let mut paths: std::collections::HashMap<u64, Vec<(&str, &str)>> = Default::default();
        for e in &events {
            if let Event::Frame(f) = e {
                paths.entry(f.id).or_default().push((&f.from, &f.to));
            }
        }
        assert!(
            paths.len()
                < events
                    .iter()
                    .filter(|e| matches!(e, Event::Frame(_)))
                    .count()
        );
        // (A pipeline's own sink or source is the pipeline, for the link out of it.)
        let node = |n: &str| {
            n.trim_end_matches("::Sink")
                .trim_end_matches("::Source")
                .to_string()
        };
        for (id, path) in &paths {
            assert!(
                path.windows(2)
                    .all(|w| node(w[0].1) == node(w[1].0) || node(w[0].0) == node(w[1].1)),
                "frame {id}'s crossings make a path: {path:?}"
            );
        }
        // Its age counts from when the bot added the worker (`added_at`), not from when this
        // feed learnt of it (a late console listed an old worker as seconds old).
        assert!(events.iter().any(|e| matches!(e,
            Event::Session(s) if s.session == 1
                && s.closed.is_none()
                && s.began_us.is_some_and(|b| b > 1_700_000_000_000_000 && b <= s.at_us))));
    }

    /// A bot that restarted lists workers with the ids its earlier run gave (`PipelineTask#0`
    /// again): they are new sessions, and the earlier ones are closed (before, the new run's
    /// frames went into the earlier run's closed session).
    #[tokio::test]
    async fn a_restarted_bots_workers_are_new_sessions() {
        let bus = Bus::new(65_536);
        let mut sub = bus.subscribe();
        let mut r = reader(&bus);
        r.take_message(SNAPSHOT);
        r.take_message(TWO_TURNS);
        drain(&mut sub);
        r.restarted = true;
        r.forget_workers();
        r.restarted = false;
        r.take_message(SNAPSHOT);
        r.take_message(TWO_TURNS);
        let events = drain(&mut sub);
        assert!(events.iter().any(|e| matches!(e,
            Event::Session(s) if s.session == 1 && s.closed.as_deref().is_some_and(|w| w.contains("restarted")))));
        assert!(events.iter().any(|e| matches!(e,
            Event::Session(s) if s.session == 2 && s.closed.is_none())));
        assert!(
            events
                .iter()
                .filter_map(Event::turn_of)
                .all(|(session, _)| session == 2),
            "the new run's turns are the new session's"
        );
    }

    /// A session the console started while another client held whisker stopped waiting for a
    /// worker (its client showed it). When whisker takes this console later, its snapshot
    /// lists that session's worker, added as the session started (by the bot's clock, told
    /// apart from this one's by the snapshot's time): it pairs with the session, whose
    /// frames, turns and tool calls it shows from then on. Before, it became a stranger's
    /// session (`whisker: task#1`) that took them, and the person's said `0 tool calls`.
    #[tokio::test]
    async fn a_session_started_while_whisker_was_held_elsewhere_pairs_when_whisker_answers() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let held = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let still_held = held.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let Ok(mut socket) = tokio_tungstenite::accept_async(tcp).await else {
                    continue;
                };
                if still_held.load(Ordering::Relaxed) {
                    let _ = socket.close(None).await;
                    continue;
                }
                use futures::SinkExt;
                // The snapshot, sent as the bot's clock says now; its worker was added 1 s
                // before (as in the recording).
                let _ = socket.send(Message::binary(SNAPSHOT.to_vec())).await;
                let _ = socket.send(Message::binary(TWO_TURNS.to_vec())).await;
                let _ = socket.next().await;
            }
        });
        let bus = Bus::new(65_536);
        let mut sub = bus.subscribe();
        let stop = CancellationToken::new();
        let pairing = Pairing::default();
        // The worker of another client's session started a minute earlier: not this one's.
        pairing.wait(3, now_us() - 60_000_000);
        pairing.stop_waiting(3);
        let state = spawn(
            url,
            bus.clone(),
            Arc::new(AtomicU64::new(7)),
            pairing.clone(),
            None,
            stop.clone(),
        );
        pairing.wait(1, now_us());
        // As `Attached` does once whisker refuses: shown by its client meanwhile.
        while !state.lock().unwrap().held_elsewhere {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(pairing.stop_waiting(1));
        held.store(false, Ordering::Relaxed);
        let mut events = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !events.iter().any(|e| matches!(e, Event::ToolCall(_))) {
            assert!(tokio::time::Instant::now() < deadline, "{events:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
            events.extend(drain(&mut sub));
        }
        stop.cancel();
        let opened: Vec<u64> = events
            .iter()
            .filter_map(|e| match e {
                Event::Session(s) if s.closed.is_none() => Some(s.session),
                _ => None,
            })
            .collect();
        assert!(opened.is_empty(), "no stranger's session: {opened:?}");
        assert!(
            events
                .iter()
                .filter_map(Event::turn_of)
                .all(|(session, _)| session == 1),
            "the worker's turns are #1's: {events:?}"
        );
        assert!(events.iter().any(|e| matches!(e,
            Event::ToolCall(c) if c.session == 1 && c.name == "echo")));
        assert!(events.iter().any(|e| matches!(e,
            Event::Log { message, .. } if message.starts_with("#1: whisker's worker PipelineTask#0 was added as #1 started"))));
    }

    /// A snapshot lists the workers of long ago too: one added well before a waiting session
    /// started is not that session's (it was paired with the first one listed).
    #[tokio::test]
    async fn a_listed_worker_older_than_a_waiting_session_is_not_its() {
        let bus = Bus::new(65_536);
        let mut sub = bus.subscribe();
        let mut r = reader(&bus);
        r.pairing.wait(5, now_us() + 10_000_000);
        r.take_message(SNAPSHOT);
        let events = drain(&mut sub);
        assert!(events.iter().any(|e| matches!(e,
            Event::Session(s) if s.session == 1 && s.closed.is_none())));
        assert!(r.pairing.stop_waiting(5), "#5 still waits for its worker");
    }

    /// A record of a type this version does not know is skipped and counted; one that is not
    /// msgpack ends its message with a warning; neither stops the feed.
    #[tokio::test]
    async fn unknown_and_broken_records_are_counted_not_fatal() {
        let bus = Bus::new(1024);
        let mut sub = bus.subscribe();
        let mut r = reader(&bus);
        let mut message = rmp_map(&[("type", "worker_status"), ("worker_id", "X")]);
        message.extend_from_slice(SNAPSHOT);
        message.push(0xc1);
        r.take_message(&message);
        let state = r.lock().clone();
        assert_eq!((state.unknown, state.bad, state.records), (1, 1, 2));
        let events = drain(&mut sub);
        assert!(events.iter().any(|e| matches!(e, Event::Session(_))));
        assert!(events.iter().any(|e| matches!(e,
            Event::Log { message, .. } if message.contains("not msgpack"))));
    }

    /// A record of a million tiny values is refused before it is decoded.
    /// Whisker held by another client closes each connection before sending anything: said
    /// once (an error in the Log), not at every attempt, and counted for the header.
    #[tokio::test]
    async fn a_whisker_held_by_another_client_is_said_once() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                if let Ok(mut socket) = tokio_tungstenite::accept_async(tcp).await {
                    let _ = socket.close(None).await;
                }
            }
        });
        let bus = Bus::new(1024);
        let mut sub = bus.subscribe();
        let stop = CancellationToken::new();
        let state = spawn(
            url,
            bus.clone(),
            Arc::default(),
            Pairing::default(),
            None,
            stop.clone(),
        );
        // Attempts at 0 s, 0.5 s, 1.5 s: three refusals.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        stop.cancel();
        let refused = state.lock().unwrap().refused;
        assert!(refused >= 3, "{refused} refusals");
        let errors: Vec<String> = drain(&mut sub)
            .into_iter()
            .filter_map(|e| match e {
                Event::Log { level, message, .. } if level == "error" => Some(message),
                _ => None,
            })
            .collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("another one holds it"), "{errors:?}");
    }

    #[test]
    fn a_record_of_too_many_values_is_skipped() {
        let mut bytes = vec![0xdd];
        bytes.extend_from_slice(&1_000_000u32.to_be_bytes());
        bytes.extend(std::iter::repeat_n(0xc0, 1_000_000));
        bytes.extend_from_slice(SNAPSHOT);
        let out = decode::records(&bytes);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0], Err(Skip::TooLarge));
        assert!(matches!(out[1], Ok(Record::Snapshot { .. })));
    }

    fn rmp_map(pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        rmp::encode::write_map_len(&mut out, pairs.len() as u32).unwrap();
        for (k, v) in pairs {
            rmp::encode::write_str(&mut out, k).unwrap();
            rmp::encode::write_str(&mut out, v).unwrap();
        }
        out
    }
}
