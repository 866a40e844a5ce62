//! The attached console as an MCP client of a `start`/`chat` server (pipecat-mcp-transport,
//! another turnscope, replicas behind a balancer): one rmcp connection over the tapped reqwest
//! client ([`Tapped`]), the sessions this console started (their handles stay here, never in
//! an event), and each call's outcome as events on the local bus: a session opened, a turn
//! started, its progress as it comes, its reply, tool calls and end as the target's turn record
//! (`_meta["turnscope/turn"]`) says or, for a target that reports only text, as this client
//! measured it. A session whose events arrive otherwise (a watched turnscope's stream, a
//! whisker worker paired with it) publishes none of its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a turn the attached console timed itself ends when its `chat` call failed or was
/// refused with no turn record (the bot is not known to have run it): the console gives its
/// line back.
pub const NOT_ANSWERED: &str = "not answered";

use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::side::ClientSide;
use super::tap::{Handles, Tapped, Tokens};
use crate::mcp::connect::{chain, initialize_failed};
use crate::observe::event::{
    FrameEvent, OwnSession, SessionEvent, SessionOpener, ToolCallEvent, TurnClock, TurnEndEvent,
    now_us,
};
use crate::observe::{Bus, Event};
use crate::server::mcp_text::{START_META, TURN_META, text_of};
use crate::sessions::{ChatReply, ToolCallSummary};
use crate::tools::hand::{self, HandResult};
use crate::tools::mcp_content::outcome_of;
use crate::tools::{ToolOutcome, ToolSpec};

/// How long a call may take before this client gives up on it.
const CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// How often an idle attached console pings its target: a server ends an MCP session after
/// five minutes without a request (rmcp's default), and the console's own sessions were then
/// said to have lost their client while it still ran.
pub const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(120);

/// Who publishes a session's turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// This client, from what its calls returned.
    ByClient,
    /// Someone else (the watched server's stream, a paired whisker worker).
    Elsewhere,
    /// Nobody yet: a whisker worker may pair with the session. This client holds the turns
    /// it sees meanwhile, and publishes them if none does ([`Target::show_by_client`]).
    Pending,
}

/// Most turns held for a session waiting for a whisker worker (it waits seconds).
const HELD_TURNS: usize = 16;

/// A turn this client saw while its session waited for a whisker worker.
#[derive(Clone)]
struct HeldTurn {
    turn: u64,
    at_us: u64,
    line: String,
    outcome: Result<ChatReply, String>,
    took: Duration,
}

/// What became of the sessions this console started when the watched server restarted
/// ([`Target::renumber`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Renumbered {
    /// Those the new server shows under another number: (number before, number now).
    pub moved: Vec<(u64, u64)>,
    /// Those it does not show (not reopened there yet): their numbers and handles, newest
    /// (highest number) first.
    pub let_go: Vec<(u64, String)>,
}

impl Renumbered {
    /// The number the session numbered `before` goes on under (itself when not moved).
    fn number_now(&self, before: u64) -> u64 {
        self.moved
            .iter()
            .find(|(from, _)| *from == before)
            .map_or(before, |(_, to)| *to)
    }
}

/// Why a kept session could not be reopened ([`Target::reopen`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reopen {
    /// The target refused the handle (what it said): its conversation is gone there.
    Refused(String),
    /// The call failed (the connection, a timeout): the handle may still be good.
    Failed(String),
    /// Not tried: the target has no event stream, so nothing would show the session.
    Unwatched,
}

/// A session this console started.
#[derive(Clone)]
struct Own {
    handle: String,
    shown: Shown,
    turns: u64,
    /// Its turns seen while [`Shown::Pending`].
    held: Vec<HeldTurn>,
    /// Whether the feed that shows it tells its progress too (a watched turnscope's stream
    /// does; a whisker worker does not: pipecat's frames carry no MCP progress).
    progress_elsewhere: bool,
}

/// The client's side of one attached target.
#[derive(Clone)]
pub struct Target {
    service: Arc<RunningService<RoleClient, Listener>>,
    url: String,
    bus: Bus,
    own: Arc<Mutex<HashMap<u64, Own>>>,
    pending: Handles,
    /// The progress tokens of `chat` calls in flight (filled by the tap), by session.
    tokens: Tokens,
    frames: Arc<AtomicU64>,
    side: Arc<ClientSide>,
    /// When this client last sent a request (µs since the epoch), for [`Target::keep_alive`].
    last_request_us: Arc<AtomicU64>,
}

/// Receives the target's notifications: progress becomes `Event::Progress` of its session,
/// unless the watched server's stream shows that session (its own `progress` events, the
/// same notifications: each would be told twice). A session a whisker worker shows keeps
/// this client's progress (whisker tells none).
#[derive(Clone)]
struct Listener {
    bus: Bus,
    tokens: Tokens,
    own: Arc<Mutex<HashMap<u64, Own>>>,
}

impl ClientHandler for Listener {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        crate::mcp::connect::client_info(super::tap::CLIENT_NAME)
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let token = token_text(&serde_json::to_value(&params.progress_token).unwrap_or_default());
        let session = self
            .tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&token)
            .copied();
        let shown_elsewhere = |session: u64| {
            self.own
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&session)
                .is_some_and(|own| own.shown == Shown::Elsewhere && own.progress_elsewhere)
        };
        if let Some(session) = session.filter(|s| !shown_elsewhere(*s)) {
            self.bus.publish(Event::Progress {
                session,
                progress: params.progress as u64,
                message: params.message.unwrap_or_default(),
                pieces: 1,
                at_us: now_us(),
            });
        }
    }
}

fn token_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What `start` gave.
#[derive(Debug, Clone)]
pub struct Started {
    /// The handle (a secret: kept here, only its first 8 characters shown).
    pub handle: String,
    /// The replica that serves it, when the target is a turnscope.
    pub replica: Option<String>,
    /// The greeting, when the bot has one.
    pub greeting: Option<String>,
}

impl Target {
    /// Connects to `url` (`token` as the bearer), every exchange tapped onto `bus`.
    ///
    /// # Errors
    /// The server cannot be reached or does not speak MCP; the message says which URL.
    pub async fn connect(url: &str, token: Option<&str>, bus: &Bus) -> Result<Self, String> {
        let tokens: Tokens = Arc::default();
        let pending: Handles = Arc::default();
        let side = Arc::new(ClientSide::default());
        let client = Tapped::new(reqwest::Client::new(), bus.clone(), url)
            .with_calls(pending.clone(), tokens.clone())
            .with_side(side.clone());
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
        // A broken reply stream is resumed a few times, then the call fails: rmcp's default
        // resumes forever, and a `chat` in flight when the server died waited out the whole
        // outage, its line neither answered nor given back (tour L).
        config.retry_config = crate::mcp::connect::stream_resume_policy();
        if let Some(t) = token {
            config = config.auth_header(t.to_string());
        }
        let own: Arc<Mutex<HashMap<u64, Own>>> = Arc::default();
        let listener = Listener {
            bus: bus.clone(),
            tokens: tokens.clone(),
            own: own.clone(),
        };
        let service = match listener
            .serve(StreamableHttpClientTransport::with_client(client, config))
            .await
        {
            Ok(service) => service,
            Err(e) => return Err(initialize_failed(url, token.is_some(), &e).await),
        };
        Ok(Self {
            service: Arc::new(service),
            url: url.to_string(),
            bus: bus.clone(),
            own,
            pending,
            tokens,
            frames: Arc::default(),
            side,
            last_request_us: Arc::new(AtomicU64::new(now_us())),
        })
    }

    /// Keeps this client's MCP session alive while the console runs: a `ping` after `every`
    /// without a request (each one an exchange in the MCP pane, as any is). Ends with the
    /// connection.
    pub fn keep_alive(&self, every: Duration) {
        let service = Arc::downgrade(&self.service);
        let last = self.last_request_us.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if now_us().saturating_sub(last.load(Ordering::Relaxed)) < every.as_micros() as u64
                {
                    continue;
                }
                // Held only for the ping (10 s at most): `close` unwraps the last one.
                let Some(service) = service.upgrade() else {
                    return;
                };
                let ping = rmcp::model::PingRequest {
                    method: Default::default(),
                    extensions: Default::default(),
                };
                let sent = service.send_request(rmcp::model::ClientRequest::PingRequest(ping));
                let _ = tokio::time::timeout(Duration::from_secs(10), sent).await;
                last.store(now_us(), Ordering::Relaxed);
            }
        });
    }

    /// What this client and the watched server's event stream know of each other (its MCP
    /// session, the replica it lives on, the one watched).
    pub fn side(&self) -> Arc<ClientSide> {
        self.side.clone()
    }

    /// The target's tools (`tools/list`, every page).
    ///
    /// # Errors
    /// The listing failed.
    pub async fn tools(&self) -> Result<Vec<rmcp::model::Tool>, String> {
        self.service
            .list_all_tools()
            .await
            .map_err(|e| format!("{}: tools/list failed: {e}", self.url))
    }

    /// The server's name and version from `initialize`, when it gave them.
    pub fn server_name(&self) -> Option<String> {
        self.service.peer_info().and_then(|i| {
            i.server_info
                .as_ref()
                .map(|s| format!("{} {}", s.name, s.version))
        })
    }

    async fn call(&self, name: &str, args: Value) -> Result<CallToolResult, String> {
        self.call_with(CallToolRequestParams::new(name.to_string()), args)
            .await
    }

    /// [`Self::call`] of `params` (a tool name, and `_meta` when the call carries some).
    async fn call_with(
        &self,
        mut params: CallToolRequestParams,
        args: Value,
    ) -> Result<CallToolResult, String> {
        let name = params.name.to_string();
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        self.last_request_us.store(now_us(), Ordering::Relaxed);
        match tokio::time::timeout(CALL_TIMEOUT, self.service.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => {
                // rmcp's transport errors name its own types: the causes, tidied, say more.
                let reach = matches!(
                    e,
                    rmcp::ServiceError::TransportSend(_) | rmcp::ServiceError::TransportClosed
                );
                let said = chain(&e);
                // rmcp's 401 reaches a call as its transport's text only (`Auth required`,
                // behind a type-erased transport error): a server that restarted with another
                // token, which the person fixes, not a bot that stopped.
                if said.contains("Auth required") {
                    return Err(format!(
                        "the `{name}` call to {} was refused: the server does not take this \
                         console's bearer token (HTTP 401; restarted with another --auth-token?). \
                         Attach again with its token",
                        self.url
                    ));
                }
                Err(format!(
                    "the `{name}` call to {} failed: {said}{}",
                    self.url,
                    if reach {
                        " (is the bot still running there?)"
                    } else {
                        ""
                    }
                ))
            }
            Err(_) => Err(format!(
                "the `{name}` call to {} gave no answer within {} s",
                self.url,
                CALL_TIMEOUT.as_secs()
            )),
        }
    }

    /// Calls the target's tool `name` by hand (the Tools pane's form): `arguments` checked
    /// against its schema in `specs` (the target's `tools/list`) first, as a hand call of the
    /// bot's own tools is, so what the schema refuses is never sent. A call that went out but
    /// failed (the connection, the timeout) comes back as an error result, said as such. A
    /// `start` answered with a handle comes back with the session it opened (not adopted
    /// here: [`crate::attach::Attached::call_by_hand`] numbers it).
    ///
    /// # Errors
    /// Not sent: the tool is not listed, or the arguments break its schema.
    pub async fn call_by_hand(
        &self,
        specs: &[ToolSpec],
        name: &str,
        arguments: Value,
    ) -> Result<(HandResult, Option<Started>), String> {
        let (spec, unchecked) =
            hand::check(specs, name, &arguments).map_err(|refused| refused.to_string())?;
        let source = spec.source.clone();
        let started = Instant::now();
        let (outcome, opened) = match self.call(name, arguments.clone()).await {
            Ok(result) => (
                outcome_of(&result),
                (name == "start")
                    .then(|| started_of(&result).ok())
                    .flatten(),
            ),
            Err(e) => (ToolOutcome::error(e), None),
        };
        Ok((
            HandResult {
                tool: name.to_string(),
                source,
                arguments,
                outcome,
                duration: started.elapsed(),
                unchecked,
            },
            opened,
        ))
    }

    /// Calls `start`.
    ///
    /// # Errors
    /// The call failed, was refused, or returned no handle.
    pub async fn start(&self) -> Result<Started, String> {
        let result = self.call("start", json!({})).await?;
        started_of(&result)
    }
}

/// The session a `start` call's `result` opened: its handle (from the start record, else the
/// whole text), replica and greeting.
///
/// # Errors
/// The call was refused, or returned no handle.
fn started_of(result: &CallToolResult) -> Result<Started, String> {
    let text = text_of(result);
    if result.is_error == Some(true) {
        return Err(format!("`start` was refused: {text}"));
    }
    let record = meta(result, START_META);
    let handle = record
        .and_then(|r| r["handle"].as_str().map(str::to_string))
        .unwrap_or_else(|| text.trim().to_string());
    if handle.is_empty() || handle.contains(char::is_whitespace) {
        return Err(format!(
            "`start` returned no handle (it said: {})",
            crate::observe::event::carried(&text)
        ));
    }
    Ok(Started {
        handle,
        replica: record.and_then(|r| r["replica"].as_str().map(str::to_string)),
        greeting: record.and_then(|r| r["greeting"].as_str().map(str::to_string)),
    })
}

impl Target {
    /// Records a started session as `number`; `shown` says who publishes its turns. When this
    /// client does, its opening is published now.
    pub fn adopt(&self, number: u64, started: &Started, shown: Shown) {
        self.adopt_after(number, started, shown, 0);
    }

    /// [`Self::adopt`] for a conversation that had `turns` turns already.
    fn adopt_after(&self, number: u64, started: &Started, shown: Shown, turns: u64) {
        self.own.lock().unwrap_or_else(|p| p.into_inner()).insert(
            number,
            Own {
                handle: started.handle.clone(),
                shown,
                turns,
                held: Vec::new(),
                // Adopted as shown elsewhere: by the watched server's stream.
                progress_elsewhere: shown == Shown::Elsewhere,
            },
        );
        if shown == Shown::ByClient {
            self.bus.publish(Event::Session(SessionEvent {
                session: number,
                handle_prefix: started.handle.chars().take(8).collect(),
                opener: SessionOpener::Console,
                closed: None,
                at_us: now_us(),
                restored: false,
                began_us: None,
                taken_from: None,
                greeting: started.greeting.clone(),
            }));
        }
        self.tell_own();
    }

    /// Publishes the sessions this console started, whole ([`Event::OwnSessions`]): the
    /// console marks them the person's, and so does a replay of its `--events` file (the
    /// watched server tells them as any client's). Called after each change of them.
    fn tell_own(&self) {
        let mut sessions: Vec<OwnSession> = self
            .own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(number, own)| OwnSession {
                session: *number,
                handle_prefix: own.handle.chars().take(8).collect(),
            })
            .collect();
        sessions.sort_unstable_by_key(|s| s.session);
        self.bus.publish(Event::OwnSessions {
            sessions,
            at_us: now_us(),
        });
    }

    /// Takes up a session an earlier run of this console started, whose handle it kept, as
    /// `number`, after `turns` turns (the next line's turn is numbered after them): shown by
    /// the watched server's stream (`Shown::Elsewhere`), or by this client when the stream
    /// comes from another replica.
    pub fn take_up(&self, number: u64, handle: &str, shown: Shown, turns: u64) {
        let started = Started {
            handle: handle.to_string(),
            replica: None,
            greeting: None,
        };
        self.adopt_after(number, &started, shown, turns);
    }

    /// Reopens on the target a session an earlier run of this console started (its handle
    /// kept): a `chat` with an empty line, which a turnscope answers by reopening the
    /// conversation from its store (reading any reply left unread), saying nothing to the bot.
    /// The conversation's turns so far, as its answer tells (0 from a target that does not).
    ///
    /// # Errors
    /// [`Reopen::Refused`]: the target answered with an error (the conversation ended, or it
    /// never kept it); [`Reopen::Failed`]: the call itself failed.
    pub async fn reopen(&self, handle: &str) -> Result<u64, Reopen> {
        let started = Instant::now();
        // Marked as a probe: a turnscope that no longer knows the handle refuses it as
        // expected, not as an error (its Log, its Stats, every console watching it).
        let mut params = CallToolRequestParams::new("chat");
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.insert(
            crate::server::mcp_text::PROBE_META.into(),
            Value::Bool(true),
        );
        params.meta = Some(meta);
        let result = self
            .call_with(params, json!({"handle": handle, "line": ""}))
            .await
            .map_err(Reopen::Failed)?;
        if result.is_error == Some(true) {
            return Err(Reopen::Refused(text_of(&result)));
        }
        // Nothing to read: the record counts the turns; a reply left unread is the latest.
        let reply = reply_of(&result, started.elapsed());
        Ok(reply.turns.or(reply.turn).unwrap_or(0))
    }

    /// Holds a session's turns until a whisker worker pairs with it ([`Self::show_elsewhere`])
    /// or none does ([`Self::show_by_client`]).
    pub fn hold(&self, number: u64) {
        if let Some(own) = self
            .own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&number)
        {
            own.shown = Shown::Pending;
        }
    }

    /// Hands a session's turns to another feed (a whisker worker paired with it): what was
    /// held is the worker's to show.
    pub fn show_elsewhere(&self, number: u64) {
        if let Some(own) = self
            .own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&number)
        {
            own.shown = Shown::Elsewhere;
            own.progress_elsewhere = false;
            own.held.clear();
        }
    }

    /// Takes a session's turns back (no whisker worker paired with it): the turns held
    /// meanwhile are published now (before, they were shown by nobody).
    pub fn show_by_client(&self, number: u64) {
        let held = {
            let mut own = self.own.lock().unwrap_or_else(|p| p.into_inner());
            let Some(own) = own.get_mut(&number) else {
                return;
            };
            own.shown = Shown::ByClient;
            std::mem::take(&mut own.held)
        };
        for turn in held {
            self.publish_whole(number, turn);
        }
    }

    /// Publishes a turn seen while nobody showed it: its start, then how it ended.
    fn publish_whole(&self, number: u64, held: HeldTurn) {
        self.bus.publish(Event::TurnStarted {
            session: number,
            turn: held.turn,
            line: held.line,
            at_us: held.at_us,
        });
        match (&held.outcome, not_answered(&held.outcome)) {
            (_, Some(why)) => self.turn_ended(
                number,
                held.turn,
                &format!("{NOT_ANSWERED}: {why}"),
                None,
                Timed::ByClient(held.took),
                0,
            ),
            (Ok(reply), None) => {
                self.publish_turn(number, held.turn, held.at_us, reply, held.took);
            }
            (Err(_), None) => {}
        }
    }

    /// After a call made while `number` was [`Shown::Pending`]: held while it still is,
    /// published when this client took the session's turns back during the call.
    fn settle_held(&self, number: u64, held: HeldTurn) {
        let publish = {
            let mut own = self.own.lock().unwrap_or_else(|p| p.into_inner());
            match own.get_mut(&number) {
                Some(o) if o.shown == Shown::Pending => {
                    if o.held.len() < HELD_TURNS {
                        o.held.push(held);
                    }
                    return;
                }
                Some(o) if o.shown == Shown::ByClient => true,
                _ => false,
            }
        };
        if publish {
            self.publish_whole(number, held);
        }
    }

    /// After the watched server restarted: the sessions this console started that the new
    /// server's stream shows (`shown_as` gives the number it shows a handle under: started or
    /// reopened there since) stay this console's under that number, their turns the stream's
    /// to show; the others are let go. A conversation keeps its handle, not its number: the
    /// new server numbers the sessions it opens from 1.
    pub fn renumber(&self, shown_as: impl Fn(&str) -> Option<u64>) -> Renumbered {
        let mut outcome = Renumbered::default();
        let mut own = self.own.lock().unwrap_or_else(|p| p.into_inner());
        // Re-keyed whole: one session's new number may be another's old one.
        for (number, mut session) in std::mem::take(&mut *own) {
            match shown_as(&session.handle) {
                Some(now) => {
                    if now != number {
                        outcome.moved.push((number, now));
                    }
                    session.shown = Shown::Elsewhere;
                    session.progress_elsewhere = true;
                    own.insert(now, session);
                }
                None => outcome.let_go.push((number, session.handle)),
            }
        }
        drop(own);
        self.tell_own();
        if !outcome.moved.is_empty() {
            // A call in flight in a moved session tells its progress under the number now.
            let now = |n: u64| outcome.number_now(n);
            for number in self
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .values_mut()
            {
                *number = now(*number);
            }
            for number in self
                .tokens
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .values_mut()
            {
                *number = now(*number);
            }
        }
        outcome
            .let_go
            .sort_unstable_by_key(|(number, _)| std::cmp::Reverse(*number));
        outcome
    }

    /// Who shows the turns of the session `number` this console started (`None`: not its).
    pub fn shown(&self, number: u64) -> Option<Shown> {
        self.own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&number)
            .map(|o| o.shown)
    }

    /// How many turns the session `number` this console started had (its lines so far).
    pub fn turns_of(&self, number: u64) -> u64 {
        self.own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&number)
            .map_or(0, |o| o.turns)
    }

    /// Whether this console started `number`.
    pub fn owns(&self, number: u64) -> bool {
        self.own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&number)
    }

    /// The numbers of the sessions this console started, taken under one lock (the
    /// Sessions pane marks its rows with them on each tick).
    pub fn owned_numbers(&self) -> Vec<u64> {
        self.own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .copied()
            .collect()
    }

    /// Whether this console started any session that is still its own.
    pub fn owns_any(&self) -> bool {
        !self
            .own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// `number`'s handle, when this console started it.
    pub fn handle_of(&self, number: u64) -> Option<String> {
        self.own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&number)
            .map(|o| o.handle.clone())
    }

    /// Says `line` into the session `number` this console started (an empty line reads the
    /// turn in flight); publishes the turn when this client shows it.
    ///
    /// # Errors
    /// The session is not this console's, or the call itself failed.
    pub async fn chat(&self, number: u64, line: &str) -> Result<ChatReply, String> {
        let (handle, shown, turn) = {
            let mut own = self.own.lock().unwrap_or_else(|p| p.into_inner());
            let Some(o) = own.get_mut(&number) else {
                return Err(format!(
                    "#{number} was started by another client: an attached console reads it but can \
                     chat only in sessions it started (n starts one)"
                ));
            };
            if !line.is_empty() {
                o.turns += 1;
            }
            (o.handle.clone(), o.shown, o.turns)
        };
        let by_client = shown == Shown::ByClient && !line.is_empty();
        let pending = shown == Shown::Pending && !line.is_empty();
        let at_us = now_us();
        if by_client {
            self.bus.publish(Event::TurnStarted {
                session: number,
                turn,
                line: line.to_string(),
                at_us,
            });
        }
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(handle.clone(), number);
        let started = Instant::now();
        let result = self
            .call("chat", json!({"handle": handle, "line": line}))
            .await;
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&handle);
        let elapsed = started.elapsed();
        let outcome = result.map(|result| reply_of(&result, elapsed));
        if pending {
            self.settle_held(
                number,
                HeldTurn {
                    turn,
                    at_us,
                    line: line.to_string(),
                    outcome: outcome.clone(),
                    took: elapsed,
                },
            );
        }
        if by_client {
            match (&outcome, not_answered(&outcome)) {
                (_, Some(why)) => self.turn_ended(
                    number,
                    turn,
                    &format!("{NOT_ANSWERED}: {why}"),
                    None,
                    Timed::ByClient(elapsed),
                    0,
                ),
                (Ok(reply), None) => self.publish_turn(number, turn, at_us, reply, elapsed),
                (Err(_), None) => {}
            }
        }
        outcome
    }

    /// Ends the session `number` (`DELETE` of the MCP session is not per conversation, so the
    /// handle is forgotten here and the row closed).
    pub fn forget(&self, number: u64) {
        let removed = self
            .own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&number);
        // Its opening was published by this client unless another feed shows it.
        if let Some(own) = &removed
            && own.shown != Shown::Elsewhere
        {
            self.bus.publish(Event::Session(SessionEvent {
                session: number,
                handle_prefix: String::new(),
                opener: SessionOpener::Console,
                closed: Some("forgotten by this console".into()),
                at_us: now_us(),
                restored: false,
                began_us: None,
                taken_from: None,
                greeting: None,
            }));
        }
        // After its close: a closed row stays the person's, as the console shows it.
        if removed.is_some() {
            self.tell_own();
        }
    }

    /// Lets go of the session `number` this console started that the target no longer knows
    /// (it refused its handle): closed, `why`, whichever feed showed it.
    pub fn let_go(&self, number: u64, why: &str) {
        self.own
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&number);
        self.bus.publish(Event::Session(SessionEvent {
            session: number,
            handle_prefix: String::new(),
            opener: SessionOpener::Console,
            closed: Some(why.into()),
            at_us: now_us(),
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: None,
        }));
        self.tell_own();
    }

    fn publish_turn(&self, number: u64, turn: u64, at_us: u64, reply: &ChatReply, took: Duration) {
        if !reply.reply.is_empty() {
            let first = reply.first_piece_ms.map_or(0, |ms| (ms * 1000.0) as u64);
            self.bus.publish(Event::Frame(FrameEvent::reply_piece(
                self.frames.fetch_add(1, Ordering::Relaxed) + 1,
                number,
                turn,
                "mcp result",
                at_us + first,
                reply.reply.clone(),
            )));
        }
        for call in &reply.tool_calls {
            self.bus.publish(Event::ToolCall(ToolCallEvent {
                session: number,
                turn,
                name: call.name.clone(),
                duration_us: (call.ms * 1000.0) as u64,
                result_bytes: call.result_bytes,
                error: call
                    .is_error
                    .then(|| "failed (the target reports no text)".into()),
                // The event carries the arguments as text, as the model sent them.
                arguments: match &call.arguments {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                },
                result: String::new(),
                started_us: 0,
                retold: false,
                by_hand: false,
            }));
        }
        let reason = match (&reply.end_reason, &reply.error) {
            (Some(r), Some(e)) if r == "error" => format!("error: {e}"),
            (Some(r), _) => r.clone(),
            (None, Some(e)) => format!("error: {e}"),
            (None, None) => "nothing to read".into(),
        };
        let first = reply.first_piece_ms.map(|ms| (ms * 1000.0) as u64);
        // The target's turn record times the turn on the target's clock; without one, this
        // client's call is all there is to time it by, and the footer says so.
        let timed = match (reply.turn, reply.total_ms) {
            (Some(_), Some(ms)) => Timed::ByTarget(Duration::from_secs_f64(ms.max(0.0) / 1000.0)),
            _ => Timed::ByClient(took),
        };
        self.turn_ended(number, turn, &reason, first, timed, reply.rounds);
    }

    fn turn_ended(
        &self,
        number: u64,
        turn: u64,
        reason: &str,
        first_piece_us: Option<u64>,
        timed: Timed,
        rounds: u32,
    ) {
        let (total, clock) = match timed {
            Timed::ByTarget(total) => (total, None),
            Timed::ByClient(took) => (took, Some(TurnClock::Client)),
        };
        self.bus.publish(Event::TurnEnded(TurnEndEvent {
            session: number,
            turn,
            reason: reason.to_string(),
            reply_bytes: 0,
            rounds,
            tool_calls: 0,
            first_piece_us,
            total_us: total.as_micros() as u64,
            clock,
            ..TurnEndEvent::default()
        }));
    }

    /// Ends the MCP connection.
    pub async fn close(self) {
        if let Ok(service) = Arc::try_unwrap(self.service) {
            let _ = service.cancel().await;
        }
    }
}

/// How long a turn took, and by whose clock.
enum Timed {
    /// The target's turn record.
    ByTarget(Duration),
    /// This client's `chat` call (the target gave no record, or the call failed).
    ByClient(Duration),
}

fn meta<'a>(result: &'a CallToolResult, key: &str) -> Option<&'a Value> {
    result
        .meta
        .as_ref()
        .and_then(|m| m.0.get(key))
        .filter(|v| v.is_object())
}

/// A `chat` result as a [`ChatReply`]: the turn record when the target gives one, else the text
/// with this client's own time.
/// Why a call's outcome is no turn the bot is known to have run — the call failed, or the
/// target refused it with no turn record — when it is: such a turn ends "not answered", so the
/// console gives the line back rather than keeping it as a turn of the bot's.
fn not_answered(outcome: &Result<ChatReply, String>) -> Option<String> {
    match outcome {
        Ok(reply) if reply.is_error() && reply.turn.is_none() && reply.reply.is_empty() => {
            Some(reply.error.clone().unwrap_or_default())
        }
        Ok(_) => None,
        Err(e) => Some(e.clone()),
    }
}

fn reply_of(result: &CallToolResult, took: Duration) -> ChatReply {
    let failed = result.is_error == Some(true);
    let text = text_of(result);
    let Some(r) = meta(result, TURN_META) else {
        return ChatReply {
            reply: if failed { String::new() } else { text.clone() },
            turn: None,
            end_reason: Some(if failed { "error" } else { "completed" }.into()),
            error: failed.then_some(text),
            rounds: 0,
            tool_calls: Vec::new(),
            first_piece_ms: None,
            total_ms: Some(took.as_secs_f64() * 1000.0),
            unread: None,
            usage: None,
            finish_reason: None,
            config_version: None,
            line: None,
            turns: None,
            kept_unread: false,
        };
    };
    let calls = r["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|c| ToolCallSummary {
                    name: c["name"].as_str().unwrap_or_default().to_string(),
                    // A JSON object from this turnscope, a string from an older one.
                    arguments: c["arguments"].clone(),
                    is_error: c["is_error"].as_bool().unwrap_or(false),
                    result_bytes: c["result_bytes"].as_u64().unwrap_or(0) as usize,
                    ms: c["ms"].as_f64().unwrap_or(0.0),
                })
                .collect()
        })
        .unwrap_or_default();
    ChatReply {
        // Past 64 KiB the record leaves the reply to the text (`reply_bytes` instead).
        reply: match r["reply"].as_str() {
            Some(reply) => reply.to_string(),
            None => crate::server::mcp_text::reply_left_to_text(r, &text).unwrap_or_default(),
        },
        turn: r["turn"].as_u64(),
        end_reason: r["end_reason"].as_str().map(str::to_string),
        error: r["error"]
            .as_str()
            .map(str::to_string)
            .or_else(|| failed.then(|| text.clone())),
        rounds: r["rounds"].as_u64().unwrap_or(0) as u32,
        tool_calls: calls,
        first_piece_ms: r["first_piece_ms"].as_f64(),
        total_ms: r["total_ms"].as_f64().or(Some(took.as_secs_f64() * 1000.0)),
        unread: None,
        usage: None,
        finish_reason: r["finish_reason"].as_str().map(str::to_string),
        config_version: r["config_version"].as_u64(),
        line: r["line"].as_str().map(str::to_string),
        turns: r["turns"].as_u64(),
        kept_unread: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    #[test]
    fn a_failed_or_refused_call_with_no_turn_record_was_not_answered() {
        let refused = CallToolResult::error(vec![ContentBlock::text("handle: no live session")]);
        assert_eq!(
            not_answered(&Ok(reply_of(&refused, Duration::ZERO))).as_deref(),
            Some("handle: no live session")
        );
        assert_eq!(
            not_answered(&Err("Transport send error".into())).as_deref(),
            Some("Transport send error")
        );
        let answered = CallToolResult::success(vec![ContentBlock::text("You said: hi")]);
        assert_eq!(not_answered(&Ok(reply_of(&answered, Duration::ZERO))), None);
    }
}
