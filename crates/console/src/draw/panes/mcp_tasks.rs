//! The MCP pane's tasks: a `chat` call answered with a task (`resultType: "task"`) gathers the
//! `tasks/*` exchanges of that task under it, instead of one head per poll: a line per run
//! of polls with the same status (how many, over how long, the latest status message), then
//! the poll that answered otherwise (the result handed over, a cancel) as the client got it.
//! Which polls go under which call is the listing's ([`crate::view::task_polls`]).

use ratatui::text::Line;
use turnscope::observe::wire::McpExchange;

use crate::text::{micros, one_line, truncate};
use crate::view::console::Console;
use crate::view::task_polls::answered;

/// The lines under a task's creating call: its polls folded by status.
pub fn lines(c: &Console, task: &str, polls: &[&McpExchange], w: usize) -> Vec<Line<'static>> {
    let t = &c.theme;
    let mut out = Vec::new();
    let mut i = 0;
    while i < polls.len() {
        let status = answered(polls[i]);
        let run = polls[i..]
            .iter()
            .take_while(|x| answered(x) == status && x.method.as_deref() == Some("tasks/get"))
            .count()
            .max(1);
        let first = polls[i];
        let last = polls[i + run - 1];
        let working = status == "working";
        if working || run > 1 {
            let mut line = format!(
                "  ↻ task {task} · tasks/get ×{run} {status} · {} … {}",
                c.state.clock(first.at_us),
                c.state.clock(last.at_us)
            );
            if let Some(message) = last.messages.last().and_then(|m| {
                m.message.value()["result"]["statusMessage"]
                    .as_str()
                    .map(str::to_string)
            }) {
                line.push_str(&format!(" · {}", one_line(&message)));
            }
            out.push(Line::styled(truncate(&line, w), t.dim));
        }
        if !working {
            // The answer that ended the run, as the client got it.
            let x = last;
            let ok = x
                .messages
                .last()
                .is_none_or(|m| m.message.value().get("error").is_none());
            out.push(Line::styled(
                truncate(
                    &format!(
                        "  ↻ task {task} · {} {} {status} · {} · {}",
                        c.state.clock(x.at_us),
                        x.method.as_deref().unwrap_or("?"),
                        x.status,
                        micros(x.total_us)
                    ),
                    w,
                ),
                if ok { t.text } else { t.error },
            ));
            if let Some(m) = x.messages.last() {
                let style = if ok { t.bot } else { t.error };
                out.push(Line::styled(
                    truncate(&format!("    ← +{} {}", micros(m.after_us), m.message), w),
                    style,
                ));
            }
        }
        i += run;
    }
    out
}
