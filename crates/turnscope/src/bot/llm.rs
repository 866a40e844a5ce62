//! The model processor: runs the model on the context, streams its text as frames, and runs
//! rounds of function calls until a response starts none. [`ModelProcessor`] says why no frame of
//! an interrupted turn can follow the interruption.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::future::join_all;
use serde_json::Value;
use tokio::task::JoinHandle;

use super::aggregators::{SharedContext, lock};
use super::wire::{self, WireTrail};
use crate::model::ModelClient;
use crate::observe::event::{carried, now_us};
use crate::observe::{Event, ToolCallEvent};
use crate::pipeline::{Frame, FrameBody, Link, Processor, TurnId};
use crate::tools::{CallContext, SessionControl, ToolCall, ToolCallRecord, ToolOutcome, Tools};

/// Limits of a turn.
#[derive(Debug, Clone, Copy)]
pub struct TurnLimits {
    /// Most rounds of function calls in one turn.
    pub round_cap: u32,
    /// Longest a single tool call may run.
    pub tool_timeout: Duration,
}

impl Default for TurnLimits {
    fn default() -> Self {
        Self {
            round_cap: 8,
            tool_timeout: Duration::from_secs(30),
        }
    }
}

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
    client: ModelClient,
    tools: Arc<dyn Tools>,
    context: SharedContext,
    limits: TurnLimits,
    control: Option<SessionControl>,
    task: Option<JoinHandle<()>>,
    open_round: OpenRound,
    trail: Arc<Mutex<WireTrail>>,
}

impl ModelProcessor {
    /// A model stage with its client, tools, context and limits.
    pub fn new(
        client: ModelClient,
        tools: Arc<dyn Tools>,
        context: SharedContext,
        limits: TurnLimits,
    ) -> Self {
        Self {
            client,
            tools,
            context,
            limits,
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
                    client: self.client.clone(),
                    tools: self.tools.clone(),
                    context: self.context.clone(),
                    limits: self.limits,
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

/// Everything one turn's task needs.
struct TurnRun {
    turn: TurnId,
    link: Link,
    client: ModelClient,
    tools: Arc<dyn Tools>,
    context: SharedContext,
    limits: TurnLimits,
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
        // Tools still being discovered for this session (bounded wait).
        self.tools.ready().await;
        let cx = CallContext {
            session: self.link.observer().session,
            turn: self.turn,
            control: self.control.clone(),
        };
        loop {
            let (messages, system, first) = {
                let ctx = lock(&self.context);
                (ctx.to_openai(), ctx.system.is_some(), ctx.first_number())
            };
            let specs = self.tools.specs();
            let bus = &self.link.observer().bus;
            // What is sent, when someone records it (once per request, before the messages
            // move into the request body).
            let sent = bus.records_wire().then(|| {
                self.trail
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .request(bus, &self.client, &messages, system, first, &specs)
            });
            self.push(FrameBody::ResponseStart);
            let started = Instant::now();
            let started_us = if bus.is_listened() { now_us() } else { 0 };
            let mut first_piece = None;
            let result = self
                .client
                .stream(messages, &specs, &mut |piece| {
                    first_piece.get_or_insert_with(|| started.elapsed());
                    self.push(FrameBody::TextPiece(piece.into_boxed_str()));
                })
                .await;
            let observer = self.link.observer();
            observer.bus.publish_with(|| Event::ModelRequest {
                session: observer.session,
                turn: self.turn,
                first_piece_us: first_piece.map(|d| d.as_micros() as u64),
                total_us: started.elapsed().as_micros() as u64,
                error: result.as_ref().err().map(|e| e.to_string()),
                at_us: started_us,
                response: sent
                    .is_some()
                    .then(|| wire::response(&result, observer.bus.wire().bytes())),
                request: sent,
            });
            let completion = match result {
                Ok(c) => c,
                Err(e) => {
                    self.push(FrameBody::Error(e.to_string().into()));
                    return;
                }
            };
            if completion.tool_calls.is_empty() {
                self.push(FrameBody::ResponseEnd { calls: 0 });
                return;
            }
            if rounds >= self.limits.round_cap {
                self.push(FrameBody::Error(
                    format!(
                        "round cap reached: the model asked for round {} of function calls, and a turn allows {}; \
                         the turn was ended. Raise the cap (round_cap) or check why the model keeps calling tools",
                        rounds + 1,
                        self.limits.round_cap
                    )
                    .into(),
                ));
                return;
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
            let records = join_all(
                calls
                    .iter()
                    .map(|c| call_tool(&*self.tools, c, self.limits.tool_timeout, &cx)),
            )
            .await;
            {
                let mut ctx = lock(&self.context);
                ctx.push_round(completion.text, &calls, &records);
                *self.open_round.lock().unwrap_or_else(|p| p.into_inner()) = None;
            }
            for record in records {
                observer.bus.publish_with(|| {
                    Event::ToolCall(ToolCallEvent {
                        session: observer.session,
                        turn: self.turn,
                        name: record.call.name.clone(),
                        duration_us: record.duration.as_micros() as u64,
                        result_bytes: record.outcome.text.len(),
                        error: record.outcome.is_error.then(|| record.outcome.text.clone()),
                        arguments: record.call.arguments.clone(),
                        result: if record.outcome.is_error {
                            String::new()
                        } else {
                            carried(&record.outcome.text)
                        },
                        // The round's calls all start together (`join_all`).
                        started_us: round_us,
                    })
                });
                self.push(FrameBody::FunctionCallResult(Arc::new(record)));
            }
        }
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
        Ok(args) => {
            match tokio::time::timeout(timeout, tools.call_in(&call.name, args, cx)).await {
                Ok(outcome) => outcome,
                Err(_) => ToolOutcome::error(format!(
                    "tool `{}` took longer than {:.1} s and was abandoned; answer without it or try again",
                    call.name,
                    timeout.as_secs_f64()
                )),
            }
        }
    };
    ToolCallRecord {
        call: call.clone(),
        outcome,
        duration: started.elapsed(),
    }
}
