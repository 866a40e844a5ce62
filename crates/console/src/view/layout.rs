//! Where each pane goes on the screen, for drawing and for mouse hits.
//!
//! Wide terminals (at least [`WIDE`] cells) get two columns: Sessions, Transcript and Input
//! on the left, the inspector (Frames, Progress, Tools, Stats as tabs) on the right. Narrow
//! ones stack everything. A resize simply lays the screen out again.

use ratatui::layout::{Constraint, Layout, Position, Rect};

use crate::text::width;
use crate::view::ids::PaneId;

/// The width from which the screen has two columns.
pub const WIDE: u16 = 110;

/// The inspector's tabs, in order.
pub const TABS: [PaneId; 6] = [
    PaneId::Frames,
    PaneId::Progress,
    PaneId::Tools,
    PaneId::Stats,
    PaneId::Log,
    PaneId::Mcp,
];

/// The screen's areas.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Areas {
    /// The header bar (two lines).
    pub header: Rect,
    /// The footer bar (one line).
    pub footer: Rect,
    /// The Sessions pane.
    pub sessions: Rect,
    /// The Transcript pane.
    pub transcript: Rect,
    /// The Input pane.
    pub input: Rect,
    /// The inspector (Frames, Progress, Tools or Stats).
    pub inspector: Rect,
    /// Where each tab's label sits on the inspector's top border.
    pub tabs: [Rect; TABS.len()],
}

/// Where each tab's label sits on the inspector's top border.
fn tabs_on(inspector: Rect) -> [Rect; TABS.len()] {
    let mut tabs = [Rect::default(); TABS.len()];
    let mut x = inspector.x + 1;
    for (slot, pane) in tabs.iter_mut().zip(TABS) {
        let w = width(&tab_label(pane)) as u16;
        let right = inspector.right().saturating_sub(1);
        let start = x.min(right);
        *slot = Rect::new(start, inspector.y, w.min(right - start), 1);
        x = x.saturating_add(w + 1);
    }
    tabs
}

/// The fewest rows a pane is drawn in: its two borders and one row inside.
pub const MIN_PANE: u16 = 3;

/// The fewest rows of the Sessions pane: its borders, its column heads and one session.
pub const SESSIONS_MIN: u16 = 4;

/// The rows the focused pane is given first on a short screen (three inside its borders), when
/// the screen has them.
pub const FOCUS_ROWS: u16 = 5;

/// The heights of panes stacked in a column of `height` rows too short for every pane's least
/// height (`mins`, top to bottom: Sessions, Transcript, Input, and the inspector when stacked),
/// or `None` when all fit. The focused pane (`focused`, an index) is given [`FOCUS_ROWS`]
/// first (the Input pane its own least, and the Transcript, where its reply appears,
/// [`FOCUS_ROWS`] with it), as many as there are; then the others, the Input
/// pane first (where a line is typed), the Transcript next (where its reply appears), then top
/// to bottom, each while its least still fits. The rows left over grow the focused pane, or,
/// when that is the Input pane or the column does not hold it, the Transcript, else the first
/// shown. A pane given no rows is hidden.
pub fn short_column(height: u16, mins: &[u16], focused: Option<usize>) -> Option<Vec<u16>> {
    const TRANSCRIPT: usize = 1;
    const INPUT: usize = 2;
    if mins.iter().sum::<u16>() <= height {
        return None;
    }
    let mut heights = vec![0u16; mins.len()];
    let mut left = height;
    if let Some(f) = focused {
        let want = if f == INPUT {
            mins[f]
        } else {
            FOCUS_ROWS.max(mins[f])
        };
        heights[f] = want.min(left);
        left -= heights[f];
        // Typing, the reply is what is read: the Transcript comes with the Input pane.
        if f == INPUT && TRANSCRIPT < mins.len() {
            heights[TRANSCRIPT] = FOCUS_ROWS.max(mins[TRANSCRIPT]).min(left);
            if heights[TRANSCRIPT] < mins[TRANSCRIPT] {
                heights[TRANSCRIPT] = 0;
            }
            left -= heights[TRANSCRIPT];
        }
    }
    let order = [INPUT, TRANSCRIPT]
        .into_iter()
        .chain((0..mins.len()).filter(|i| *i != INPUT && *i != TRANSCRIPT));
    for i in order.filter(|i| *i < mins.len() && Some(*i) != focused) {
        if heights[i] == 0 && mins[i] <= left {
            heights[i] = mins[i];
            left -= mins[i];
        }
    }
    let grow = focused
        .filter(|f| *f != INPUT)
        .or((heights[TRANSCRIPT] > 0).then_some(TRANSCRIPT))
        .or(focused)
        .or_else(|| heights.iter().position(|h| *h > 0));
    if let Some(g) = grow {
        heights[g] += left;
    }
    Some(heights)
}

/// `area` cut into rows of `heights`, top to bottom.
fn stack<const N: usize>(area: Rect, heights: Vec<u16>) -> [Rect; N] {
    let mut out = [Rect::default(); N];
    let mut y = area.y;
    for (slot, h) in out.iter_mut().zip(heights) {
        *slot = Rect::new(area.x, y, area.width, h);
        y += h;
    }
    out
}

/// A tab's label: ` 4 Frames `.
pub fn tab_label(pane: PaneId) -> String {
    format!(" {} {} ", pane.number(), pane.title())
}

impl Areas {
    /// Lays out a screen of `size` whose session list has `session_rows` rows and whose input
    /// holds `input_lines` lines. Stacked (narrow), the Transcript and the inspector share what
    /// is left two to one, the larger share to the one `focus` is on or nearest. A screen too
    /// short for every pane gives up chrome before the focused pane's rows: the header's lines
    /// and the footer below [`FOCUS_ROWS`] of body, and the other panes (see [`short_column`]).
    pub fn compute(size: Rect, session_rows: usize, input_lines: usize, focus: PaneId) -> Areas {
        // The header's second line goes first, then its first, then the footer.
        let footer_h = u16::from(size.height > MIN_PANE);
        let header_h = size.height.saturating_sub(footer_h + MIN_PANE).min(2);
        let [header, body, footer] = Layout::vertical([
            Constraint::Length(header_h),
            Constraint::Min(0),
            Constraint::Length(footer_h),
        ])
        .areas(size);
        let input_h = (input_lines as u16 + 2).clamp(3, 8);
        let sessions_h = (session_rows as u16 + 3).clamp(4, 12);
        let (sessions, transcript, input, inspector) = if size.width >= WIDE {
            let [left, right] =
                Layout::horizontal([Constraint::Percentage(46), Constraint::Percentage(54)])
                    .areas(body);
            let [s, t, i] = match short_column(
                left.height,
                &[SESSIONS_MIN, MIN_PANE, input_h],
                [PaneId::Sessions, PaneId::Transcript, PaneId::Input]
                    .iter()
                    .position(|p| *p == focus),
            ) {
                Some(heights) => stack(left, heights),
                None => Layout::vertical([
                    Constraint::Length(sessions_h.min(left.height / 3).max(SESSIONS_MIN)),
                    Constraint::Min(MIN_PANE),
                    Constraint::Length(input_h),
                ])
                .areas(left),
            };
            (s, t, i, right)
        } else {
            let focused = if focus.is_inspector() {
                3
            } else {
                match focus {
                    PaneId::Sessions => 0,
                    PaneId::Transcript => 1,
                    _ => 2,
                }
            };
            let [s, t, i, r] = match short_column(
                body.height,
                &[SESSIONS_MIN, MIN_PANE, input_h, MIN_PANE],
                Some(focused),
            ) {
                Some(heights) => stack(body, heights),
                None => {
                    let (transcript_share, inspector_share) =
                        if focus.is_inspector() { (1, 2) } else { (2, 1) };
                    let sessions = sessions_h.min(body.height / 4).max(SESSIONS_MIN);
                    let areas: [Rect; 4] = Layout::vertical([
                        Constraint::Length(sessions),
                        Constraint::Fill(transcript_share),
                        Constraint::Length(input_h),
                        Constraint::Fill(inspector_share),
                    ])
                    .areas(body);
                    // Two to one, but neither below a pane's least (all fit: `short_column`).
                    if areas[1].height.min(areas[3].height) < MIN_PANE {
                        let rest = areas[1].height + areas[3].height;
                        let larger = rest - MIN_PANE;
                        let (transcript, inspector) = if focus.is_inspector() {
                            (MIN_PANE, larger)
                        } else {
                            (larger, MIN_PANE)
                        };
                        stack(body, vec![sessions, transcript, input_h, inspector])
                    } else {
                        areas
                    }
                }
            };
            (s, t, i, r)
        };
        Areas {
            header,
            footer,
            sessions,
            transcript,
            input,
            inspector,
            tabs: if inspector.is_empty() {
                Default::default()
            } else {
                tabs_on(inspector)
            },
        }
    }

    /// Everything between the header and the footer.
    pub fn body(&self) -> Rect {
        let top = self.header.bottom();
        Rect::new(
            self.header.x,
            top,
            self.header.width,
            self.footer.y.saturating_sub(top),
        )
    }

    /// The same screen with `pane` (an inspector pane: the inspector) over the whole body
    /// and the other panes hidden (empty areas).
    pub fn zoomed(self, pane: PaneId) -> Areas {
        let body = self.body();
        let mut out = Areas {
            header: self.header,
            footer: self.footer,
            ..Areas::default()
        };
        match pane {
            PaneId::Sessions => out.sessions = body,
            PaneId::Transcript => out.transcript = body,
            PaneId::Input => out.input = body,
            _ => {
                out.inspector = body;
                out.tabs = tabs_on(body);
            }
        }
        out
    }

    /// The pane under a screen position; the inspector counts as `shown`, its visible tab.
    pub fn pane_at(&self, x: u16, y: u16, shown: PaneId) -> Option<PaneId> {
        let p = Position::new(x, y);
        if let Some(i) = self.tabs.iter().position(|r| r.contains(p)) {
            return Some(TABS[i]);
        }
        [
            (self.sessions, PaneId::Sessions),
            (self.transcript, PaneId::Transcript),
            (self.input, PaneId::Input),
            (self.inspector, shown),
        ]
        .into_iter()
        .find(|(r, _)| r.contains(p))
        .map(|(_, pane)| pane)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_and_narrow_layouts_cover_the_body() {
        let wide = Areas::compute(Rect::new(0, 0, 140, 40), 3, 1, PaneId::Input);
        assert_eq!(wide.header.height, 2);
        assert_eq!(wide.footer.y, 39);
        assert!(wide.inspector.x > wide.sessions.x);
        assert_eq!(wide.sessions.height, 6);
        assert_eq!(wide.input.height, 3);
        let narrow = Areas::compute(Rect::new(0, 0, 80, 40), 3, 1, PaneId::Input);
        assert_eq!(narrow.inspector.x, narrow.sessions.x);
        assert!(narrow.inspector.y > narrow.input.y);
        assert!(narrow.transcript.height > narrow.inspector.height);
        let inspecting = Areas::compute(Rect::new(0, 0, 80, 40), 3, 1, PaneId::Frames);
        assert!(inspecting.inspector.height > inspecting.transcript.height);
        assert_eq!(
            wide.tabs.len(),
            TABS.len(),
            "every tab, MCP included, can be clicked"
        );
    }

    #[test]
    fn hits_find_panes_and_tabs() {
        let a = Areas::compute(Rect::new(0, 0, 140, 40), 3, 1, PaneId::Input);
        assert_eq!(
            a.pane_at(a.sessions.x + 1, a.sessions.y + 1, PaneId::Frames),
            Some(PaneId::Sessions)
        );
        assert_eq!(
            a.pane_at(a.input.x + 2, a.input.y + 1, PaneId::Frames),
            Some(PaneId::Input)
        );
        assert_eq!(
            a.pane_at(a.inspector.x + 5, a.inspector.y + 5, PaneId::Stats),
            Some(PaneId::Stats)
        );
        let tools = a.tabs[2];
        assert_eq!(
            a.pane_at(tools.x + 1, tools.y, PaneId::Frames),
            Some(PaneId::Tools)
        );
        assert_eq!(a.pane_at(0, 0, PaneId::Frames), None);
    }
}
