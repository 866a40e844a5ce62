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
    /// The send in flight's id among [`Sends`].
    pub send_id: Option<u64>,
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
            send_id: None,
        }
    }

    /// An editor over an edit (`text` to `url`) of what was opened as `opened` (body, URL):
    /// `Ctrl+R` starts over from that.
    pub fn of_edit(key: RequestKey, opened: (&str, &str), text: &str, url: &str) -> Self {
        let mut editor = Self::new(key, text, url);
        editor.opened_with = (
            opened.0.lines().collect::<Vec<_>>().join("\n"),
            opened.1.to_string(),
        );
        editor
    }

    /// Marks send `id` going out now, cancelled through `stop`.
    pub fn sent(&mut self, (id, stop): (u64, CancellationToken)) {
        self.sent_at = Some(std::time::Instant::now());
        self.stop = Some(stop);
        self.send_id = Some(id);
    }

    /// Cancels the send in flight: how long it had been out (`None`: none was).
    pub fn cancel(&mut self) -> Option<std::time::Duration> {
        let waited = self.sent_at.take()?.elapsed();
        self.send_id = None;
        if let Some(stop) = self.stop.take() {
            stop.cancel();
        }
        Some(waited)
    }

    /// Its send in flight is over (answered elsewhere, or cancelled from `v`).
    pub fn send_over(&mut self) {
        self.sent_at = None;
        self.stop = None;
        self.send_id = None;
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

/// A resend out (from the editor or `$EDITOR`) until its answer comes or it is cancelled:
/// listed after the request's variants in `v`, where `Esc` cancels it.
#[derive(Debug)]
pub struct Sending {
    /// Which send (the editor that sent it names it too).
    pub id: u64,
    /// The request it varies.
    pub key: RequestKey,
    /// The body sent, JSON text.
    pub body: String,
    /// Where it went.
    pub url: String,
    /// When it went out.
    pub at: std::time::Instant,
    /// Cancelled, the task sending it stops and drops the request, closing its connection.
    pub stop: CancellationToken,
    /// The variant the edit was opened from (none: the recorded request).
    pub from_variant: Option<usize>,
}

/// The resends in flight, oldest first.
#[derive(Debug, Default)]
pub struct Sends {
    list: Vec<Sending>,
    next: u64,
}

impl Sends {
    /// Lists a send going out now; its id and token.
    pub fn start(
        &mut self,
        key: RequestKey,
        body: String,
        url: String,
        from_variant: Option<usize>,
    ) -> (u64, CancellationToken) {
        self.next += 1;
        let stop = CancellationToken::new();
        self.list.push(Sending {
            id: self.next,
            key,
            body,
            url,
            at: std::time::Instant::now(),
            stop: stop.clone(),
            from_variant,
        });
        (self.next, stop)
    }

    /// Send `id`'s token, while it is out.
    pub fn token(&self, id: u64) -> Option<CancellationToken> {
        self.list
            .iter()
            .find(|s| s.id == id)
            .map(|s| s.stop.clone())
    }

    /// Takes send `id` off the list (answered, failed, refused); `None` when it is not out
    /// (cancelled meanwhile).
    pub fn end(&mut self, id: u64) -> Option<Sending> {
        let at = self.list.iter().position(|s| s.id == id)?;
        Some(self.list.remove(at))
    }

    /// Cancels send `id`: its token, and it leaves the list.
    pub fn cancel(&mut self, id: u64) -> Option<Sending> {
        let gone = self.end(id)?;
        gone.stop.cancel();
        Some(gone)
    }

    /// The sends of request `key` in flight, oldest first.
    pub fn of(&self, key: RequestKey) -> impl Iterator<Item = &Sending> {
        self.list.iter().filter(move |s| s.key == key)
    }

    /// The `i`th send of `key` in flight.
    pub fn nth(&self, key: RequestKey, i: usize) -> Option<&Sending> {
        self.of(key).nth(i)
    }

    /// Where send `id` is among its request's sends in flight.
    pub fn place(&self, id: u64) -> Option<usize> {
        let key = self.list.iter().find(|s| s.id == id)?.key;
        self.of(key).position(|s| s.id == id)
    }
}

/// The comparison shown: a request's variants beside its recorded answer.
#[derive(Debug)]
pub struct VariantsPick {
    /// The request.
    pub key: RequestKey,
    /// The variant shown (from 0); past the request's variants, its sends still in flight
    /// ([`Sends`], oldest first).
    pub shown: usize,
    /// Lines scrolled down, kept in range by the drawing.
    pub scroll: Cell<usize>,
}
