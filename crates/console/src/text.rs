//! Small text helpers for the panes: durations, widths, wrapping and sparklines.
//!
//! Everything here is pure and deterministic, so pane snapshots never depend on the clock.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// A duration in microseconds as a short human figure: `850 µs`, `12.3 ms`, `1.25 s`, `3m05s`.
pub fn micros(us: u64) -> String {
    if us < 1_000 {
        format!("{us} µs")
    } else if us < 100_000 {
        format!("{:.1} ms", us as f64 / 1_000.0)
    } else if us < 1_000_000 {
        format!("{} ms", us / 1_000)
    } else if us < 60_000_000 {
        format!("{:.2} s", us as f64 / 1_000_000.0)
    } else {
        let s = us / 1_000_000;
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// Whole seconds as `42s`, `3m05s` or `2h07m`.
pub fn seconds(s: u64) -> String {
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// Display width of `s` in terminal cells.
pub fn width(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// `s` cut to at most `max` cells, ending in `…` when cut.
pub fn truncate(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > max {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// A border's key hints in at most `room` cells: as many of `hints` as fit, whole and in
/// order, then `last` (how to close, always shown), joined by ` · `. A hint cut in the middle
/// of a word would read as another key.
pub fn key_hints(hints: &[&str], last: &str, room: usize) -> String {
    let mut out = String::from(" ");
    let mut used = 2 + width(last);
    for hint in hints {
        let cost = width(hint) + 3;
        if used + cost > room {
            break;
        }
        used += cost;
        out.push_str(hint);
        out.push_str(" · ");
    }
    out.push_str(last);
    out.push(' ');
    truncate(&out, room)
}

/// `s` cut to at most `max` cells from its start, keeping its end (`…` first when cut): for
/// text whose newest part is last, such as a progress message (the reply so far).
pub fn truncate_start(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut used = 1;
    let mut start = s.len();
    for (i, c) in s.char_indices().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > max {
            break;
        }
        used += w;
        start = i;
    }
    format!("…{}", &s[start..])
}

/// `s` padded with spaces (or cut) to exactly `cells` cells.
pub fn pad(s: &str, cells: usize) -> String {
    let cut = truncate(s, cells);
    let w = width(&cut);
    format!("{cut}{}", " ".repeat(cells.saturating_sub(w)))
}

/// One line of text with control characters made visible and newlines shown as `⏎`.
pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\n' => '⏎',
            '\r' | '\t' => ' ',
            c if c.is_control() => '·',
            c => c,
        })
        .collect()
}

/// Greedy word wrap of `text` to lines of at most `max` cells; long words are split, and
/// newlines in the text start new lines. Always returns at least one line.
pub fn wrap(text: &str, max: usize) -> Vec<String> {
    let max = max.max(1);
    let mut lines = Vec::new();
    for para in text.split('\n') {
        let mut line = String::new();
        let mut used = 0usize;
        for word in para.split_inclusive(' ') {
            let w = width(word);
            let trimmed_w = width(word.trim_end());
            if used + trimmed_w <= max {
                line.push_str(word);
                used += w;
                continue;
            }
            if !line.is_empty() {
                lines.push(line.trim_end().to_string());
                line = String::new();
                used = 0;
            }
            // The word alone may still be too long: split it by cells.
            for c in word.chars() {
                let cw = c.width().unwrap_or(0);
                if used + cw > max && !(c == ' ' && used == max) {
                    lines.push(std::mem::take(&mut line));
                    used = 0;
                }
                line.push(c);
                used += cw;
            }
        }
        lines.push(line.trim_end().to_string());
    }
    lines
}

/// `items` joined by ` · ` and wrapped to lines of at most `max` cells, breaking only between
/// items so a figure keeps its value and unit together ("total 444 ms", never "total 444" /
/// "ms"); an item wider than `max` alone is word-wrapped. Always returns at least one line.
pub fn wrap_items(items: &[String], max: usize) -> Vec<String> {
    const SEP: &str = " · ";
    let max = max.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    for item in items {
        let w = width(item);
        if !line.is_empty() && width(&line) + width(SEP) + w <= max {
            line.push_str(SEP);
            line.push_str(item);
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        if w <= max {
            line.push_str(item);
        } else {
            let mut parts = wrap(item, max);
            line = parts.pop().unwrap_or_default();
            lines.extend(parts);
        }
    }
    lines.push(line);
    lines
}

/// Greedy word wrap of a styled `line` to lines of at most `max` cells, each piece keeping
/// its style; lines after the first start with `hang` spaces (at most half of `max`), long
/// words are split, and a line's trailing spaces are dropped. Always returns at least one line.
pub fn wrap_line(line: &Line<'_>, max: usize, hang: usize) -> Vec<Line<'static>> {
    let max = max.max(1);
    if line.width() <= max {
        let spans = line
            .spans
            .iter()
            .map(|s| Span::styled(s.content.to_string(), s.style))
            .collect::<Vec<_>>();
        return vec![Line::from(spans).style(line.style)];
    }
    let hang = hang.min(max / 2);
    let chars: Vec<(char, Style)> = line
        .spans
        .iter()
        .flat_map(|s| s.content.chars().map(move |c| (c, s.style)))
        .collect();
    let mut rows: Vec<Vec<(char, Style)>> = vec![Vec::new()];
    let mut used = 0usize;
    // Whether the row holds a word yet (the hang alone does not count).
    let mut filled = false;
    let mut start = 0;
    while start < chars.len() {
        // A word: up to and with the spaces after it.
        let mut end = start;
        while end < chars.len() && chars[end].0 != ' ' {
            end += 1;
        }
        let word_end = end;
        while end < chars.len() && chars[end].0 == ' ' {
            end += 1;
        }
        let word = &chars[start..end];
        let cells = |run: &[(char, Style)]| {
            run.iter()
                .map(|(c, _)| c.width().unwrap_or(0))
                .sum::<usize>()
        };
        if used + cells(&chars[start..word_end]) > max && filled {
            rows.push(vec![(' ', Style::default()); hang]);
            used = hang;
        }
        for &(c, style) in word {
            let w = c.width().unwrap_or(0);
            if used + w > max {
                if c == ' ' {
                    continue;
                }
                rows.push(vec![(' ', Style::default()); hang]);
                used = hang;
            }
            rows.last_mut().expect("a row").push((c, style));
            used += w;
        }
        filled |= word_end > start;
        start = end;
    }
    rows.into_iter()
        .map(|mut row| {
            while row.last().is_some_and(|(c, _)| *c == ' ') {
                row.pop();
            }
            let mut spans: Vec<Span<'static>> = Vec::new();
            let mut text = String::new();
            let mut style = None;
            for (c, s) in row {
                if style.is_some_and(|st| st != s) {
                    spans.push(Span::styled(
                        std::mem::take(&mut text),
                        style.unwrap_or_default(),
                    ));
                }
                style = Some(s);
                text.push(c);
            }
            if !text.is_empty() {
                spans.push(Span::styled(text, style.unwrap_or_default()));
            }
            Line::from(spans).style(line.style)
        })
        .collect()
}

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A sparkline of the last `cells` samples, scaled to the largest of them.
pub fn sparkline(samples: &[u64], cells: usize) -> String {
    let tail = &samples[samples.len().saturating_sub(cells)..];
    let top = tail.iter().copied().max().unwrap_or(0).max(1);
    tail.iter()
        .map(|&v| {
            let i = ((v as f64 / top as f64) * 7.0).round() as usize;
            BARS[i.min(7)]
        })
        .collect()
}

/// A number with thousands separators: `12,345`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A size in bytes as a short figure: `812 B`, `41.2 KiB`, `3.10 MiB`.
pub fn bytes(n: u64) -> String {
    const KIB: f64 = 1024.0;
    match n as f64 {
        b if b < KIB => format!("{n} B"),
        b if b < KIB * KIB => format!("{:.1} KiB", b / KIB),
        b => format!("{:.2} MiB", b / (KIB * KIB)),
    }
}

/// `1 error`, `3 errors`.
pub fn plural(n: u64, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{} {one}s", count(n))
    }
}

/// `once`, `3 times`.
pub fn times(n: u64) -> String {
    if n == 1 {
        "once".to_string()
    } else {
        format!("{} times", count(n))
    }
}

/// `line` cut to `max` cells, ending in `…` where it was cut.
pub fn fit<'a>(line: Line<'a>, max: usize) -> Line<'a> {
    if line.width() <= max {
        return line;
    }
    let style = line.style;
    let mut used = 0;
    let mut spans = Vec::new();
    for span in line.spans {
        let w = width(&span.content);
        if used + w < max {
            used += w;
            spans.push(span);
            continue;
        }
        let room = max.saturating_sub(used);
        if room > 0 {
            let cut = truncate(&format!("{}…", span.content), room);
            spans.push(Span::styled(cut, span.style));
        }
        break;
    }
    Line::from(spans).style(style)
}

/// `line` in at most `max` cells, cut at a word boundary and ended with ` …` when too wide,
/// so no word is shown in part (nor a `·` separator left dangling); a first word wider than
/// `max` alone is cut as [`fit`] does.
pub fn fit_words<'a>(line: Line<'a>, max: usize) -> Line<'a> {
    if line.width() <= max {
        return line;
    }
    // The last space (past the leading ones) after which ` …` still fits.
    let mut used = 0;
    let mut cut: Option<(usize, usize)> = None;
    let mut seen_word = false;
    'spans: for (si, span) in line.spans.iter().enumerate() {
        for (bi, ch) in span.content.char_indices() {
            if used + 2 > max {
                break 'spans;
            }
            if ch == ' ' && seen_word {
                cut = Some((si, bi));
            }
            seen_word |= ch != ' ';
            used += ch.width().unwrap_or(0);
        }
    }
    let Some((si, bi)) = cut else {
        return fit(line, max);
    };
    let style = line.style;
    let mut spans: Vec<Span<'a>> = line.spans.into_iter().take(si + 1).collect();
    let last = spans.pop().expect("the span cut in");
    // A separator (`·`) the cut left at the end goes with the spaces before it.
    let bare = |text: &str| text.trim_end().trim_end_matches('·').trim_end().to_string();
    let kept = bare(&last.content[..bi]);
    let last_style = last.style;
    if !kept.is_empty() {
        spans.push(Span::styled(kept, last_style));
    }
    // Spaces and a separator left at the end of the spans before.
    while let Some(end) = spans.last_mut() {
        let trimmed = bare(&end.content);
        if trimmed.is_empty() {
            spans.pop();
            continue;
        }
        end.content = trimmed.into();
        break;
    }
    spans.push(Span::styled(" …", last_style));
    Line::from(spans).style(style)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(micros(850), "850 µs");
        assert_eq!(micros(12_345), "12.3 ms");
        assert_eq!(micros(345_000), "345 ms");
        assert_eq!(micros(1_250_000), "1.25 s");
        assert_eq!(micros(185_000_000), "3m05s");
        assert_eq!(seconds(42), "42s");
        assert_eq!(seconds(185), "3m05s");
        assert_eq!(seconds(7620), "2h07m");
    }

    #[test]
    fn truncate_start_keeps_the_end() {
        assert_eq!(
            truncate_start("You said: we open at nine", 10),
            "…n at nine"
        );
        assert_eq!(truncate_start("short", 10), "short");
        assert_eq!(truncate_start("日本語です", 5), "…です");
        assert_eq!(width(&truncate_start("日本語です", 5)), 5);
    }

    #[test]
    fn truncate_and_pad_count_cells() {
        assert_eq!(truncate("hello world", 5), "hell…");
        assert_eq!(truncate("hi", 5), "hi");
        assert_eq!(pad("ab", 4), "ab  ");
        assert_eq!(pad("abcdef", 4), "abc…");
        assert_eq!(width("你好"), 4);
        assert_eq!(truncate("你好吗", 4), "你…");
    }

    #[test]
    fn wrap_breaks_on_words_and_splits_long_ones() {
        assert_eq!(wrap("the quick brown fox", 9), ["the quick", "brown fox"]);
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("a\nb", 10), ["a", "b"]);
        assert_eq!(wrap("", 10), [""]);
    }

    #[test]
    fn wrap_items_breaks_between_items_only() {
        let items: Vec<String> = ["1 round", "2 tool calls", "first 98.1 ms", "total 444 ms"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            wrap_items(&items, 30),
            vec!["1 round · 2 tool calls", "first 98.1 ms · total 444 ms"]
        );
        // An item wider than the line alone is word-wrapped; the next item starts afresh.
        let long = vec!["reasoning of a great length".to_string(), "x".to_string()];
        assert_eq!(
            wrap_items(&long, 12),
            vec!["reasoning of", "a great", "length · x"]
        );
        assert_eq!(wrap_items(&[], 10), vec![""]);
    }

    #[test]
    fn wrap_line_keeps_styles_and_hangs_what_follows() {
        let key = Style::new().add_modifier(ratatui::style::Modifier::BOLD);
        let line = Line::from(vec![
            Span::raw("  "),
            Span::styled("\"key\"", key),
            Span::raw(": \"one two three four\""),
        ]);
        let rows = wrap_line(&line, 16, 4);
        let text: Vec<String> = rows.iter().map(|l| l.to_string()).collect();
        assert_eq!(text, ["  \"key\": \"one", "    two three", "    four\""]);
        assert!(rows.iter().all(|l| l.width() <= 16));
        assert_eq!(rows[0].spans[1].style, key, "the key keeps its style");
        assert_eq!(rows[0].spans[1].content, "\"key\"");
        // A word longer than the room is split; a short line comes back whole.
        let long = wrap_line(&Line::raw("abcdefghij"), 4, 0);
        let long: Vec<String> = long.iter().map(|l| l.to_string()).collect();
        assert_eq!(long, ["abcd", "efgh", "ij"]);
        assert_eq!(wrap_line(&Line::raw("hi"), 4, 2).len(), 1);
    }

    #[test]
    fn fit_words_cuts_between_words() {
        let line = Line::from(vec![
            Span::raw(" connect: "),
            Span::raw("claude mcp add --transport http"),
        ]);
        let cut = fit_words(line.clone(), 29);
        assert_eq!(cut.to_string(), " connect: claude mcp add …");
        assert!(cut.width() <= 29);
        assert_eq!(fit_words(line.clone(), 80).to_string(), line.to_string());
        // A span boundary right after a word is a boundary too.
        let two = Line::from(vec![Span::raw(" turnscope "), Span::raw(" ● live ")]);
        assert_eq!(fit_words(two, 14).to_string(), " turnscope …");
        // One word wider than the room is cut inside, as `fit` does.
        assert_eq!(fit_words(Line::raw("abcdefghij"), 5).to_string(), "abcd…");
    }

    #[test]
    fn sparkline_scales_to_the_top() {
        assert_eq!(sparkline(&[0, 50, 100], 10), "▁▅█");
        assert_eq!(sparkline(&[1, 2, 3, 4], 2), "▆█");
        assert_eq!(sparkline(&[], 4), "");
    }

    #[test]
    fn counts_have_separators() {
        assert_eq!(count(0), "0");
        assert_eq!(count(1234), "1,234");
        assert_eq!(count(1234567), "1,234,567");
    }

    #[test]
    fn key_hints_keep_whole_hints_and_always_the_last() {
        let hints = ["← → turns", "m model requests", "v variants"];
        let wide = key_hints(&hints, "Esc closes", 80);
        assert_eq!(
            wide,
            " ← → turns · m model requests · v variants · Esc closes "
        );
        let narrow = key_hints(&hints, "Esc closes", 43);
        assert_eq!(narrow, " ← → turns · m model requests · Esc closes ");
        assert_eq!(width(&narrow), 43);
        assert_eq!(
            key_hints(&hints, "Esc closes", 42),
            " ← → turns · Esc closes "
        );
        assert_eq!(key_hints(&hints, "Esc closes", 12), " Esc closes ");
    }
}
