//! `turnscope attach`: the console over a bot this process does not run. Every feed publishes
//! the same [`Event`]s a turnscope publishes about itself onto one local [`Bus`], so the
//! console folds an attached bot exactly as its own, and `--events` records it for `turnscope
//! replay`:
//! - [`target`]: an MCP client of the bot's `start`/`chat` (its exchanges tapped by [`tap`]):
//!   the sessions this console starts, their turns as the client saw them;
//! - [`stream`]: a watched turnscope's live event stream (`/events`): every session, frame,
//!   model request and MCP exchange of that server;
//! - [`whisker`]: pipecat's whisker feed: workers, their pipelines, frames per link, and the
//!   turns of a text bot derived from them.
//!
//! [`address`] reads what the command line gives as the two addresses.
//!
//! A session the console starts is shown once: by the stream when the watched server's stream
//! shows it, by a whisker worker paired with it, else by this client.

pub mod address;
mod retold;
pub mod side;
pub mod stream;
pub mod tap;
pub mod target;
pub mod whisker;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::observe::event::now_us;
use crate::observe::{Bus, Event};
pub use target::Reopen;
use target::{Shown, Target};

/// How long a started session waits to be seen in the watched server's stream.
const SEEN_WITHIN: Duration = Duration::from_secs(3);
/// How long a started session waits for a whisker worker to pair with it.
const PAIRED_WITHIN: Duration = Duration::from_secs(10);
/// Numbers of sessions this client shows itself while a stream numbers the server's.
const CLIENT_NUMBERS: u64 = 1_000_000;

/// Masks the handles in a hand call's result (its text, content blocks and
/// `structuredContent`) to their first 8 characters and `…`, as the console shows handles
/// everywhere else.
fn mask_result_handles(outcome: &mut crate::tools::ToolOutcome) {
    crate::observe::wire::mask_handles_in(&mut outcome.text);
    outcome
        .parts
        .iter_mut()
        .for_each(crate::observe::wire::mask_handles);
    if let Some(structured) = &mut outcome.structured {
        crate::observe::wire::mask_handles(structured);
    }
}

/// What to attach to.
#[derive(Debug, Clone, Default)]
pub struct AttachOptions {
    /// The bot's MCP URL, when chatting with it.
    pub url: Option<String>,
    /// The bearer token for the URL and its event stream.
    pub token: Option<String>,
    /// Pipecat whisker's WebSocket URL (`ws://HOST:PORT`).
    pub whisker: Option<String>,
}

/// The feeds of one attached console, publishing on [`Attached::bus`].
pub struct Attached {
    /// The local bus the console (and `--events`) read.
    pub bus: Bus,
    /// The MCP client, when a URL was given.
    pub target: Option<Target>,
    /// The event stream's state, when the target serves one.
    pub stream: Option<stream::Shared>,
    /// The whisker feed's state, when one was given.
    pub whisker: Option<whisker::Shared>,
    pairing: whisker::Pairing,
    numbers: Arc<AtomicU64>,
    stop: CancellationToken,
}

impl Attached {
    /// Connects to what `options` names; events go to `bus` (subscribe first to see them all).
    ///
    /// # Errors
    /// The MCP URL cannot be reached or does not speak MCP.
    pub async fn start(options: &AttachOptions, bus: Bus) -> Result<Self, String> {
        let stop = CancellationToken::new();
        let numbers = Arc::new(AtomicU64::new(0));
        let target = match &options.url {
            Some(url) => {
                let target = Target::connect(url, options.token.as_deref(), &bus).await?;
                target.keep_alive(target::KEEP_ALIVE_EVERY);
                Some(target)
            }
            None => None,
        };
        let stream = options
            .url
            .as_deref()
            .and_then(stream::events_url)
            .map(|url| {
                stream::spawn(
                    url,
                    options.token.clone(),
                    bus.clone(),
                    target.as_ref().map(Target::side),
                    stop.child_token(),
                )
            });
        let pairing = whisker::Pairing::default();
        let whisker = options.whisker.as_ref().map(|url| {
            whisker::spawn(
                url.clone(),
                bus.clone(),
                numbers.clone(),
                pairing.clone(),
                target.clone(),
                stop.child_token(),
            )
        });
        Ok(Self {
            bus,
            target,
            stream,
            whisker,
            pairing,
            numbers,
            stop,
        })
    }

    /// Whether the watched server's stream is open (its sessions are numbered by it).
    fn streaming(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| {
            let s = s.lock().unwrap_or_else(|p| p.into_inner());
            s.available == Some(true)
        })
    }

    /// Starts a session for the person; its number in the console.
    ///
    /// # Errors
    /// No MCP URL was given, or `start` failed.
    pub async fn open(&self) -> Result<u64, String> {
        let Some(target) = &self.target else {
            return Err(
                "no bot URL to chat with: `turnscope attach URL` chats; --whisker alone only watches"
                    .into(),
            );
        };
        self.stream_known().await;
        let started = target.start().await?;
        Ok(self.adopt_started(target, &started).await)
    }

    /// Calls the target's tool `name` by hand (the Tools pane's form, [`Target::call_by_hand`]).
    /// A `start` the target answered with a handle opened a session this console started, as
    /// `n` does: it is this console's (a line chats in it, `d` lets it go), and its number
    /// comes back with the result. The result shows the handle as the console shows every
    /// handle, by its first 8 characters (`y` in Sessions copies it whole).
    ///
    /// # Errors
    /// No MCP URL was given, or the call was not sent ([`Target::call_by_hand`]).
    pub async fn call_by_hand(
        &self,
        specs: &[crate::tools::ToolSpec],
        name: &str,
        arguments: serde_json::Value,
    ) -> Result<(crate::tools::hand::HandResult, Option<u64>), String> {
        let Some(target) = &self.target else {
            return Err("no bot URL to call: --whisker alone only watches".into());
        };
        if name == "start" {
            self.stream_known().await;
        }
        let (mut result, started) = target.call_by_hand(specs, name, arguments).await?;
        let Some(started) = started else {
            return Ok((result, None));
        };
        let number = self.adopt_started(target, &started).await;
        mask_result_handles(&mut result.outcome);
        Ok((result, Some(number)))
    }

    /// Makes a session `start` just opened this console's: numbered as the watched server's
    /// stream shows it (by its handle's first 8 characters), else by this client (paired with
    /// a whisker worker when there is a whisker feed). Its number.
    async fn adopt_started(&self, target: &Target, started: &target::Started) -> u64 {
        let started = started.clone();
        // Behind a balancer the stream may come from another replica than the session's:
        // then it is moved there when it can be, else it will never show the session, which
        // is not waited for.
        if self.streaming()
            && (target.side().elsewhere().is_none() || self.follow_session().await)
            && let Some(number) = self.seen_in_stream(&started.handle).await
        {
            target.adopt(number, &started, Shown::Elsewhere);
            return number;
        }
        let number = self.client_number();
        if let Some(replica) = &started.replica {
            self.say_elsewhere(number, replica);
        }
        if self.whisker.is_some() {
            target.adopt(number, &started, Shown::ByClient);
            // Held before it waits: a worker that pairs at once hands it over.
            target.hold(number);
            self.pairing.wait(number, now_us());
            self.unpaired_after(number);
        } else {
            target.adopt(number, &started, Shown::ByClient);
        }
        number
    }

    /// Goes on with a session an earlier run of this console started on a watched turnscope
    /// (its handle kept) that the stream does not show: reopened there from its store
    /// ([`Target::reopen`]), found in the stream, and this console's again; its number.
    ///
    /// # Errors
    /// No event stream ([`Reopen::Unwatched`]), the target refused the handle, or no target,
    /// the call failed or the stream did not show the session in time ([`Reopen::Failed`]).
    pub async fn reopen(&self, handle: &str) -> Result<u64, Reopen> {
        let Some(target) = &self.target else {
            return Err(Reopen::Failed("no bot URL to chat with".into()));
        };
        self.stream_known().await;
        if !self.streaming() {
            return Err(Reopen::Unwatched);
        }
        let turns = target.reopen(handle).await?;
        // Reopened on another replica than the watched one (behind a balancer), and the
        // stream cannot be moved there: shown as this client sees it from now on, its earlier
        // turns not retold here. (Nothing to follow, the stream is not moved.)
        if !self.follow_session().await
            && let Some(replica) = target.side().elsewhere()
        {
            let number = self.client_number();
            target.take_up(number, handle, Shown::ByClient, turns);
            self.say_elsewhere(number, &replica);
            return Ok(number);
        }
        let number = self.seen_in_stream(handle).await.ok_or_else(|| {
            Reopen::Failed(format!(
                "the target reopened the session, and its event stream did not show it within {} ms",
                SEEN_WITHIN.as_millis()
            ))
        })?;
        target.take_up(number, handle, Shown::Elsewhere, turns);
        Ok(number)
    }

    /// A number for a session this client shows itself (above the stream's, while there is one).
    fn client_number(&self) -> u64 {
        let base = if self.streaming() { CLIENT_NUMBERS } else { 0 };
        base + self.numbers.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Says in the Log that `number` lives on `replica`, when the stream comes from another.
    fn say_elsewhere(&self, number: u64, replica: &str) {
        if !self.streaming() {
            return;
        }
        let watched = self
            .target
            .as_ref()
            .and_then(|t| t.side().watched())
            .unwrap_or_else(|| "another replica".into());
        if watched == replica {
            return;
        }
        self.bus.publish(Event::Log {
            at_ms: now_us() / 1000,
            level: "info".into(),
            message: format!(
                "#{number} lives on replica {replica}, and this event stream comes from {watched}: \
                 it is shown as this client sees it (replies, progress, its times)"
            ),
        });
    }

    /// Moves the event stream to the replica the client's MCP session lives on, when that is
    /// another and the stream was not asked with this session yet (it is new: the replica of
    /// the old one died), and waits at most [`SEEN_WITHIN`] for the first line of the stream's
    /// new connection. A balancer that keeps each session on its replica (examples/haproxy.cfg)
    /// then shows the console its own session's frames again. True when the stream now comes
    /// from the session's replica.
    async fn follow_session(&self) -> bool {
        let (Some(target), Some(stream)) = (&self.target, &self.stream) else {
            return false;
        };
        let side = target.side();
        let before = stream.lock().unwrap_or_else(|p| p.into_inner()).connects;
        if !side.follow() {
            return false;
        }
        let deadline = Instant::now() + SEEN_WITHIN;
        while Instant::now() < deadline {
            let answered = {
                let s = stream.lock().unwrap_or_else(|p| p.into_inner());
                s.connects > before && s.replica_read == s.connects
            };
            if answered {
                return side.elsewhere().is_none();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// Waits (at most [`SEEN_WITHIN`]) until the event stream answered or was found missing,
    /// so a session is numbered by the right side.
    async fn stream_known(&self) {
        let Some(stream) = &self.stream else {
            return;
        };
        let deadline = Instant::now() + SEEN_WITHIN;
        while Instant::now() < deadline
            && stream
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .available
                .is_none()
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The number the event stream shows the session `handle` names under (by its first 8
    /// characters), waiting at most [`SEEN_WITHIN`] for it to appear.
    async fn seen_in_stream(&self, handle: &str) -> Option<u64> {
        let prefix: String = handle.chars().take(8).collect();
        let stream = self.stream.as_ref()?;
        let deadline = Instant::now() + SEEN_WITHIN;
        while Instant::now() < deadline {
            let found = stream
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .session_of(&prefix);
            if found.is_some() {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    /// When no whisker worker pairs with `number` in time (at once when another client holds
    /// whisker: none can), this client shows it, the turns it held meanwhile first, until a
    /// worker added as it started shows up (whisker answers later: [`whisker::Pairing`]).
    fn unpaired_after(&self, number: u64) {
        let pairing = self.pairing.clone();
        let target = self.target.clone();
        let whisker = self.whisker.clone();
        let bus = self.bus.clone();
        tokio::spawn(async move {
            let refused = || {
                whisker
                    .as_ref()
                    .is_some_and(|w| w.lock().unwrap_or_else(|p| p.into_inner()).held_elsewhere)
            };
            let deadline = Instant::now() + PAIRED_WITHIN;
            while Instant::now() < deadline && !refused() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            if pairing.stop_waiting(number)
                && let Some(target) = target
            {
                target.show_by_client(number);
                let never_answered = whisker.as_ref().is_some_and(|w| {
                    let w = w.lock().unwrap_or_else(|p| p.into_inner());
                    w.connects == 0 && w.refused == 0
                });
                let (why, until) = if refused() {
                    (
                        "another client holds whisker, so no worker pairs with it now".to_string(),
                        " until whisker takes this console (then its worker pairs with it)",
                    )
                } else if never_answered {
                    // Whisker opens its port as the bot's first session starts: this one did.
                    (
                        format!(
                            "nothing answered at the --whisker address within {} s of its start, \
                             though whisker listens once the bot's first session starts: is the \
                             port the one the bot printed?",
                            PAIRED_WITHIN.as_secs()
                        ),
                        " until whisker answers (then its worker pairs with it)",
                    )
                } else {
                    (
                        format!(
                            "no whisker worker appeared for it within {} s",
                            PAIRED_WITHIN.as_secs()
                        ),
                        "",
                    )
                };
                bus.publish(Event::Log {
                    at_ms: now_us() / 1000,
                    level: "warn".into(),
                    message: format!(
                        "#{number}: {why}: its turns are shown as this client sees them{until}"
                    ),
                });
            }
        });
    }

    /// Ends the session `number` this console started ([`Target::forget`]); one still
    /// waiting for a whisker worker stops waiting, so no worker pairs with it after.
    pub fn forget(&self, number: u64) {
        self.pairing.give_up(number);
        if let Some(target) = &self.target {
            target.forget(number);
        }
    }

    /// Lets go of the session `number` this console started whose handle the target refused
    /// as unknown ([`Target::let_go`]): closed, saying why.
    pub fn let_go(&self, number: u64, why: &str) {
        self.pairing.give_up(number);
        if let Some(target) = &self.target {
            target.let_go(number, why);
        }
    }

    /// Stops every feed.
    pub async fn shutdown(self) {
        self.stop.cancel();
        if let Some(target) = self.target {
            target.close().await;
        }
    }
}
