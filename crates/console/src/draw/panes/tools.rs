//! The Tools pane: the tool sources' states, every tool the bot has (by source) and the
//! ones that were skipped, and the selected tool's description, what OpenAI strict mode,
//! Gemini or Claude would refuse in its schema (`~` in the list), its input schema
//! pretty-printed, the `parameters` the OpenAI bridge converts it to, and any skip,
//! collision, rename or dropped fragment explained. In place of that detail: a hand-call form
//! or the list of hand calls ([`hand_call`](super::hand_call)).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::hand_call::Scrolled;
use crate::state::{Source, ToolView};
use crate::text::{truncate, width, wrap, wrap_line};
use crate::view::console::Console;
use crate::view::ids::PaneId;
use crate::view::nav::Follow;

/// Splits the inspector's inside, below the sources line, into the tool list and the
/// detail (the mouse uses this too): the list as wide as its longest row (mark, name, space,
/// source, border), at most a third of the pane (30 cells), at least 20 (its count and
/// legend), so short names leave the form and the detail their room.
pub fn split(area: Rect, tools: &[ToolView]) -> (Rect, Rect) {
    let below = Rect {
        y: area.y + 1,
        height: area.height.saturating_sub(1),
        ..area
    };
    let rows = tools
        .iter()
        .map(|t| width(&t.name) + width(&t.source) + 3)
        .max()
        .unwrap_or(0);
    let most = (area.width / 3).clamp(14, 30);
    let list_w = u16::try_from(rows)
        .unwrap_or(u16::MAX)
        .clamp(20.min(most), most);
    let [list, detail] =
        Layout::horizontal([Constraint::Length(list_w), Constraint::Min(0)]).areas(below);
    (list, detail)
}

/// Whether the console is attached to a bot it does not run: its tools are the target's
/// `tools/list`, which no bridge of ours offers.
fn attached(c: &Console) -> bool {
    matches!(c.state.header.source, Source::Attached { .. })
}

fn sources_line(c: &Console, width: usize) -> Line<'static> {
    let t = &c.theme;
    let sources: Vec<&String> = c.state.tool_sources().collect();
    let text = if sources.is_empty() && attached(c) {
        if c.state.tools.iter().any(|t| t.elsewhere) {
            "listed: the attached bot's tools/list, then the tools its model is offered".to_string()
        } else {
            "none seen from here; listed: the attached bot's own tools/list".to_string()
        }
    } else if sources.is_empty() {
        "no MCP servers configured".to_string()
    } else if sources.len() == 1 {
        sources[0].clone()
    } else {
        // Several: each one's state and count, so a long failure cannot hide the others; the
        // first one in trouble last, with its words (cut at the pane's edge; the Log has
        // them whole).
        let troubled = sources.iter().position(|s| !serving(s));
        let mut parts: Vec<String> = sources
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != troubled)
            .map(|(_, s)| short_source(s))
            .collect();
        if let Some(i) = troubled {
            parts.push(sources[i].clone());
        }
        parts.join(" · ")
    };
    Line::from(vec![
        Span::styled("sources: ", t.dim),
        Span::styled(truncate(&text, width.saturating_sub(9)), t.accent),
    ])
}

/// Whether a source's line (`ConsoleState::tool_sources`: `name (transport): state, N tools…`
/// from events, `name (transport): up, N tools…` from the registry) says it serves its tools.
fn serving(line: &str) -> bool {
    ["): connected,", "): refreshed,", "): up,", "): connecting"]
        .iter()
        .any(|state| line.contains(state))
}

/// A source's line in short: `files: 2 tools` for one serving, its line up to its state
/// (`web (http): failed, retrying`) for one that is not.
fn short_source(line: &str) -> String {
    let name = line.split(" (").next().unwrap_or(line);
    if serving(line)
        && let Some(i) = line.find(" tools")
    {
        let count = line[..i].rsplit(' ').next().unwrap_or("?");
        return format!("{name}: {count} tools");
    }
    match line.find("): ") {
        Some(at) => {
            let state = &line[at + 3..];
            let state = state.split([',', ':']).next().unwrap_or(state);
            format!("{name}: {state}")
        }
        None => line.to_string(),
    }
}

/// Draws the pane into the inspector's inside.
pub fn draw(f: &mut Frame, area: Rect, c: &Console) {
    let t = &c.theme;
    let tools = &c.state.tools;
    if tools.is_empty() {
        let text = c
            .state
            .tools_note
            .clone()
            .unwrap_or_else(|| "This bot has no tools.".into());
        f.render_widget(
            Paragraph::new(Line::styled(text, t.dim)).wrap(ratatui::widgets::Wrap { trim: true }),
            area,
        );
        return;
    }
    f.render_widget(Paragraph::new(sources_line(c, area.width as usize)), area);
    let (list_area, detail_area) = split(area, &c.state.tools);
    let offered = tools.iter().filter(|t| t.skipped.is_none()).count();
    let skipped = tools.len() - offered;
    let mut list = vec![Line::styled(
        if skipped > 0 {
            format!("{offered} tools, {skipped} skipped")
        } else {
            format!("{offered} tools")
        },
        t.dim,
    )];
    let visible = list_area.height.saturating_sub(1) as usize;
    let (start, end) = c.tools.nav.window(tools.len(), visible);
    let name_w = list_area.width.saturating_sub(2) as usize;
    for (i, tool) in tools.iter().enumerate().take(end).skip(start) {
        let warn = if tool.skipped.is_some() {
            "✗"
        } else if !tool.notes.is_empty() {
            "!"
        } else if tool.unserved {
            "~"
        } else {
            " "
        };
        // The name whole first; the source (the detail names it too) cut to what is left,
        // or left out when too little is.
        let name = truncate(&tool.name, name_w);
        let room = name_w.saturating_sub(width(&name) + 1);
        let source = if room >= 4 {
            truncate(&tool.source, room)
        } else {
            String::new()
        };
        let gap = name_w.saturating_sub(width(&name) + width(&source));
        let line = Line::from(vec![
            Span::styled(warn.to_string(), t.warn),
            Span::styled(
                name,
                if tool.skipped.is_some() {
                    t.dim
                } else {
                    t.text
                },
            ),
            Span::raw(" ".repeat(gap)),
            Span::styled(source, t.dim),
        ]);
        list.push(if i == c.tools.nav.cursor {
            line.patch_style(t.selected)
        } else {
            line
        });
    }
    // What the list's marks mean, those it shows, under it where rows are left (the detail
    // says why, per tool).
    let marks = [
        (skipped > 0, "✗ not offered"),
        (
            tools.iter().any(|t| !t.notes.is_empty()),
            "! renamed or mended",
        ),
        (tools.iter().any(|t| t.unserved), "~ refused by a provider"),
    ];
    let legend: Vec<&str> = marks
        .iter()
        .filter(|(shown, _)| *shown)
        .map(|(_, mark)| *mark)
        .collect();
    if !legend.is_empty() && list.len() + 1 + legend.len() <= list_area.height as usize {
        list.push(Line::default());
        // Cut at a word where the list is narrow (a stray "~ refused by a provi" showed).
        let room = (list_area.width as usize).saturating_sub(1);
        list.extend(
            legend
                .into_iter()
                .map(|mark| crate::text::fit_words(Line::from(Span::styled(mark, t.dim)), room)),
        );
    }
    f.render_widget(
        Paragraph::new(list).block(Block::new().borders(Borders::RIGHT).border_style(t.border)),
        list_area,
    );
    let Some(tool) = tools.get(c.tools.nav.cursor) else {
        return;
    };
    let inner = Rect {
        x: detail_area.x + 1,
        width: detail_area.width.saturating_sub(1),
        ..detail_area
    };
    let w = inner.width as usize;
    use crate::view::hand_calls::Mode;
    let height = inner.height as usize;
    let (view, scroll_cell, follow) = match &c.tools.hand.mode {
        Mode::Detail => return draw_detail(f, inner, c, tool),
        Mode::Form(form) => (
            super::hand_call::form_lines(c, form, w),
            &form.scroll,
            form.follow.get(),
        ),
        Mode::Calls => (
            super::hand_call::calls_lines(c, w),
            &c.tools.scroll,
            c.tools.hand.follow.get(),
        ),
    };
    let scroll = scrolled(&view, scroll_cell.get(), follow, height);
    scroll_cell.set(scroll);
    let shown: Vec<Line> = view.lines.into_iter().skip(scroll).take(height).collect();
    f.render_widget(Paragraph::new(shown), inner);
}

/// Where a form or the list of calls is scrolled to, `height` rows shown: `scroll` kept in
/// range (the last row can reach the bottom), and moved only as far as `follow` asks, so
/// PgUp/PgDn take it anywhere (tour S: it was pulled back to the field edited at each draw,
/// and a long answer could not be read).
fn scrolled(view: &Scrolled, scroll: usize, follow: Follow, height: usize) -> usize {
    let max = view.lines.len().saturating_sub(height);
    let mut scroll = scroll.min(max);
    match follow {
        Follow::Cursor => {
            if let Some(at) = view.cursor {
                if at < scroll {
                    scroll = at;
                } else if height > 0 && at >= scroll + height {
                    scroll = at + 1 - height;
                }
            }
        }
        // The answer's head at the top once it is off the screen; the rest by PgDn.
        Follow::Answer => {
            if let Some(at) = view.answer
                && (at < scroll || at >= scroll + height)
            {
                scroll = at.min(max);
            }
        }
        Follow::Free => {}
    }
    scroll
}

/// Draws the selected tool's detail into `inner`: wrapped once per tool list, tool and width
/// (kept in the view), each draw taking only the rows on screen.
fn draw_detail(f: &mut Frame, inner: Rect, c: &Console, tool: &ToolView) {
    let (w, height) = (inner.width as usize, inner.height as usize);
    let key = (c.state.tools_generation(), c.tools.nav.cursor, w);
    let mut cache = c.tools.detail.borrow_mut();
    if cache.as_ref().is_none_or(|(k, _)| *k != key) {
        *cache = Some((key, detail_lines(c, tool, w)));
    }
    let rows = cache.as_ref().map(|(_, l)| l.as_slice()).unwrap_or(&[]);
    // Scrolling counts wrapped rows, so the last one can be scrolled to.
    // A page key in Tools pages this detail.
    c.shown_rows(PaneId::Tools, height);
    let scroll = c.tools.scroll.get().min(rows.len().saturating_sub(height));
    c.tools.scroll.set(scroll);
    let shown: Vec<Line> = rows.iter().skip(scroll).take(height).cloned().collect();
    f.render_widget(Paragraph::new(shown), inner);
}

/// The selected tool's detail, every line wrapped to `width` cells (JSON lines hang under
/// their key), so scrolling counts the rows drawn and the last one can be reached.
fn detail_lines(c: &Console, tool: &ToolView, width: usize) -> Vec<Line<'static>> {
    let t = &c.theme;
    let mut out = wrap_line(
        &Line::from(vec![
            Span::styled(tool.name.clone(), t.title),
            Span::styled(format!("  from {}", tool.source), t.dim),
        ]),
        width,
        2,
    );
    let say = |out: &mut Vec<Line<'static>>, text: &str, style| {
        for l in wrap(text, width) {
            out.push(Line::styled(l, style));
        }
    };
    if let Some(why) = &tool.skipped {
        say(&mut out, why, t.warn);
        return out;
    }
    say(&mut out, &tool.description, t.text);
    for note in &tool.notes {
        say(&mut out, &format!("! {note}"), t.warn);
    }
    if !tool.portability.is_empty() {
        out.push(Line::default());
        if tool.over_mcp {
            // Called over MCP here, which takes the schema as it is: news for a model's use
            // of it, not a fault of the tool.
            say(
                &mut out,
                "portability (what providers would refuse or change, were it offered to a \
                 model as it is; called here over MCP, it works as it is)",
                t.accent,
            );
            for finding in &tool.portability {
                say(&mut out, &format!("· {finding}"), t.dim);
            }
        } else {
            say(
                &mut out,
                "portability (what other providers would refuse or change)",
                t.accent,
            );
            for finding in &tool.portability {
                say(&mut out, &format!("~ {finding}"), t.warn);
            }
        }
    }
    if tool.elsewhere {
        say(
            &mut out,
            &format!(
                "runs where the watched bot runs, not from here (`turnscope tools call {}` there)",
                tool.name
            ),
            t.dim,
        );
        out.push(Line::default());
        // What the stream carries: the tool as the model gets it, not its MCP schema.
        say(
            &mut out,
            "parameters (as its model is offered them)",
            t.accent,
        );
        out.extend(json_lines(c, &tool.schema, width));
        return out;
    }
    if !c.read_only {
        say(
            &mut out,
            "Enter calls this tool by hand · h lists the hand calls",
            t.dim,
        );
    }
    out.push(Line::default());
    say(&mut out, "input schema (MCP)", t.accent);
    out.extend(json_lines(c, &tool.schema, width));
    out.push(Line::default());
    say(
        &mut out,
        if attached(c) {
            // An attached bot's MCP tools: no bridge of ours offers them.
            "OpenAI parameters (as turnscope's OpenAI bridge would convert them)"
        } else {
            "OpenAI parameters (as the OpenAI bridge sends them)"
        },
        t.accent,
    );
    match &tool.openai {
        Ok(json) if json == &tool.schema => say(&mut out, "same as the input schema", t.dim),
        Ok(json) => out.extend(json_lines(c, json, width)),
        Err(e) => say(&mut out, e, t.error),
    }
    out
}

/// Pretty JSON with keys, strings and punctuation styled apart, each line wrapped to `width`
/// cells with what follows hanging two cells under its indent.
fn json_lines(c: &Console, json: &str, width: usize) -> Vec<Line<'static>> {
    let t = &c.theme;
    json.lines()
        .flat_map(|l| {
            let indent = l.len() - l.trim_start().len();
            let rest = l.trim_start();
            let line = match rest.split_once("\": ") {
                Some((key, value)) if rest.starts_with('"') => Line::from(vec![
                    Span::raw(" ".repeat(indent)),
                    Span::styled(format!("{key}\""), t.control),
                    Span::styled(": ", t.dim),
                    Span::styled(value.to_string(), t.text),
                ]),
                _ => Line::from(vec![
                    Span::raw(" ".repeat(indent)),
                    Span::styled(rest.to_string(), t.text),
                ]),
            };
            wrap_line(&line, width, indent + 2)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_in_short_keeps_its_count_or_its_state() {
        assert_eq!(
            short_source("files (stdio): connected, 2 tools"),
            "files: 2 tools"
        );
        assert_eq!(
            short_source("files (stdio): up, 3 tools, pid 7"),
            "files: 3 tools"
        );
        assert_eq!(
            short_source("web (http): failed, retrying, 0 tools: connection refused"),
            "web: failed"
        );
        assert_eq!(
            short_source("web (http): down after 3 attempts: nothing listens there"),
            "web: down after 3 attempts"
        );
        assert!(serving("files (stdio): connected, 2 tools"));
        assert!(!serving("web (http): down after 3 attempts: refused"));
    }
}
