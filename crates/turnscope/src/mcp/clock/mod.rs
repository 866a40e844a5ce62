//! The clock reconnect and restart policies wait on: `SystemClock` (tokio time) in
//! production, [`ManualClock`] in tests (time moves only when the test says so, and every
//! requested wait is recorded, so delays are asserted instead of slept through). Protocol
//! timers (keepalive pings, call timeouts) are never on this clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

#[cfg(any(test, feature = "testing"))]
mod manual;
#[cfg(any(test, feature = "testing"))]
pub use manual::ManualClock;

/// A source of "now" and of waits.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Instant;
    /// A future that completes once `duration` has passed on this clock.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// Real time, through tokio.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// The system clock as a shared trait object.
pub fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}
