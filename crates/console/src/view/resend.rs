//! Edit-and-resend's view state: the request editor (the recorded request's body as pretty JSON
//! in a text area, and the URL it goes to) and the comparison of a request's variants with the
//! recorded answer. The loop sends; the variants themselves are [`Variants`](crate::state::variants::Variants).

use std::cell::Cell;

use ratatui::style::{Modifier, Style};
use ratatui_textarea::TextArea;
use tokio_util::sync::CancellationToken;

use super::line_edit::LineEdit;
use crate::state::variants::RequestKey;

/// The editor over the turn view.
pub struct RequestEditor {
    /// The request edited.
    pub key: RequestKey,
    /// The body, pretty JSON.
    pub body: TextArea<'static>,
    /// Where it goes: the recorded URL (the session's model), or another typed here.
    pub url: LineEdit,
    /// Whether the URL line has the keys (Tab switches).
    pub on_url: bool,
    /// Why the last send was not made (the body is not JSON).
    pub error: Option<String>,
    /// The body and URL it was opened with (what `Ctrl+R` starts over from).
    opened_with: (String, String),
    /// The variant it was opened from, to go back to when it closes.
    pub from_variant: Option<usize>,
    /// When its send went out, while it is in flight (`None`: no send in flight).
    pub sent_at: Option<std::time::Instant>,
    /// How to cancel the send in flight (`Esc`): the task sending it stops and drops the
    /// request, closing its connection.
    pub stop: Option<CancellationToken>,
}

impl std::fmt::Debug for RequestEditor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestEditor")
            .field("key", &self.key)
            .field("url", &self.url.text())
            .field("sending", &self.sending())
            .finish_non_exhaustive()
    }
}

impl RequestEditor {
    /// An editor over `text` (the body) going to `url`.
    pub fn new(key: RequestKey, text: &str, url: &str) -> Self {
        let mut body = TextArea::new(text.lines().map(str::to_string).collect());
        body.set_cursor_line_style(Style::new());
        body.set_cursor_style(Style::new().add_modifier(Modifier::REVERSED));
        // Numbered, since a body that is not JSON is said by line and column.
        body.set_line_number_style(Style::new().add_modifier(Modifier::DIM));
        Self {
            key,
            body,
            url: LineEdit::new(url),
            on_url: false,
            error: None,
            opened_with: (text.lines().collect::<Vec<_>>().join("\n"), url.to_string()),
            from_variant: None,
            sent_at: None,
            stop: None,
        }
    }

    /// Marks a send going out now: its token, for the task to stop on.
    pub fn sent(&mut self) -> CancellationToken {
        let stop = CancellationToken::new();
        self.sent_at = Some(std::time::Instant::now());
        self.stop = Some(stop.clone());
        stop
    }

    /// Cancels the send in flight: how long it had been out (`None`: none was).
    pub fn cancel(&mut self) -> Option<std::time::Duration> {
        let waited = self.sent_at.take()?.elapsed();
        if let Some(stop) = self.stop.take() {
            stop.cancel();
        }
        Some(waited)
    }

    /// Whether a send is in flight.
    pub fn sending(&self) -> bool {
        self.sent_at.is_some()
    }

    /// Whether the body or the URL differs from what it was opened with.
    pub fn edited(&self) -> bool {
        self.text() != self.opened_with.0 || self.url.text() != self.opened_with.1
    }

    /// Puts back what it was opened with (the recorded request, or the variant's): the body
    /// as one more edit, so `Ctrl+Z` brings the edit back; the URL line keeps no history, so
    /// a URL typed over is returned, for the person to be told it. Says what it put back.
    pub fn start_over(&mut self) -> StartedOver {
        let (text, url) = &self.opened_with;
        let body = self.text() != *text;
        if body {
            // Selected by moves, not `select_all` (its jump stops at 65,536 rows).
            self.body.move_cursor(ratatui_textarea::CursorMove::Top);
            self.body.move_cursor(ratatui_textarea::CursorMove::Head);
            self.body.start_selection();
            self.body.move_cursor(ratatui_textarea::CursorMove::Bottom);
            self.body.move_cursor(ratatui_textarea::CursorMove::End);
            self.body.insert_str(text);
            self.body.move_cursor(ratatui_textarea::CursorMove::Top);
            self.body.move_cursor(ratatui_textarea::CursorMove::Head);
        }
        self.error = None;
        let typed = self.url.text();
        let url_typed = (typed != *url).then(|| {
            self.url = LineEdit::new(url);
            typed
        });
        StartedOver { body, url_typed }
    }

    /// The body's text.
    pub fn text(&self) -> String {
        self.body.lines().join("\n")
    }

    /// Says the body is not JSON (`said`) and puts the cursor where the parser stopped (`e`'s
    /// line and column, from 1; a column past the line's end is its end).
    pub fn not_json(&mut self, e: &serde_json::Error, said: String) {
        let row = e.line().saturating_sub(1);
        let col = e.column().saturating_sub(1);
        self.body.move_cursor(ratatui_textarea::CursorMove::Jump(
            u16::try_from(row).unwrap_or(u16::MAX),
            u16::try_from(col).unwrap_or(u16::MAX),
        ));
        self.error = Some(said);
    }
}

/// What [`RequestEditor::start_over`] put back.
#[derive(Debug)]
pub struct StartedOver {
    /// The body (an edit `Ctrl+Z` takes back).
    pub body: bool,
    /// The URL typed over, when the URL was put back (its line keeps no history).
    pub url_typed: Option<String>,
}

/// The comparison shown: a request's variants beside its recorded answer.
#[derive(Debug)]
pub struct VariantsPick {
    /// The request.
    pub key: RequestKey,
    /// The variant shown (from 0).
    pub shown: usize,
    /// Lines scrolled down, kept in range by the drawing.
    pub scroll: Cell<usize>,
}
