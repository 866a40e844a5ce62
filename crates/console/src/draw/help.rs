//! The help overlay: every key binding of [`keys::BINDINGS`](crate::view::keys::BINDINGS), grouped
//! by where it applies, over the middle of the screen.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph};

use crate::text::{pad, wrap};
use crate::view::console::Console;
use crate::view::keys::{BINDINGS, Binding, Scope};

/// A binding as this console has it: the replay's stepping keys only in a replay, `R` and `i`
/// only where the console runs the server, `q` said as what it does here. `None`: not here.
fn for_this_console(c: &Console, b: &Binding) -> Option<Binding> {
    let replay = matches!(c.state.header.source, crate::state::Source::Replay { .. });
    let attached = c.state.header.source.is_attached();
    match b.keys {
        "[ / ]" | ", / ." if !replay => None,
        "R" | "i" if replay || attached => None,
        // Attached, another client's session takes no line at all (refused, not asked).
        "Enter twice" if replay || attached => None,
        "e E v" if b.scope == Scope::TurnView && (replay || attached) => None,
        "q" if attached => Some(Binding {
            what: "quit (Ctrl+C quits from anywhere); the server and its sessions go on, yours until \
                   their handles expire",
            ..*b
        }),
        "Ctrl+Z" if replay || attached => Some(Binding {
            what: "suspend to the shell (fg brings it back)",
            ..*b
        }),
        "q" if replay => Some(Binding {
            what: "quit (Ctrl+C quits from anywhere)",
            ..*b
        }),
        _ => Some(*b),
    }
}

/// The fewest cells a description is given beside its keys; narrower, each key stands on its
/// own line above its text (at 40 columns the keys' column took the whole box and every
/// description was blank).
const WHAT_MIN: usize = 24;

/// The help's lines for the bindings of `scopes`, for a column `width` cells wide: each key
/// beside its text, or above it when the column is too narrow for both.
pub fn lines(c: &Console, width: usize, scopes: &[Scope]) -> Vec<Line<'static>> {
    let t = &c.theme;
    let shown: Vec<Binding> = BINDINGS
        .iter()
        .filter(|b| scopes.contains(&b.scope))
        .filter_map(|b| for_this_console(c, b))
        .collect();
    let keys_w = shown
        .iter()
        .map(|b| crate::text::width(b.keys))
        .max()
        .unwrap_or(10)
        + 2;
    let stacked = width < 2 + keys_w + WHAT_MIN;
    let what_w = if stacked {
        width.saturating_sub(4).max(8)
    } else {
        width.saturating_sub(keys_w + 2)
    };
    let mut out = Vec::new();
    let mut scope: Option<Scope> = None;
    for b in &shown {
        if scope != Some(b.scope) {
            if scope.is_some() {
                out.push(Line::default());
            }
            out.push(Line::styled(b.scope.heading().to_string(), t.title));
            scope = Some(b.scope);
        }
        if stacked {
            out.push(Line::from(vec![
                Span::raw("  "),
                Span::styled(b.keys.to_string(), t.key),
            ]));
            for piece in wrap(b.what, what_w) {
                out.push(Line::from(vec![
                    Span::raw("    "),
                    Span::styled(piece, t.overlay),
                ]));
            }
            continue;
        }
        for (i, piece) in wrap(b.what, what_w).into_iter().enumerate() {
            let keys = if i == 0 { b.keys } else { "" };
            out.push(Line::from(vec![
                Span::raw("  "),
                Span::styled(pad(keys, keys_w), t.key),
                Span::styled(piece, t.overlay),
            ]));
        }
    }
    out
}

const LEFT: &[Scope] = &[
    Scope::Global,
    Scope::Input,
    Scope::Lists,
    Scope::Frames,
    Scope::ScopeToggle,
];
const RIGHT: &[Scope] = &[
    Scope::Sessions,
    Scope::Transcript,
    Scope::TurnView,
    Scope::Tools,
    Scope::Mcp,
];
/// Every heading, in the order the one-column help lists them.
pub(crate) const ALL: &[Scope] = &[
    Scope::Global,
    Scope::Input,
    Scope::Lists,
    Scope::Sessions,
    Scope::Transcript,
    Scope::TurnView,
    Scope::Tools,
    Scope::Mcp,
    Scope::Frames,
    Scope::ScopeToggle,
];

/// The help's columns laid out in `inner` (positions relative to it), with their lines.
fn columns(c: &Console, inner: Rect, two: bool) -> Vec<(Rect, Vec<Line<'static>>)> {
    if two {
        let [left, right] = ratatui::layout::Layout::horizontal([
            ratatui::layout::Constraint::Percentage(50),
            ratatui::layout::Constraint::Percentage(50),
        ])
        .spacing(2)
        .areas(inner);
        vec![
            (left, lines(c, left.width as usize, LEFT)),
            (right, lines(c, right.width as usize, RIGHT)),
        ]
    } else {
        vec![(inner, lines(c, inner.width as usize, ALL))]
    }
}

/// The least box the help is drawn in (its borders included): narrower or shorter, a line
/// says to make the terminal larger.
const MIN_W: u16 = 20;
/// See [`MIN_W`]: the box's borders and at least five lines.
const MIN_H: u16 = 9;

/// Draws the overlay: two columns when the screen is wide enough, else one that scrolls.
pub fn draw(f: &mut Frame, screen: Rect, c: &Console) {
    let two = screen.width >= 120;
    let w = screen
        .width
        .saturating_sub(6)
        .min(if two { 150 } else { 96 });
    if w < MIN_W || screen.height < MIN_H {
        crate::draw::too_small(f, screen, c, "the help");
        return;
    }
    let probe = Rect::new(0, 0, w.saturating_sub(2), screen.height);
    let columns = columns(c, probe, two);
    let tallest = columns.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
    let h = (tallest as u16 + 2).min(screen.height.saturating_sub(4));
    let area = Rect::new(
        screen.x + (screen.width - w) / 2,
        screen.y + (screen.height - h) / 2,
        w,
        h,
    );
    let t = &c.theme;
    let inner = area.inner(ratatui::layout::Margin::new(1, 1));
    let columns: Vec<(Rect, Vec<Line<'static>>)> = columns
        .into_iter()
        .map(|(r, l)| (Rect::new(inner.x + r.x, inner.y, r.width, inner.height), l))
        .collect();
    let tallest = columns.iter().map(|(_, l)| l.len()).max().unwrap_or(0);
    let max = tallest.saturating_sub(inner.height as usize);
    let scroll = c.help.scroll.get().min(max);
    c.help.scroll.set(scroll);
    let more = if max > 0 { " ↑↓ scroll ·" } else { "" };
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .border_style(t.border_focused)
        .style(t.overlay)
        .title(Line::styled(" Keys ", t.title))
        .title_bottom(Line::styled(format!("{more} Esc or ? closes "), t.dim));
    f.render_widget(Clear, area);
    f.render_widget(block, area);
    for (rect, col) in columns {
        f.render_widget(
            Paragraph::new(col.into_iter().skip(scroll).collect::<Vec<_>>()),
            rect,
        );
    }
}
