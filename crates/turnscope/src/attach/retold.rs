//! What a watched server tells again when a viewer reconnects, recognised so the console
//! shows it once.
//!
//! On every connect `/events` sends each open session and, for the turns it keeps of them that
//! its recent history no longer holds, a short account written anew (`server::viewers`'s
//! preamble: the turn's start, its whole reply as one piece, its tool calls, its end). Written
//! anew, those lines differ from the ones the viewer read live (their times are recomputed),
//! so the stream's byte-for-byte check does not catch them. A viewer that reconnects after
//! being dropped, or after the server rested, has shown most of them already: without this it
//! showed each session opened twice, each finished turn twice (its reply, its tool calls and
//! its timings in Stats counted again), and a turn in flight at the drop started twice.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;

use crate::observe::Event;

/// Sessions and turns remembered (each kind), oldest forgotten first.
const KEYS_REMEMBERED: usize = 16_384;

/// A set that keeps its last `most` insertions.
#[derive(Debug)]
pub(super) struct Recent<K> {
    set: HashSet<K>,
    order: VecDeque<K>,
    most: usize,
}

impl<K: Copy + Eq + Hash> Recent<K> {
    pub(super) fn new(most: usize) -> Self {
        Self {
            set: HashSet::new(),
            order: VecDeque::new(),
            most,
        }
    }

    /// True when `key` was not there (it is now).
    pub(super) fn insert(&mut self, key: K) -> bool {
        if !self.set.insert(key) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > self.most
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        true
    }

    pub(super) fn contains(&self, key: &K) -> bool {
        self.set.contains(key)
    }
}

/// A turn: (session, turn).
type TurnKey = (u64, u64);

/// What this viewer has shown of sessions and turns, and what the current connection retells.
#[derive(Debug)]
pub(super) struct Retold {
    sessions_opened: Recent<u64>,
    turns_started: Recent<TurnKey>,
    turns_ended: Recent<TurnKey>,
    /// Tool calls shown of each turn not ended yet.
    calls_shown: HashMap<TurnKey, u32>,
    /// This connection: finished turns whose account is being retold (all of it is skipped,
    /// up to its end).
    replaying: HashSet<TurnKey>,
    /// This connection: of a turn in flight at the reconnect, how many of the retold tool
    /// calls (the preamble gives them all, with no start time) were shown live already.
    calls_to_skip: HashMap<TurnKey, u32>,
}

impl Default for Retold {
    fn default() -> Self {
        Self {
            sessions_opened: Recent::new(KEYS_REMEMBERED),
            turns_started: Recent::new(KEYS_REMEMBERED),
            turns_ended: Recent::new(KEYS_REMEMBERED),
            calls_shown: HashMap::new(),
            replaying: HashSet::new(),
            calls_to_skip: HashMap::new(),
        }
    }
}

impl Retold {
    /// A new connection begins: its preamble may retell what was shown.
    pub(super) fn connected(&mut self) {
        self.replaying.clear();
        self.calls_to_skip = self.calls_shown.clone();
    }

    /// Whether `event` retells what this viewer showed already (so it is skipped); else it
    /// is noted as shown.
    pub(super) fn told_before(&mut self, event: &Event) -> bool {
        if let Event::Session(s) = event {
            return s.closed.is_none() && !self.sessions_opened.insert(s.session);
        }
        let Some(key) = event.turn_of() else {
            return false;
        };
        if self.replaying.contains(&key) {
            if matches!(event, Event::TurnEnded(_)) {
                self.replaying.remove(&key);
            }
            return true;
        }
        match event {
            Event::TurnStarted { .. } if self.turns_ended.contains(&key) => {
                self.replaying.insert(key);
                true
            }
            Event::TurnStarted { .. } => !self.turns_started.insert(key),
            // The preamble's calls have no start time; a live call always has one.
            Event::ToolCall(c) if c.started_us == 0 => match self.calls_to_skip.get_mut(&key) {
                Some(left) if *left > 0 => {
                    *left -= 1;
                    true
                }
                _ => {
                    self.call_shown(key);
                    false
                }
            },
            Event::ToolCall(_) => {
                self.call_shown(key);
                false
            }
            Event::TurnEnded(_) => {
                self.turns_ended.insert(key);
                self.calls_shown.remove(&key);
                self.calls_to_skip.remove(&key);
                false
            }
            _ => false,
        }
    }

    fn call_shown(&mut self, key: TurnKey) {
        // Bounded: turns that never end (a server gone mid-turn) must not pile up.
        if self.calls_shown.len() >= KEYS_REMEMBERED && !self.calls_shown.contains_key(&key) {
            self.calls_shown.clear();
        }
        *self.calls_shown.entry(key).or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::event::{SessionEvent, SessionOpener, ToolCallEvent, TurnEndEvent};

    fn opened(session: u64) -> Event {
        Event::Session(SessionEvent {
            session,
            handle_prefix: "abcdefgh".into(),
            opener: SessionOpener::Api,
            closed: None,
            at_us: 1,
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: None,
        })
    }

    fn started(turn: u64) -> Event {
        Event::TurnStarted {
            session: 1,
            turn,
            line: "hi".into(),
            at_us: 1,
        }
    }

    /// A tool call of turn `turn`: live ones have a start time, retold ones none.
    fn call(turn: u64, live: bool) -> Event {
        Event::ToolCall(ToolCallEvent {
            session: 1,
            turn,
            name: "clock".into(),
            started_us: if live { 5 } else { 0 },
            ..ToolCallEvent::default()
        })
    }

    fn ended(turn: u64) -> Event {
        Event::TurnEnded(TurnEndEvent {
            session: 1,
            turn,
            reason: "completed".into(),
            ..TurnEndEvent::default()
        })
    }

    /// Feeds `events` and returns which were let through.
    fn pass(r: &mut Retold, events: &[Event]) -> Vec<bool> {
        events.iter().map(|e| !r.told_before(e)).collect()
    }

    #[test]
    fn the_first_connect_lets_everything_through() {
        let mut r = Retold::default();
        r.connected();
        let all = [opened(1), started(1), call(1, true), ended(1), started(2)];
        assert_eq!(pass(&mut r, &all), [true; 5]);
    }

    #[test]
    fn a_finished_turn_and_an_open_session_retold_on_a_reconnect_are_skipped() {
        let mut r = Retold::default();
        r.connected();
        pass(&mut r, &[opened(1), started(1), call(1, true), ended(1)]);
        r.connected();
        let retold = [opened(1), started(1), call(1, false), ended(1)];
        assert_eq!(pass(&mut r, &retold), [false; 4]);
        // What comes after is live and new.
        assert_eq!(pass(&mut r, &[started(2), ended(2)]), [true, true]);
    }

    #[test]
    fn a_turn_in_flight_at_the_drop_keeps_what_happened_while_away() {
        let mut r = Retold::default();
        r.connected();
        // Seen live before the drop: the start and one of the turn's two calls.
        pass(&mut r, &[opened(1), started(1), call(1, true)]);
        r.connected();
        // Retold: the start (shown), both calls (the first was shown), the end (new).
        let retold = [started(1), call(1, false), call(1, false), ended(1)];
        assert_eq!(pass(&mut r, &retold), [false, false, true, true]);
    }

    #[test]
    fn a_turn_still_running_at_the_reconnect_goes_on_live() {
        let mut r = Retold::default();
        r.connected();
        pass(&mut r, &[started(1), call(1, true)]);
        r.connected();
        // Retold: only its start; then its live calls and end.
        let after = [started(1), call(1, true), ended(1)];
        assert_eq!(pass(&mut r, &after), [false, true, true]);
    }

    #[test]
    fn recent_keeps_its_last_insertions() {
        let mut recent = Recent::new(2);
        assert!(recent.insert(1) && recent.insert(2) && !recent.insert(2));
        assert!(recent.insert(3));
        assert!(!recent.contains(&1) && recent.contains(&2) && recent.contains(&3));
    }
}
