//! Key bindings: one table that the help overlay and the footer hints are drawn from, and
//! the mapping from a key press to a [`Command`] outside the input line.
//!
//! The input line has its own keys (Enter sends, Alt+Enter / Shift+Enter / Ctrl+J add a
//! newline); they are listed here too, so the help is complete.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// What a key asks for, outside the input line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Quit the console.
    Quit,
    /// Focus the next pane.
    NextPane,
    /// Focus the previous pane.
    PrevPane,
    /// Focus pane number n (1-based, in the Tab order).
    Jump(usize),
    /// Open or close the help overlay.
    Help,
    /// Close the innermost thing (overlay, detail, filter) or leave the pane.
    Back,
    /// Move up one row.
    Up,
    /// Move down one row.
    Down,
    /// Move up a page.
    PageUp,
    /// Move down a page.
    PageDown,
    /// Go to the first row.
    Home,
    /// Go to the last row and follow new ones.
    End,
    /// Open the selected row (frame detail; chat with the selected session).
    Enter,
    /// Edit the filter.
    Filter,
    /// Pause or resume live updates of the pane.
    Pause,
    /// Switch the pane between the selected session and all sessions.
    Scope,
    /// Interrupt the selected session's turn in flight.
    Interrupt,
    /// Open (or close) the turn view: the waterfall of the selected session's latest turn.
    Turn,
    /// Frames: one row per frame, or one per link crossing.
    Expand,
    /// Zoom the focused pane to the whole screen, and back.
    Zoom,
    /// Export the selected session's turns and frames to a file.
    Export,
    /// Export the selected session as a conversation test case (`*.test.toml`).
    ExportTest,
    /// Copy the selected session's full handle.
    Yank,
    /// Open a new session for the person.
    New,
    /// Close the selected session (asks first).
    Close,
    /// A replay: step back (-1) or on (+1) one turn end.
    Step(isize),
    /// A replay: step back (-1) or on (+1) one event inside a turn (a piece, a tool call).
    Scrub(isize),
    /// Sessions: the next sort.
    Sort,
    /// Read the config file again and apply it from the next turn.
    Reload,
}

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everywhere except the input line (unless said).
    Global,
    /// The input line.
    Input,
    /// The Frames pane.
    Frames,
    /// Lists and text panes.
    Lists,
    /// The Sessions pane.
    Sessions,
    /// The Progress and Stats panes.
    ScopeToggle,
    /// The Transcript pane.
    Transcript,
    /// The turn view (`w`, or Enter in the Transcript).
    TurnView,
    /// The Tools pane (6).
    Tools,
    /// The MCP pane (9).
    Mcp,
}

impl Scope {
    /// The heading the help overlay gives this scope.
    pub fn heading(self) -> &'static str {
        match self {
            Scope::Global => "Everywhere",
            Scope::Input => "Input line",
            Scope::Lists => "Lists and text",
            Scope::Sessions => "Sessions (1)",
            Scope::Frames => "Frames (4)",
            Scope::ScopeToggle => "Frames, Progress, Stats, Log",
            Scope::Transcript => "Transcript (2)",
            Scope::TurnView => "Turn view (w)",
            Scope::Tools => "Tools (6)",
            Scope::Mcp => "MCP (9)",
        }
    }
}

/// One documented binding.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    /// Where it applies.
    pub scope: Scope,
    /// The keys, as written in the help.
    pub keys: &'static str,
    /// What it does.
    pub what: &'static str,
}

const fn b(scope: Scope, keys: &'static str, what: &'static str) -> Binding {
    Binding { scope, keys, what }
}

/// Every key the console knows, in the order the help lists them.
pub const BINDINGS: &[Binding] = &[
    b(
        Scope::Global,
        "Tab / Shift+Tab",
        "next / previous pane (works in the input line too)",
    ),
    b(
        Scope::Global,
        "1 … 9 / Alt+1 … 9",
        "jump to a pane: Sessions, Transcript, Input, Frames, Progress, Tools, Stats, Log, MCP (Alt in the input line)",
    ),
    b(Scope::Global, "? / F1", "this help (F1 in the input line)"),
    b(
        Scope::Global,
        "Esc",
        "back: close the help, a view or the filter, clear a notice; leave the input line (never enters it)",
    ),
    b(
        Scope::Global,
        "w",
        "the turn view: the selected session's latest turn as a waterfall, tool calls whole",
    ),
    b(
        Scope::Global,
        "i",
        "interrupt the selected session's turn in flight",
    ),
    b(
        Scope::Global,
        "e",
        "export the selected session: its turns (waterfall, tool calls whole) and its filtered frames, to a file",
    ),
    b(
        Scope::Global,
        "t",
        "export the selected session as a test case for `turnscope test`",
    ),
    b(
        Scope::Global,
        "[ / ]",
        "replay: step the whole console back / on one turn end (the header says where)",
    ),
    b(
        Scope::Global,
        ", / .",
        "replay: step back / on one event inside a turn (a model request, a piece, a tool call)",
    ),
    b(
        Scope::Global,
        "R",
        "reload the config file (saving it or SIGHUP does too): from each session's next turn",
    ),
    b(
        Scope::Global,
        "z",
        "zoom: the focused pane fills the screen; z or Esc gives the others back",
    ),
    b(
        Scope::Global,
        "q",
        "quit (asks first while MCP clients hold sessions; Ctrl+C quits from anywhere); every session is ended",
    ),
    b(
        Scope::Global,
        "Ctrl+Z",
        "suspend to the shell (fg brings it back); the server this console runs answers nobody meanwhile",
    ),
    b(
        Scope::Global,
        "mouse",
        "click a pane or a row to select it, wheel to scroll, click a tab",
    ),
    b(
        Scope::Input,
        "Enter",
        "send the line to the selected session",
    ),
    b(
        Scope::Input,
        "Enter on empty",
        "read the turn in flight (as an empty chat line does)",
    ),
    b(Scope::Input, "Alt/Shift+Enter, Ctrl+J", "new line"),
    b(Scope::Input, "PgUp / PgDn", "scroll the transcript"),
    b(
        Scope::Input,
        "Ctrl+A / Ctrl+E, Alt+B / Alt+F",
        "start / end of the line, word back / forward (also in the filter)",
    ),
    b(
        Scope::Input,
        "Ctrl+U / Ctrl+K / Ctrl+W",
        "delete to the start / end of the line, the word before (also in the filter)",
    ),
    b(
        Scope::Input,
        "Enter twice",
        "a session the console did not open (an MCP client's) asks once before a line goes in",
    ),
    b(Scope::Lists, "↑ ↓ / k j", "move (scroll in the transcript)"),
    b(Scope::Lists, "PgUp PgDn, Ctrl+U Ctrl+D", "move a page"),
    b(Scope::Lists, "Home / g", "go to the top"),
    b(Scope::Lists, "End / G", "go to the end and follow new rows"),
    b(
        Scope::Sessions,
        "Enter",
        "chat with the selected session (focus the input line); a stored one of yours (console (you), from before a restart) opens again with your line",
    ),
    b(
        Scope::Sessions,
        "y",
        "copy the selected session's full handle to the clipboard (OSC 52)",
    ),
    b(
        Scope::Sessions,
        "s",
        "sort: by number / latest active first / most errors first",
    ),
    b(
        Scope::Sessions,
        "/",
        "filter the list: number, handle, who opened it, state (any case); Esc clears",
    ),
    b(
        Scope::Sessions,
        "n",
        "open a new session for you; type its first line",
    ),
    b(
        Scope::Sessions,
        "d",
        "close the selected session (d twice; Esc keeps it)",
    ),
    b(
        Scope::Transcript,
        "/",
        "search the transcript (any case); Esc clears",
    ),
    b(
        Scope::Transcript,
        "n / N",
        "the older / newer match of the search",
    ),
    b(
        Scope::Transcript,
        "Enter",
        "the turn view of the selected session's latest turn",
    ),
    b(
        Scope::TurnView,
        "← → / ↑↓",
        "step through the turns / scroll",
    ),
    b(
        Scope::TurnView,
        "m f Tab c J",
        "open the model requests whole (m), unfold long contents (f), pick one (Tab), copy it as curl (c) or JSON (J) via OSC 52",
    ),
    b(
        Scope::TurnView,
        "e E v",
        "edit the picked model request and send it again: in the console (e; Ctrl+S or F5 sends, Tab edits the URL, Esc cancels a send in flight) or in $EDITOR (E); v sets its variants beside the recorded answer (word diff, tool calls, usage, finish, times; t saves one as a test case), then its sends still in flight (Esc over one cancels it: an $EDITOR send too); the session is never changed",
    ),
    b(
        Scope::Tools,
        "Enter",
        "call the selected tool by hand through a form built from its schema (Enter calls once nothing is refused, and not again while that call is in flight; Esc cancels the call in flight, then closes, keeping what was typed)",
    ),
    b(
        Scope::Tools,
        "↑↓ / Tab",
        "in the form: the previous / next field",
    ),
    b(
        Scope::Tools,
        "← → Space",
        "in the form: choose a value (Space flips a yes/no)",
    ),
    b(
        Scope::Tools,
        "Del",
        "in the form: unset a choice, or send an empty text from an empty text field",
    ),
    b(
        Scope::Tools,
        "PgUp / PgDn",
        "in the form and the list of calls: scroll them and the answer under them a page at a time (the wheel too; Ctrl+Home / Ctrl+End to either end); a key that moves or types brings the field back",
    ),
    b(
        Scope::Tools,
        "h",
        "list the hand calls: ↑↓ pick one, Enter runs it again, e edits it in the form, s saves it in .turnscope/calls.json (or forgets it), x cancels it while in flight",
    ),
    b(
        Scope::Tools,
        "F1",
        "this help, from the form too (? is typed there, except on a yes/no or a choice)",
    ),
    b(
        Scope::Mcp,
        "↑↓ Enter",
        "pick an exchange and open it whole (pretty, _meta last; f unfolds, ← → step, J copies JSON)",
    ),
    b(
        Scope::Mcp,
        "/",
        "filter by typed text: words, client: method: tool: status:, !negates",
    ),
    b(Scope::Mcp, "a / x", "keep one client / one method"),
    b(Scope::Mcp, "y", "copy the picked exchange as curl"),
    b(
        Scope::Frames,
        "/",
        "filter: text, kind: name: dir: from: to: turn: session:, !term negates",
    ),
    b(
        Scope::Frames,
        "Space / p",
        "pause or resume (a paused list keeps what it showed)",
    ),
    b(
        Scope::Frames,
        "Enter",
        "the selected frame's detail, its path hop by hop",
    ),
    b(
        Scope::Frames,
        "x",
        "one row per frame (its path and time folded in) / one row per link crossing",
    ),
    b(
        Scope::Frames,
        "(rows)",
        "a frame: its time since its session opened, S system / D data / C control, its name, its path (from→to, hops, time), ↓ downstream / ↑ upstream, what it carries",
    ),
    b(
        Scope::Frames,
        "(diagram)",
        "above the list, the pipeline: each link's frames/s while frames flow (×N: how many crossed in all), qN the deepest queue a frame joined, ↑ upstream frames/s",
    ),
    b(
        Scope::ScopeToggle,
        "a",
        "all sessions / the selected session (Log: problems only / everything)",
    ),
];

/// What has the keys: a pane, or an overlay or editor over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOwner {
    /// A pane.
    Pane(crate::view::ids::PaneId),
    /// The frame filter being edited.
    Filter,
    /// The turn view.
    TurnView,
    /// The frame detail.
    FrameDetail,
    /// An MCP exchange opened whole.
    McpDetail,
    /// The help.
    Help,
    /// The Tools pane's hand-call form.
    Form,
    /// The Tools pane's list of hand calls.
    Calls,
    /// The model-request editor.
    Editor,
    /// A request's variants beside the recorded answer.
    Variants,
}

/// Short hints for the footer, for what has the keys.
pub fn owner_hints(owner: KeyOwner, read_only: bool) -> Vec<(&'static str, &'static str)> {
    match owner {
        KeyOwner::Pane(pane) => hints(pane, read_only),
        KeyOwner::Filter => vec![
            ("Ctrl+A/E", "start/end"),
            ("Ctrl+U/K", "delete to start/end"),
            ("Ctrl+W", "delete word"),
            ("Enter", "keep"),
            ("Esc", "clear"),
        ],
        KeyOwner::TurnView => vec![
            ("← →", "turn"),
            ("m", "model requests"),
            ("c/J", "copy curl/JSON"),
            ("Tab", "pick request"),
            ("f", "unfold"),
            ("↑↓ PgUp/PgDn", "scroll"),
            ("?", "help"),
            ("Esc", "close"),
        ],
        KeyOwner::FrameDetail => vec![
            ("↑↓", "previous/next frame"),
            ("?", "help"),
            ("Esc", "close"),
        ],
        KeyOwner::McpDetail => vec![
            ("↑↓ PgUp/PgDn", "scroll"),
            ("← →", "exchange"),
            ("f", "unfold"),
            ("y/J", "copy curl/JSON"),
            ("?", "help"),
            ("Esc", "close"),
        ],
        KeyOwner::Help => vec![("↑↓", "scroll"), ("Esc", "close")],
        // The last two always show (the footer drops from the middle when narrow).
        KeyOwner::Form => vec![
            ("↑↓ Tab", "field"),
            ("← → Space", "choose"),
            ("F1", "help"),
            ("PgUp/PgDn", "answer"),
            ("Del", "empty text"),
            ("Enter", "call"),
            ("Esc", "cancel/close"),
        ],
        KeyOwner::Calls => vec![
            ("↑↓", "call"),
            ("Enter", "run again"),
            ("e", "edit"),
            ("s", "save/forget"),
            ("PgUp/PgDn", "answer"),
            ("x", "cancel"),
            ("Esc", "back"),
        ],
        KeyOwner::Editor => vec![
            ("Ctrl+S / F5", "send"),
            ("Tab", "body/URL"),
            ("Esc", "cancel/close"),
        ],
        KeyOwner::Variants => vec![
            ("← →", "variant"),
            ("↑↓", "scroll"),
            ("e", "edit again"),
            ("c/J", "copy curl/JSON"),
            ("t", "save as test"),
            ("Esc", "back"),
        ],
    }
}

/// Short hints for the footer, for a focused pane.
pub fn hints(pane: crate::view::ids::PaneId, read_only: bool) -> Vec<(&'static str, &'static str)> {
    use crate::view::ids::PaneId;
    let mut out = match pane {
        PaneId::Input if read_only => vec![("Tab", "pane")],
        PaneId::Input => vec![
            ("Enter", "send (empty: read the turn)"),
            ("Esc", "leave"),
            ("Alt+Enter", "newline"),
            ("Ctrl+U/K/W", "delete"),
            ("Ctrl+A/E", "start/end"),
            ("F1", "help"),
            ("Ctrl+C", "quit"),
        ],
        PaneId::Sessions if read_only => vec![
            ("↑↓", "select"),
            ("w", "turn view"),
            ("s", "sort"),
            ("/", "filter"),
            ("[ ] , .", "step"),
        ],
        PaneId::Sessions => vec![
            ("↑↓", "select"),
            ("Enter", "chat"),
            ("w", "turn view"),
            ("s", "sort"),
            ("/", "filter"),
            ("n/d", "new/close"),
            ("i", "interrupt"),
            ("y", "copy handle"),
            ("e/t", "export/test"),
        ],
        PaneId::Transcript => vec![
            ("↑↓", "scroll"),
            ("/", "search"),
            ("Enter", "turn view"),
            ("End", "follow"),
        ],
        PaneId::Log => vec![("↑↓", "scroll"), ("a", "problems/all")],
        PaneId::Mcp => vec![
            ("↑↓", "pick"),
            ("Enter", "open whole"),
            ("/", "filter"),
            ("a", "client"),
            ("x", "method"),
            ("y", "copy as curl"),
        ],
        PaneId::Frames => vec![
            ("/", "filter"),
            ("Space", "pause"),
            ("Enter", "detail"),
            ("x", "per link"),
            ("a", "all/one"),
        ],
        PaneId::Progress | PaneId::Stats => vec![("↑↓", "scroll"), ("a", "all/one")],
        PaneId::Tools if read_only => vec![("↑↓", "tool"), ("PgUp/PgDn", "schema")],
        PaneId::Tools => vec![
            ("↑↓", "tool"),
            ("Enter", "call it"),
            ("h", "hand calls"),
            ("PgUp/PgDn", "schema"),
        ],
    };
    if pane != PaneId::Input {
        out.extend([("z", "zoom"), ("Tab", "pane"), ("?", "help"), ("q", "quit")]);
    }
    out
}

/// The pane number of Alt+1 … Alt+9 (which jumps from anywhere, the input line included).
pub fn alt_jump(key: &KeyEvent) -> Option<usize> {
    match key.code {
        KeyCode::Char(c @ '1'..='9') if key.modifiers.contains(KeyModifiers::ALT) => {
            Some(c as usize - '0' as usize)
        }
        _ => None,
    }
}

/// Whether the key is Ctrl+C (quits from anywhere).
pub fn is_ctrl_c(key: &KeyEvent) -> bool {
    key.modifiers.contains(KeyModifiers::CONTROL) && matches!(key.code, KeyCode::Char('c'))
}

/// Whether the key is Ctrl+Z (suspend, as a shell's job control expects).
pub fn is_ctrl_z(key: &KeyEvent) -> bool {
    key.modifiers.contains(KeyModifiers::CONTROL) && matches!(key.code, KeyCode::Char('z'))
}

/// Whether the key adds a newline in the input line.
pub fn is_newline(key: &KeyEvent) -> bool {
    match key.code {
        KeyCode::Enter => key
            .modifiers
            .intersects(KeyModifiers::ALT | KeyModifiers::SHIFT),
        KeyCode::Char('j') => key.modifiers.contains(KeyModifiers::CONTROL),
        _ => false,
    }
}

/// The command a key press means outside the input line, if any.
pub fn command(key: &KeyEvent) -> Option<Command> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    if is_ctrl_c(key) {
        return Some(Command::Quit);
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    Some(match key.code {
        KeyCode::Tab => Command::NextPane,
        KeyCode::BackTab => Command::PrevPane,
        KeyCode::Esc => Command::Back,
        KeyCode::F(1) | KeyCode::Char('?') => Command::Help,
        KeyCode::Up | KeyCode::Char('k') => Command::Up,
        KeyCode::Down | KeyCode::Char('j') => Command::Down,
        KeyCode::Char('u') if ctrl => Command::PageUp,
        KeyCode::Char('d') if ctrl => Command::PageDown,
        KeyCode::PageUp => Command::PageUp,
        KeyCode::PageDown => Command::PageDown,
        KeyCode::Home | KeyCode::Char('g') => Command::Home,
        KeyCode::End | KeyCode::Char('G') => Command::End,
        KeyCode::Enter => Command::Enter,
        KeyCode::Char('/') => Command::Filter,
        KeyCode::Char(' ') | KeyCode::Char('p') => Command::Pause,
        KeyCode::Char('a') => Command::Scope,
        KeyCode::Char('i') => Command::Interrupt,
        KeyCode::Char('q') => Command::Quit,
        KeyCode::Char(c @ '1'..='9') => Command::Jump(c as usize - '0' as usize),
        KeyCode::Char('w') => Command::Turn,
        KeyCode::Char('x') => Command::Expand,
        KeyCode::Char('z') => Command::Zoom,
        KeyCode::Char('e') => Command::Export,
        KeyCode::Char('t') => Command::ExportTest,
        KeyCode::Char('y') => Command::Yank,
        KeyCode::Char('n') => Command::New,
        KeyCode::Char('d') => Command::Close,
        KeyCode::Char('[') => Command::Step(-1),
        KeyCode::Char(',') => Command::Scrub(-1),
        KeyCode::Char('.') => Command::Scrub(1),
        KeyCode::Char('s') => Command::Sort,
        KeyCode::Char(']') => Command::Step(1),
        KeyCode::Char('R') => Command::Reload,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn keys_map_to_commands() {
        let none = KeyModifiers::NONE;
        assert_eq!(command(&key(KeyCode::Char('q'), none)), Some(Command::Quit));
        assert_eq!(
            command(&key(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Command::Quit)
        );
        assert_eq!(command(&key(KeyCode::Char('j'), none)), Some(Command::Down));
        assert_eq!(command(&key(KeyCode::Up, none)), Some(Command::Up));
        assert_eq!(
            command(&key(KeyCode::Char('3'), none)),
            Some(Command::Jump(3))
        );
        assert_eq!(
            command(&key(KeyCode::BackTab, KeyModifiers::SHIFT)),
            Some(Command::PrevPane)
        );
        assert_eq!(command(&key(KeyCode::Char('v'), none)), None);
    }

    #[test]
    fn newline_keys() {
        assert!(is_newline(&key(KeyCode::Enter, KeyModifiers::ALT)));
        assert!(is_newline(&key(KeyCode::Enter, KeyModifiers::SHIFT)));
        assert!(is_newline(&key(KeyCode::Char('j'), KeyModifiers::CONTROL)));
        assert!(!is_newline(&key(KeyCode::Enter, KeyModifiers::NONE)));
    }

    #[test]
    fn every_command_key_is_documented() {
        let help: String = BINDINGS.iter().map(|b| format!("{} ", b.keys)).collect();
        for documented in [
            "Tab",
            "Shift+Tab",
            "?",
            "F1",
            "Esc",
            "i",
            "q",
            "/",
            "Space",
            "p",
            "a",
            "Enter",
            "PgUp",
            "PgDn",
            "Home",
            "End",
            "g",
            "G",
            "k",
            "j",
            "1 … 9",
            "Ctrl+J",
            "Alt/Shift+Enter",
            ", / .",
            "s",
        ] {
            assert!(
                help.contains(documented),
                "{documented} missing from the help"
            );
        }
    }
}
