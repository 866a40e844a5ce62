//! Export: the selected session's greeting and turns (each with its waterfall, tool calls
//! whole and the reply) and the Frames pane's frames of that session, as the filter leaves
//! them, in one plain-text report.
//!
//! Pure: it builds the text from the console; writing it to a file is the event loop's job.

use crate::draw::panes::resend::comparison;
use crate::draw::panes::{model_request, turn_view};
use crate::state::variants::RequestKey;
use crate::view::console::Console;
use crate::view::frames::FrameLine;

/// Width the report's turns are laid out in.
const WIDTH: usize = 120;

/// The variants sent of a turn's model requests, each beside its recorded answer as the
/// variants view shows it: they live only in this console's memory, and the report is where
/// they outlive it.
fn variant_lines(c: &Console, session: u64, turn: u64) -> Vec<ratatui::text::Line<'static>> {
    let mut out = Vec::new();
    for (index, call) in c.state.wire.calls_of(session, turn).iter().enumerate() {
        let key = RequestKey {
            session,
            turn,
            index,
        };
        for shown in 0..c.variants.count(key) {
            let Some(variant) = c.variants.get(key, shown) else {
                continue;
            };
            out.push(Default::default());
            out.push(ratatui::text::Line::from(format!(
                "variant {} of model request {} (sent from the console beside the recorded one)",
                shown + 1,
                index + 1
            )));
            out.extend(comparison(c, call, variant, shown, WIDTH));
        }
    }
    out
}

/// The report for `session`: a heading naming it and who opened it, [`turns_body`], then the
/// Frames pane's frames of it.
pub fn session_report(c: &Console, session: u64) -> String {
    let who = c
        .state
        .session(session)
        .map(|r| format!("{} · {}", r.opener_label(), r.activity.label()))
        .unwrap_or_default();
    let mut out = format!(
        "turnscope session {} · {who}\n\n",
        c.state.session_name(session)
    );
    out.push_str(&turns_body(c, session));
    frames_report(c, session, &mut out);
    out
}

/// The body of the report: the greeting `session` opened with, then each turn with its
/// waterfall, tool calls whole, reply and model requests (what `turnscope sessions show`
/// prints of a stored session, whose frames would only be its reply pieces again).
pub fn turns_body(c: &Console, session: u64) -> String {
    let mut out = String::new();
    let greeting = match c.state.session(session) {
        Some(row) => row.greeting.shown(c.state.greeting.as_deref()),
        None => c.state.greeting.as_deref(),
    };
    if let Some(greeting) = greeting {
        out.push_str(&format!("bot   {greeting}\n\n"));
    }
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
            .chain(variant_lines(c, session, turn.id))
        {
            out.push_str(line.to_string().trim_end());
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// The report's second part: `session`'s frames as the Frames pane's filter leaves them.
fn frames_report(c: &Console, session: u64, out: &mut String) {
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
}
