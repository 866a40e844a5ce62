//! The Transcript pane: the selected session's lines and replies, the reply streaming as its
//! pieces arrive, each turn closed by a boundary with its end reason, rounds, tool calls and
//! timings.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{bottom_window, dim_piece, inner, pane_block};
use crate::state::TurnView;
use crate::text::{micros, wrap};
use crate::view::console::Console;
use crate::view::ids::PaneId;

/// Width of the speaker column (`you  `, `bot  `, `tool `).
const GUTTER: usize = 5;

/// Draws the pane.
pub fn draw(f: &mut Frame, area: Rect, c: &Console) {
    let mut extra = Vec::new();
    if let Some(n) = c.selected {
        let who = c
            .state
            .session(n)
            .map(|r| format!("{} {}", c.state.session_name(n), r.opener_label()))
            .unwrap_or_else(|| format!("#{n}"));
        extra.push(dim_piece(c, who));
        if let Some(label) = c.state.session(n).and_then(|r| r.takeover_label()) {
            extra.push(Span::styled(format!("· ↷ {label} "), c.theme.warn));
        }
        if let Some(row) = c.state.session(n)
            && row.is_closed()
        {
            extra.push(Span::styled(
                format!("· {} ", row.activity.label()),
                c.theme.warn,
            ));
        }
    }
    if let Some(editing) = &c.transcript.search_editing {
        let (before, after) = editing.split();
        extra.push(Span::styled(
            format!("· search: {before}▏{after} "),
            c.theme.key,
        ));
    }
    let body = inner(area);
    let mut lines = lines(c, body.width.max(1) as usize);
    if c.transcript.search_editing.is_none() && !c.transcript.search.is_empty() {
        let needle = c.transcript.search.to_lowercase();
        let hits = lines
            .iter()
            .filter(|l| l.to_string().to_lowercase().contains(&needle))
            .count();
        let found = if hits == 0 {
            "no match ".to_string()
        } else {
            format!(
                "{} of {hits} ",
                hits - c.transcript.search_hit.get().min(hits - 1)
            )
        };
        extra.push(Span::styled(
            format!("· search: {} · {found}", c.transcript.search),
            if hits == 0 { c.theme.warn } else { c.theme.key },
        ));
    }
    if c.transcript.back.get() > 0 && c.transcript.search.is_empty() {
        extra.push(Span::styled("· scrolled (End follows) ", c.theme.warn));
    }
    let block = pane_block(c, PaneId::Transcript, extra, area.width);
    f.render_widget(block, area);
    if body.height == 0 || body.width == 0 {
        return;
    }
    let height = body.height as usize;
    c.shown_rows(PaneId::Transcript, height);
    if !c.transcript.search.is_empty() {
        search(c, &mut lines, height);
    }
    let (start, end) = bottom_window(&lines, height, &c.transcript.back);
    f.render_widget(Paragraph::new(lines[start..end].to_vec()), body);
}

/// Marks the lines matching the search (any case) and scrolls the chosen match, counted back
/// from the newest, into the middle of the pane.
fn search(c: &Console, lines: &mut [Line<'static>], height: usize) {
    let needle = c.transcript.search.to_lowercase();
    let hits: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.to_string().to_lowercase().contains(&needle))
        .map(|(i, _)| i)
        .collect();
    if hits.is_empty() {
        return;
    }
    let back = c.transcript.search_hit.get().min(hits.len() - 1);
    c.transcript.search_hit.set(back);
    let at = hits[hits.len() - 1 - back];
    for i in &hits {
        let marked = std::mem::take(&mut lines[*i]).patch_style(c.theme.key);
        lines[*i] = marked;
    }
    lines[at] = std::mem::take(&mut lines[at]).patch_style(c.theme.selected);
    c.transcript
        .back
        .set(lines.len().saturating_sub(at + 1 + height / 2));
}

/// Every line of the selected session's transcript, wrapped to `width` cells.
pub fn lines(c: &Console, width: usize) -> Vec<Line<'static>> {
    let t = &c.theme;
    let mut out = Vec::new();
    let Some(session) = c.selected else {
        let text = if c.no_chat_here {
            "This server is no bot: it offers no start and chat tools, so nothing here chats. \
             Its tools are in 6 Tools, where each can be called by hand."
        } else if c.start_on_first_line && c.own.is_none() {
            // Attached: nothing was started on the bot; the person's first line starts it.
            "No session of yours yet: type a line below and press Enter to start one on the \
             bot (n in Sessions (1) starts one without a line)."
        } else {
            "No session selected."
        };
        for piece in wrap(text, width) {
            out.push(Line::styled(piece, t.dim));
        }
        return out;
    };
    // The session's own (a watched server's, a replay's, one opened before a reload
    // changed it, a stored one's: none when it had none), else this console's bot's.
    let standing_in = c.state.greeting.as_deref();
    let greeting = match c.state.session(session) {
        Some(row) => row.greeting.shown(standing_in),
        None => standing_in,
    };
    if let Some(greeting) = greeting {
        speaker(&mut out, "bot", greeting, t.bot, t.bot, width);
    }
    let turns = c.state.transcript(session);
    // Turns let go to keep within the console's memory are said, not passed over: an empty
    // transcript read "No turns yet." of a session that had a hundred.
    let let_go = c.state.transcript_dropped(session);
    if let_go > 0 {
        let text = format!(
            "{} of #{session} let go, oldest first, to keep the console within its memory \
             (console.max_mib).",
            match let_go {
                1 => "1 earlier turn".to_string(),
                n => format!("{n} earlier turns"),
            }
        );
        for piece in wrap(&text, width) {
            out.push(Line::styled(piece, t.dim));
        }
        if turns.is_empty() {
            return out;
        }
    }
    let unshown = c.state.transcript_unshown(session);
    if unshown > 0 {
        let text = format!(
            "{} of #{session} not shown: the console keeps only a session's latest turns in view.",
            match unshown {
                1 => "1 earlier turn".to_string(),
                n => format!("{n} earlier turns"),
            }
        );
        for piece in wrap(&text, width) {
            out.push(Line::styled(piece, t.dim));
        }
    }
    if turns.is_empty()
        && let Some(error) = c.state.stored_read_failure(session)
    {
        stored_read_failed(c, error, width, &mut out);
        return out;
    }
    if turns.is_empty() {
        let yours = Some(session) == c.own && !c.read_only;
        let row = c.state.session(session);
        // Another session the person opened here (`n`).
        let opened_here = !c.read_only
            && row.is_some_and(|row| {
                row.mine || matches!(row.opener, turnscope::observe::SessionOpener::Console)
            });
        // A line can go into it from here: open, and not refused (closed, another client's).
        let chats = !c.read_only
            && !c.watching_only()
            && !c.no_chat_here
            && row.is_some_and(|row| !row.is_closed() && !row.is_stored())
            && (Some(session) != c.selected || c.refused().is_none());
        let loading = row.is_some_and(|row| row.is_stored() && row.turns > 0);
        let worker = row.is_some_and(|row| {
            turnscope::attach::whisker::fold::is_worker(&row.opener, &row.handle_prefix)
        });
        let hint = if loading {
            "Reading this stored session's turns from the store…"
        } else if worker {
            // Whisker sends frames to the client reading as they pass, and its buffer of what
            // went before only to its first client: a worker that ran before may show none.
            "No turns seen yet. Whisker hands what passed before a client connected only to \
             its first client: turns this worker ran before may be missing, and a worker that \
             ended before then is still listed as open."
        } else if yours || opened_here {
            "No turns yet. Type a line below and press Enter."
        } else {
            "No turns yet."
        };
        for piece in wrap(hint, width) {
            out.push(Line::styled(piece, t.dim));
        }
        if yours && let Some(gone) = &c.state.gone_of_yours {
            for piece in wrap(gone, width) {
                out.push(Line::styled(piece, t.dim));
            }
        }
        if yours && let Some(earlier) = c.state.latest_stored_of_yours() {
            let turns = match earlier.turns {
                1 => "1 turn".to_string(),
                n => format!("{n} turns"),
            };
            let text = format!(
                "Your conversation {} from before ({turns}) is stored: select it in Sessions (1) \
                 and type to go on with it.",
                earlier.handle_prefix
            );
            for piece in wrap(&text, width) {
                out.push(Line::styled(piece, t.dim));
            }
        }
        // The header names the model (at start, and after a reload that changed it). Every
        // empty transcript a line can go into says it, not the first session's alone.
        if (yours || chats) && turnscope::app::describes_embedded(&c.state.header.model) {
            for piece in wrap(&scripted_model_hint(c), width) {
                out.push(Line::styled(piece, t.dim));
            }
        }
    }
    for turn in turns {
        turn_lines(c, session, turn, width, &mut out);
    }
    if c.input_line.waiting.contains_key(&session) && turns.last().is_none_or(|t| t.end.is_some()) {
        out.push(Line::styled("     … waiting for the turn to start", t.dim));
    }
    out
}

/// A stored session whose turns the store failed to give: what happened (the store's
/// `error`) and what to do.
fn stored_read_failed(c: &Console, error: &str, width: usize, out: &mut Vec<Line<'static>>) {
    let t = &c.theme;
    let said = format!("Could not read this stored session's turns: {error}");
    for piece in wrap(&said, width) {
        out.push(Line::styled(piece, t.error));
    }
    let next = "Select another session and this one again to read it again; if it keeps \
                failing, check the store (the file or Redis server --store names).";
    for piece in wrap(next, width) {
        out.push(Line::styled(piece, t.dim));
    }
}

/// What the embedded scripted model answers, for a person's first line: it echoes a line,
/// and calls a tool the line names (the bot's first tool, as the example).
fn scripted_model_hint(c: &Console) -> String {
    let example = c
        .state
        .tools
        .iter()
        .map(|tool| tool.name.as_str())
        .find(|name| *name != "end_session")
        .map(|name| format!(" (try: use the {name})"))
        .unwrap_or_default();
    // Two lines at 80 columns: the pane may be three tall, and it shows its newest lines,
    // so a longer hint would push "Type a line below" out of sight.
    format!(
        "The embedded scripted model echoes a line and calls a tool it names{example}; \
         --model-url points at a real model."
    )
}

/// Who said a turn's line: `you`, the person at this console (a line typed here, or any line
/// of a session a console opened), else `user`, the client that opened the session (Claude
/// Code's lines in its session are not the person's).
pub(super) fn speaker_of(c: &Console, session: u64, turn: &TurnView) -> &'static str {
    let clients = c.state.session(session).is_some_and(|row| {
        !row.mine && !matches!(row.opener, turnscope::observe::SessionOpener::Console)
    });
    if clients && !turn.typed_here {
        "user"
    } else {
        "you"
    }
}

fn turn_lines(
    c: &Console,
    session: u64,
    turn: &TurnView,
    width: usize,
    out: &mut Vec<Line<'static>>,
) {
    let t = &c.theme;
    let who = speaker_of(c, session, turn);
    if turn.line.is_empty() {
        out.push(Line::styled(
            format!("{who:<GUTTER$}(empty line: read the turn in flight)"),
            t.dim,
        ));
    } else {
        speaker(out, who, &turn.line, t.user, t.text, width);
    }
    for tool in &turn.tools {
        let style = if tool.error { t.error } else { t.tool };
        let head = super::tool_call::head(tool, width.saturating_sub(GUTTER).max(8));
        out.push(Line::from(vec![
            Span::styled(format!("{:<GUTTER$}", "tool"), t.tool),
            Span::styled(head, style),
        ]));
        out.extend(super::tool_call::lines(
            tool,
            width,
            GUTTER,
            true,
            (t.error, t.text, t.dim),
        ));
    }
    let streaming = turn.end.is_none();
    if !turn.reply.is_empty() || streaming {
        let mut reply = turn.reply.trim_start().to_string();
        if streaming {
            reply.push('▍');
        }
        speaker(out, "bot", &reply, t.bot, t.bot, width);
    }
    out.extend(boundary(c, session, turn, width));
}

fn speaker(
    out: &mut Vec<Line<'static>>,
    who: &str,
    text: &str,
    who_style: Style,
    style: Style,
    width: usize,
) {
    let body_w = width.saturating_sub(GUTTER).max(1);
    for (i, piece) in wrap(text, body_w).into_iter().enumerate() {
        let gutter = if i == 0 {
            format!("{who:<GUTTER$}")
        } else {
            " ".repeat(GUTTER)
        };
        out.push(Line::from(vec![
            Span::styled(gutter, who_style),
            Span::styled(piece, style),
        ]));
    }
}

/// `── turn 2 · completed · 1 round · 1 tool call · first 12.0 ms · total 240 ms ──`, on two
/// lines (the figures under the rule) when that does not fit; a turn that became an MCP task
/// says so first among the figures (`task 0f1e2d3c completed · 17 polls · collected …`).
fn boundary(c: &Console, session: u64, turn: &TurnView, width: usize) -> Vec<Line<'static>> {
    let t = &c.theme;
    let mut parts = vec![format!("turn {}", turn.id)];
    let end_style = match turn.end.as_deref() {
        None => {
            parts.push("streaming".into());
            t.accent
        }
        Some(end) => {
            parts.push(end.to_string());
            if end == "completed" {
                t.ok
            } else if end.starts_with("error") {
                t.error
            } else {
                t.warn
            }
        }
    };
    let plural = |n: usize, one: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {one}s")
        }
    };
    let mut figures: Vec<String> = c
        .state
        .tasks
        .of_turn(session, turn.id)
        .map(|task| task.summary())
        .into_iter()
        .collect();
    figures.push(plural(turn.rounds as usize, "round"));
    figures.push(plural(turn.tools.len(), "tool call"));
    if let Some(first) = turn.first_piece_us {
        figures.push(format!("first {}", micros(first)));
    }
    if let Some(total) = turn.total_us {
        figures.push(format!("total {}", micros(total)));
    }
    if let Some(u) = &turn.usage {
        figures.push(crate::state::wire::tokens_label(u));
    }
    if turn.reasoning_bytes > 0 {
        figures.push(format!("reasoning {} B", turn.reasoning_bytes));
    }
    if let Some(clock) = turn.clock {
        figures.push(clock.label().to_string());
    }
    let head = format!("── {} · ", parts[0]);
    let tail = format!(" · {} ", figures.join(" · "));
    let w = crate::text::width;
    let used = w(&head) + w(&parts[1]) + w(&tail);
    if used + 2 <= width {
        let rule = "─".repeat(width - used);
        return vec![Line::from(vec![
            Span::styled(head, t.boundary),
            Span::styled(parts[1].clone(), end_style),
            Span::styled(tail, t.boundary),
            Span::styled(rule, t.boundary),
        ])];
    }
    // An end reason too long for the rule's line (an error's whole message) is named there by
    // its kind and given whole, wrapped, under it: cut at the pane's edge it was unreadable.
    let (label, told) = match parts[1].split_once(": ") {
        Some((kind, _)) if w(&head) + w(&parts[1]) + 2 > width => (kind.to_string(), true),
        _ => (parts[1].clone(), false),
    };
    let rule = "─".repeat(width.saturating_sub(w(&head) + w(&label) + 1));
    let mut lines = vec![Line::from(vec![
        Span::styled(head, t.boundary),
        Span::styled(label, end_style),
        Span::styled(format!(" {rule}"), t.boundary),
    ])];
    if told {
        lines.extend(
            wrap(&parts[1], width.saturating_sub(3))
                .into_iter()
                .map(|l| Line::styled(format!("   {l}"), end_style)),
        );
    }
    lines.extend(
        crate::text::wrap_items(&figures, width.saturating_sub(3))
            .into_iter()
            .map(|l| Line::styled(format!("   {l}"), t.boundary)),
    );
    lines
}
