//! The model client's HTTP connections: the pooled client every request goes through first,
//! and a second one that never reuses a connection, for the one retry.
//!
//! Why: llama-server closes its connection after every streamed response while answering
//! `Keep-Alive: timeout=5, max=100` (no `Connection: close`, which hyper honours by not pooling
//! the connection). hyper puts the connection back in the pool, and the next request (a tool
//! round comes milliseconds later) can take it before the close is noticed; it then fails with
//! "connection closed before message completed" or a reset, with no byte of the answer sent.
//! Such a request never reached the model, so it is sent again, once, on a fresh connection.
//!
//! reqwest does not say whether a failed request ran on a reused connection, and counting the
//! connections the pool opens cannot tell either: when no idle connection is ready, hyper races
//! a new connect against the pool and may still hand the request the old connection. So every
//! request that failed after connecting and before any byte of the answer gets that one retry;
//! a connect failure (the server is down) never does.

use std::time::Duration;

/// How long an idle pooled connection is kept: under the 5 s keep-alive timeout llama.cpp,
/// Node and uvicorn servers announce (reqwest's default of 90 s would outlive it and race the
/// server's close).
pub(crate) const POOL_IDLE: Duration = Duration::from_secs(4);

/// The pooled client and the never-reusing one.
#[derive(Clone)]
pub(crate) struct Connections {
    /// The client every request goes through first.
    pub(crate) pooled: reqwest::Client,
    /// A client that keeps no idle connection, so every request opens a fresh one.
    pub(crate) fresh: reqwest::Client,
}

impl Connections {
    /// Both clients with `connect_timeout`.
    pub(crate) fn new(connect_timeout: Duration) -> Self {
        let pooled = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .tcp_nodelay(true)
            .pool_idle_timeout(POOL_IDLE)
            .build()
            .expect("reqwest client builds with static settings");
        let fresh = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .tcp_nodelay(true)
            .pool_max_idle_per_host(0)
            .build()
            .expect("reqwest client builds with static settings");
        Self { pooled, fresh }
    }
}
