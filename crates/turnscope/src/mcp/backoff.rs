//! When to try again: a reconnect policy as a small state machine. An *abnormal end* (failed
//! dial or attempt, lost connection) doubles the delay from `initial` up to `max`; a *clean
//! close* waits a fixed delay; a *rejected* credential waits `max`; a session up for
//! `healthy_after` resets the doubling; every delay gets random jitter so peers restarted
//! together spread out. The Xiaozhi endpoint and every MCP client supervisor use it; it never
//! waits itself (callers sleep on a [`Clock`](super::clock::Clock)).

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// How an endpoint session (or an attempt to open one) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    /// The endpoint closed with 1000 or 1001.
    Clean,
    /// Anything else: dial failure, reset, abnormal close code, keepalive timeout.
    Abnormal,
    /// The endpoint refused the token: close 1008, or HTTP 401/403 on the upgrade.
    Rejected,
}

/// The numbers of the reconnect policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// First delay after an abnormal end.
    pub(crate) initial: Duration,
    /// Largest delay; also the delay after a rejected token.
    pub max: Duration,
    /// Most random time added to each delay.
    pub jitter: Duration,
    /// Delay after a clean close.
    pub(crate) after_clean_close: Duration,
    /// A session up at least this long resets the doubling.
    pub(crate) healthy_after: Duration,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(600),
            jitter: Duration::from_millis(300),
            after_clean_close: Duration::from_secs(5),
            healthy_after: Duration::from_secs(60),
        }
    }
}

/// The reconnect state of one bridge.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    policy: ReconnectPolicy,
    next_abnormal: Duration,
}

impl Backoff {
    /// A fresh state: the next abnormal end waits [`ReconnectPolicy::initial`].
    pub fn new(policy: ReconnectPolicy) -> Self {
        Self {
            next_abnormal: policy.initial,
            policy,
        }
    }

    /// The delay before the next dial after a session ended as `end` having stayed up for
    /// `uptime` (`None`: the dial itself failed), with random jitter.
    pub(crate) fn delay(&mut self, end: SessionEnd, uptime: Option<Duration>) -> Duration {
        self.delay_with(end, uptime, random_fraction())
    }

    /// Like [`Backoff::delay`] with the jitter given as a fraction of the maximum, in
    /// `0.0..=1.0` (values outside are clamped).
    pub(crate) fn delay_with(
        &mut self,
        end: SessionEnd,
        uptime: Option<Duration>,
        jitter_fraction: f64,
    ) -> Duration {
        if uptime.is_some_and(|up| up >= self.policy.healthy_after) {
            self.next_abnormal = self.policy.initial;
        }
        let base = match end {
            SessionEnd::Clean => self.policy.after_clean_close,
            SessionEnd::Rejected => self.policy.max,
            SessionEnd::Abnormal => {
                let d = self.next_abnormal;
                self.next_abnormal = (d * 2).min(self.policy.max);
                d
            }
        };
        base + self.policy.jitter.mul_f64(jitter_fraction.clamp(0.0, 1.0))
    }
}

/// A random number in `0.0..1.0`, from the standard library's per-process random hash keys
/// (good enough to spread reconnects; not for secrets).
fn random_fraction() -> f64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x9e37_79b9_7f4a_7c15);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn abnormal_ends_double_from_one_second_to_ten_minutes() {
        let mut b = Backoff::new(ReconnectPolicy::default());
        let got: Vec<u64> = (0..13)
            .map(|_| b.delay_with(SessionEnd::Abnormal, None, 0.0).as_secs())
            .collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600, 600]);
    }

    #[test]
    fn jitter_adds_at_most_three_tenths() {
        let mut b = Backoff::new(ReconnectPolicy::default());
        assert_eq!(b.delay_with(SessionEnd::Abnormal, None, 1.0), secs(1.3));
        assert_eq!(b.delay_with(SessionEnd::Clean, None, 0.5), secs(5.15));
        for _ in 0..50 {
            let d = Backoff::new(ReconnectPolicy::default()).delay(SessionEnd::Abnormal, None);
            assert!(d >= secs(1.0) && d <= secs(1.3), "{d:?}");
        }
    }

    #[test]
    fn clean_close_waits_five_seconds_and_keeps_the_doubling() {
        let mut b = Backoff::new(ReconnectPolicy::default());
        b.delay_with(SessionEnd::Abnormal, None, 0.0);
        b.delay_with(SessionEnd::Abnormal, None, 0.0);
        assert_eq!(
            b.delay_with(SessionEnd::Clean, Some(secs(3.0)), 0.0),
            secs(5.0)
        );
        assert_eq!(b.delay_with(SessionEnd::Abnormal, None, 0.0), secs(4.0));
    }

    #[test]
    fn a_session_up_a_minute_resets_the_doubling() {
        let mut b = Backoff::new(ReconnectPolicy::default());
        for _ in 0..5 {
            b.delay_with(SessionEnd::Abnormal, None, 0.0);
        }
        assert_eq!(
            b.delay_with(SessionEnd::Abnormal, Some(secs(59.9)), 0.0),
            secs(32.0)
        );
        assert_eq!(
            b.delay_with(SessionEnd::Abnormal, Some(secs(60.0)), 0.0),
            secs(1.0)
        );
        assert_eq!(b.delay_with(SessionEnd::Abnormal, None, 0.0), secs(2.0));
    }

    #[test]
    fn a_rejected_token_waits_the_slowest_delay() {
        let mut b = Backoff::new(ReconnectPolicy::default());
        assert_eq!(b.delay_with(SessionEnd::Rejected, None, 0.0), secs(600.0));
        assert_eq!(b.delay_with(SessionEnd::Rejected, None, 0.0), secs(600.0));
        assert_eq!(b.delay_with(SessionEnd::Abnormal, None, 0.0), secs(1.0));
    }
}
