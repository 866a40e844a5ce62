//! What an input asks of the event loop: the [`Action`]s the keys and the mouse produce.

/// What the event loop must do after an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Quit: restore the terminal and end every session.
    Quit,
    /// Ctrl+Z: give the terminal back and stop the process, as a shell's job control does
    /// (the server goes on serving only while the process runs: `fg` brings it back).
    Suspend,
    /// Chat on a session (an empty line reads the turn in flight).
    Chat {
        /// Session number.
        session: u64,
        /// The line.
        line: String,
    },
    /// Interrupt the session's turn in flight.
    Interrupt {
        /// Session number.
        session: u64,
    },
    /// Copy the session's full handle to the clipboard (OSC 52).
    Yank {
        /// Session number.
        session: u64,
    },
    /// Copy this text to the clipboard (OSC 52): a model request as curl or JSON.
    Copy {
        /// What it is, for the notice.
        what: String,
        /// The text.
        text: String,
    },
    /// Open a new session for the person and select it.
    NewSession,
    /// Open the person's first session and send this line in it (an attached console opens
    /// none until the person writes, so watching adds nothing to the watched bot).
    StartWith {
        /// The line.
        line: String,
    },
    /// Close a session (asked for twice).
    Close {
        /// Session number.
        session: u64,
    },
    /// Write this report of a session to a file.
    Export {
        /// Session number.
        session: u64,
        /// The report ([`session_report`](crate::draw::export::session_report)).
        text: String,
    },
    /// Read the config file again and apply it (the outcome comes back as a bus event).
    ReloadConfig,
    /// Call a tool by hand (the Tools pane's form or its list of calls).
    HandCall {
        /// The call's number in the list ([`HandCalls`](crate::view::hand_calls::HandCalls)).
        id: u64,
        /// The tool.
        tool: String,
        /// The arguments, JSON text of an object.
        arguments: String,
    },
    /// Write the saved hand calls to the project's file, call `toggled` just saved or
    /// forgotten (taken back if the file cannot be written).
    SaveCalls {
        /// The call whose mark changed.
        toggled: u64,
    },
    /// Send an edited model request again.
    Resend {
        /// Which send ([`Sends`](crate::view::resend::Sends): its cancel token).
        id: u64,
        /// Which recorded request it varies.
        key: crate::state::variants::RequestKey,
        /// The body, JSON text.
        body: String,
        /// Another chat-completions URL, or none for the session's model.
        url: Option<String>,
    },
    /// Edit a model request in `$EDITOR` (the terminal is handed over meanwhile), then send it.
    EditExternally {
        /// Which recorded request.
        key: crate::state::variants::RequestKey,
        /// The body to start from, pretty JSON.
        text: String,
        /// Where it goes.
        url: String,
    },
    /// Write this test case of a session to a `.test.toml` file.
    ExportTest {
        /// Session number.
        session: u64,
        /// The file's text ([`ConsoleState::test_case`](crate::state::ConsoleState::test_case)).
        text: String,
    },
}
