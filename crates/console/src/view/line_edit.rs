//! Readline keys wherever the console edits text: a one-line editor ([`LineEdit`]) for the
//! frame filter and the searches, and [`textarea_key`] giving the input line the same keys
//! (Ctrl+A/E/B/F, Alt+B/F, Ctrl+U/K/W/H/D, Alt+Backspace, Alt+D).
//!
//! Pure: it edits a string and a cursor and never draws or decides what Enter or Esc mean.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui_textarea::{CursorMove, TextArea};

/// The readline keys, for the help and the footers.
pub const READLINE_KEYS: &str =
    "Ctrl+A/E start/end · Ctrl+U/K delete to start/end · Ctrl+W delete word";

/// What a key did to a [`LineEdit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    /// The text changed.
    Changed,
    /// Only the cursor moved (or nothing happened).
    Same,
    /// Enter: accept.
    Accept,
    /// Esc: cancel.
    Cancel,
}

/// One line of text and a cursor (a char index).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineEdit {
    chars: Vec<char>,
    cursor: usize,
}

impl LineEdit {
    /// A line holding `text`, the cursor at its end.
    pub fn new(text: &str) -> Self {
        let chars: Vec<char> = text.chars().collect();
        let cursor = chars.len();
        Self { chars, cursor }
    }

    /// The text.
    pub fn text(&self) -> String {
        self.chars.iter().collect()
    }

    /// The text before and after the cursor.
    pub fn split(&self) -> (String, String) {
        (
            self.chars[..self.cursor].iter().collect(),
            self.chars[self.cursor..].iter().collect(),
        )
    }

    fn word_back(&self) -> usize {
        let mut at = self.cursor;
        while at > 0 && !self.chars[at - 1].is_alphanumeric() {
            at -= 1;
        }
        while at > 0 && self.chars[at - 1].is_alphanumeric() {
            at -= 1;
        }
        at
    }

    fn word_forward(&self) -> usize {
        let mut at = self.cursor;
        let n = self.chars.len();
        while at < n && !self.chars[at].is_alphanumeric() {
            at += 1;
        }
        while at < n && self.chars[at].is_alphanumeric() {
            at += 1;
        }
        at
    }

    /// Applies one key.
    pub fn key(&mut self, key: &KeyEvent) -> Edit {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let before = self.chars.len();
        match key.code {
            KeyCode::Enter => return Edit::Accept,
            KeyCode::Esc => return Edit::Cancel,
            KeyCode::Char('a') if ctrl => self.cursor = 0,
            KeyCode::Home => self.cursor = 0,
            KeyCode::Char('e') if ctrl => self.cursor = self.chars.len(),
            KeyCode::End => self.cursor = self.chars.len(),
            KeyCode::Char('b') if ctrl => self.cursor = self.cursor.saturating_sub(1),
            KeyCode::Left if ctrl || alt => self.cursor = self.word_back(),
            KeyCode::Left => self.cursor = self.cursor.saturating_sub(1),
            KeyCode::Char('f') if ctrl => self.cursor = (self.cursor + 1).min(self.chars.len()),
            KeyCode::Right if ctrl || alt => self.cursor = self.word_forward(),
            KeyCode::Right => self.cursor = (self.cursor + 1).min(self.chars.len()),
            KeyCode::Char('b') if alt => self.cursor = self.word_back(),
            KeyCode::Char('f') if alt => self.cursor = self.word_forward(),
            KeyCode::Char('u') if ctrl => {
                self.chars.drain(..self.cursor);
                self.cursor = 0;
            }
            KeyCode::Char('k') if ctrl => self.chars.truncate(self.cursor),
            KeyCode::Char('w') if ctrl => self.delete_word_back(),
            KeyCode::Backspace if alt || ctrl => self.delete_word_back(),
            KeyCode::Char('d') if alt => {
                let to = self.word_forward();
                self.chars.drain(self.cursor..to);
            }
            KeyCode::Char('h') if ctrl => self.backspace(),
            KeyCode::Backspace => self.backspace(),
            KeyCode::Char('d') if ctrl => self.delete(),
            KeyCode::Delete => self.delete(),
            KeyCode::Char(c) if !ctrl && !alt => {
                self.chars.insert(self.cursor, c);
                self.cursor += 1;
                return Edit::Changed;
            }
            _ => {}
        }
        if self.chars.len() == before {
            Edit::Same
        } else {
            Edit::Changed
        }
    }

    /// Inserts pasted `text` at the cursor, as one line: line breaks and tabs become spaces,
    /// other control characters are dropped.
    pub fn paste(&mut self, text: &str) -> Edit {
        let pasted: Vec<char> = one_line(text).collect();
        if pasted.is_empty() {
            return Edit::Same;
        }
        let n = pasted.len();
        self.chars.splice(self.cursor..self.cursor, pasted);
        self.cursor += n;
        Edit::Changed
    }

    fn delete_word_back(&mut self) {
        let from = self.word_back();
        self.chars.drain(from..self.cursor);
        self.cursor = from;
    }

    fn backspace(&mut self) {
        if self.cursor > 0 {
            self.cursor -= 1;
            self.chars.remove(self.cursor);
        }
    }

    fn delete(&mut self) {
        if self.cursor < self.chars.len() {
            self.chars.remove(self.cursor);
        }
    }
}

/// `text` as one line's characters: line breaks and tabs as spaces, other control
/// characters left out (a paste into a one-line field).
pub fn one_line(text: &str) -> impl Iterator<Item = char> + '_ {
    text.chars().filter_map(|c| match c {
        '\n' | '\r' | '\t' => Some(' '),
        c if c.is_control() => None,
        c => Some(c),
    })
}

/// Applies a readline key to the input line; `false` when it is not one (the text area's
/// own handling applies then).
pub fn textarea_key(area: &mut TextArea<'_>, key: &KeyEvent) -> bool {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    match key.code {
        KeyCode::Char('a') if ctrl => area.move_cursor(CursorMove::Head),
        KeyCode::Char('e') if ctrl => area.move_cursor(CursorMove::End),
        KeyCode::Char('b') if ctrl => area.move_cursor(CursorMove::Back),
        KeyCode::Char('f') if ctrl => area.move_cursor(CursorMove::Forward),
        KeyCode::Char('b') if alt => area.move_cursor(CursorMove::WordBack),
        KeyCode::Char('f') if alt => area.move_cursor(CursorMove::WordForward),
        KeyCode::Char('u') if ctrl => {
            area.delete_line_by_head();
        }
        KeyCode::Char('k') if ctrl => {
            area.delete_line_by_end();
        }
        KeyCode::Char('w') if ctrl => {
            area.delete_word();
        }
        KeyCode::Backspace if alt || ctrl => {
            area.delete_word();
        }
        KeyCode::Char('d') if alt => {
            area.delete_next_word();
        }
        KeyCode::Char('h') if ctrl => {
            area.delete_char();
        }
        KeyCode::Char('d') if ctrl => {
            area.delete_next_char();
        }
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(code: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, m)
    }

    #[test]
    fn readline_keys_edit_the_line() {
        let c = KeyModifiers::CONTROL;
        let mut e = LineEdit::new("kind:data name:Text");
        assert_eq!(e.key(&k(KeyCode::Char('w'), c)), Edit::Changed);
        assert_eq!(e.text(), "kind:data name:");
        e.key(&k(KeyCode::Char('a'), c));
        e.key(&k(KeyCode::Char('!'), KeyModifiers::NONE));
        assert_eq!(e.text(), "!kind:data name:");
        e.key(&k(KeyCode::Char('e'), c));
        e.key(&k(KeyCode::Char('b'), KeyModifiers::ALT));
        e.key(&k(KeyCode::Char('u'), c));
        assert_eq!(e.text(), "name:");
        e.key(&k(KeyCode::Char('k'), c));
        assert_eq!(e.text(), "");
        assert_eq!(e.key(&k(KeyCode::Esc, KeyModifiers::NONE)), Edit::Cancel);
    }

    #[test]
    fn a_paste_lands_at_the_cursor_as_one_line() {
        let mut e = LineEdit::new("name:");
        e.key(&k(KeyCode::Left, KeyModifiers::NONE));
        assert_eq!(e.paste("a\nb\tc\u{7}"), Edit::Changed);
        assert_eq!(e.text(), "namea b c:");
        assert_eq!(e.split().1, ":", "the cursor is after the pasted text");
        assert_eq!(e.paste("\u{1b}"), Edit::Same);
    }

    #[test]
    fn the_input_line_gets_the_same_keys() {
        let c = KeyModifiers::CONTROL;
        let mut area = TextArea::default();
        area.insert_str("hello big world");
        assert!(textarea_key(&mut area, &k(KeyCode::Char('w'), c)));
        assert_eq!(area.lines()[0], "hello big ");
        assert!(textarea_key(&mut area, &k(KeyCode::Char('u'), c)));
        assert_eq!(area.lines()[0], "");
    }
}
