//! The terminal: raw mode, the alternate screen, mouse capture and bracketed paste on the way
//! in; all of it undone on the way out, by a guard on drop and by a panic hook, so a crash
//! never leaves the person's shell unusable.

use crate::error::ConsoleError;
use std::io::{IsTerminal, Stdout, stdout};
use std::sync::Once;

use crossterm::cursor::Show;
use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// The terminal the console draws on.
pub type Term = Terminal<CrosstermBackend<Stdout>>;

/// Restores the terminal when dropped.
pub struct Guard(());

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// Fails with a clear message when stdin or stdout is not a terminal.
pub fn check() -> Result<(), ConsoleError> {
    if !stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(ConsoleError::NotATerminal);
    }
    Ok(())
}

/// Takes over the terminal. Fails with a clear message when it is not one.
pub fn enter() -> Result<(Term, Guard), ConsoleError> {
    check()?;
    install_panic_hook();
    enable_raw_mode().map_err(ConsoleError::RawMode)?;
    let guard = Guard(());
    execute!(
        stdout(),
        EnterAlternateScreen,
        EnableMouseCapture,
        EnableBracketedPaste
    )
    .map_err(ConsoleError::Setup)?;
    let terminal = Terminal::new(CrosstermBackend::new(stdout())).map_err(ConsoleError::Setup)?;
    Ok((terminal, guard))
}

/// Lets go of the terminal once the loop ended with `result`. When the terminal hung up,
/// ratatui's terminal is not dropped (its drop shows the cursor and reports the failure with
/// `eprintln!`, which panics on a hung-up terminal; nothing is left to give back and the
/// process is about to end), and a read or draw that failed because of it is the end the
/// person would have asked for.
pub fn let_go(
    terminal: Term,
    result: Result<(), ConsoleError>,
    terminals: &turnscope::app::hangup::Terminals,
) -> Result<(), ConsoleError> {
    if !terminals.hung_up() {
        drop(terminal);
        return result;
    }
    std::mem::forget(terminal);
    match result {
        Err(ConsoleError::ReadInput(_) | ConsoleError::Draw(_)) => Ok(()),
        other => other,
    }
}

/// Gives the terminal back: leaves raw mode, the alternate screen and mouse capture, and
/// shows the cursor. Safe to call more than once.
pub fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(
        stdout(),
        DisableBracketedPaste,
        DisableMouseCapture,
        LeaveAlternateScreen,
        Show
    );
}

/// Hands the terminal back to the person for a while (to run `$EDITOR`): what [`restore`]
/// does; [`take_back`] undoes it.
pub fn hand_over() {
    restore();
}

/// Stops this process as a shell's job control stops a job on Ctrl+Z (SIGTSTP, which raw mode
/// keeps the terminal from sending), after [`hand_over`]; returns once it is continued (`fg`,
/// SIGCONT). Elsewhere than Unix it returns at once.
pub fn suspend() {
    #[cfg(unix)]
    // SAFETY: raise(3) with a valid signal number; SIGTSTP's default action stops the process
    // until SIGCONT, and nothing here handles it.
    unsafe {
        libc::raise(libc::SIGTSTP);
    }
}

/// Takes the terminal over again after [`hand_over`]: raw mode, the alternate screen, mouse
/// capture and bracketed paste; the next draw repaints everything.
pub fn take_back() -> std::io::Result<()> {
    enable_raw_mode()?;
    execute!(
        stdout(),
        EnterAlternateScreen,
        EnableMouseCapture,
        EnableBracketedPaste
    )
}

fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}
