//! The header (product, bot, source, failures, config version, MCP URL, replica, model, the
//! `claude mcp add` line, bridges, counts), laid out so that what does not fit is shortened or
//! left out whole, and the footer (key hints for what has the keys, help and quit always shown).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::state::Source;
use crate::text::count;
use crate::view::console::Console;
use crate::view::keys::owner_hints;

/// The line to paste into a shell to connect Claude Code (with the header a server started
/// with `--auth-token` wants: `$TOKEN` stands for it, never printed).
pub fn claude_line(url: &str, wants_token: bool) -> String {
    let header = if wants_token {
        " --header \"Authorization: Bearer $TOKEN\""
    } else {
        ""
    };
    format!("claude mcp add --transport http turnscope {url}{header}")
}

/// One piece of a header line: its spans, a shorter form, and when it gives way when the line
/// is too narrow (lower first; `NEVER` stays, cut with `…` only if nothing else is left to give).
struct Chunk {
    long: Vec<Span<'static>>,
    short: Option<Vec<Span<'static>>>,
    shorten_at: u8,
    drop_at: u8,
}

/// Never given up.
const NEVER: u8 = u8::MAX;

impl Chunk {
    fn new(spans: Vec<Span<'static>>, drop_at: u8) -> Self {
        Self {
            long: spans,
            short: None,
            shorten_at: NEVER,
            drop_at,
        }
    }

    fn or_short(mut self, short: Vec<Span<'static>>, shorten_at: u8) -> Self {
        self.short = Some(short);
        self.shorten_at = shorten_at;
        self
    }
}

/// The chunks as one line of at most `width` cells: chunks are shortened and dropped in the
/// order of their priorities until the line fits, so what is shown is whole; only a line whose
/// every remaining chunk is `NEVER` is cut, between two words, ending with ` …`.
fn lay_out(chunks: Vec<Chunk>, width: usize) -> Line<'static> {
    #[derive(Clone, Copy, PartialEq)]
    enum Form {
        Long,
        Short,
        Gone,
    }
    let mut forms = vec![Form::Long; chunks.len()];
    let spans_of = |forms: &[Form]| -> Vec<Span<'static>> {
        chunks
            .iter()
            .zip(forms)
            .flat_map(|(c, f)| match f {
                Form::Long => c.long.clone(),
                Form::Short => c.short.clone().unwrap_or_default(),
                Form::Gone => Vec::new(),
            })
            .collect()
    };
    // Every step the line can take, in order: (priority, chunk, what).
    let mut steps: Vec<(u8, usize, Form)> = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        if c.short.is_some() && c.shorten_at != NEVER {
            steps.push((c.shorten_at, i, Form::Short));
        }
        if c.drop_at != NEVER {
            steps.push((c.drop_at, i, Form::Gone));
        }
    }
    steps.sort_by_key(|(p, i, _)| (*p, *i));
    let wide = |forms: &[Form]| Line::from(spans_of(forms)).width() > width;
    let mut taken = Vec::new();
    for (_, i, form) in steps {
        if !wide(&forms) {
            break;
        }
        if forms[i] != Form::Gone {
            taken.push((i, forms[i]));
            forms[i] = form;
        }
    }
    // A later step may have made room (a long chunk shortened): what was given up before it
    // comes back, the most important first, where it fits whole.
    for (i, before) in taken.into_iter().rev() {
        let now = forms[i];
        forms[i] = before;
        if wide(&forms) {
            forms[i] = now;
        }
    }
    // Whatever chunk comes first, the line starts one space in.
    let mut spans = spans_of(&forms);
    if let Some(first) = spans.first_mut() {
        let trimmed = first.content.trim_start().to_string();
        first.content = format!(" {trimmed}").into();
    }
    crate::text::fit_words(Line::from(spans), width)
}

/// Whether the replica id is the default one (`host:port` as bound): a server that runs alone.
fn default_replica(id: &str, mcp_url: Option<&str>) -> bool {
    mcp_url.is_some_and(|url| url.contains(&format!("//{id}/")))
}

/// Draws the two header lines: what runs, and how to connect to it.
pub fn header(f: &mut Frame, area: Rect, c: &Console) {
    let t = &c.theme;
    let h = &c.state.header;
    let mut first = vec![Chunk::new(
        vec![Span::styled(" turnscope ", t.brand)],
        NEVER,
    )];
    if let Some(name) = &h.bot {
        first.push(Chunk::new(
            vec![Span::styled(format!(" {name} "), t.title)],
            7,
        ));
    }
    match &h.source {
        Source::Live => first.push(Chunk::new(vec![Span::styled(" ● live ", t.ok)], NEVER)),
        Source::Attached { target, .. } => {
            // Narrow, the plain schemes go (`http://`, `ws://`): at 80 columns the whisker
            // URL was cut to `whisker …` (tour T).
            let bare = target.replace("http://", "").replace("ws://", "");
            let mut chunk = Chunk::new(
                vec![
                    Span::styled(" ◆ attached ", t.ok),
                    Span::styled(format!("{target} "), t.accent),
                ],
                NEVER,
            );
            if bare != *target {
                chunk = chunk.or_short(
                    vec![
                        Span::styled(" ◆ attached ", t.ok),
                        Span::styled(format!("{bare} "), t.accent),
                    ],
                    1,
                );
            }
            first.push(chunk);
        }
        Source::Replay { file, .. } => {
            first.push(
                Chunk::new(
                    vec![Span::styled(format!(" ◼ replay {file} "), t.warn)],
                    NEVER,
                )
                .or_short(vec![Span::styled(" ◼ replay ", t.warn)], 8),
            );
            if let Some(tape) = &c.tape {
                first.push(Chunk::new(
                    vec![Span::styled(format!(" {} ", tape.label), t.accent)],
                    NEVER,
                ));
            }
        }
    }
    // Failures come right after the source.
    let j = &c.state.journal;
    if j.errors > 0 {
        let errors = crate::text::plural(j.errors, "error");
        first.push(
            Chunk::new(
                vec![Span::styled(format!(" {errors} (8 Log) "), t.error)],
                NEVER,
            )
            .or_short(vec![Span::styled(format!(" {errors} "), t.error)], 1),
        );
    }
    if j.warnings > 0 {
        first.push(Chunk::new(
            vec![Span::styled(
                format!(" {} ", crate::text::plural(j.warnings, "warning")),
                t.warn,
            )],
            5,
        ));
    }
    config_mark(&mut first, c);
    if let Some(url) = &h.mcp_url {
        // The second line's `claude mcp add` carries the URL too; still, it goes only after
        // the model's name is shortened (at 130 columns the URL went and the model's whole
        // address stayed).
        first.push(Chunk::new(
            vec![
                Span::styled(" MCP ", t.dim),
                Span::styled(url.clone(), t.accent),
                Span::styled(" ", t.dim),
            ],
            3,
        ));
    }
    if let Some((id, state)) = &h.replica {
        let alone = default_replica(id, h.mcp_url.as_deref());
        if !alone || state != "serving" {
            let mut spans = vec![
                Span::styled(" replica ", t.dim),
                Span::styled(id.clone(), t.text),
            ];
            if state != "serving" {
                spans.push(Span::styled(format!(" {state}"), t.warn));
            }
            spans.push(Span::styled(" ", t.dim));
            // Kept past the model's name: replicas share one model, and which one this is
            // (or this attached console watches) is what tells them apart.
            first.push(Chunk::new(spans, 10));
        }
    }
    if let Some(store) = &h.store {
        // The file's name only: its whole path is in the ready line and `/healthz`.
        let short = store
            .strip_prefix("sqlite:")
            .and_then(|path| std::path::Path::new(path).file_name())
            .map_or(store.clone(), |name| name.to_string_lossy().into_owned());
        let chunk = if h.store_degraded {
            // Kept on a narrow screen: what is said now may not outlive the process.
            Chunk::new(
                vec![
                    Span::styled(" store ", t.dim),
                    Span::styled(format!("{short} degraded (8 Log)"), t.error),
                    Span::styled(" ", t.dim),
                ],
                5,
            )
        } else {
            let default_file = store.starts_with("sqlite:") && short.starts_with("sessions-");
            let chunk = Chunk::new(
                vec![
                    Span::styled(" store ", t.dim),
                    Span::styled(short, t.text),
                    Span::styled(" ", t.dim),
                ],
                // Goes on a narrow screen (the ready line and `/healthz` name it too), after
                // the model's name is shortened: where conversations are kept says more than
                // the model's address.
                4,
            );
            // Only the default file's name (a name of the person's own says which store).
            if default_file {
                // A file's name (`sessions-127.0.0.1-7870.sqlite3`, its address again) gives
                // way to its kind first: at 120 columns the MCP URL went for it (tour O).
                chunk.or_short(
                    vec![
                        Span::styled(" store ", t.dim),
                        Span::styled("sqlite", t.text),
                        Span::styled(" ", t.dim),
                    ],
                    2,
                )
            } else {
                chunk
            }
        };
        first.push(chunk);
    }
    if let Some(server) = &h.server {
        first.push(Chunk::new(
            vec![
                Span::styled(" server ", t.dim),
                Span::styled(server.clone(), t.text),
                Span::styled(" ", t.dim),
            ],
            2,
        ));
    }
    if !h.model.is_empty() {
        let short = h.model_short.clone().unwrap_or_else(|| h.model.clone());
        first.push(
            Chunk::new(
                vec![
                    Span::styled(" model ", t.dim),
                    Span::styled(h.model.clone(), t.text),
                    Span::styled(" ", t.dim),
                ],
                9,
            )
            .or_short(
                vec![
                    Span::styled(" model ", t.dim),
                    Span::styled(short, t.text),
                    Span::styled(" ", t.dim),
                ],
                2,
            ),
        );
    }
    if !h.params.is_empty() {
        first.push(Chunk::new(
            vec![Span::styled(format!("· {} ", h.params), t.dim)],
            6,
        ));
    }
    let mut second = Vec::new();
    if let Source::Attached { view, .. } = &h.source {
        // Piece by piece, each shortened or left out by its own priority: the long
        // `client view: …` left no room for whisker's state at 80 columns (tour T).
        for (i, piece) in view.pieces.iter().enumerate() {
            let lead = if i == 0 { " " } else { " · " };
            let mut chunk = Chunk::new(
                vec![Span::styled(format!("{lead}{}", piece.long), t.dim)],
                piece.drop_at,
            );
            if let Some(short) = &piece.short {
                chunk = chunk.or_short(
                    vec![Span::styled(format!("{lead}{short}"), t.dim)],
                    piece.shorten_at,
                );
            }
            second.push(chunk);
        }
    } else if let Some(url) = &h.mcp_url {
        // Narrower, the URL alone: the part of the command a person cannot guess.
        second.push(
            Chunk::new(
                vec![
                    Span::styled(" connect: ", t.dim),
                    Span::styled(claude_line(url, h.wants_token), t.key),
                ],
                NEVER,
            )
            .or_short(vec![Span::styled(format!(" {url}"), t.accent)], 5),
        );
        // Claude Code's default scope is `local`: the folder the command runs in.
        second.push(Chunk::new(
            vec![Span::styled(" (this folder; --scope user: all)", t.dim)],
            1,
        ));
    }
    let s = &c.state;
    let open = s
        .session_rows()
        .iter()
        .filter(|r| !r.is_closed() && !r.is_stored())
        .count();
    // Nothing to say of bridges where none can be known (a replay without their events, a
    // bot that is not a turnscope): `bridges: not recorded` meant nothing for a pipecat bot.
    let bridges = s.bridges_summary();
    if !bridges.is_empty() {
        second.push(Chunk::new(
            vec![Span::styled(format!("  bridges: {bridges}"), t.dim)],
            3,
        ));
    }
    let plural = if open == 1 { "" } else { "s" };
    second.push(Chunk::new(
        vec![Span::styled(
            format!(" · {open} session{plural} open"),
            t.dim,
        )],
        2,
    ));
    let tokens = &s.wire.total;
    if tokens.prompt_tokens > 0 || tokens.completion_tokens > 0 {
        second.push(Chunk::new(
            vec![Span::styled(
                format!(" · {}", crate::state::wire::tokens_label(tokens)),
                t.text,
            )],
            4,
        ));
    }
    second.push(Chunk::new(
        vec![Span::styled(
            format!(" · {} events", count(s.events_seen)),
            t.dim,
        )],
        1,
    ));
    if s.events_missed > 0 {
        second.push(Chunk::new(
            vec![Span::styled(
                format!(" · {} missed", count(s.events_missed)),
                t.warn,
            )],
            8,
        ));
    }
    let w = area.width as usize;
    f.render_widget(
        Paragraph::new(vec![lay_out(first, w), lay_out(second, w)]).style(t.header),
        area,
    );
}

/// The config version in force (`↻` once a reload applied, `✗` when the last one was refused,
/// and how many changed keys wait for a restart): early in the line and never left out, so a
/// narrow screen keeps it (shortened to the version and its mark).
fn config_mark(chunks: &mut Vec<Chunk>, c: &Console) {
    let t = &c.theme;
    let Some(mark) = &c.state.header.config else {
        return;
    };
    let version = match mark.outcome.as_str() {
        "refused" => Span::styled(format!("v{} ✗ reload refused", mark.version), t.error),
        "applied" => Span::styled(format!("v{} ↻", mark.version), t.accent),
        _ => Span::styled(format!("v{}", mark.version), t.text),
    };
    let mut long = vec![Span::styled(" config ", t.dim), version.clone()];
    if mark.restart > 0 {
        long.push(Span::styled(
            format!(
                " · {} for a restart",
                crate::text::plural(mark.restart as u64, "key")
            ),
            t.warn,
        ));
    }
    long.push(Span::raw(" "));
    // Shortened, the keys waiting for a restart still show, as a count (tour M: at 80
    // columns nothing said a key waited once the notice went).
    let mut short = vec![Span::raw(" "), version];
    if mark.restart > 0 {
        short.push(Span::styled(
            format!(" ·{} to restart", mark.restart),
            t.warn,
        ));
    }
    short.push(Span::raw(" "));
    // Shortened after the model's long name (3) and the replica (4).
    chunks.push(Chunk::new(long, NEVER).or_short(short, 5));
}

/// Draws the footer: the focused pane's key hints. Help and quit always show: hints that do
/// not fit before them are left out whole, never cut.
pub fn footer(f: &mut Frame, area: Rect, c: &Console) {
    let t = &c.theme;
    let mut hints = owner_hints(c.key_owner(), c.read_only);
    // A send in flight shown in the variants: Esc cancels it, and what needs its answer waits.
    if c.key_owner() == crate::view::keys::KeyOwner::Variants && c.shown_send().is_some() {
        hints.retain(|(key, _)| matches!(*key, "← →" | "↑↓"));
        hints.push(("Esc", "cancel the send"));
    }
    // An attached console interrupts nothing (MCP has no call for it).
    if c.state.header.source.is_attached() {
        hints.retain(|(key, _)| *key != "i");
    }
    // Nothing here chats (whisker alone, a server that is no bot): the Input pane offers only
    // its way out, not the sending and editing keys its text says do nothing.
    if c.key_owner() == crate::view::keys::KeyOwner::Pane(crate::view::ids::PaneId::Input)
        && (c.watching_only() || c.no_chat_here)
    {
        hints.retain(|(key, _)| matches!(*key, "Esc" | "F1" | "Ctrl+C"));
    }
    let kept = hints.len().saturating_sub(ALWAYS_SHOWN);
    let cell = |(key, what): &(&str, &str)| crate::text::width(key) + 1 + crate::text::width(what);
    // One space in, two between hints.
    let width_of = |list: &[(&str, &str)]| {
        1 + list.iter().map(cell).sum::<usize>() + 2 * list.len().saturating_sub(1)
    };
    let tail = footer_tail(&hints[kept..], area.width as usize, width_of);
    let tail = tail.as_slice();
    let mut shown: Vec<(&str, &str)> = Vec::new();
    for hint in &hints[..kept] {
        let mut tried = shown.clone();
        tried.push(*hint);
        tried.extend_from_slice(tail);
        if width_of(&tried) > area.width as usize {
            // Later hints may be shorter, but skipping one and showing the next reads as if
            // the skipped key did not exist: stop at the first that does not fit.
            break;
        }
        shown.push(*hint);
    }
    shown.extend_from_slice(tail);
    let mut spans = vec![Span::raw(" ")];
    for (i, (key, what)) in shown.into_iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled("  ", t.footer));
        }
        spans.push(Span::styled(key, t.key));
        spans.push(Span::styled(format!(" {what}"), t.footer));
    }
    f.render_widget(
        Paragraph::new(crate::text::fit(Line::from(spans), area.width as usize)).style(t.footer),
        area,
    );
}

/// The hints at the end of every footer that always show: help and quit.
const ALWAYS_SHOWN: usize = 2;

/// The footer's last hints (help and quit), fitted to `room` cells: as they are, else with
/// `Ctrl+C` said `^C`, else the last alone, so they are never cut (at 20 columns the footer
/// ended "Ctrl+C qu…").
fn footer_tail<'a>(
    tail: &[(&'a str, &'a str)],
    room: usize,
    width_of: impl Fn(&[(&str, &str)]) -> usize,
) -> Vec<(&'a str, &'a str)> {
    if width_of(tail) <= room {
        return tail.to_vec();
    }
    let short: Vec<(&str, &str)> = tail
        .iter()
        .map(|(key, what)| (if *key == "Ctrl+C" { "^C" } else { *key }, *what))
        .collect();
    if width_of(&short) <= room {
        return short;
    }
    short.last().copied().into_iter().collect()
}
