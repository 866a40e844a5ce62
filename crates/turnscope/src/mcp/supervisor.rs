//! Keeps one MCP server connected: open a session, hand it to the [`Watcher`] (the *view*
//! that owns what callers see), wait for it to end or for `tools/list_changed`, and open
//! again after the [`RESTART`] backoff, until stopped. It never formats messages or keeps
//! tool lists; views (`tools::McpSource`, the Xiaozhi MCP upstream) do.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::service::QuitReason;
use rmcp::{ClientHandler, Peer, RoleClient};
use tokio::sync::Notify;
use tokio::task::JoinError;
use tokio_util::sync::CancellationToken;

use super::backoff::{Backoff, ReconnectPolicy, SessionEnd};
use super::clock::Clock;
use super::connect::{ConnectError, Session};

/// Delays between attempts, for every MCP client. Of the two policies the crate had, this is
/// the Xiaozhi upstream's: its jitter keeps servers that die together (a network blip) from
/// being retried in lockstep, it waits on an injected [`Clock`] so tests assert delays
/// instead of sleeping, and 0.5 s still respawns a crashed stdio server at once to a person.
/// The tool sources' (0.25 s doubling to 30 s, no jitter, tokio time only) had neither.
pub(crate) const RESTART: ReconnectPolicy = ReconnectPolicy {
    initial: Duration::from_millis(500),
    max: Duration::from_secs(30),
    jitter: Duration::from_millis(300),
    after_clean_close: Duration::from_millis(500),
    healthy_after: Duration::from_secs(60),
};

/// How long a stopping session is waited for. A stdio child's stdin is closed (at most 3 s),
/// its process group sent SIGTERM 3 s later and SIGKILL 3 s after that (`stdio_child`); past
/// this wait that continues in the background, and a child still running when the process
/// exits is killed with its group.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(4);

/// How the supervisor runs.
#[derive(Clone)]
pub(crate) struct Plan {
    /// Longest one attempt (open + [`Watcher::opened`]) may take.
    pub(crate) attempt_timeout: Duration,
    /// Delays between attempts.
    pub(crate) restart: ReconnectPolicy,
    /// The clock delays are waited on.
    pub(crate) clock: Arc<dyn Clock>,
}

/// Why an attempt failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    /// Occurs when the session could not be opened.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Occurs when the session opened but its first `tools/list` failed (the reason given).
    #[error("connected, but tools/list failed: {0}")]
    Listing(String),
    /// Occurs when the attempt took longer than [`Plan::attempt_timeout`].
    #[error(
        "no answer (the MCP handshake and tools/list) within {:.1} s, the attempt's limit",
        .0.as_secs_f64()
    )]
    TimedOut(Duration),
}

/// How the server went down.
pub(crate) enum Down {
    /// An attempt failed.
    Failed {
        /// Why.
        failure: Failure,
        /// Failed attempts since the last session.
        attempts: u32,
        /// Whether it failed exactly as the attempt before.
        repeated: bool,
    },
    /// A session ended by itself.
    Lost {
        /// How its service task ended.
        quit: Result<QuitReason, JoinError>,
    },
}

/// The view a supervisor reports to.
pub(crate) trait Watcher: Send + Sync + 'static {
    /// The rmcp client handler of a session.
    type Client: ClientHandler;

    /// Opens one session with a fresh handler; cancelling `ct` ends it.
    fn open(
        &self,
        ct: CancellationToken,
    ) -> BoxFuture<'_, Result<Session<Self::Client>, ConnectError>>;

    /// The session is open; `alive` is cancelled when it ends. Whoever holds `alive` may
    /// cancel it to let the session go (a call found it dead): the supervisor ends it and
    /// reconnects. Runs inside the attempt's time limit; an error fails the attempt.
    fn opened<'a>(
        &'a self,
        session: &'a Session<Self::Client>,
        alive: CancellationToken,
    ) -> BoxFuture<'a, Result<(), Failure>>;

    /// Woken while a session is up (by `tools/list_changed`), [`Watcher::refresh`] runs.
    fn list_changed(&self) -> Option<Arc<Notify>> {
        None
    }

    /// Lists again after [`Watcher::list_changed`] woke the supervisor.
    fn refresh<'a>(&'a self, _peer: &'a Peer<RoleClient>) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// The server is down; the next attempt starts after `delay` unless stopped first.
    fn down(&self, down: Down, delay: Duration);

    /// Stopped for good.
    fn closed(&self);
}

/// Runs until `stop` is cancelled, then closes the session (waiting [`CLOSE_GRACE`]).
pub(crate) async fn supervise<W: Watcher>(watcher: Arc<W>, plan: Plan, stop: CancellationToken) {
    let mut backoff = Backoff::new(plan.restart);
    let mut attempts = 0u32;
    let mut last_failure: Option<String> = None;
    loop {
        let ct = stop.child_token();
        let alive = CancellationToken::new();
        let attempt = async {
            let session = watcher.open(ct.clone()).await?;
            watcher.opened(&session, alive.clone()).await?;
            Ok::<_, Failure>(session)
        };
        let result = tokio::select! {
            r = tokio::time::timeout(plan.attempt_timeout, attempt) => {
                r.unwrap_or(Err(Failure::TimedOut(plan.attempt_timeout)))
            }
            () = stop.cancelled() => {
                ct.cancel();
                break;
            }
        };
        let (down, uptime) = match result {
            Ok(session) => {
                attempts = 0;
                last_failure = None;
                let started = plan.clock.now();
                let stderr = session.stderr.clone();
                let Some(quit) = run(&*watcher, session, &stop, &ct, &alive).await else {
                    break;
                };
                // Its last words (why it ended) may still be in the pipe.
                if let Some(stderr) = stderr {
                    stderr.settled(super::connect::STDERR_GRACE).await;
                }
                let uptime = plan.clock.now().saturating_duration_since(started);
                (Down::Lost { quit }, Some(uptime))
            }
            Err(failure) => {
                ct.cancel();
                alive.cancel();
                attempts += 1;
                let text = failure.to_string();
                let repeated = last_failure.as_deref() == Some(text.as_str());
                last_failure = Some(text);
                let down = Down::Failed {
                    failure,
                    attempts,
                    repeated,
                };
                (down, None)
            }
        };
        let delay = backoff.delay(SessionEnd::Abnormal, uptime);
        watcher.down(down, delay);
        tokio::select! {
            () = plan.clock.sleep(delay) => {}
            () = stop.cancelled() => break,
        }
    }
    watcher.closed();
}

/// Serves one session until it ends (its quit reason) or `stop` (`None`, session closed).
async fn run<W: Watcher>(
    watcher: &W,
    session: Session<W::Client>,
    stop: &CancellationToken,
    ct: &CancellationToken,
    alive: &CancellationToken,
) -> Option<Result<QuitReason, JoinError>> {
    let peer = session.service.peer().clone();
    let list_changed = watcher.list_changed();
    // The session's own token too: a session opened without `ct` (a test's) ends with it.
    let session_ct = session.service.cancellation_token();
    let waiting = session.service.waiting();
    tokio::pin!(waiting);
    let quit = loop {
        tokio::select! {
            quit = &mut waiting => break quit,
            () = stop.cancelled() => {
                alive.cancel();
                ct.cancel();
                session_ct.cancel();
                if tokio::time::timeout(CLOSE_GRACE, &mut waiting).await.is_err() {
                    tracing::warn!("MCP server did not close within {} s; it is killed in the background", CLOSE_GRACE.as_secs());
                }
                return None;
            }
            () = notified(list_changed.as_deref()) => watcher.refresh(&peer).await,
            // Let go by its user (a call found the connection dead): end it and reconnect.
            () = alive.cancelled() => {
                ct.cancel();
                session_ct.cancel();
                break tokio::time::timeout(CLOSE_GRACE, &mut waiting)
                    .await
                    .unwrap_or(Ok(QuitReason::Cancelled));
            }
        }
    };
    alive.cancel();
    if stop.is_cancelled() && matches!(quit, Ok(QuitReason::Cancelled)) {
        return None;
    }
    Some(quit)
}

/// Waits for `notify`, or forever without one.
async fn notified(notify: Option<&Notify>) {
    match notify {
        Some(n) => n.notified().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::mcp::clock::ManualClock;

    /// A view whose every attempt fails the same way; it records what it is told.
    #[derive(Default)]
    struct Failing {
        downs: Mutex<Vec<(String, u32, bool)>>,
        closed: Mutex<bool>,
    }

    impl Watcher for Failing {
        type Client = ();

        fn open(&self, _ct: CancellationToken) -> BoxFuture<'_, Result<Session<()>, ConnectError>> {
            Box::pin(async { Err(ConnectError::Other("refused".into())) })
        }

        fn opened<'a>(
            &'a self,
            _session: &'a Session<()>,
            _alive: CancellationToken,
        ) -> BoxFuture<'a, Result<(), Failure>> {
            Box::pin(async { Ok(()) })
        }

        fn down(&self, down: Down, _delay: Duration) {
            let Down::Failed {
                failure,
                attempts,
                repeated,
            } = down
            else {
                panic!("no session was ever up");
            };
            let entry = (failure.to_string(), attempts, repeated);
            self.downs.lock().unwrap().push(entry);
        }

        fn closed(&self) {
            *self.closed.lock().unwrap() = true;
        }
    }

    #[tokio::test]
    async fn failed_attempts_back_off_on_the_clock_and_stop_closes_the_view() {
        let clock = ManualClock::new();
        let view = Arc::new(Failing::default());
        let stop = CancellationToken::new();
        let plan = Plan {
            attempt_timeout: Duration::from_secs(5),
            restart: RESTART,
            clock: clock.clone(),
        };
        let task = tokio::spawn(supervise(view.clone(), plan, stop.clone()));
        let first = clock.next_sleep().await;
        assert!(first >= RESTART.initial && first <= RESTART.initial + RESTART.jitter);
        clock.advance(first);
        let second = clock.next_sleep().await;
        let doubled = RESTART.initial * 2;
        assert!(second >= doubled && second <= doubled + RESTART.jitter);
        stop.cancel();
        task.await.unwrap();
        assert_eq!(
            *view.downs.lock().unwrap(),
            [
                ("refused".to_string(), 1, false),
                ("refused".to_string(), 2, true)
            ]
        );
        assert!(*view.closed.lock().unwrap());
    }
}
