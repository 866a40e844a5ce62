//! A long session's events, as the server publishes them with the console attached: per turn
//! its line, a W-word reply streamed piece by piece across the pipeline's links, one progress
//! notification per piece, the model request (its delta and answer) and the `chat` exchange on
//! `/mcp` (its first and latest progress notification, the tally, the result with the reply).
//! For the tests of the console's bounds ([`super::bounds`]) and of replay stepping
//! ([`super::tape`]).

use std::borrow::Cow;

use serde_json::json;

use turnscope::observe::wire::{
    JsonText, McpExchange, McpMessage, ProgressTally, WireAnswer, WireRequest,
};
use turnscope::observe::{
    Event, FrameEvent, ModelResponseInfo, SessionEvent, SessionOpener, TokenUsage, TurnEndEvent,
};

use super::fixture::T0;

const LINKS: [(&str, &str); 4] = [
    ("model", "output"),
    ("output", "assistant-aggregator"),
    ("assistant-aggregator", "user-aggregator"),
    ("user-aggregator", "sink"),
];

/// `turns` turns of `words`-word replies in session `session` (opened by an MCP client).
pub fn session(session: u64, turns: u64, words: usize) -> Vec<Event> {
    let mut out = vec![Event::Session(SessionEvent {
        session,
        handle_prefix: "5e55101d".into(),
        opener: SessionOpener::Mcp("python-sdk".into()),
        closed: None,
        restored: false,
        began_us: None,
        taken_from: None,
        greeting: None,
        at_us: T0,
    })];
    let mut frame_id = 0;
    let mut at = T0;
    let mut reply_before = String::new();
    for turn in 1..=turns {
        at += 1_000_000;
        let line = format!("line {turn}");
        out.push(Event::TurnStarted {
            session,
            turn,
            line: line.clone(),
            at_us: at,
        });
        let mut reply = String::new();
        for w in 0..words {
            let piece = format!("word{w} ");
            reply.push_str(&piece);
            frame_id += 1;
            for (i, (from, to)) in LINKS.iter().enumerate() {
                out.push(Event::Frame(FrameEvent {
                    id: frame_id,
                    session,
                    turn,
                    kind: Cow::Borrowed("data"),
                    name: Cow::Borrowed("TextPiece"),
                    from: Cow::Borrowed(from),
                    to: Cow::Borrowed(to),
                    direction: Cow::Borrowed("down"),
                    at_us: at + w as u64 * 10 + i as u64,
                    detail: piece.clone(),
                    depth: 0,
                }));
            }
            out.push(Event::Progress {
                session,
                progress: w as u64 + 1,
                message: reply.chars().rev().take(200).collect::<String>(),
                pieces: 1,
                at_us: at + w as u64 * 10 + 5,
            });
        }
        let appended = if turn == 1 {
            vec![
                json!({"role": "system", "content": "be brief"}),
                json!({"role": "user", "content": line}),
            ]
        } else {
            vec![
                json!({"role": "assistant", "content": reply_before}),
                json!({"role": "user", "content": line}),
            ]
        };
        let from = if turn == 1 { 0 } else { 2 * turn - 2 };
        out.push(Event::ModelRequest {
            session,
            turn,
            first_piece_us: Some(10),
            total_us: words as u64 * 10,
            error: None,
            at_us: at,
            response: ModelResponseInfo {
                usage: Some(TokenUsage {
                    prompt_tokens: 10 * turn,
                    completion_tokens: words as u64,
                    ..TokenUsage::default()
                }),
                status: Some(200),
                ..ModelResponseInfo::default()
            },
            request: Some(Box::new(WireRequest {
                model: "m".into(),
                url: "http://127.0.0.1:1/v1/chat/completions".into(),
                system: true,
                first: 1,
                from,
                appended,
                ..WireRequest::default()
            })),
            answer: Some(Box::new(WireAnswer {
                content: reply.clone(),
                ..WireAnswer::default()
            })),
        });
        let end = at + words as u64 * 10 + 50;
        out.push(Event::TurnEnded(TurnEndEvent {
            session,
            turn,
            reason: "completed".into(),
            reply_bytes: reply.len(),
            rounds: 0,
            tool_calls: 0,
            first_piece_us: Some(10),
            total_us: end - at,
            ..TurnEndEvent::default()
        }));
        let progress = |n: usize| McpMessage {
            after_us: n as u64 * 10,
            message: JsonText::from_value(
                &json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": 1, "progress": n, "message": "so far"}}),
            ),
        };
        out.push(Event::Mcp(Box::new(McpExchange {
            client: Some("python-sdk".into()),
            http_method: "POST".into(),
            path: "/mcp".into(),
            method: Some("tools/call".into()),
            tool: Some("chat".into()),
            request: Some(JsonText::from_value(
                &json!({"jsonrpc": "2.0", "id": turn, "method": "tools/call",
                "params": {"name": "chat", "arguments": {"handle": "5e55101d…", "line": line}}}),
            )),
            status: 200,
            content_type: Some("text/event-stream".into()),
            messages: vec![
                progress(1),
                progress(words),
                McpMessage {
                    after_us: words as u64 * 10 + 40,
                    message: JsonText::from_value(
                        &json!({"jsonrpc": "2.0", "id": turn, "result": {
                        "content": [{"type": "text", "text": reply}],
                        "_meta": {"turnscope/turn": {"reply": reply, "pieces": words}}}}),
                    ),
                },
            ],
            progress: Some(ProgressTally {
                count: words as u64,
                bytes: words as u64 * 250,
                left_out: words.saturating_sub(2) as u64,
            }),
            first_byte_us: Some(10),
            total_us: words as u64 * 10 + 40,
            complete: true,
            at_us: at,
            ..McpExchange::default()
        })));
        reply_before = reply;
    }
    out
}
