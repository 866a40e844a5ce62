//! Export: the selected session's turns (each with its waterfall, tool calls whole and the
//! reply) and the Frames pane's frames of that session, as the filter leaves them, in one
//! plain-text report.
//!
//! Pure: it builds the text from the console; writing it to a file is the event loop's job.

use crate::draw::panes::{model_request, turn_view};
use crate::view::console::Console;
use crate::view::frames::FrameLine;

/// Width the report's turns are laid out in.
const WIDTH: usize = 120;

/// The report for `session`.
pub fn session_report(c: &Console, session: u64) -> String {
    let mut out = String::new();
    let who = c
        .state
        .session(session)
        .map(|r| format!("{} · {}", r.opener_label(), r.activity.label()))
        .unwrap_or_default();
    out.push_str(&format!(
        "turnscope session {} · {who}\n\n",
        c.state.session_name(session)
    ));
    let turns = c.state.transcript(session);
    if turns.is_empty() {
        out.push_str("No turns.\n");
    }
    for turn in turns {
        let rule = format!("── turn {} ", turn.id);
        out.push_str(&format!(
            "{rule}{}\n",
            "─".repeat(WIDTH - rule.chars().count())
        ));
        let timeline = c.state.timelines.get(session, turn.id);
        let shown = model_request::Shown {
            open: true,
            whole: true,
            selected: None,
        };
        let requests = model_request::lines(c, session, turn.id, WIDTH, shown);
        for line in turn_view::lines(c, session, turn, timeline, WIDTH)
            .into_iter()
            .chain(std::iter::once(Default::default()))
            .chain(requests)
        {
            out.push_str(line.to_string().trim_end());
            out.push('\n');
        }
        out.push('\n');
    }
    let filter = c.frames.filter.text();
    out.push_str(&format!(
        "Frames of #{session}{}\n",
        if filter.is_empty() {
            String::new()
        } else {
            format!(" (filter: {filter})")
        }
    ));
    let source = c.frame_source();
    for line in c.frame_lines() {
        let FrameLine::Frame(i) = line else {
            continue;
        };
        let f = source.get(i).frame();
        if f.session != session {
            continue;
        }
        let path: Vec<String> = c
            .frame_hops(i)
            .iter()
            .map(|h| {
                let hop = source.get(*h).frame();
                format!("{}→{}", hop.from, hop.to)
            })
            .collect();
        out.push_str(&format!(
            "{} turn {:<3} {:<8} {:<22} {}  {}\n",
            c.state.session_relative(session, f.at_us),
            f.turn,
            f.kind,
            f.name,
            path.join(" "),
            crate::text::one_line(&f.detail)
        ));
    }
    out
}
