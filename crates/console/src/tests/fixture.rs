//! A fixed, deterministic console state for the tests: three sessions (the person's, an MCP
//! client's with a turn streaming, a closed one), frames, progress, stats, logs and tools.
//! Every time is a fixed offset from [`T0`], so nothing depends on the clock.

use std::borrow::Cow;

use serde_json::json;

use crate::state::{Activity, ConsoleState, Header, SessionRow, Source};
use crate::theme::Theme;
use crate::view::console::Console;
use turnscope::observe::event::{BridgeEvent, ToolSourceEvent, ToolSourceState};
use turnscope::observe::{
    Event, FrameEvent, SessionEvent, SessionOpener, ToolCallEvent, TurnEndEvent,
};
use turnscope::tools::merge::{Skip, SkipReason};
use turnscope::tools::{ToolSpec, builtin};

/// The fixture's clock origin (µs since the epoch).
pub const T0: u64 = 1_700_000_000_000_000;

const MS: u64 = 1_000;
const S: u64 = 1_000_000;

/// The pipeline's links, in order, as the bot's pipeline names them.
const LINKS: [(&str, &str); 6] = [
    ("source", "input"),
    ("input", "user-aggregator"),
    ("user-aggregator", "model"),
    ("model", "output"),
    ("output", "assistant-aggregator"),
    ("assistant-aggregator", "sink"),
];

/// Builds events with increasing frame ids.
pub struct Script {
    /// The events so far.
    pub events: Vec<Event>,
    next_id: u64,
}

impl Script {
    fn new() -> Self {
        Self {
            events: Vec::new(),
            next_id: 100,
        }
    }

    /// A frame crossing every link from `from_link` on.
    fn frame(
        &mut self,
        (session, turn): (u64, u64),
        kind: &'static str,
        name: &'static str,
        detail: &str,
        at: u64,
        from_link: usize,
    ) {
        self.next_id += 1;
        for (i, (from, to)) in LINKS.iter().enumerate().skip(from_link) {
            self.events.push(Event::Frame(FrameEvent {
                id: self.next_id,
                session,
                turn,
                kind: Cow::Borrowed(kind),
                name: Cow::Borrowed(name),
                from: Cow::Borrowed(from),
                to: Cow::Borrowed(to),
                direction: Cow::Borrowed("down"),
                at_us: at + i as u64 * 100,
                detail: detail.to_string(),
                depth: 0,
            }));
        }
    }

    fn session(&mut self, session: u64, opener: SessionOpener, at: u64, closed: Option<&str>) {
        self.events.push(Event::Session(SessionEvent {
            session,
            handle_prefix: format!("{session}a2b3c4d")[..8].to_string(),
            opener,
            closed: closed.map(str::to_string),
            at_us: at,
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: None,
        }));
    }

    fn turn(&mut self, session: u64, turn: u64, line: &str, at: u64) {
        self.events.push(Event::TurnStarted {
            session,
            turn,
            line: line.into(),
            at_us: at,
        });
        self.frame((session, turn), "data", "UserLine", line, at, 0);
        self.frame((session, turn), "data", "RunModel", "", at + MS, 2);
        self.frame(
            (session, turn),
            "control",
            "ResponseStart",
            "",
            at + 20 * MS,
            3,
        );
    }

    fn pieces(&mut self, session: u64, turn: u64, pieces: &[&str], at: u64) {
        for (i, p) in pieces.iter().enumerate() {
            self.frame(
                (session, turn),
                "data",
                "TextPiece",
                p,
                at + i as u64 * 30 * MS,
                3,
            );
        }
    }

    /// Ends a turn: (rounds, tool calls) and (first piece, total) in µs.
    fn end(
        &mut self,
        session: u64,
        turn: u64,
        at: u64,
        (rounds, tools): (u32, u32),
        (first, total): (u64, u64),
    ) {
        self.frame((session, turn), "control", "ResponseEnd", "calls=0", at, 3);
        self.events.push(Event::TurnEnded(TurnEndEvent {
            session,
            turn,
            reason: "completed".into(),
            reply_bytes: 10,
            rounds,
            tool_calls: tools,
            first_piece_us: Some(first),
            total_us: total,
            ..TurnEndEvent::default()
        }));
    }
}

/// The fixture's events: what a short live run would have published.
pub fn events() -> Vec<Event> {
    let mut s = Script::new();
    s.session(1, SessionOpener::Console, T0, None);
    s.frame((1, 0), "system", "Start", "", T0, 0);
    s.session(2, SessionOpener::Mcp("claude-code".into()), T0 + S, None);
    s.session(3, SessionOpener::Api, T0 + 2 * S, None);

    s.turn(1, 1, "hello there", T0 + 3 * S);
    s.pieces(
        1,
        1,
        &["Hello", " there!", " How can I help?"],
        T0 + 3 * S + 40 * MS,
    );
    s.events.push(Event::ModelRequest {
        session: 1,
        turn: 1,
        first_piece_us: Some(40 * MS),
        total_us: 130 * MS,
        error: None,
        at_us: T0 + 3 * S,
        response: info("stop", 20, 6),
        request: request(
            0,
            vec![
                json!({"role": "system", "content": "You are a helpful assistant. Answer in one short sentence."}),
                json!({"role": "user", "content": "hello there"}),
            ],
        ),
        answer: answer("Hello there! How can I help?", &[]),
    });
    s.end(1, 1, T0 + 3 * S + 130 * MS, (0, 0), (40 * MS, 131 * MS));

    s.turn(1, 2, "what does the clock say", T0 + 4 * S);
    s.frame(
        (1, 2),
        "system",
        "FunctionCallsStarted",
        "clock({})",
        T0 + 4 * S + 60 * MS,
        3,
    );
    s.events.push(Event::ToolCall(ToolCallEvent {
        session: 1,
        turn: 2,
        name: "clock".into(),
        duration_us: 80,
        result_bytes: 23,
        error: None,
        arguments: "{}".into(),
        result: "2026-01-01 12:00:00 UTC".into(),
        started_us: T0 + 4 * S + 60 * MS,
        retold: false,
        by_hand: false,
    }));
    s.frame(
        (1, 2),
        "data",
        "FunctionCallResult",
        "clock({}) -> 23 B (0.1 ms)",
        T0 + 4 * S + 61 * MS,
        3,
    );
    s.events.push(Event::ModelRequest {
        session: 1,
        turn: 2,
        first_piece_us: None,
        total_us: 60 * MS,
        error: None,
        at_us: T0 + 4 * S,
        response: info("tool_calls", 32, 5),
        request: request(
            2,
            vec![
                json!({"role": "assistant", "content": "Hello there! How can I help?"}),
                json!({"role": "user", "content": "what does the clock say"}),
            ],
        ),
        answer: answer("", &[("call_0", "clock", "{}")]),
    });
    s.pieces(
        1,
        2,
        &["The clock tool says:", " 12:00 UTC."],
        T0 + 4 * S + 90 * MS,
    );
    s.events.push(Event::ModelRequest {
        session: 1,
        turn: 2,
        first_piece_us: Some(30 * MS),
        total_us: 70 * MS,
        error: None,
        at_us: T0 + 4 * S + 80 * MS,
        response: info("stop", 45, 8),
        request: request(
            4,
            vec![
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_0", "type": "function", "function": {"name": "clock", "arguments": "{}"}}]}),
                json!({"role": "tool", "tool_call_id": "call_0", "content": "2026-01-01 12:00:00 UTC"}),
            ],
        ),
        answer: answer("The clock tool says: 12:00 UTC.", &[]),
    });
    mcp_exchanges(&mut s);
    s.end(1, 2, T0 + 4 * S + 150 * MS, (1, 1), (90 * MS, 152 * MS));

    s.turn(2, 1, "tell me a story", T0 + 5 * S);
    s.pieces(2, 1, &["Once", " upon", " a time"], T0 + 5 * S + 50 * MS);
    for (progress, message, pieces, at) in [(1, "Once", 1, 50), (3, " upon a time", 2, 120)] {
        s.events.push(Event::Progress {
            session: 2,
            progress,
            message: message.into(),
            pieces,
            at_us: T0 + 5 * S + at * MS,
        });
    }
    s.events.push(Event::Served {
        route: "mcp tools/call start".into(),
        duration_us: 900,
        ok: true,
        error: None,
        session: None,
        at_us: 0,
        probe: false,
    });
    s.events.push(Event::Served {
        route: "mcp tools/call chat".into(),
        duration_us: 140 * MS,
        ok: true,
        error: None,
        session: None,
        at_us: 0,
        probe: false,
    });
    for _ in 0..2 {
        s.events.push(Event::Served {
            route: "mcp tools/call start".into(),
            duration_us: 300,
            ok: false,
            error: Some(
                "all 3 sessions are in use; end one (or wait for the idle sweep) and call start again"
                    .into(),
            ),
            session: None,
            at_us: T0 + 5 * S + 200 * MS,
            probe: false,
        });
    }
    s.events.push(Event::ToolSource(ToolSourceEvent {
        server: "files".into(),
        transport: "stdio".into(),
        session: None,
        state: ToolSourceState::Connected,
        tools: 2,
        detail: String::new(),
        at_us: T0 + 6 * S,
    }));
    s.events.push(Event::ToolSource(ToolSourceEvent {
        server: "web".into(),
        transport: "http".into(),
        session: None,
        state: ToolSourceState::Failed,
        tools: 0,
        detail: "connection refused".into(),
        at_us: T0 + 6 * S,
    }));
    s.events.push(Event::Bridge(BridgeEvent {
        kind: "xiaozhi".into(),
        name: "kitchen".into(),
        endpoint: "wss://api.example/mcp/?token=***".into(),
        upstream: "bot: start/chat".into(),
        upstream_state: "up".into(),
        connected: true,
        reconnects: 0,
        frames_in: 4,
        frames_out: 4,
        malformed: 0,
        blocked: 0,
        last_error: None,
        token_rejected: false,
        at_us: T0 + 6 * S,
    }));
    s.session(3, SessionOpener::Api, T0 + 9 * S, Some("idle too long"));
    s.events.push(Event::Log {
        at_ms: (T0 + 9 * S) / 1000,
        level: "warn".into(),
        message: "model slow to answer (1.2 s to first byte)".into(),
    });
    s.events
}

/// The tools of the fixture: the built-ins, one with a name OpenAI refuses and a `$ref`
/// schema, one whose schema cannot be converted, and a name collision.
pub fn tools() -> Vec<ToolSpec> {
    let mut specs = vec![
        builtin::clock().spec().clone(),
        builtin::echo().spec().clone(),
    ];
    specs.push(ToolSpec {
        name: "fs/read file".into(),
        description: "Reads a file of the project.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"path": {"$ref": "#/$defs/Path"}},
            "required": ["path"],
            "$defs": {"Path": {"type": "string", "description": "A path under the project."}}
        }),
        source: "mcp:files".into(),
    });
    specs.push(ToolSpec {
        name: "fetch".into(),
        description: "Fetches a URL.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"url": {"$ref": "https://example.com/url.json"}}
        }),
        source: "mcp:web".into(),
    });
    specs.push(ToolSpec {
        name: "echo".into(),
        description: "Another echo.".into(),
        input_schema: json!({"type": "object", "properties": {}}),
        source: "mcp:files".into(),
    });
    specs
}

/// The fixture state, with live-looking figures laid over the open sessions.
pub fn state() -> ConsoleState {
    let mut state = ConsoleState::new(Header {
        mcp_url: Some("http://127.0.0.1:7870/mcp".into()),
        model: "embedded scripted model (http://127.0.0.1:7861/v1)".into(),
        model_short: Some("scripted".into()),
        bridges: "none".into(),
        source: Source::Live,
        replica: None,
        ..Header::default()
    });
    for event in events() {
        state.apply(&event);
    }
    state.sync_sessions(vec![
        SessionRow {
            number: 1,
            handle_prefix: "1a2b3c4d".into(),
            opener: SessionOpener::Console,
            mine: true,
            turns: 2,
            activity: Activity::Idle,
            opened_us: T0,
            began_us: None,
            age_s: 65,
            idle_left_s: Some(295),
            taken_from: None,
            greeting: crate::state::Greeting::Unknown,
        },
        SessionRow {
            number: 2,
            handle_prefix: "2a2b3c4d".into(),
            opener: SessionOpener::Mcp("claude-code".into()),
            mine: false,
            turns: 1,
            activity: Activity::InTurn,
            opened_us: T0 + S,
            began_us: None,
            age_s: 64,
            idle_left_s: None,
            taken_from: None,
            greeting: crate::state::Greeting::Unknown,
        },
    ]);
    state.set_tools_and_skips(
        &tools(),
        &[Skip {
            tool: "clock".into(),
            source: "files".into(),
            reason: SkipReason::TakenBy("builtin".into()),
        }],
    );
    state
}

/// One crossing of frame `id` (0: a retold reply) of `session`'s turn `turn`, `name` from
/// `model` to `output`, carrying `detail`.
pub fn crossing(session: u64, turn: u64, id: u64, name: &str, detail: &str, at_us: u64) -> Event {
    Event::Frame(FrameEvent {
        id,
        session,
        turn,
        kind: "data".into(),
        name: name.to_string().into(),
        from: "model".into(),
        to: "output".into(),
        direction: "down".into(),
        at_us,
        detail: detail.into(),
        depth: 0,
    })
}

/// A console over the fixture state, the person's session selected and the input focused.
pub fn console() -> Console {
    let mut c = Console::new(state(), Theme::default(), false);
    c.own = Some(1);
    c.selected = Some(1);
    c.settle();
    c
}

/// The tool set the fixture's model requests offer.
pub const TOOL_SET: &str = "00c0ffee00c0ffee";

/// A model request of session 1 carrying `appended` from message `from` on.
fn request(
    from: u64,
    appended: Vec<serde_json::Value>,
) -> Option<Box<turnscope::observe::wire::WireRequest>> {
    let mut params = serde_json::Map::new();
    params.insert("stream".into(), json!(true));
    Some(Box::new(turnscope::observe::wire::WireRequest {
        model: "turnscope-scripted".into(),
        url: "http://127.0.0.1:7861/v1/chat/completions".into(),
        params,
        tools: Some(TOOL_SET.into()),
        tool_count: 2,
        system: true,
        first: 1,
        from,
        appended,
        ..Default::default()
    }))
}

/// What the model answered.
fn answer(
    text: &str,
    calls: &[(&str, &str, &str)],
) -> Option<Box<turnscope::observe::wire::WireAnswer>> {
    Some(Box::new(turnscope::observe::wire::WireAnswer {
        content: text.into(),
        reasoning: String::new(),
        tool_calls: calls
            .iter()
            .map(|(id, name, args)| turnscope::observe::wire::WireCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*args).into(),
            })
            .collect(),
    }))
}

/// A response's facts: finish reason and tokens.
fn info(finish: &str, prompt: u64, completion: u64) -> turnscope::observe::ModelResponseInfo {
    turnscope::observe::ModelResponseInfo {
        finish_reason: Some(finish.into()),
        usage: Some(turnscope::observe::TokenUsage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            ..Default::default()
        }),
        model: Some("turnscope-scripted".into()),
        response_id: Some("chatcmpl-turnscope".into()),
        status: Some(200),
        headers_us: Some(2 * MS),
        ..Default::default()
    }
}

/// An MCP client's exchanges: initialize, tools/list, a chat with progress, a refused chat.
fn mcp_exchanges(s: &mut Script) {
    use turnscope::observe::wire::{JsonText, McpExchange, McpMessage, ToolSetEvent};
    s.events.push(Event::ToolSet(ToolSetEvent {
        id: TOOL_SET.into(),
        tools: vec![
            json!({"type": "function", "function": {"name": "clock", "description": "the time", "parameters": {"type": "object", "properties": {}}}}),
            json!({"type": "function", "function": {"name": "echo", "description": "says it back", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}),
        ],
        at_us: T0,
    }));
    let exchange = |at: u64,
                    method: &str,
                    tool: Option<&str>,
                    request: serde_json::Value,
                    messages: Vec<(u64, serde_json::Value)>| {
        Event::Mcp(Box::new(McpExchange {
            client: Some("claude-code".into()),
            mcp_session: Some("5e55101d".into()),
            http_method: "POST".into(),
            path: "/mcp".into(),
            host: Some("127.0.0.1:7870".into()),
            protocol: Some("2025-11-25".into()),
            method: Some(method.into()),
            tool: tool.map(str::to_string),
            request: Some(JsonText::from_value(&request)),
            status: 200,
            content_type: Some("text/event-stream".into()),
            first_byte_us: messages.first().map(|(t, _)| *t),
            total_us: messages.last().map_or(300, |(t, _)| *t),
            messages: messages
                .into_iter()
                .map(|(after_us, message)| McpMessage {
                    after_us,
                    message: JsonText::from_value(&message),
                })
                .collect(),
            complete: true,
            at_us: T0 + at,
            ..Default::default()
        }))
    };
    s.events.push(exchange(
        S,
        "initialize",
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "clientInfo": {"name": "claude-code", "version": "2.1"}}}),
        vec![(900, json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-11-25", "serverInfo": {"name": "turnscope"}}}))],
    ));
    s.events.push(exchange(
        S + 5 * MS,
        "tools/list",
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        vec![(700, json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "start"}, {"name": "chat"}]}}))],
    ));
    s.events.push(exchange(
        2 * S,
        "tools/call",
        Some("chat"),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "chat", "arguments": {"handle": "2b7c19de…", "line": "tell me a story"}}}),
        vec![
            (50 * MS, json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 3, "progress": 1, "message": "Once"}})),
            (120 * MS, json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 3, "progress": 3, "message": " upon a time"}})),
            (180 * MS, json!({"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "Once upon a time"}], "isError": false}})),
        ],
    ));
    s.events.push(exchange(
        2 * S + 500 * MS,
        "tools/call",
        Some("chat"),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "chat", "arguments": {"handle": "00000000…", "line": "hi"}}}),
        vec![(800, json!({"jsonrpc": "2.0", "id": 4, "result": {"content": [{"type": "text", "text": "handle: no live session on this replica"}], "isError": true}}))],
    ));
}

/// A Claude Code conversation (session 4) whose turn became an MCP task: the `chat` call
/// answered with the task after the 2 s grace period, three polls while the 5.5 s turn ran,
/// and the poll that collected the result 500 ms after the turn's end.
pub fn task_events() -> Vec<Event> {
    use turnscope::observe::wire::{JsonText, McpExchange, McpMessage};
    use turnscope::observe::{TaskChange, TaskEvent};
    let mut s = Script::new();
    let at = T0 + 10 * S;
    s.session(4, SessionOpener::Mcp("claude-code".into()), at, None);
    s.turn(4, 1, "tell me everything", at + S);
    s.pieces(
        4,
        1,
        &["You said:", " tell me", " everything"],
        at + S + 300 * MS,
    );
    let exchange =
        |at_us: u64, method: &str, request: serde_json::Value, answer: serde_json::Value| {
            Event::Mcp(Box::new(McpExchange {
                client: Some("claude-code".into()),
                http_method: "POST".into(),
                path: "/mcp".into(),
                protocol: Some("2026-07-28".into()),
                mcp_method: Some(method.into()),
                mcp_name: method.starts_with("tasks/").then(|| "4f1e2d3c…".into()),
                method: Some(method.into()),
                tool: (method == "tools/call").then(|| "chat".into()),
                request: Some(JsonText::from_value(&request)),
                status: 200,
                content_type: Some("application/json".into()),
                first_byte_us: Some(800),
                total_us: 900,
                messages: vec![McpMessage {
                    after_us: 800,
                    message: JsonText::from_value(&answer),
                }],
                complete: true,
                at_us,
                ..Default::default()
            }))
        };
    let task = |change, status: &'static str, polls, at_us| {
        Event::Task(TaskEvent {
            session: 4,
            turn: 1,
            task: "4f1e2d3c".into(),
            client: "claude-code".into(),
            change,
            status: status.into(),
            end_reason: (status == "completed").then(|| "completed".into()),
            polls,
            at_us,
        })
    };
    s.events.push(exchange(
        at + S,
        "tools/call",
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "chat", "arguments": {"handle": "4a2b3c4d…", "line": "tell me everything"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "result": {"resultType": "task", "taskId": "4f1e2d3c…", "status": "working", "ttlMs": 300000, "pollIntervalMs": 1000}}),
    ));
    s.events
        .push(task(TaskChange::Created, "working", 0, at + 3 * S));
    for poll in 1..=3u32 {
        let when = at + (3 + u64::from(poll)) * S;
        s.events.push(exchange(
            when,
            "tasks/get",
            json!({"jsonrpc": "2.0", "id": 4 + poll, "method": "tasks/get", "params": {"taskId": "4f1e2d3c…"}}),
            json!({"jsonrpc": "2.0", "id": 4 + poll, "result": {"resultType": "complete", "taskId": "4f1e2d3c…", "status": "working", "statusMessage": "You said: tell me"}}),
        ));
        s.events
            .push(task(TaskChange::Polled, "working", poll, when));
    }
    s.end(4, 1, at + 6 * S + 500 * MS, (0, 0), (300 * MS, 5_500 * MS));
    s.events.push(task(
        TaskChange::Ended,
        "completed",
        3,
        at + 6 * S + 500 * MS,
    ));
    s.events.push(exchange(
        at + 7 * S,
        "tasks/get",
        json!({"jsonrpc": "2.0", "id": 8, "method": "tasks/get", "params": {"taskId": "4f1e2d3c…"}}),
        json!({"jsonrpc": "2.0", "id": 8, "result": {"resultType": "complete", "taskId": "4f1e2d3c…", "status": "completed", "result": {"content": [{"type": "text", "text": "You said: tell me everything"}], "isError": false}}}),
    ));
    s.events
        .push(task(TaskChange::Collected, "completed", 4, at + 7 * S));
    s.events
        .push(task(TaskChange::Polled, "completed", 4, at + 7 * S));
    s.events
}

/// [`console`] with [`task_events`] folded in, session 4 selected.
pub fn console_with_a_task() -> Console {
    let mut c = console();
    for event in task_events() {
        c.state.apply(&event);
    }
    c.selected = Some(4);
    c.settle();
    c
}
