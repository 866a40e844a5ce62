//! The fold of what can go wrong around the turns: refused MCP calls, bridge and tool-source
//! states, log lines, MCP clients gone, config reloads; each goes to the journal (the Log
//! pane).

use turnscope::observe::ConfigReloadEvent;
use turnscope::observe::event::{BridgeEvent, ToolSourceEvent, ToolSourceState};

use super::journal::{Entry, Level};
use super::records::ConfigMark;
use super::{ConsoleState, LOGS_KEPT, LogLine};

/// A refusal this console expected: a watched server's refusal of a call of this console's
/// that was a probe (a `chat` reopening a handle kept from an earlier run, which the server
/// no longer knows), handled and said in the Log by the console. The server's line for it,
/// come through its event stream, is news, not an error.
#[derive(Debug, Clone)]
pub struct Expected {
    /// The refused method's Log source: `chat refused`.
    source: String,
    /// What the server answered.
    message: String,
    /// When the call went out and came back (µs), widened by [`EXPECTED_SLACK_US`].
    from_us: u64,
    to_us: u64,
}

/// How far apart the watched server's clock and this console's may be for its line of an
/// expected refusal to be taken as that refusal.
pub const EXPECTED_SLACK_US: u64 = 5_000_000;
/// Most expected refusals waiting for the server's line.
const EXPECTED_KEPT: usize = 8;

impl ConsoleState {
    /// Notes that this console's `method` call, sent at `from_us` and refused with `message`
    /// at `to_us`, was expected and handled: the server's line for it (come or to come) is
    /// news, not counted as an error.
    pub fn expect_refusal(&mut self, method: &str, message: &str, from_us: u64, to_us: u64) {
        let expected = Expected {
            source: format!("{method} refused"),
            message: message.to_string(),
            from_us: from_us.saturating_sub(EXPECTED_SLACK_US),
            to_us: to_us.saturating_add(EXPECTED_SLACK_US),
        };
        if !self.journal.expected(
            &expected.source,
            &expected.message,
            expected.from_us,
            expected.to_us,
        ) {
            if self.expected.len() == EXPECTED_KEPT {
                self.expected.remove(0);
            }
            self.expected.push(expected);
        }
    }

    /// A call answered with a failure; `probe`: its client marked it as a probe, so the
    /// failure is the answer it asked for (news, not an error).
    pub(super) fn on_refused(
        &mut self,
        route: &str,
        error: &Option<String>,
        session: &Option<u64>,
        at_us: &u64,
        probe: bool,
    ) {
        self.saw_time(*at_us);
        let at = if *at_us == 0 { self.now_us } else { *at_us };
        if let Some(n) = session {
            self.touch(*n, at);
        }
        let source = match route.strip_prefix("mcp tools/call ") {
            Some(method) => (method, " refused"),
            None => (route, " failed"),
        };
        let message = error.as_deref().unwrap_or("");
        // This console's own probe, expected and handled (it says so in a line of its own):
        // news, once. Matched by text and time, as an older turnscope does not mark probes.
        let expected = session.is_none().then(|| {
            self.expected.iter().position(|e| {
                e.source.strip_suffix(source.1) == Some(source.0)
                    && e.message.trim() == message.trim()
                    && (e.from_us..=e.to_us).contains(&at)
            })
        });
        if let Some(i) = expected.flatten() {
            self.expected.remove(i);
            self.journal
                .note(at, Level::Info, *session, source, message);
        } else if probe {
            // Another console's probe, marked by its client: the answer it asked for.
            let message = format!(
                "{message} (a console's probe of a handle it kept from an earlier run: the \
                 answer it asked for, not an error)"
            );
            self.journal
                .note(at, Level::Info, *session, source, &message);
        } else {
            self.journal
                .note(at, Level::Error, *session, source, message);
        }
    }

    /// A bridge's state changed.
    pub(super) fn on_bridge(&mut self, b: &BridgeEvent) {
        self.saw_time(b.at_us);
        let key = format!("{} {}", b.kind, b.name);
        let before = self.bridges.get(&key).and_then(|o| o.last_error.clone());
        if let Some(e) = &b.last_error
            && before.as_ref() != Some(e)
        {
            self.journal.push(Entry {
                at_us: b.at_us,
                level: Level::Warn,
                session: None,
                source: format!("bridge {key}"),
                message: e.clone(),
                repeats: 1,
            });
        }
        self.bridges.insert(key, b.clone());
    }

    /// A tool source's state changed.
    pub(super) fn on_tool_source(&mut self, t: &ToolSourceEvent) {
        self.saw_time(t.at_us);
        let key = match t.session {
            Some(n) => format!("{} #{n}", t.server),
            None => t.server.clone(),
        };
        let state = match t.state {
            ToolSourceState::Connected => "connected",
            ToolSourceState::Refreshed => "refreshed",
            ToolSourceState::Failed => "failed, retrying",
            ToolSourceState::MissedBudget => "missed the start-up budget",
            ToolSourceState::Disconnected => "disconnected, reconnecting",
            ToolSourceState::Skipped => "skipped",
            ToolSourceState::Closed => "closed",
        };
        let mut line = format!("{key} ({}): {state}, {} tools", t.transport, t.tools);
        if !t.detail.is_empty() {
            line.push_str(&format!(": {}", t.detail));
        }
        if matches!(
            t.state,
            ToolSourceState::Failed
                | ToolSourceState::MissedBudget
                | ToolSourceState::Disconnected
                | ToolSourceState::Skipped
        ) {
            // A server retried again and again fails the same way each time: one entry that
            // counts, not one per attempt (the delay before the next one is the pane's news).
            let detail = t
                .detail
                .strip_prefix(turnscope::tools::mcp_source::REPEAT_MARK)
                .unwrap_or(&t.detail);
            let detail = detail
                .rsplit_once("; retrying in ")
                .map_or(detail, |(said, _)| said);
            self.journal.push_or_repeat(Entry {
                at_us: t.at_us,
                level: Level::Warn,
                session: t.session,
                source: format!("tools {}", t.server),
                message: format!("{state}: {detail}"),
                repeats: 1,
            });
        }
        self.tool_sources.insert(key, line);
    }

    /// A config reload: the header's mark, a Log entry naming the keys (an error when the
    /// file was refused, a warning when keys wait for a restart), and the notice to show.
    pub(super) fn on_config_reload(&mut self, r: &ConfigReloadEvent) {
        self.saw_time(r.at_us);
        self.header.config = Some(ConfigMark {
            version: r.version,
            outcome: r.outcome.to_string(),
            restart: r.restart.len(),
        });
        // The header says what runs: the model, its short name and its parameters all follow
        // a reload (a file recorded before the short name was kept has the parameters at the
        // model's end).
        if r.outcome == "applied" && !r.model.is_empty() {
            self.header.model.clone_from(&r.model);
            self.header.model_short = (!r.model_short.is_empty()).then(|| r.model_short.clone());
            self.header.params.clone_from(&r.model_params);
        }
        let level = if r.is_refused() {
            Level::Error
        } else if !r.restart.is_empty() {
            Level::Warn
        } else {
            Level::Info
        };
        self.journal.push(Entry::new(
            r.at_us,
            level,
            None,
            "config".into(),
            r.summary(),
        ));
        self.reloads_seen += 1;
        self.last_reload = Some(r.clone());
    }

    /// A log line.
    pub(super) fn on_log(&mut self, at_ms: &u64, level: &str, message: &str) {
        self.saw_time(at_ms.saturating_mul(1000));
        if self.logs.len() == LOGS_KEPT {
            self.logs.pop_front();
        }
        let mut text = message.to_string();
        super::journal::cut_entry_text(&mut text);
        self.logs.push_back(LogLine {
            level: level.to_string(),
            message: text,
        });
        self.journal.push(Entry {
            at_us: at_ms.saturating_mul(1000),
            level: Level::parse(level),
            session: None,
            source: "log".into(),
            message: message.to_string(),
            repeats: 1,
        });
    }

    /// Sets every bridge's state (a live snapshot; events update it between snapshots).
    pub fn set_bridges(&mut self, states: Vec<BridgeEvent>) {
        self.bridges = states
            .into_iter()
            .map(|b| (format!("{} {}", b.kind, b.name), b))
            .collect();
    }

    /// The bridges' states in a few words, or the header's fallback when there is none.
    pub fn bridges_summary(&self) -> String {
        if self.bridges.is_empty() {
            return self.header.bridges.clone();
        }
        self.bridges
            .values()
            .map(|b| {
                let link = if b.connected {
                    "connected"
                } else {
                    "not connected"
                };
                format!(
                    "{} {}: {link}, upstream {}",
                    b.kind, b.name, b.upstream_state
                )
            })
            .collect::<Vec<_>>()
            .join(" · ")
    }

    /// Sets the tool sources' states (a live snapshot, one line each).
    pub fn set_tool_sources(&mut self, lines: Vec<String>) {
        self.tool_sources = lines
            .into_iter()
            .map(|l| (l.split(' ').next().unwrap_or("").to_string(), l))
            .collect();
    }

    /// The tool sources' latest states.
    pub fn tool_sources(&self) -> impl Iterator<Item = &String> {
        self.tool_sources.values()
    }
}
