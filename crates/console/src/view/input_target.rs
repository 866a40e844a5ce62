//! Where the input line's text would go, and whether it can: a line into a closed session,
//! another client's stored conversation, or (attached) a session another client started is
//! refused. The Input pane says so on its border and in place of the empty line's
//! placeholder before anything is typed, and the refusal on Enter says the same.

use crate::state::Source;
use crate::view::console::Console;

/// Why a line cannot go into the selected session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The session is closed (and is not the person's own, which a line opens again).
    Closed(u64),
    /// A stored conversation of another client's: only the client holding its handle
    /// reopens it.
    Stored(String),
    /// Attached: another client started it; an attached console chats only in its own.
    AnotherClients(u64),
}

impl Refused {
    /// The Input pane's title piece: what the session is.
    pub fn title(&self) -> &'static str {
        match self {
            Refused::Closed(_) => "closed",
            Refused::Stored(_) => "read-only",
            Refused::AnotherClients(_) => "another client's",
        }
    }

    /// What the empty input line says instead of its placeholder: short enough for the
    /// narrowest input pane, and what to do.
    pub fn placeholder(&self) -> String {
        match self {
            Refused::Closed(n) => format!("#{n} is closed: Esc, then n opens a new session"),
            Refused::Stored(_) => "stored: read-only here (its client reopens it)".into(),
            Refused::AnotherClients(n) => {
                format!("#{n} is another client's: Esc, then n opens yours")
            }
        }
    }
}

impl Console {
    /// Whether `session` was started on an attached console's target by another client:
    /// such a console chats in, closes and interrupts only the sessions it started.
    pub(crate) fn is_another_clients(&self, session: u64) -> bool {
        matches!(self.state.header.source, Source::Attached { .. })
            && Some(session) != self.own
            && self.state.session(session).is_some_and(|row| !row.mine)
    }

    /// Why a line typed now could not go into the selected session, if it could not. The
    /// person's own session is never refused (a line into it after it closed opens a new
    /// one), nor, attached, the first line (it starts the person's session).
    pub fn refused(&self) -> Option<Refused> {
        // Where nothing chats at all, the pane says that instead.
        if self.read_only
            || self.watching_only()
            || self.no_chat_here
            || (self.start_on_first_line && self.own.is_none())
        {
            return None;
        }
        let session = self.selected?;
        let row = self.state.session(session)?;
        if row.is_closed() && Some(session) != self.own {
            Some(Refused::Closed(session))
        } else if row.is_stored() && !row.mine {
            Some(Refused::Stored(row.handle_prefix.clone()))
        } else if self.is_another_clients(session) {
            Some(Refused::AnotherClients(session))
        } else {
            None
        }
    }
}
