//! The model processor: runs the model on the context, streams its text as frames, and runs
//! rounds of function calls until a response starts none. [`ModelProcessor`] says why no frame of
//! an interrupted turn can follow the interruption.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::future::join_all;
use serde_json::{Map, Value};
use tokio::task::JoinHandle;

use super::aggregators::{SharedContext, lock};
use super::fault_log;
use super::settings::{BotSettings, SharedSettings};
use super::wire::{self, Sending, WireTrail};
use crate::model::ModelError;
use crate::model::client::openai_tool;
use crate::observe::event::now_us;
use crate::observe::{Event, ModelResponseInfo};
use crate::pipeline::{FlushToken, Frame, FrameBody, Link, ModelReport, Processor, TurnId};
use crate::tools::{
    CallContext, SessionControl, ToolCall, ToolCallRecord, ToolOutcome, ToolSpec, Tools,
};

/// How long a failed response waits for its pieces to reach the output before its error
/// (which would overtake them) is pushed.
const ERROR_FLUSH_WAIT: Duration = Duration::from_secs(2);

/// A round in flight: the response text and the calls it started.
type OpenRound = Arc<Mutex<Option<(String, Arc<[ToolCall]>)>>>;

/// The pipeline stage that talks to the model.
///
/// The whole turn runs in one spawned task so system frames are never held up; an
/// interruption aborts that task (and with it the HTTP stream and any tool calls) and waits
/// for it to stop before passing the interruption on, so no frame of the aborted turn can
/// follow the interruption. A round's calls and results are written to the context by this
/// task before the model runs again, so the next request always sees them.
pub(crate) struct ModelProcessor {
    /// The settings of the session's latest turn (its `say` put them there).
    settings: SharedSettings,
    tools: Arc<dyn Tools>,
    context: SharedContext,
    control: Option<SessionControl>,
    task: Option<JoinHandle<()>>,
    open_round: OpenRound,
    trail: Arc<Mutex<WireTrail>>,
}

impl ModelProcessor {
    /// A model stage running each turn on the settings in `settings` as the turn begins, with
    /// these tools and context.
    pub fn new(settings: SharedSettings, tools: Arc<dyn Tools>, context: SharedContext) -> Self {
        Self {
            settings,
            tools,
            context,
            control: None,
            task: None,
            open_round: Arc::new(Mutex::new(None)),
            trail: Arc::default(),
        }
    }

    /// Gives tool calls the session's control handle (so `end_session` can end it).
    pub(crate) fn with_control(mut self, control: SessionControl) -> Self {
        self.control = Some(control);
        self
    }

    /// Aborts the turn in flight and waits for it to stop; a round it left open gets
    /// "cancelled" results in the context so no call is orphaned.
    async fn stop_turn(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        let open = self
            .open_round
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some((text, calls)) = open {
            lock(&self.context).push_round(text, &calls, &[]);
        }
    }
}

#[async_trait]
impl Processor for ModelProcessor {
    fn name(&self) -> &'static str {
        "model"
    }

    async fn process(&mut self, frame: Frame, link: &Link) {
        match frame.body {
            FrameBody::RunModel => {
                self.stop_turn().await;
                let run = TurnRun {
                    turn: frame.turn,
                    link: link.clone(),
                    settings: self.settings.load_full(),
                    tools: self.tools.clone(),
                    context: self.context.clone(),
                    control: self.control.clone(),
                    open_round: self.open_round.clone(),
                    trail: self.trail.clone(),
                };
                self.task = Some(tokio::spawn(run.run()));
            }
            FrameBody::Interruption | FrameBody::Cancel(_) | FrameBody::End => {
                self.stop_turn().await;
                link.push(frame);
            }
            _ => link.push(frame),
        }
    }
}

/// A model request being answered. It publishes its `ModelRequest` event when the answer
/// ends ([`RequestInFlight::ended`]), or, when the turn is stopped under it (an interruption
/// or a cancel aborts the turn's task mid-stream), on drop, as stopped with what it streamed:
/// the session's wire trail counted its messages as carried, so the next request's record
/// builds on this one's (without it, every later request of the session was rebuilt wrong).
struct RequestInFlight {
    bus: crate::observe::Bus,
    session: u64,
    turn: TurnId,
    started: Instant,
    started_us: u64,
    first_piece: Option<Duration>,
    /// The text streamed so far, kept only while the wire is recorded (to its bound): a
    /// request that fails or is stopped mid-answer records what it did say.
    streamed: String,
    keep: usize,
    info: ModelResponseInfo,
    /// What was sent, when the wire is recorded; taken when the event is published.
    sent: Option<Box<crate::observe::wire::WireRequest>>,
    published: bool,
}

impl RequestInFlight {
    fn new(
        observer: &crate::pipeline::Observer,
        turn: TurnId,
        sent: Option<Box<crate::observe::wire::WireRequest>>,
    ) -> Self {
        let bus = observer.bus.clone();
        Self {
            started: Instant::now(),
            started_us: if bus.is_listened() { now_us() } else { 0 },
            first_piece: None,
            streamed: String::new(),
            keep: if sent.is_some() {
                bus.wire().bytes()
            } else {
                0
            },
            info: ModelResponseInfo::default(),
            sent,
            published: false,
            session: observer.session,
            turn,
            bus,
        }
    }

    /// Publishes the request's event with its `result`; returns its first piece's time and
    /// what the response reported.
    fn ended(
        mut self,
        result: &Result<crate::model::Completion, ModelError>,
    ) -> (Option<Duration>, ModelResponseInfo) {
        let limit = self.bus.wire().bytes();
        let answer = self
            .sent
            .is_some()
            .then(|| wire::answer(result, &self.streamed, limit));
        self.publish(result.as_ref().err().map(ToString::to_string), answer);
        (self.first_piece, std::mem::take(&mut self.info))
    }

    fn publish(
        &mut self,
        error: Option<String>,
        answer: Option<Box<crate::observe::wire::WireAnswer>>,
    ) {
        self.published = true;
        let request = self.sent.take();
        self.bus.publish_with(|| Event::ModelRequest {
            session: self.session,
            turn: self.turn,
            first_piece_us: self.first_piece.map(|d| d.as_micros() as u64),
            total_us: self.started.elapsed().as_micros() as u64,
            error,
            at_us: self.started_us,
            answer,
            request,
            response: self.info.clone(),
        });
    }
}

impl Drop for RequestInFlight {
    fn drop(&mut self) {
        if self.published {
            return;
        }
        self.info.stopped = true;
        self.info.finish_reason = None;
        let answer = self
            .sent
            .is_some()
            .then(|| wire::partial_answer(&self.streamed, self.bus.wire().bytes()));
        self.publish(None, answer);
    }
}

/// Everything one turn's task needs.
struct TurnRun {
    turn: TurnId,
    link: Link,
    /// What the whole turn runs on: the client and the limits.
    settings: Arc<BotSettings>,
    tools: Arc<dyn Tools>,
    context: SharedContext,
    control: Option<SessionControl>,
    open_round: OpenRound,
    trail: Arc<Mutex<WireTrail>>,
}

impl TurnRun {
    fn push(&self, body: FrameBody) {
        self.link.push(Frame::new(self.turn, body));
    }

    async fn run(self) {
        let mut rounds = 0u32;
        // Set once the model asked for a round beyond the cap: the next request offers no tools.
        let mut capped = false;
        // Tools still being discovered for this session (bounded wait), then the set this turn
        // keeps to its end: a reload or a server's new list applies from the next turn.
        self.tools.ready().await;
        let set = self.tools.pinned().unwrap_or_else(|| self.tools.clone());
        let client = &self.settings.model;
        let limits = self.settings.limits;
        let cx = CallContext {
            session: self.link.observer().session,
            turn: self.turn,
            control: self.control.clone(),
        };
        loop {
            let (messages, sending) = {
                let ctx = lock(&self.context);
                let messages = ctx.to_openai();
                let sending = Sending {
                    system: ctx.system.is_some(),
                    first: ctx.first_number(),
                    rewound: ctx.rewound,
                };
                (messages, sending)
            };
            // The round cap's last answer is asked for without tools.
            let specs: Arc<[ToolSpec]> = if capped {
                Arc::from(Vec::new())
            } else {
                set.specs()
            };
            let tools: Vec<Value> = specs.iter().map(openai_tool).collect();
            let bus = &self.link.observer().bus;
            // What is sent, when someone records it (once per request, before the messages
            // move into the request body).
            let sent = bus.records_wire().then(|| {
                lock(&self.context).rewound = None;
                self.trail
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .request(bus, client, &messages, &sending, &specs)
            });
            self.push(FrameBody::ResponseStart);
            let mut asked = RequestInFlight::new(self.link.observer(), self.turn, sent);
            let result = client
                .stream_reporting(
                    messages,
                    tools,
                    &Map::new(),
                    &mut |piece| {
                        asked
                            .first_piece
                            .get_or_insert_with(|| asked.started.elapsed());
                        if asked.streamed.len() < asked.keep {
                            asked.streamed.push_str(&piece);
                        }
                        self.push(FrameBody::TextPiece(piece.into_boxed_str()));
                    },
                    &mut asked.info,
                )
                .await;
            let (first_piece, info) = asked.ended(&result);
            let observer = self.link.observer();
            let mut completion = match result {
                Ok(c) => c,
                Err(e) => {
                    // An error is a system frame and overtakes data: the pieces this response
                    // pushed just before it broke would reach the output after the turn ended
                    // and be lost. A flush lets them through first, so the turn keeps its
                    // partial reply (bounded: a stuck processor of yours cannot hold it).
                    if first_piece.is_some() {
                        let (token, passed) = FlushToken::new();
                        self.push(FrameBody::Flush(token));
                        let _ = tokio::time::timeout(ERROR_FLUSH_WAIT, passed).await;
                    }
                    self.fail(&e, rounds);
                    return;
                }
            };
            let reasoning = std::mem::take(&mut completion.reasoning);
            self.push(FrameBody::ModelReport(Arc::new(ModelReport {
                info,
                reasoning,
            })));
            if completion.tool_calls.is_empty() {
                self.push(FrameBody::ResponseEnd { calls: 0 });
                return;
            }
            if rounds >= limits.round_cap {
                if !limits.answer_at_cap || capped {
                    self.push(FrameBody::Error(
                        round_cap_error(rounds, limits.round_cap, capped).into(),
                    ));
                    return;
                }
                capped = true;
            }
            rounds += 1;
            let calls: Arc<[ToolCall]> = completion.tool_calls.into();
            *self.open_round.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((completion.text.clone(), calls.clone()));
            self.push(FrameBody::ResponseEnd { calls: calls.len() });
            self.push(FrameBody::FunctionCallsStarted(calls.clone()));
            let round_us = if self.link.observer().bus.is_listened() {
                now_us()
            } else {
                0
            };
            let records = if capped {
                calls
                    .iter()
                    .map(|c| not_run_at_cap(c, limits.round_cap))
                    .collect()
            } else {
                join_all(
                    calls
                        .iter()
                        .map(|c| call_tool(&*set, c, limits.tool_timeout, &cx)),
                )
                .await
            };
            {
                let mut ctx = lock(&self.context);
                ctx.push_round(completion.text, &calls, &records);
                *self.open_round.lock().unwrap_or_else(|p| p.into_inner()) = None;
            }
            for record in records {
                // The round's calls all start together (`join_all`).
                observer.bus.publish_with(|| {
                    Event::ToolCall(record.event(observer.session, self.turn, round_us, false))
                });
                self.push(FrameBody::FunctionCallResult(Arc::new(record)));
            }
        }
    }

    /// Ends the turn on a failed model request: unless the server was only busy, the turn is
    /// rolled back from the history ([`ModelError::rolls_back`]; what the response streamed
    /// stays in the turn's record), and the failure is logged once (rate-limited) for
    /// headless runs.
    fn fail(&self, e: &ModelError, rounds: u32) {
        let session = self.link.observer().session;
        // A server that broke off after this turn's tools ran keeps the turn: rolled back, the
        // line sent again would run those tools again (and what they did stays done).
        let rolls_back = e.rolls_back()
            && (rounds == 0 || e.is_refusal() || matches!(e, ModelError::TooLong(_)));
        if rolls_back {
            lock(&self.context).roll_back_turn();
        }
        let message = if e.is_refusal() {
            format!(
                "{e}. The line and this turn's tool rounds were left out of the history, so the \
                 conversation goes on from before them; {}",
                refusal_advice(e)
            )
        } else if rolls_back && !matches!(e, ModelError::TooLong(_)) {
            // (A passed bound says so in its own words.)
            format!(
                "{e}. The line and what the reply said so far were left out of the history: \
                 send the line again once the model server answers"
            )
        } else if e.rolls_back() && !matches!(e, ModelError::TooLong(_)) {
            format!(
                "{e}. The line and the results of the tools this turn ran stay in the history \
                 (sent again, the line would run them again): send a line to go on from them \
                 once the model server answers"
            )
        } else {
            e.to_string()
        };
        let next = match e {
            _ if rolls_back => "the turn was rolled back from the history",
            _ if e.rolls_back() => {
                "the line and its tool results stay in the history; the next line tries the model again"
            }
            // Busy: every other failure rolls back or keeps the tools' results (above).
            _ => "the line stays in the history; the next line tries the model again",
        };
        fault_log::model_request_failed(session, self.turn, &e.to_string(), next);
        self.push(FrameBody::Error(message.into()));
    }
}

/// What to do about a refused request: for a prompt over the model's context, the three ways
/// out; otherwise, what to check.
fn refusal_advice(e: &ModelError) -> &'static str {
    let ModelError::Status { code, message } = e else {
        return "";
    };
    let m = message.to_ascii_lowercase();
    let too_long = m.contains("context")
        || m.contains("too long")
        || m.contains("maximum") && m.contains("token");
    if *code == 413 && !too_long {
        "the request is larger than the model server takes (its body size limit, not the \
         model's context): the history goes with every line, so keep fewer history messages \
         (bot.history_messages), send shorter lines, or raise the server's (or its proxy's) \
         request size limit"
    } else if too_long {
        "the conversation no longer fits the model's context: send a shorter line, give the server a \
         larger context (llama-server -c N), or keep fewer history messages (bot.history_messages)"
    } else if *code == 404 {
        "the server has no such endpoint or no such model: check --model-url / [model] url \
         (OpenAI-compatible servers serve under /v1, e.g. http://localhost:11434/v1) and the model \
         name (--model), then send the line again"
    } else {
        "check what the server refused (the model name, the [model] parameters, the key) and send the line again"
    }
}

/// The round-cap error: the model asked for one round too many (and, with `answer_at_cap`,
/// asked again on the last request, which offered no tools).
fn round_cap_error(rounds: u32, cap: u32, after_last_request: bool) -> String {
    if after_last_request {
        format!(
            "round cap reached: the model asked for more function calls after {cap} rounds, and again on \
             the last request, which offered no tools; the turn was ended. Raise the cap (bot.round_cap) or \
             check why the model keeps calling tools"
        )
    } else {
        format!(
            "round cap reached: the model asked for round {} of function calls, and a turn allows {cap}; \
             the turn was ended. Raise the cap (bot.round_cap), set bot.at_round_cap = \"answer\" for a last \
             answer without tools, or check why the model keeps calling tools",
            rounds + 1
        )
    }
}

/// The result a call gets when the round cap stops it from running.
fn not_run_at_cap(call: &ToolCall, cap: u32) -> ToolCallRecord {
    ToolCallRecord {
        call: call.clone(),
        outcome: ToolOutcome::error(format!(
            "not run: this turn reached its round cap ({cap} rounds of function calls); answer now \
             with what the earlier results say, without calling tools"
        )),
        duration: Duration::ZERO,
    }
}

/// Runs one call: arguments parsed, the timeout enforced, every failure an error outcome.
async fn call_tool(
    tools: &dyn Tools,
    call: &ToolCall,
    timeout: Duration,
    cx: &CallContext,
) -> ToolCallRecord {
    let started = Instant::now();
    let raw = call.arguments.trim();
    let parsed = if raw.is_empty() {
        Ok(Value::Object(Default::default()))
    } else {
        serde_json::from_str::<Value>(raw)
    };
    let outcome = match parsed {
        Err(e) => ToolOutcome::error(format!(
            "the arguments for `{}` are not valid JSON ({e}); send one JSON object matching the tool's schema",
            call.name
        )),
        Ok(args) => crate::tools::timed::call_timed(tools, &call.name, args, cx, timeout).await,
    };
    ToolCallRecord {
        call: call.clone(),
        outcome,
        duration: started.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, message: &str) -> ModelError {
        ModelError::Status {
            code,
            message: message.into(),
        }
    }

    #[test]
    fn a_body_limit_is_told_apart_from_the_context_window() {
        let limit = refusal_advice(&status(
            413,
            "Failed to buffer the request body: length limit exceeded",
        ));
        assert!(
            limit.contains("body size limit, not the model's context"),
            "{limit}"
        );
        for context in [
            status(400, "this model's maximum context length is 8192 tokens"),
            status(413, "prompt exceeds the context size"),
        ] {
            let advice = refusal_advice(&context);
            assert!(
                advice.contains("no longer fits the model's context"),
                "{advice}"
            );
        }
    }
}
