//! [`ManualClock`]: a clock whose time moves only when a test says so. Built only for the
//! library's own tests and with the `testing` feature (the workspace's integration tests).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::sync::{Notify, oneshot};

use super::Clock;

/// A clock for tests: time stands still until [`ManualClock::advance`], and every
/// [`Clock::sleep`] request is recorded in order. Only in the library's own tests and with the
/// `testing` feature (the workspace's integration tests): not part of the library's API.
pub struct ManualClock {
    start: Instant,
    inner: Mutex<ManualInner>,
    asked: Notify,
}

#[derive(Default)]
struct ManualInner {
    elapsed: Duration,
    sleepers: Vec<(Duration, oneshot::Sender<()>)>,
    requested: Vec<Duration>,
    taken: usize,
}

impl ManualClock {
    /// A clock standing at an arbitrary start instant.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            inner: Mutex::new(ManualInner::default()),
            asked: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ManualInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves time forward by `by`, completing every sleep that is now due.
    pub fn advance(&self, by: Duration) {
        let mut inner = self.lock();
        inner.elapsed += by;
        let now = inner.elapsed;
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut inner.sleepers)
            .into_iter()
            .partition(|(deadline, _)| *deadline <= now);
        inner.sleepers = waiting;
        drop(inner);
        for (_, wake) in due {
            let _ = wake.send(());
        }
    }

    /// Every sleep duration asked of this clock so far, in order.
    pub fn requested(&self) -> Vec<Duration> {
        self.lock().requested.clone()
    }

    /// Waits for the next sleep request not returned by an earlier call, and returns its
    /// duration. Requests are returned in order, each once.
    pub async fn next_sleep(&self) -> Duration {
        loop {
            let notified = self.asked.notified();
            {
                let mut inner = self.lock();
                if inner.taken < inner.requested.len() {
                    let d = inner.requested[inner.taken];
                    inner.taken += 1;
                    return d;
                }
            }
            notified.await;
        }
    }

    /// How many sleeps are waiting for time to move.
    pub fn pending(&self) -> usize {
        self.lock().sleepers.len()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.start + self.lock().elapsed
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let (wake, woken) = oneshot::channel();
        {
            let mut inner = self.lock();
            inner.requested.push(duration);
            if duration.is_zero() {
                let _ = wake.send(());
            } else {
                let deadline = inner.elapsed + duration;
                inner.sleepers.push((deadline, wake));
            }
        }
        self.asked.notify_waiters();
        Box::pin(async move {
            // A dropped clock never wakes its sleepers; the sleep then never ends.
            if woken.await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sleeps_end_only_when_time_is_advanced() {
        let clock = ManualClock::new();
        let t0 = clock.now();
        let mut sleep = clock.sleep(Duration::from_secs(2));
        assert_eq!(clock.next_sleep().await, Duration::from_secs(2));
        assert!(futures::poll!(&mut sleep).is_pending());
        clock.advance(Duration::from_secs(1));
        assert!(futures::poll!(&mut sleep).is_pending());
        clock.advance(Duration::from_secs(1));
        sleep.await;
        assert_eq!(clock.now() - t0, Duration::from_secs(2));
        assert_eq!(clock.pending(), 0);
        assert_eq!(clock.requested(), vec![Duration::from_secs(2)]);
    }

    #[tokio::test]
    async fn next_sleep_waits_for_a_request() {
        let clock = ManualClock::new();
        let waiter = {
            let clock = clock.clone();
            tokio::spawn(async move { clock.next_sleep().await })
        };
        tokio::task::yield_now().await;
        let _sleep = clock.sleep(Duration::from_millis(1500));
        assert_eq!(waiter.await.unwrap(), Duration::from_millis(1500));
    }
}
