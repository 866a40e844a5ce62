//! The Sessions pane's order and filter: `s` cycles the sort (number, latest activity,
//! errors), `/` types a filter (number, handle, who opened it, state, `taken over from R`;
//! any case) with the readline keys. Everything that walks the rows (the pane, the selection,
//! the mouse) asks [`SessionList::listed`], so what is drawn is what is selected.

use crate::state::{ConsoleState, SessionRow};
use crate::view::line_edit::LineEdit;
use crate::view::nav::ListNav;

/// How the Sessions pane is sorted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SessionSort {
    /// Open ones by number, then closed ones, latest closed first.
    #[default]
    Number,
    /// The latest turn, tool call or failure first.
    Activity,
    /// The most errors first.
    Errors,
}

impl SessionSort {
    /// The next sort `s` picks.
    pub fn next(self) -> Self {
        match self {
            SessionSort::Number => SessionSort::Activity,
            SessionSort::Activity => SessionSort::Errors,
            SessionSort::Errors => SessionSort::Number,
        }
    }

    /// How the pane's title names it.
    pub fn label(self) -> &'static str {
        match self {
            SessionSort::Number => "by number",
            SessionSort::Activity => "latest active first",
            SessionSort::Errors => "most errors first",
        }
    }
}

/// The Sessions pane's sort and filter.
#[derive(Debug, Default)]
pub struct SessionList {
    /// The sort in force.
    pub sort: SessionSort,
    /// The filter in force (empty: every session).
    pub filter: String,
    /// The filter being typed.
    pub editing: Option<LineEdit>,
    /// The cursor and scroll over the listed rows.
    pub nav: ListNav,
}

impl SessionList {
    fn keeps(&self, state: &ConsoleState, row: &SessionRow) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        let needle = self.filter.to_lowercase();
        let number = needle.trim_start_matches('#');
        if !number.is_empty() && row.number.to_string() == number {
            return true;
        }
        let state = match state.client_gone(row.number) {
            Some(_) if !row.is_closed() => "client gone".to_string(),
            _ => row.activity.label(),
        };
        let takeover = row.takeover_label().unwrap_or_default();
        [&row.handle_prefix, &row.opener_label(), &state, &takeover]
            .iter()
            .any(|field| field.to_lowercase().contains(&needle))
    }
    /// The sessions as the pane lists them: filtered, then sorted.
    pub fn listed<'a>(&self, state: &'a ConsoleState) -> Vec<&'a SessionRow> {
        let mut rows: Vec<&SessionRow> = state
            .session_rows()
            .into_iter()
            .filter(|r| self.keeps(state, r))
            .collect();
        match self.sort {
            SessionSort::Number => {}
            SessionSort::Activity => {
                rows.sort_by_key(|r| std::cmp::Reverse(state.last_activity(r)))
            }
            SessionSort::Errors => rows.sort_by_key(|r| {
                (
                    std::cmp::Reverse(state.journal.errors_of(r.number)),
                    r.is_closed(),
                    r.number,
                )
            }),
        }
        rows
    }
}
