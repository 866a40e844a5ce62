//! One bridge: an endpoint, an upstream, a tool filter, and the loop that keeps the socket open:
//! dial, serve, and after every end wait as the `Backoff` says, on the injected [`Clock`]. The
//! first dial waits (up to 30 s) for the upstream's first start attempt, so the endpoint's opening
//! `tools/list` finds the tools; stopping closes the socket with 1000 and the upstream.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::endpoint::{self, Endpoint, MAX_FRAME_BYTES};
use super::listing::DEFAULT_PAGE_SIZE;
use super::socket::{self, Relay};
use super::state::BridgeState;
use super::upstream::Upstream;
use crate::config::ToolFilter;
use crate::mcp::backoff::{Backoff, ReconnectPolicy, SessionEnd};
use crate::mcp::clock::{self, Clock};
use crate::observe::{BridgeEvent, Bus};

/// How long the first dial waits for the upstream's first start.
const FIRST_START_WAIT: Duration = Duration::from_secs(30);

/// How often counters are published when they changed.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// Tunables of a bridge.
#[derive(Clone)]
pub struct BridgeSettings {
    /// Reconnect delays.
    pub policy: ReconnectPolicy,
    /// The clock reconnect delays and uptimes are measured on.
    pub clock: Arc<dyn Clock>,
    /// Largest frame accepted or sent.
    pub max_frame: usize,
    /// Tools per `tools/list` page.
    pub page_size: usize,
    /// Interval of WebSocket pings.
    pub keepalive: Duration,
}

impl Default for BridgeSettings {
    fn default() -> Self {
        Self {
            policy: ReconnectPolicy::default(),
            clock: clock::system(),
            max_frame: MAX_FRAME_BYTES,
            page_size: DEFAULT_PAGE_SIZE,
            keepalive: Duration::from_secs(20),
        }
    }
}

/// Everything a bridge is made of.
pub struct XiaozhiBridge {
    /// Its name (from the config or the command line).
    pub name: String,
    /// Where it dials.
    pub endpoint: Endpoint,
    /// What it relays to.
    pub upstream: Arc<dyn Upstream>,
    /// Which tools the endpoint may see and call.
    pub filter: ToolFilter,
    /// Tunables.
    pub settings: BridgeSettings,
}

/// A bridge running in its own task.
pub struct RunningBridge {
    state: Arc<BridgeState>,
    upstream: Arc<dyn Upstream>,
    stop: CancellationToken,
    task: JoinHandle<()>,
    reporter: JoinHandle<()>,
}

impl XiaozhiBridge {
    /// Starts the bridge, publishing on `bus`.
    pub fn spawn(self, bus: &Bus) -> RunningBridge {
        let state = Arc::new(BridgeState::new(
            self.name.clone(),
            self.endpoint.shown().to_string(),
            self.upstream.clone(),
            bus.clone(),
        ));
        let relay = Arc::new(Relay::new(
            self.upstream.clone(),
            self.filter.clone(),
            state.clone(),
            self.settings.page_size,
            self.settings.max_frame,
            self.settings.keepalive,
        ));
        let stop = CancellationToken::new();
        let reporter = {
            let state = state.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(REPORT_EVERY);
                loop {
                    tick.tick().await;
                    state.publish_if_changed();
                }
            })
        };
        state.log(
            tracing::Level::INFO,
            &format!(
                "relaying {} to {}",
                self.upstream.label(),
                self.endpoint.shown()
            ),
        );
        let task = tokio::spawn(run(self.endpoint, self.settings, relay, stop.clone()));
        RunningBridge {
            state,
            upstream: self.upstream,
            stop,
            task,
            reporter,
        }
    }
}

async fn run(
    endpoint: Endpoint,
    settings: BridgeSettings,
    relay: Arc<Relay>,
    stop: CancellationToken,
) {
    let state = relay.state.clone();
    tokio::select! {
        _ = relay.upstream.ready(FIRST_START_WAIT) => {}
        _ = stop.cancelled() => return,
    }
    let clock = settings.clock.clone();
    let mut backoff = Backoff::new(settings.policy);
    let mut first = true;
    loop {
        if !first {
            state.reconnecting();
        }
        first = false;
        let dialed = tokio::select! {
            r = endpoint::dial(&endpoint, settings.max_frame) => r,
            _ = stop.cancelled() => return,
        };
        let (end, message, uptime) = match dialed {
            Ok(socket) => {
                let opened = clock.now();
                state.connected();
                state.log(
                    tracing::Level::INFO,
                    &format!("connected to {}", endpoint.shown()),
                );
                let ended = socket::serve(socket, &relay, &stop).await;
                if ended.stopping {
                    state.disconnected("bridge stopped", false);
                    return;
                }
                let up = clock.now().saturating_duration_since(opened);
                (ended.end, ended.message, Some(up))
            }
            Err(e) => (e.end, e.message, None),
        };
        let delay = backoff.delay(end, uptime);
        let rejected = end == SessionEnd::Rejected;
        state.disconnected(&message, rejected);
        state.log(
            if rejected || end == SessionEnd::Abnormal {
                tracing::Level::WARN
            } else {
                tracing::Level::INFO
            },
            &format!("{message}; dialling again in {:.1} s", delay.as_secs_f64()),
        );
        tokio::select! {
            _ = clock.sleep(delay) => {}
            _ = stop.cancelled() => return,
        }
    }
}

impl RunningBridge {
    /// The bridge's name.
    pub fn name(&self) -> &str {
        self.state.name()
    }

    /// Its current state.
    pub fn status(&self) -> BridgeEvent {
        self.state.snapshot()
    }

    pub(crate) fn state_handle(&self) -> Arc<BridgeState> {
        self.state.clone()
    }

    /// Closes the socket with 1000 and stops the upstream at the same time, waiting at most
    /// about 4.5 s. A stdio child gets its stdin closed, then SIGTERM after 3 s; one still
    /// running when the process exits is killed (`kill_on_drop`).
    pub async fn shutdown(self) {
        self.stop.cancel();
        let mut task = self.task;
        let socket = async {
            if tokio::time::timeout(Duration::from_secs(2), &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        };
        tokio::join!(socket, self.upstream.shutdown());
        self.reporter.abort();
        self.state.publish();
    }
}
