//! Conversations ended here (open ones closed and deleted: the bot's `end_session`, the idle
//! sweep, the console; a stored one the sweep deletes is not), remembered a while by handle, so a `chat` on one is told why it ended instead of
//! guesses at idle timeouts and restarts (tour M2). Bounded: the latest [`ENDED_KEPT`], each
//! reason cut to [`REASON_BYTES`]; forgotten with the process.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::store::HandleId;

/// Most ended conversations remembered.
pub const ENDED_KEPT: usize = 1024;
/// Most bytes of one reason kept.
pub const REASON_BYTES: usize = 160;

/// The conversations ended here, oldest first.
#[derive(Default)]
pub(super) struct EndedHandles {
    ended: Mutex<VecDeque<Ended>>,
}

/// One conversation ended here.
struct Ended {
    id: HandleId,
    /// Its session number here.
    number: u64,
    reason: String,
    at: Instant,
}

impl EndedHandles {
    /// `id`'s conversation (session `number`) ended here for `reason`.
    pub(super) fn remember(&self, id: &HandleId, number: u64, reason: &str) {
        let mut reason = reason.to_string();
        super::errors::shorten(&mut reason, REASON_BYTES);
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        if ended.len() == ENDED_KEPT {
            ended.pop_front();
        }
        ended.push_back(Ended {
            id: *id,
            number,
            reason,
            at: Instant::now(),
        });
    }

    /// Why `id`'s conversation ended here and how long ago, when it is remembered.
    pub(super) fn why(&self, id: &HandleId) -> Option<(String, Duration)> {
        let ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        ended
            .iter()
            .rev()
            .find(|e| e.id == *id)
            .map(|e| (e.reason.clone(), e.at.elapsed()))
    }

    /// The session number `id`'s conversation had here, when it is remembered (a refused
    /// `chat` on it names its session in the Log).
    pub(super) fn number(&self, id: &HandleId) -> Option<u64> {
        let ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        ended.iter().rev().find(|e| e.id == *id).map(|e| e.number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::HandleKey;

    #[test]
    fn the_latest_are_remembered_with_their_reason_cut() {
        let key = HandleKey::generate();
        let id = |n: u128| key.id_of(&uuid::Uuid::from_u128(n));
        let ended = EndedHandles::default();
        ended.remember(&id(1), 7, "ended by the bot: end_session");
        assert_eq!(ended.number(&id(1)), Some(7));
        assert_eq!(
            ended.why(&id(1)).map(|(r, _)| r).as_deref(),
            Some("ended by the bot: end_session")
        );
        assert!(ended.why(&id(2)).is_none());
        ended.remember(&id(2), 8, &"é".repeat(REASON_BYTES));
        let (cut, _) = ended.why(&id(2)).unwrap();
        assert!(cut.len() <= REASON_BYTES + '…'.len_utf8() && cut.ends_with('…'));
        for n in 3..(ENDED_KEPT as u128 + 3) {
            ended.remember(&id(n), n as u64, "idle too long");
        }
        assert!(ended.why(&id(1)).is_none() && ended.why(&id(2)).is_none());
        assert!(ended.why(&id(ENDED_KEPT as u128 + 2)).is_some());
    }
}
