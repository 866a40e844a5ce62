//! With `--url` and `--events`, the conversation as this client saw it, as events `turnscope
//! replay` reads: a session per run (opened by "turnscope test"), each line a turn with its
//! reply as one piece, its tool calls (names and arguments, no durations) and its end reason
//! and times as the target reported them or as measured here, and the task a call was
//! answered with (created, collected, its polls). The target's own frames, model requests and
//! tool timings are in its process, not here.

use std::sync::atomic::{AtomicU64, Ordering};

use turnscope::observe::event::{
    FrameEvent, SessionEvent, SessionOpener, ToolCallEvent, TurnEndEvent, now_us,
};
use turnscope::observe::{Bus, Event, TaskChange, TaskEvent};

use super::target::TurnRecord;

/// Numbers the runs' sessions in the file.
#[derive(Default)]
pub struct ClientEvents {
    sessions: AtomicU64,
    frames: AtomicU64,
}

const OPENER: &str = "turnscope test";

impl ClientEvents {
    /// A run's session opened (with the bot's `greeting`, if its `start` said one); its
    /// number in the file.
    pub fn opened(&self, bus: &Bus, handle: &str, greeting: Option<String>) -> u64 {
        let session = self.sessions.fetch_add(1, Ordering::Relaxed) + 1;
        bus.publish(Event::Session(SessionEvent {
            session,
            handle_prefix: handle.chars().take(8).collect(),
            opener: SessionOpener::Mcp(OPENER.into()),
            closed: None,
            at_us: now_us(),
            restored: false,
            began_us: None,
            taken_from: None,
            greeting,
        }));
        session
    }

    /// A run's session is done with.
    pub fn closed(&self, bus: &Bus, session: u64, why: &str) {
        bus.publish(Event::Session(SessionEvent {
            session,
            handle_prefix: String::new(),
            opener: SessionOpener::Mcp(OPENER.into()),
            closed: Some(why.into()),
            at_us: now_us(),
            restored: false,
            began_us: None,
            taken_from: None,
            greeting: None,
        }));
    }

    /// One `chat` call: `line` said at `at_us`, and what came back.
    pub fn turn(
        &self,
        bus: &Bus,
        session: u64,
        turn: u64,
        line: &str,
        at_us: u64,
        rec: &TurnRecord,
    ) {
        bus.publish(Event::TurnStarted {
            session,
            turn,
            line: line.to_string(),
            at_us,
        });
        let us = |ms: f64| (ms * 1000.0) as u64;
        let first = rec.first_piece_ms.map(|(ms, _)| us(ms));
        if !rec.reply.is_empty() {
            bus.publish(Event::Frame(FrameEvent::reply_piece(
                self.frames.fetch_add(1, Ordering::Relaxed) + 1,
                session,
                turn,
                "mcp result",
                at_us + first.unwrap_or(0),
                rec.reply.clone(),
            )));
        }
        let calls = rec.tool_calls.as_deref().unwrap_or_default();
        for call in calls {
            bus.publish(Event::ToolCall(ToolCallEvent {
                session,
                turn,
                name: call.name.clone(),
                arguments: call.args.to_string(),
                // As the target reported them (its record carries no result text).
                duration_us: call.ms.map_or(0, us),
                result_bytes: call.result_bytes.unwrap_or(0),
                error: call
                    .is_error
                    .unwrap_or(false)
                    .then(|| "the target reported it failed".into()),
                ..ToolCallEvent::default()
            }));
        }
        let reason = match (&rec.end_reason, &rec.error) {
            (Some(r), Some(e)) if r == "error" => format!("error: {e}"),
            (Some(r), _) => r.clone(),
            (None, Some(e)) => format!("error: {e}"),
            (None, None) => "reply (the target reports text only)".into(),
        };
        if let Some(task) = &rec.task {
            let event = |change, status: &'static str, at_us| {
                Event::Task(TaskEvent {
                    session,
                    turn,
                    task: task.id.clone(),
                    client: OPENER.into(),
                    change,
                    status: status.into(),
                    end_reason: rec.end_reason.clone().filter(|_| status != "working"),
                    polls: if status == "working" { 0 } else { task.polls },
                    at_us,
                })
            };
            bus.publish(event(
                TaskChange::Created,
                "working",
                at_us + us(task.created_ms),
            ));
            // This client sees the result when the poll that collects it answers.
            let done = at_us + us(task.collected_ms);
            bus.publish(event(TaskChange::Collected, "completed", done));
        }
        bus.publish(Event::TurnEnded(TurnEndEvent {
            session,
            turn,
            reason,
            reply_bytes: rec.reply.len(),
            rounds: rec.rounds.unwrap_or(0),
            tool_calls: calls.len() as u32,
            first_piece_us: first,
            total_us: us(rec.total_ms.0),
            usage: rec.usage,
            ..TurnEndEvent::default()
        }));
    }
}
