//! The Sessions pane: every open handle (and recently closed ones), who opened it (after
//! `↷R` when this replica took it over from replica R), its turns, errors, what it is doing (`client gone` once its MCP client let go of it), its age
//! and the idle time it has left; in the sort and under the filter the title names.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{dim_piece, inner, pane_block};
use crate::state::{Activity, SessionRow};
use crate::text::{pad, seconds, truncate, width};
use crate::view::console::Console;
use crate::view::ids::PaneId;
use crate::view::sessions::SessionSort;

/// Draws the pane.
pub fn draw(f: &mut Frame, area: Rect, c: &Console) {
    let rows = c.listed_sessions();
    let open = c
        .state
        .session_rows()
        .iter()
        .filter(|r| !r.is_closed() && !r.is_stored())
        .count();
    let mut title = vec![dim_piece(c, format!("{open} open"))];
    match c.state.stored_counts() {
        (0, 0) => {}
        (listed, 0) => title.push(dim_piece(c, format!("{listed} stored"))),
        (listed, more) => title.push(dim_piece(
            c,
            format!(
                "{} stored, {} not listed",
                crate::text::count(listed as u64 + more),
                crate::text::count(more)
            ),
        )),
    }
    let list = &c.sessions_list;
    if list.sort != SessionSort::Number {
        title.push(dim_piece(c, list.sort.label().to_string()));
    }
    if let Some(editing) = &list.editing {
        let (before, after) = editing.split();
        title.push(Span::styled(
            format!(" filter: {before}▏{after} "),
            c.theme.key,
        ));
        title.push(dim_piece(c, format!("{} shown", rows.len())));
    } else if !list.filter.is_empty() {
        title.push(Span::styled(
            format!(" filter: {} ", list.filter),
            c.theme.key,
        ));
        title.push(dim_piece(c, format!("{} shown (Esc clears)", rows.len())));
    }
    let body = inner(area);
    let visible = body.height.saturating_sub(1) as usize;
    c.shown_rows(PaneId::Sessions, visible);
    let (start, end) = c.sessions_list.nav.window(rows.len(), visible);
    if rows.len() > visible && visible > 0 {
        // Not every row fits: say which ones are shown (z gives the pane the screen).
        title.push(dim_piece(
            c,
            format!("rows {}–{end} of {}", start + 1, rows.len()),
        ));
    }
    let t = &c.theme;
    // One row inside the borders: the selected session rather than the column heads alone.
    let one_row = body.height == 1 && !rows.is_empty();
    let (start, end) = if one_row {
        let at = rows
            .iter()
            .position(|r| Some(r.number) == c.selected)
            .unwrap_or(0);
        if rows.len() > 1 {
            title.push(dim_piece(c, format!("row {} of {}", at + 1, rows.len())));
        }
        (at, at + 1)
    } else {
        (start, end)
    };
    let on_screen = || rows.iter().take(end).skip(start);
    let columns = Columns::fit(
        body.width as usize,
        number_width(on_screen().filter(|r| !r.is_stored()).map(|r| r.number)),
        on_screen()
            .map(|r| opener_width(r))
            .max()
            .unwrap_or(0)
            .max("opened by ".len()),
    );
    // Columns the pane is too narrow for are said on its border (z gives it the screen).
    let hidden: Vec<&str> = [(columns.age, "age"), (columns.left, "left")]
        .iter()
        .filter(|(shown, _)| !shown)
        .map(|(_, name)| *name)
        .collect();
    if !hidden.is_empty() {
        let hidden = hidden.join(", ");
        title.push(dim_piece(
            c,
            if c.zoom {
                format!("no room for {hidden}")
            } else {
                format!("z: +{hidden}")
            },
        ));
    }
    let block = pane_block(c, PaneId::Sessions, title, area.width);
    f.render_widget(block, area);
    if body.height == 0 {
        return;
    }
    let mut header = format!(
        "{}{}{}{}{}{}",
        pad(" #", columns.number_w),
        pad("handle", 9),
        pad("opened by", columns.by_w),
        pad("turns", 6),
        pad("errs", 5),
        pad("state", 12)
    );
    if columns.age {
        header.push_str(&pad("age", 7));
    }
    if columns.left {
        header.push_str(&pad("left", 7));
    }
    if columns.tokens {
        header.push_str(&pad("tokens", TOKENS_W));
    }
    let mut lines = if one_row {
        Vec::new()
    } else {
        vec![Line::styled(header, t.dim)]
    };
    if rows.is_empty() && !list.filter.is_empty() {
        lines.push(Line::styled(
            " no session matches the filter; Esc clears it",
            t.dim,
        ));
    } else if rows.is_empty() {
        lines.push(Line::styled(
            if c.watching_only() {
                " no sessions yet: they show as the bot runs them"
            } else if c.no_chat_here {
                " no sessions: this server has no start/chat tools"
            } else if c.start_on_first_line {
                // Attached: the bot's other clients may not show here; the person's line does.
                " no sessions yet: a line below starts yours"
            } else {
                " no sessions yet: MCP clients open one with `start`"
            },
            t.dim,
        ));
    }
    for row in rows.iter().take(end).skip(start) {
        let selected = Some(row.number) == c.selected;
        lines.push(row_line(c, row, selected, &columns));
    }
    f.render_widget(Paragraph::new(lines), body);
}

/// How long ago, in one unit (`9s`, `4m`, `3h`, `2d`): a stored row's last use, so that
/// `stored 4m` fits the state column.
fn ago(s: u64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// Width of the tokens column (`12,345→678`).
const TOKENS_W: usize = 14;

/// Width of the age and left columns (`1m05s`, `≥4m55s`).
const TIME_W: usize = 7;

/// The columns that fit the pane's width, and the widths of those that vary.
struct Columns {
    number_w: usize,
    /// The "opened by" cell: what is left once the columns below took theirs (8 to 24).
    by_w: usize,
    age: bool,
    left: bool,
    tokens: bool,
}

impl Columns {
    /// Fits the optional columns into `width` by what a person reads first: who opened
    /// each session (`longest_by`: its widest label on screen; `console (you)` and
    /// `mcp: claude-code` whole, at least), the idle time a session has `left` before the
    /// sweep closes it, then its `age`, the longest opener whole, and the tokens. At 140
    /// columns the pane has room for `left` (it showed neither before 150).
    fn fit(width: usize, number_w: usize, longest_by: usize) -> Self {
        const BY_FIRST: usize = 17;
        let fixed = number_w + 9 + 6 + 5 + 12;
        let by_wanted = longest_by.clamp(8, 24);
        let by_first = by_wanted.min(BY_FIRST);
        let mut spare = width.saturating_sub(fixed + by_first);
        let mut take = |w: usize| {
            let fits = spare >= w;
            if fits {
                spare -= w;
            }
            fits
        };
        let left = take(TIME_W);
        let age = left && take(TIME_W);
        let whole_by = age && take(by_wanted - by_first);
        let tokens = whole_by && take(TOKENS_W);
        let optional = [(left, TIME_W), (age, TIME_W), (tokens, TOKENS_W)]
            .iter()
            .filter(|(shown, _)| *shown)
            .map(|(_, w)| w)
            .sum::<usize>();
        Self {
            number_w,
            by_w: width.saturating_sub(fixed + optional).clamp(8, 24),
            age,
            left,
            tokens,
        }
    }
}

/// The cells a row's "opened by" wants: its label, the take-over mark, and a gap.
fn opener_width(row: &SessionRow) -> usize {
    width(&row.opener_label()) + row.taken_from.as_ref().map_or(0, |from| width(from) + 2) + 1
}

/// The "opened by" cell, `by_w` cells: who opened it, after `↷R ` when this replica took
/// the conversation over from replica R (the mark takes at most half the cell).
fn opened_by<'a>(
    c: &Console,
    row: &SessionRow,
    by_w: usize,
    by_style: ratatui::style::Style,
) -> Vec<Span<'a>> {
    // Cut a cell short of its width: the turns column after it keeps its gap.
    let cell = |label: &str, w: usize| pad(&truncate(label, w.saturating_sub(1)), w);
    let Some(from) = &row.taken_from else {
        return vec![Span::styled(cell(&row.opener_label(), by_w), by_style)];
    };
    let mark = format!(
        "{} ",
        truncate(&format!("↷{from}"), (by_w / 2).saturating_sub(1))
    );
    let mark_w = width(&mark);
    vec![
        Span::styled(mark, c.theme.warn),
        Span::styled(
            cell(&row.opener_label(), by_w.saturating_sub(mark_w)),
            by_style,
        ),
    ]
}

/// A stored session's errors, as its store counts them (none for an open one: the Log
/// counts those).
fn stored_errors(row: &SessionRow) -> u64 {
    match row.activity {
        Activity::Stored { errors, .. } => errors,
        _ => 0,
    }
}

/// The number column's width for the rows on screen (a stored row shows `-`): the marker,
/// the longest number and a space (at least 4), so `#1000001` (a session an attached console
/// started, numbered apart from the watched server's) or the thousandth session is shown
/// whole.
fn number_width(numbers: impl Iterator<Item = u64>) -> usize {
    let digits = numbers
        .map(|n| n.checked_ilog10().map_or(1, |d| d as usize + 1))
        .max()
        .unwrap_or(1);
    (digits + 2).max(4)
}

fn row_line<'a>(c: &Console, row: &SessionRow, selected: bool, columns: &Columns) -> Line<'a> {
    let (number_w, by_w) = (columns.number_w, columns.by_w);
    let t = &c.theme;
    let closed = row.is_closed();
    let stored = row.is_stored();
    let base = if closed { t.dim } else { t.text };
    let gone =
        !closed && row.activity != Activity::InTurn && c.state.client_gone(row.number).is_some();
    let state_style = match row.activity {
        _ if gone => t.warn,
        Activity::InTurn => t.accent,
        Activity::Interrupted => t.warn,
        Activity::Closed(_) | Activity::Stored { .. } => t.dim,
        Activity::Idle => t.ok,
    };
    let marker = if selected { "▶" } else { " " };
    let by_style = if row.mine { t.user } else { base };
    let mut spans = vec![
        // A stored session has no number until a client's chat reopens it.
        Span::styled(
            pad(
                &if stored {
                    format!("{marker}-")
                } else {
                    format!("{marker}{}", row.number)
                },
                number_w,
            ),
            base,
        ),
        Span::styled(pad(&row.handle_prefix, 9), base),
    ];
    spans.extend(opened_by(c, row, by_w, by_style));
    spans.extend([
        Span::styled(pad(&row.turns.to_string(), 6), base),
        match c.state.journal.errors_of(row.number) + stored_errors(row) {
            0 => Span::styled(pad("-", 5), t.dim),
            n => Span::styled(pad(&n.to_string(), 5), t.error),
        },
        Span::styled(
            pad(
                &match &row.activity {
                    _ if gone => "client gone".to_string(),
                    // A turn an MCP client gets as a task (it polls for the result).
                    Activity::InTurn if c.state.tasks.working_in(row.number).is_some() => {
                        "● task".to_string()
                    }
                    Activity::InTurn => "● in turn".to_string(),
                    Activity::Closed(_) => "closed".to_string(),
                    Activity::Stored { idle_s, .. } => format!("stored {}", ago(*idle_s)),
                    other => other.label(),
                },
                12,
            ),
            state_style,
        ),
    ]);
    if columns.age {
        spans.push(Span::styled(pad(&seconds(row.age_s), TIME_W), t.dim));
    }
    if columns.left {
        spans.push(Span::styled(
            pad(
                &row.idle_left_s
                    .map(|left| {
                        // Watched from outside: counted from the last activity seen, at least.
                        if c.state.header.watched_handle_seconds.is_some() {
                            format!("≥{}", seconds(left))
                        } else {
                            seconds(left)
                        }
                    })
                    .unwrap_or_else(|| "-".into()),
                TIME_W,
            ),
            t.dim,
        ));
    }
    if columns.tokens {
        let used = c
            .state
            .wire
            .session_tokens(row.number)
            .map(|u| {
                format!(
                    "{}→{}",
                    crate::text::count(u.prompt_tokens),
                    crate::text::count(u.completion_tokens)
                )
            })
            .unwrap_or_else(|| "-".into());
        spans.push(Span::styled(pad(&used, TOKENS_W), t.dim));
    }
    let line = Line::from(spans);
    if selected {
        line.patch_style(t.selected)
    } else {
        line
    }
}
