//! The MCP pane's view state: which exchanges it lists (a client, a method, a typed filter),
//! the exchange under the cursor, and the one opened whole.
//!
//! The list is kept incrementally: each exchange is tested against the filters once, when it
//! arrives (or when a filter changes), so drawing costs the rows on screen, not the history.
//! Unless a method is kept, a task's `tasks/*` polls are not listed on their own but kept
//! under the `chat` call that created it ([`super::task_polls`]).

use std::cell::{Cell, Ref, RefCell};
use std::collections::{BTreeMap, HashMap, VecDeque};

use turnscope::observe::wire::McpExchange;

use super::filter::{Term, parse_terms};
use super::line_edit::LineEdit;
use super::task_polls::{TaskPolls, created_task, polled_task};
use crate::state::kept::Kept;
use crate::state::wire::ExchangeRow;

/// The MCP pane's typed filter: terms separated by spaces, all of which an exchange must
/// match, ignoring case. A term is free text (found in the client, the methods, the tool, the
/// status, or anywhere in the request and the messages as JSON) or `field:value` with field
/// `client`, `method`, `tool`, `status` or `session`; `!term` (or `-term`) keeps the exchanges
/// that do not match. Example: `tool:chat !isError`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpFilter {
    text: String,
    /// Each term's field: `client`, `method`, `tool`, `status`, `session`, or none: anywhere,
    /// the bodies too.
    terms: Vec<Term<Option<&'static str>>>,
}

impl McpFilter {
    /// Parses a filter line; an unknown `field:` prefix is free text.
    pub fn parse(text: &str) -> McpFilter {
        let terms = parse_terms(text, None, |f| {
            Some(Some(match f {
                "client" | "c" => "client",
                "method" | "m" => "method",
                "tool" | "t" => "tool",
                "status" | "s" => "status",
                "session" => "session",
                _ => return None,
            }))
        });
        McpFilter {
            text: text.to_string(),
            terms,
        }
    }

    /// The line as typed.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether it keeps everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether `x` passes every term.
    pub fn matches(&self, x: &McpExchange) -> bool {
        // The bodies as JSON text, written only when a free term is not found in the head.
        let mut bodies: Option<String> = None;
        self.terms.iter().all(|term| {
            let has = |s: Option<&str>| s.is_some_and(|s| s.to_lowercase().contains(&term.value));
            let found = match term.field {
                Some("client") => has(x.client.as_deref()),
                Some("method") => has(x.method.as_deref()),
                Some("tool") => has(x.tool.as_deref()),
                Some("status") => x.status.to_string().contains(&term.value),
                Some(_) => has(x.mcp_session.as_deref()),
                None => {
                    has(x.client.as_deref())
                        || has(x.method.as_deref())
                        || has(x.tool.as_deref())
                        || has(Some(&x.http_method))
                        || x.status.to_string().contains(&term.value)
                        || bodies
                            .get_or_insert_with(|| body_text(x))
                            .contains(&term.value)
                }
            };
            found != term.negate
        })
    }
}

/// The request, the messages and a text body of `x`, as lower-case JSON text.
fn body_text(x: &McpExchange) -> String {
    let mut out = String::new();
    if let Some(r) = &x.request {
        out.push_str(&r.to_string());
    }
    for m in &x.messages {
        out.push('\n');
        out.push_str(&m.message.to_string());
    }
    if let Some(t) = &x.text {
        out.push('\n');
        out.push_str(t);
    }
    out.to_lowercase()
}

/// The exchanges listed under the filters, found incrementally.
#[derive(Debug, Default)]
struct Listed {
    /// The filters these were found with.
    key: (Option<String>, Option<String>, String),
    /// Numbers of the exchanges that pass, oldest first.
    numbers: VecDeque<u64>,
    /// The next exchange number to test.
    next: u64,
    /// Exchanges tested against the filters, in all.
    tested: u64,
    /// The listed calls that created a task, by the task's id prefix.
    tasks: HashMap<String, u64>,
    /// The polls hidden under each of those calls, by the call's number.
    polls: BTreeMap<u64, TaskPolls>,
    /// Polls hidden under their calls, in all.
    grouped: usize,
}

/// The lines of an opened exchange, as drawn for (its number, unfolded, width).
pub type DetailLines = Option<((u64, bool, usize), Vec<ratatui::text::Line<'static>>)>;

/// An exchange opened whole over the panes.
#[derive(Debug)]
pub struct McpDetail {
    /// The exchange's number.
    pub number: u64,
    /// Lines scrolled down.
    pub scroll: Cell<usize>,
    /// Long messages and texts shown whole (else folded).
    pub unfolded: bool,
    /// The lines built for it, kept while it stays open as it is.
    pub lines: RefCell<DetailLines>,
}

impl McpDetail {
    /// Exchange `number`, opened at its top, folded.
    pub fn new(number: u64) -> Self {
        Self {
            number,
            scroll: Cell::new(0),
            unfolded: false,
            lines: RefCell::new(None),
        }
    }
}

/// The MCP pane: which exchanges it lists, the cursor, the one opened.
#[derive(Debug, Default)]
pub struct McpView {
    /// Only this client's exchanges (`a` cycles through the clients seen).
    pub client: Option<String>,
    /// Only this JSON-RPC method (`x` cycles through the methods seen).
    pub method: Option<String>,
    /// The typed filter in force.
    pub filter: McpFilter,
    /// The filter line while it is being edited.
    pub editing: Option<LineEdit>,
    /// The exchange under the cursor, by number; `None` follows the newest.
    pub cursor: Option<u64>,
    /// The first exchange drawn (by number), kept while the cursor stays in view.
    pub top: Cell<Option<u64>>,
    /// The exchange opened whole.
    pub detail: Option<McpDetail>,
    listed: RefCell<Listed>,
}

impl McpView {
    /// The numbers of the exchanges listed, oldest first: tested once each as they arrive,
    /// all again only when a filter changed.
    pub fn listed(&self, kept: &Kept<ExchangeRow>) -> Ref<'_, VecDeque<u64>> {
        {
            let mut l = self.listed.borrow_mut();
            let key = (
                self.client.clone(),
                self.method.clone(),
                self.filter.text().to_string(),
            );
            let first = kept.first_number();
            // A call dropped with polls under it: they are listed on their own again, in
            // their places among the others, so the list is found anew (rare: once per task
            // whose call the budget let go while its polls stayed).
            let orphaned = l.polls.range(..first).next().is_some();
            if l.key != key || orphaned {
                let tested = l.tested;
                *l = Listed {
                    key,
                    tested,
                    ..Listed::default()
                };
            }
            let mut let_go = false;
            while l.numbers.front().is_some_and(|n| *n < first) {
                l.numbers.pop_front();
                let_go = true;
            }
            if let_go {
                l.tasks.retain(|_, n| *n >= first);
            }
            let from = l.next.max(first);
            let grouping = self.method.is_none();
            for n in from..kept.next_number() {
                l.tested += 1;
                let Some(x) = kept.by_number(n).map(ExchangeRow::exchange) else {
                    continue;
                };
                if !self.passes(x) {
                    continue;
                }
                if grouping
                    && let Some(task) = polled_task(x)
                    && let Some(call) = l.tasks.get(&task).copied()
                {
                    l.polls.entry(call).or_default().push(n, x);
                    l.grouped += 1;
                    continue;
                }
                l.numbers.push_back(n);
                if grouping && let Some(task) = created_task(x) {
                    l.tasks.insert(task, n);
                }
            }
            l.next = kept.next_number();
        }
        Ref::map(self.listed.borrow(), |l| &l.numbers)
    }

    /// The polls hidden under the calls that created their tasks, by the call's number (as
    /// found by the latest [`McpView::listed`]).
    pub fn task_polls(&self) -> Ref<'_, BTreeMap<u64, TaskPolls>> {
        Ref::map(self.listed.borrow(), |l| &l.polls)
    }

    /// How many polls are hidden under their calls (as found by the latest
    /// [`McpView::listed`]).
    pub fn grouped(&self) -> usize {
        self.listed.borrow().grouped
    }

    /// Exchanges tested against the filters since the pane began (each once, unless a
    /// filter changed).
    pub fn tested(&self) -> u64 {
        self.listed.borrow().tested
    }

    fn passes(&self, x: &McpExchange) -> bool {
        (self.client.is_none() || x.client == self.client)
            && (self.method.is_none() || x.method == self.method)
            && self.filter.matches(x)
    }

    /// The cursor's place in `listed` (the newest when following, or when its exchange is no
    /// longer listed: the nearest newer one).
    pub fn cursor_index(&self, listed: &VecDeque<u64>) -> Option<usize> {
        let last = listed.len().checked_sub(1)?;
        Some(match self.cursor {
            None => last,
            Some(n) => listed.partition_point(|x| *x < n).min(last),
        })
    }

    /// Moves the cursor `delta` exchanges in `listed` (following again past the newest).
    pub fn step(&mut self, listed: &VecDeque<u64>, delta: isize) {
        let Some(at) = self.cursor_index(listed) else {
            return;
        };
        let last = listed.len() - 1;
        let to = (at as isize).saturating_add(delta).clamp(0, last as isize) as usize;
        self.cursor = if to == last && delta > 0 {
            None
        } else {
            Some(listed[to])
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use turnscope::observe::wire::JsonText;

    fn exchange(client: &str, tool: &str, text: &str) -> McpExchange {
        McpExchange {
            client: Some(client.into()),
            method: Some("tools/call".into()),
            tool: Some(tool.into()),
            http_method: "POST".into(),
            status: 200,
            request: Some(JsonText::from_value(&json!({"params": {"name": tool}}))),
            messages: vec![turnscope::observe::wire::McpMessage {
                after_us: 1,
                message: JsonText::from_value(
                    &json!({"result": {"content": [{"type": "text", "text": text}]}}),
                ),
            }],
            ..McpExchange::default()
        }
    }

    #[test]
    fn the_filter_takes_free_text_fields_and_negation() {
        let a = exchange("claude-code", "chat", "We open at nine");
        let b = exchange("python", "start", "your handle");
        let f = McpFilter::parse("NINE");
        assert!(
            f.matches(&a) && !f.matches(&b),
            "found in the body, any case"
        );
        let f = McpFilter::parse("tool:chat client:claude");
        assert!(f.matches(&a) && !f.matches(&b));
        let f = McpFilter::parse("!tool:chat");
        assert!(!f.matches(&a) && f.matches(&b));
        assert!(McpFilter::parse("  ").is_empty());
        assert!(McpFilter::parse("status:200").matches(&b));
    }

    fn answer(method: &str, task: &str, answer: serde_json::Value) -> McpExchange {
        McpExchange {
            method: Some(method.into()),
            http_method: "POST".into(),
            status: 200,
            request: Some(JsonText::from_value(&json!({"params": {"taskId": task}}))),
            messages: vec![turnscope::observe::wire::McpMessage {
                after_us: 1,
                message: JsonText::from_value(&answer),
            }],
            ..McpExchange::default()
        }
    }

    fn push(kept: &mut Kept<ExchangeRow>, x: McpExchange) {
        let row = ExchangeRow::new(std::sync::Arc::new(turnscope::observe::Event::Mcp(
            Box::new(x),
        )));
        kept.push(row.expect("an MCP exchange"), 100);
    }

    #[test]
    fn a_tasks_polls_go_under_the_call_that_created_it_until_it_is_let_go() {
        let mut kept = Kept::new(100, 100_000);
        let mut chat = exchange("claude-code", "chat", "");
        chat.messages[0].message = JsonText::from_value(
            &json!({"result": {"resultType": "task", "taskId": "0f1e2d3c…", "status": "working"}}),
        );
        push(&mut kept, chat);
        let poll = |status: &str| {
            answer(
                "tasks/get",
                "0f1e2d3c…",
                json!({"result": {"status": status}}),
            )
        };
        push(&mut kept, poll("working"));
        push(
            &mut kept,
            answer("tasks/get", "99999999…", json!({"error": {"code": -32602}})),
        );
        push(&mut kept, poll("completed"));
        let mut view = McpView::default();
        assert_eq!(
            *view.listed(&kept),
            [0, 2],
            "the call and the poll of a task it did not create"
        );
        assert_eq!(view.grouped(), 2);
        assert_eq!(view.task_polls()[&0].numbers, [1, 3]);
        assert_eq!(
            view.task_polls()[&0].rows(),
            1 + 2,
            "working ×1, then completed and its answer"
        );
        view.method = Some("tasks/get".into());
        assert_eq!(
            *view.listed(&kept),
            [1, 2, 3],
            "a method kept lists each on its own"
        );
        view.method = None;
        assert_eq!(view.listed(&kept).len(), 2);
        // The budget lets the call go: its polls are listed on their own again.
        kept.set_max_bytes(300);
        assert_eq!(*view.listed(&kept), [1, 2, 3]);
        assert_eq!(view.grouped(), 0);
    }
}
