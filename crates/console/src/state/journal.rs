//! The console's journal: every failure and log line, with its time and session, for the
//! Log pane, and the error counts the header and the Sessions pane show.
//!
//! Folded by [`ConsoleState`](crate::state::ConsoleState) from refused MCP calls, tool errors,
//! model faults, bridge and tool-source troubles and log lines. Bounded by [`JOURNAL_KEPT`];
//! the counts keep counting after the oldest entries are evicted. It never reads the clock.

use std::collections::{BTreeMap, VecDeque};

/// Entries kept for the Log pane; older ones are evicted (the counts keep them).
pub const JOURNAL_KEPT: usize = 1_000;
/// Most bytes of one entry's message (and of one log line) kept; the rest is cut with a
/// marker saying how long it was.
pub const ENTRY_TEXT_KEPT: usize = 4 * 1024;

/// `text` within [`ENTRY_TEXT_KEPT`] bytes, cut on a character boundary with its length.
pub fn cut_entry_text(text: &mut String) {
    if text.len() > ENTRY_TEXT_KEPT {
        let total = text.len();
        let mut end = ENTRY_TEXT_KEPT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(&format!("… ({total} bytes in all)"));
    }
}

/// How bad an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Something worth knowing.
    Info,
    /// Something went wrong but carried on (a bridge reconnecting, a source retried).
    Warn,
    /// A call or a turn failed.
    Error,
}

impl Level {
    /// The level of a log line's `info` / `warn` / `error`.
    pub fn parse(text: &str) -> Level {
        match text {
            "error" => Level::Error,
            "warn" | "warning" => Level::Warn,
            _ => Level::Info,
        }
    }

    /// `info`, `warn` or `error`.
    pub fn label(self) -> &'static str {
        match self {
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// One journal entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// When (µs since the epoch; 0 when unknown).
    pub at_us: u64,
    /// How bad.
    pub level: Level,
    /// The session it concerns, when any.
    pub session: Option<u64>,
    /// Where it comes from: `start refused`, `tool clock`, `model`, `bridge xiaozhi a`, `log`.
    pub source: String,
    /// What happened.
    pub message: String,
    /// How many times in a row it happened (the time is the latest).
    pub repeats: u64,
}

impl Entry {
    /// An entry that happened once.
    pub fn new(
        at_us: u64,
        level: Level,
        session: Option<u64>,
        source: String,
        message: String,
    ) -> Entry {
        Entry {
            at_us,
            level,
            session,
            source,
            message,
            repeats: 1,
        }
    }
}

/// Entries looked back through for one a new entry repeats ([`Journal::push_or_repeat`]).
pub const REPEAT_LOOKBACK: usize = 32;

/// The journal: recent entries and counts.
#[derive(Debug, Clone, Default)]
pub struct Journal {
    entries: VecDeque<Entry>,
    /// Errors seen in all.
    pub errors: u64,
    /// Warnings seen in all.
    pub warnings: u64,
    per_session: BTreeMap<u64, u64>,
}

impl Journal {
    fn count(&mut self, level: Level, session: Option<u64>) {
        match level {
            Level::Error => {
                self.errors += 1;
                if let Some(n) = session {
                    *self.per_session.entry(n).or_default() += 1;
                }
            }
            Level::Warn => self.warnings += 1,
            Level::Info => {}
        }
    }

    /// Notes an entry whose source is `source` followed by `suffix`: when it repeats the
    /// latest entry it only counts (nothing is allocated, so a flood of one refusal costs
    /// little); else it is added.
    pub fn note(
        &mut self,
        at_us: u64,
        level: Level,
        session: Option<u64>,
        (source, suffix): (&str, &str),
        message: &str,
    ) {
        if let Some(last) = self.entries.back_mut()
            && last.level == level
            && last.session == session
            && last.message == message
            && last.source.strip_suffix(suffix) == Some(source)
        {
            last.repeats += 1;
            // Never back in time: the latest entry stays the latest (a late line repeating it
            // carries an older time).
            last.at_us = last.at_us.max(at_us);
            self.count(level, session);
            return;
        }
        self.push(Entry::new(
            at_us,
            level,
            session,
            format!("{source}{suffix}"),
            message.to_string(),
        ));
    }

    /// Counts `entry` as a repeat of a recent entry saying the same (same level, session,
    /// source and message among the last [`REPEAT_LOOKBACK`]), moved to the end with its new
    /// time; else adds it. For news that recurs with other entries between (a tool server
    /// retried every few seconds while turns run): one problem, so the header's counts take
    /// it once, and the entry's `×N` says how often it came.
    pub fn push_or_repeat(&mut self, mut entry: Entry) {
        // Compared as kept: a long message is kept cut.
        cut_entry_text(&mut entry.message);
        cut_entry_text(&mut entry.source);
        let start = self.entries.len().saturating_sub(REPEAT_LOOKBACK);
        let found = (start..self.entries.len()).rev().find(|&i| {
            let e = &self.entries[i];
            e.level == entry.level
                && e.session == entry.session
                && e.source == entry.source
                && e.message == entry.message
        });
        match found.and_then(|i| self.entries.remove(i)) {
            Some(mut earlier) => {
                earlier.repeats += 1;
                earlier.at_us = earlier.at_us.max(entry.at_us);
                self.insert_in_time_order(earlier);
            }
            None => self.push_cut(entry),
        }
    }

    /// Adds an entry (evicting the oldest past [`JOURNAL_KEPT`], its text within
    /// [`ENTRY_TEXT_KEPT`]).
    pub fn push(&mut self, mut entry: Entry) {
        cut_entry_text(&mut entry.message);
        cut_entry_text(&mut entry.source);
        self.push_cut(entry);
    }

    /// Adds an entry whose texts are cut already, in time order: an entry that comes late (a
    /// watched server's line, stamped by its clock before this console's own that arrived
    /// first) goes before the later ones, so the Log's times never run backwards. One with no
    /// time (0) goes last.
    fn push_cut(&mut self, entry: Entry) {
        self.count(entry.level, entry.session);
        if self.entries.len() == JOURNAL_KEPT {
            self.entries.pop_front();
        }
        self.insert_in_time_order(entry);
    }

    /// Puts `entry` after every entry no later than it (at the end when its time is 0).
    fn insert_in_time_order(&mut self, entry: Entry) {
        let mut at = self.entries.len();
        if entry.at_us != 0 {
            while at > 0 && self.entries[at - 1].at_us > entry.at_us {
                at -= 1;
            }
        }
        self.entries.insert(at, entry);
    }

    /// Takes the errors of no session from `source` saying `message`, between `from_us` and
    /// `to_us`, for what they were: a refusal the console expected and handled (a probe of a
    /// handle kept from an earlier run), noted as news, not counted as an error. Whether any
    /// was found.
    pub fn expected(&mut self, source: &str, message: &str, from_us: u64, to_us: u64) -> bool {
        let mut found = false;
        for e in self.entries.iter_mut().filter(|e| {
            e.level == Level::Error
                && e.session.is_none()
                && e.source == source
                && e.message.trim() == message.trim()
                && (from_us..=to_us).contains(&e.at_us)
        }) {
            e.level = Level::Info;
            self.errors = self.errors.saturating_sub(e.repeats);
            found = true;
        }
        found
    }

    /// The entries kept, oldest first.
    pub fn entries(&self) -> &VecDeque<Entry> {
        &self.entries
    }

    /// Errors of one session.
    pub fn errors_of(&self, session: u64) -> u64 {
        self.per_session.get(&session).copied().unwrap_or(0)
    }

    /// Forgets a session's count (its row was forgotten).
    pub fn forget(&mut self, session: u64) {
        self.per_session.remove(&session);
    }

    /// Sessions with an error count.
    pub fn sessions(&self) -> usize {
        self.per_session.len()
    }

    /// Keeps the error counts of at most `n` sessions (the lowest-numbered go first).
    pub fn keep_at_most(&mut self, n: usize) {
        while self.per_session.len() > n {
            self.per_session.pop_first();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(level: Level, session: Option<u64>) -> Entry {
        Entry::new(1, level, session, "t".into(), "m".into())
    }

    #[test]
    fn a_repeated_entry_is_counted_not_kept_again() {
        let mut j = Journal::default();
        for at in 0..5 {
            j.note(
                at,
                Level::Error,
                None,
                ("chat", " refused"),
                "no such handle",
            );
        }
        j.note(9, Level::Error, None, ("start", " refused"), "full");
        assert_eq!(j.entries().len(), 2);
        assert_eq!(j.entries()[0].repeats, 5);
        assert_eq!(j.entries()[0].at_us, 4);
        assert_eq!(j.entries()[0].source, "chat refused");
        assert_eq!(j.errors, 6);
    }

    /// A line that arrives late (a watched server's, stamped before this console's own that
    /// came first) goes in its place: the Log's times never run backwards (tour F3).
    #[test]
    fn entries_are_kept_in_time_order_whatever_order_they_come_in() {
        let mut j = Journal::default();
        j.push(Entry::new(10, Level::Info, None, "log".into(), "a".into()));
        j.push(Entry::new(
            63,
            Level::Info,
            None,
            "log".into(),
            "mine".into(),
        ));
        j.push(Entry::new(
            61,
            Level::Error,
            None,
            "chat refused".into(),
            "x".into(),
        ));
        j.push(Entry::new(
            0,
            Level::Info,
            None,
            "log".into(),
            "untimed".into(),
        ));
        let order: Vec<&str> = j.entries().iter().map(|e| e.message.as_str()).collect();
        assert_eq!(order, ["a", "x", "mine", "untimed"]);
    }

    /// A repeat that comes late (an older time than the entries after the one it repeats)
    /// keeps the Log in time order: it took the repeat's time as it was, so times ran
    /// backwards (review of the time-ordered Log).
    #[test]
    fn a_late_repeat_keeps_the_time_order() {
        let mut j = Journal::default();
        let entry =
            |at, message: &str| Entry::new(at, Level::Warn, None, "tools".into(), message.into());
        j.push_or_repeat(entry(10, "down"));
        j.push_or_repeat(entry(20, "other"));
        j.push_or_repeat(entry(30, "third"));
        j.push_or_repeat(entry(15, "down"));
        let times: Vec<u64> = j.entries().iter().map(|e| e.at_us).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        assert_eq!(
            j.entries()
                .iter()
                .find(|e| e.message == "down")
                .unwrap()
                .repeats,
            2
        );
        j.note(40, Level::Info, None, ("log", ""), "same");
        j.note(5, Level::Info, None, ("log", ""), "same");
        assert_eq!(j.entries().back().unwrap().at_us, 40);
        assert_eq!(j.entries().back().unwrap().repeats, 2);
    }

    /// A refusal the console expected (its probe of a kept handle) is taken for news: not
    /// an error, whether the server's line came before the console knew or after.
    #[test]
    fn an_expected_refusal_is_news_not_an_error() {
        let mut j = Journal::default();
        j.note(61, Level::Error, None, ("chat", " refused"), "handle: gone");
        j.note(
            62,
            Level::Error,
            Some(3),
            ("chat", " refused"),
            "handle: gone",
        );
        assert_eq!(j.errors, 2);
        assert!(j.expected("chat refused", "handle: gone", 50, 70));
        assert_eq!(j.errors, 1, "only the one of no session");
        assert_eq!(j.entries()[0].level, Level::Info);
        assert!(
            !j.expected("chat refused", "handle: gone", 80, 90),
            "out of the window"
        );
    }

    #[test]
    fn counts_outlive_evicted_entries() {
        let mut j = Journal::default();
        for _ in 0..JOURNAL_KEPT + 5 {
            j.push(entry(Level::Error, Some(2)));
        }
        j.push(entry(Level::Warn, None));
        assert_eq!(j.entries().len(), JOURNAL_KEPT);
        assert_eq!(j.errors, JOURNAL_KEPT as u64 + 5);
        assert_eq!(j.warnings, 1);
        assert_eq!(j.errors_of(2), JOURNAL_KEPT as u64 + 5);
        assert_eq!(j.errors_of(3), 0);
    }

    #[test]
    fn news_that_recurs_between_other_entries_counts_on_one() {
        let mut j = Journal::default();
        let retry = |at| Entry::new(at, Level::Warn, None, "tools fx".into(), "failed".into());
        j.push_or_repeat(retry(1));
        j.push(entry(Level::Info, Some(1)));
        j.push_or_repeat(retry(2));
        j.push_or_repeat(retry(3));
        assert_eq!(j.entries().len(), 2);
        let last = j.entries().back().unwrap();
        assert_eq!((last.repeats, last.at_us), (3, 3));
        assert_eq!(j.warnings, 1, "one problem, counted once");
        // Out of sight behind the lookback: a new entry (those between come after it in
        // time: the Log keeps time order).
        for _ in 0..REPEAT_LOOKBACK {
            j.push(Entry::new(3, Level::Info, None, "t".into(), "m".into()));
        }
        j.push_or_repeat(retry(4));
        assert_eq!(j.entries().back().unwrap().repeats, 1);
        // A message too long to keep whole is compared as it is kept (cut).
        let long = |at| Entry::new(at, Level::Warn, None, "tools fx".into(), "x".repeat(10_000));
        j.push_or_repeat(long(5));
        j.push_or_repeat(long(6));
        assert_eq!(j.entries().back().unwrap().repeats, 2);
    }
}
