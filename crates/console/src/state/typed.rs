//! Lines this console sent, until their turns start: a turn whose line was typed here is
//! marked ([`TurnView::typed_here`](super::records::TurnView::typed_here)), so the transcript
//! of a session another client opened (Claude Code's) tells the person's lines from the
//! client's. Only the console knows which lines it sent: the server's events do not say.

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Most lines kept waiting for their turns: a line whose call failed before a turn took it
/// never starts one, and goes when newer lines push it out.
pub const TYPED_KEPT: usize = 16;

/// The lines sent and not yet seen start a turn: (session, the line's hash), oldest first. A
/// hash, so a pasted page costs eight bytes here.
#[derive(Debug, Default, Clone)]
pub struct Typed {
    waiting: VecDeque<(u64, u64)>,
}

impl Typed {
    /// This console sent `line` into `session`.
    pub fn sent(&mut self, session: u64, line: &str) {
        if self.waiting.len() == TYPED_KEPT {
            self.waiting.pop_front();
        }
        self.waiting.push_back((session, hash(line)));
    }

    /// Whether a turn of `session` that started with `line` is one this console sent (it is
    /// then no longer waited for).
    pub fn started(&mut self, session: u64, line: &str) -> bool {
        if self.waiting.is_empty() {
            return false;
        }
        let key = (session, hash(line));
        match self.waiting.iter().position(|w| *w == key) {
            Some(i) => {
                self.waiting.remove(i);
                true
            }
            None => false,
        }
    }

    /// Lines waiting (for the tests of its bound).
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

fn hash(line: &str) -> u64 {
    let mut h = DefaultHasher::new();
    line.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sent_line_marks_one_turn_of_its_session_and_the_waiting_are_bounded() {
        let mut t = Typed::default();
        t.sent(2, "hello");
        assert!(!t.started(1, "hello"), "another session's turn");
        assert!(!t.started(2, "hi"), "another line");
        assert!(t.started(2, "hello"));
        assert!(!t.started(2, "hello"), "marked once");
        for i in 0..TYPED_KEPT + 5 {
            t.sent(3, &format!("line {i}"));
        }
        assert_eq!(t.waiting(), TYPED_KEPT);
        assert!(!t.started(3, "line 0"), "the oldest went");
        assert!(t.started(3, &format!("line {}", TYPED_KEPT + 4)));
    }
}
