//! The bot runtime end to end: real pipeline, real model client, real loopback model servers.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::upstream::{Reply, Upstream, content};
use serde_json::json;
use turnscope::bot::{Bot, BotSession, Message, TurnEnd, TurnLimits, TurnRecord};
use turnscope::model::{EmbeddedModel, ModelClient, ModelConfig, ScriptSettings};
use turnscope::observe::Bus;
use turnscope::pipeline::Observer;
use turnscope::tools::{FnTool, Toolbox, Tools};

const WAIT: Duration = Duration::from_secs(10);

fn client(base_url: &str) -> ModelClient {
    let mut config = ModelConfig::new(base_url, "test-model");
    config.first_byte_timeout = Duration::from_millis(400);
    config.idle_timeout = Duration::from_millis(400);
    ModelClient::new(config)
}

fn session(base_url: &str, tools: Arc<dyn Tools>, limits: TurnLimits) -> BotSession {
    Bot::builder(client(base_url))
        .system_prompt("be brief")
        .tools(tools)
        .limits(limits)
        .build()
        .open(Observer::new(Bus::default(), 1))
}

fn no_tools() -> Arc<dyn Tools> {
    Arc::new(Toolbox::new())
}

fn echo_tools() -> Arc<dyn Tools> {
    Arc::new(Toolbox::new().with(turnscope::tools::builtin::echo()))
}

/// The embedded model answering at once, its script's own reply length.
async fn zero_pace_model() -> EmbeddedModel {
    EmbeddedModel::start(
        0,
        ScriptSettings {
            pace: 0.0,
            words: None,
        },
    )
    .await
    .unwrap()
}

async fn turn(session: &BotSession, line: &str) -> TurnRecord {
    let t = session.say(line).await;
    tokio::time::timeout(WAIT, t.done())
        .await
        .expect("turn ends");
    t.snapshot()
}

#[tokio::test]
async fn a_turn_with_no_round_gives_the_whole_reply() {
    let up = Upstream::start(vec![Reply::text(&["Hello", " there", "."])]).await;
    let s = session(&up.base_url(), no_tools(), TurnLimits::default());
    let r = turn(&s, "hi").await;
    assert_eq!(r.reply, "Hello there.");
    assert_eq!(r.end, Some(TurnEnd::Completed));
    assert_eq!(r.rounds, 0);
    assert_eq!(r.piece_ends.len(), 3);
    assert!(r.first_piece.is_some() && r.total.is_some());
    let req = &up.requests()[0];
    assert_eq!(req["stream"], json!(true));
    assert_eq!(
        req["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
    assert_eq!(req["messages"][1], json!({"role": "user", "content": "hi"}));
    assert!(
        req.get("tools").is_none(),
        "no tools offered when the bot has none"
    );
}

/// A server that breaks off after the turn's tools ran keeps the turn (line and tool
/// results): rolled back, the line sent again would run the tools again (the review of tour J's
/// rollback). One that breaks off before any tool ran is rolled back.
#[tokio::test]
async fn a_break_after_tools_ran_keeps_the_turn_and_says_so() {
    let up = Upstream::start(vec![
        Reply::calls(&[("echo", r#"{"text":"ping"}"#)]),
        Reply::Cut(vec![content("got pi")]),
        Reply::text(&["next"]),
    ])
    .await;
    let s = session(&up.base_url(), echo_tools(), TurnLimits::default());
    let broke = turn(&s, "first").await;
    match &broke.end {
        Some(TurnEnd::Error(m)) => assert!(
            m.contains("the results of the tools this turn ran stay in the history"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(turn(&s, "go on").await.reply, "next");
    let last = &up.requests()[2]["messages"];
    let text = last.to_string();
    assert!(
        text.contains("\"first\"") && text.contains("\"tool_call_id\":\"c0\""),
        "the line and its tool result stay: {text}"
    );
}

#[tokio::test]
async fn one_and_two_rounds_end_on_the_response_that_starts_none() {
    let up = Upstream::start(vec![
        Reply::calls(&[("echo", r#"{"text":"ping"}"#)]),
        Reply::text(&["got ping"]),
        Reply::calls(&[("echo", r#"{"text":"a"}"#)]),
        Reply::calls(&[("echo", r#"{"text":"b"}"#)]),
        Reply::text(&["got a and b"]),
    ])
    .await;
    let s = session(&up.base_url(), echo_tools(), TurnLimits::default());
    let one = turn(&s, "first").await;
    assert_eq!((one.reply.as_str(), one.rounds), ("got ping", 1));
    assert_eq!(one.tool_calls.len(), 1);
    assert_eq!(one.tool_calls[0].outcome.text, "ping");
    let two = turn(&s, "second").await;
    assert_eq!((two.reply.as_str(), two.rounds), ("got a and b", 2));
    assert_eq!(two.end, Some(TurnEnd::Completed));
    // The re-run request carries the call and its result, paired by id.
    let rerun = &up.requests()[1]["messages"];
    let n = rerun.as_array().unwrap().len();
    assert_eq!(rerun[n - 2]["tool_calls"][0]["function"]["name"], "echo");
    assert_eq!(
        rerun[n - 1],
        json!({"role": "tool", "tool_call_id": "c0", "content": "ping"})
    );
}

#[tokio::test]
async fn calls_of_one_round_run_concurrently() {
    let log: Arc<Mutex<Vec<(&'static str, Instant)>>> = Arc::default();
    let slow = |name: &'static str, log: Arc<Mutex<Vec<(&'static str, Instant)>>>| {
        FnTool::new(name, "slow", json!({"type": "object"}), move |_| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(("start", Instant::now()));
                tokio::time::sleep(Duration::from_millis(300)).await;
                log.lock().unwrap().push(("end", Instant::now()));
                Ok(format!("{name} done"))
            }
        })
    };
    let tools = Arc::new(
        Toolbox::new()
            .with(slow("a", log.clone()))
            .with(slow("b", log.clone())),
    );
    let up = Upstream::start(vec![
        Reply::calls(&[("a", "{}"), ("b", "{}")]),
        Reply::text(&["both done"]),
    ])
    .await;
    let s = session(&up.base_url(), tools, TurnLimits::default());
    let r = turn(&s, "go").await;
    assert_eq!(r.reply, "both done");
    assert_eq!(r.rounds, 1);
    assert_eq!(r.tool_calls.len(), 2);
    let kinds: Vec<_> = log.lock().unwrap().iter().map(|(k, _)| *k).collect();
    assert_eq!(
        kinds,
        ["start", "start", "end", "end"],
        "both calls start before either ends"
    );
}

#[tokio::test]
async fn an_interruption_mid_stream_leaves_the_next_turn_whole() {
    let model = EmbeddedModel::start(
        0,
        ScriptSettings {
            pace: 0.02,
            words: Some(30),
        },
    )
    .await
    .unwrap();
    let s = session(&model.base_url(), no_tools(), TurnLimits::default());
    let first = s.say("alpha").await;
    let mut signal = first.subscribe();
    tokio::time::timeout(WAIT, signal.wait_for(|s| s.pieces >= 3))
        .await
        .unwrap()
        .unwrap();
    let second = turn(&s, "bravo").await;
    let first = first.snapshot();
    assert_eq!(first.end, Some(TurnEnd::Interrupted));
    assert!(
        first.reply.starts_with("You said: alpha"),
        "{}",
        first.reply
    );
    assert!(first.piece_ends.len() < 30);
    assert!(
        second.reply.starts_with("You said: bravo"),
        "{}",
        second.reply
    );
    assert!(!second.reply.contains("alpha"));
    assert_eq!(second.reply.split_whitespace().count(), 30);
    // The context holds the partial reply before the new line, and the whole new reply.
    let history = s.context().messages;
    assert!(matches!(&history[0], Message::User(l) if &**l == "alpha"));
    assert!(
        matches!(&history[1], Message::Assistant { text, .. } if text.starts_with("You said: alpha") && text.len() < second.reply.len())
    );
    assert!(matches!(&history[2], Message::User(l) if &**l == "bravo"));
    assert!(matches!(&history[3], Message::Assistant { text, .. } if *text == second.reply));
    assert_eq!(history.len(), 4);
}

/// A chat settles its turn (a drain, so the stored history holds the reply) and then says
/// the next line: one `Flush` goes through the pipeline between the two turns, not a second
/// one for a pipeline nothing was pushed into since, and the next turn still sees the reply.
#[tokio::test]
async fn a_settled_turn_is_not_drained_again_before_the_next_line() {
    let model = zero_pace_model().await;
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let s = Bot::builder(client(&model.base_url()))
        .tools(no_tools())
        .build()
        .open(Observer::new(bus.clone(), 1));
    turn(&s, "we open at nine").await;
    assert!(s.settle().await);
    assert!(s.settle().await, "a second settle finds it settled");
    let r = turn(&s, "what did I say?").await;
    assert_eq!(r.reply, "Earlier you said: we open at nine");
    let mut flushes_between = std::collections::HashSet::new();
    while let Some(event) = events.try_recv() {
        if let turnscope::observe::Event::Frame(frame) = &*event
            && frame.name == "Flush"
            && frame.turn == 0
        {
            flushes_between.insert(frame.id);
        }
    }
    // One before the first line (nothing was drained yet), one settling the first turn.
    assert_eq!(flushes_between.len(), 2, "{flushes_between:?}");
}

#[tokio::test]
async fn history_is_kept_across_turns() {
    let model = zero_pace_model().await;
    let s = session(&model.base_url(), no_tools(), TurnLimits::default());
    turn(&s, "we open at nine").await;
    let r = turn(&s, "what did I say?").await;
    assert_eq!(r.reply, "Earlier you said: we open at nine");
}

#[tokio::test]
async fn the_round_cap_ends_a_runaway_turn_with_an_error_that_says_so() {
    let call = || Reply::calls(&[("echo", r#"{"text":"again"}"#)]);
    let up = Upstream::start(vec![call(), call(), call(), Reply::text(&["fine"])]).await;
    let limits = TurnLimits {
        round_cap: 2,
        answer_at_cap: false,
        ..TurnLimits::default()
    };
    let s = session(&up.base_url(), echo_tools(), limits);
    let r = turn(&s, "loop").await;
    assert_eq!(r.rounds, 2);
    match r.end {
        Some(TurnEnd::Error(m)) => assert!(
            m.contains("round cap reached") && m.contains("allows 2"),
            "{m}"
        ),
        other => panic!("expected a round-cap error, got {other:?}"),
    }
    // The session stays usable.
    assert_eq!(turn(&s, "next").await.reply, "fine");
}

/// A tool that answers only after a minute.
fn stuck_tool() -> FnTool {
    FnTool::new(
        "stuck",
        "never ends",
        json!({"type": "object"}),
        |_| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok("late".to_string())
        },
    )
}

#[tokio::test]
async fn a_tool_that_times_out_gives_the_model_an_error_and_the_turn_goes_on() {
    let stuck = stuck_tool();
    let up = Upstream::start(vec![
        Reply::calls(&[("stuck", "{}")]),
        Reply::text(&["sorry, it timed out"]),
    ])
    .await;
    let limits = TurnLimits {
        tool_timeout: Duration::from_millis(200),
        ..TurnLimits::default()
    };
    let s = session(&up.base_url(), Arc::new(Toolbox::new().with(stuck)), limits);
    let r = turn(&s, "try it").await;
    assert_eq!(r.reply, "sorry, it timed out");
    assert!(r.tool_calls[0].outcome.is_error);
    assert!(
        r.tool_calls[0]
            .outcome
            .text
            .contains("took longer than 0.2 s"),
        "{}",
        r.tool_calls[0].outcome.text
    );
    let sent = &up.requests()[1]["messages"];
    let last = &sent[sent.as_array().unwrap().len() - 1];
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .starts_with("ERROR: tool `stuck` took longer")
    );
}

/// A turn interrupted while its tool runs records the call with the time it ran, not 0.
#[tokio::test]
async fn a_tool_call_cut_by_an_interruption_keeps_the_time_it_ran() {
    let stuck = stuck_tool();
    let up = Upstream::start(vec![Reply::calls(&[("stuck", "{}")])]).await;
    let s = session(
        &up.base_url(),
        Arc::new(Toolbox::new().with(stuck)),
        TurnLimits::default(),
    );
    let running = s.say("try it").await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(s.interrupt().await);
    let mut signal = running.subscribe();
    tokio::time::timeout(WAIT, signal.wait_for(|s| s.done))
        .await
        .unwrap()
        .unwrap();
    let r = running.snapshot();
    assert_eq!(r.end, Some(TurnEnd::Interrupted));
    assert_eq!(r.tool_calls.len(), 1, "{r:?}");
    let ran = r.tool_calls[0].duration;
    assert!(ran >= Duration::from_millis(300), "{ran:?}");
}

#[tokio::test]
async fn bad_tool_arguments_are_an_error_result_not_a_failure() {
    let up = Upstream::start(vec![
        Reply::calls(&[("echo", "{not json")]),
        Reply::text(&["ok"]),
    ])
    .await;
    let s = session(&up.base_url(), echo_tools(), TurnLimits::default());
    let r = turn(&s, "x").await;
    assert_eq!(r.reply, "ok");
    assert!(r.tool_calls[0].outcome.text.contains("not valid JSON"));
}

/// Runs one faulty turn, checks its error names the cause, then checks the session answers.
async fn fault(reply: Reply, expect: &[&str], partial: &str) {
    let up = Upstream::start(vec![reply, Reply::text(&["recovered"])]).await;
    let s = session(&up.base_url(), no_tools(), TurnLimits::default());
    let r = turn(&s, "hello").await;
    match &r.end {
        Some(TurnEnd::Error(m)) => {
            for e in expect {
                assert!(m.contains(e), "error {m:?} should contain {e:?}");
            }
        }
        other => panic!("expected an error end, got {other:?}"),
    }
    assert_eq!(r.reply, partial);
    assert_eq!(turn(&s, "again").await.reply, "recovered");
}

#[tokio::test]
async fn model_http_errors_name_status_and_message() {
    fault(
        Reply::Status(500, r#"{"error":{"message":"the GPU caught fire"}}"#.into()),
        &["HTTP 500", "the GPU caught fire"],
        "",
    )
    .await;
    fault(
        Reply::Status(429, r#"{"error":{"message":"Rate limit reached"}}"#.into()),
        &["HTTP 429", "Rate limit"],
        "",
    )
    .await;
}

#[tokio::test]
async fn a_malformed_chunk_ends_the_turn() {
    let reply = Reply::Events {
        data: vec![content("Hi"), "{not json".into()],
        done: true,
        gap: Duration::ZERO,
    };
    fault(reply, &["not an OpenAI chat.completion.chunk"], "Hi").await;
}

#[tokio::test]
async fn a_stream_cut_mid_word_keeps_the_partial_reply() {
    fault(
        Reply::Cut(vec![content("We op")]),
        &["broke before its end"],
        "We op",
    )
    .await;
    let closed = Reply::Events {
        data: vec![content("We op")],
        done: false,
        gap: Duration::ZERO,
    };
    fault(closed, &["no [DONE] and no finish reason"], "We op").await;
}

#[tokio::test]
async fn hangs_before_and_after_the_first_byte_time_out() {
    fault(Reply::Hang, &["sent nothing within 0.4 s"], "").await;
    fault(
        Reply::StallAfter(vec![content("Hi")]),
        &["went silent for 0.4 s"],
        "Hi",
    )
    .await;
}

#[tokio::test]
async fn a_refused_connection_is_an_error_and_a_server_that_comes_back_answers() {
    let up = Upstream::start(vec![]).await;
    let addr = up.addr;
    up.stop();
    drop(up);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let s = session(
        &format!("http://{addr}/v1"),
        no_tools(),
        TurnLimits::default(),
    );
    let r = turn(&s, "anyone?").await;
    match &r.end {
        Some(TurnEnd::Error(m)) => assert!(m.contains("unreachable"), "{m}"),
        other => panic!("{other:?}"),
    }
    let _back = Upstream::start_at(addr, vec![Reply::text(&["back again"])]).await;
    assert_eq!(turn(&s, "now?").await.reply, "back again");
}

#[tokio::test]
async fn ending_a_session_ends_its_turn_as_session_ended() {
    let up = Upstream::start(vec![Reply::Hang]).await;
    let mut config = ModelConfig::new(up.base_url(), "m");
    config.first_byte_timeout = Duration::from_secs(30);
    let s = Bot::builder(ModelClient::new(config))
        .build()
        .open(Observer::new(Bus::default(), 1));
    let t = s.say("hello").await;
    s.end().await;
    tokio::time::timeout(WAIT, t.done()).await.unwrap();
    assert_eq!(t.snapshot().end, Some(TurnEnd::SessionEnded));
    assert!(s.is_finished());
}

/// A processor of yours that takes its time over each reply piece.
struct SlowPieces;

#[async_trait::async_trait]
impl turnscope::pipeline::Processor for SlowPieces {
    fn name(&self) -> &'static str {
        "slow-pieces"
    }

    async fn process(
        &mut self,
        frame: turnscope::pipeline::Frame,
        link: &turnscope::pipeline::Link,
    ) {
        if matches!(frame.body, turnscope::pipeline::FrameBody::TextPiece(_)) {
            tokio::time::sleep(Duration::from_millis(60)).await;
        }
        link.push(frame);
    }
}

/// A model error is a system frame, which overtakes data: the pieces a broken response
/// streamed before it still reach the turn, so a failed turn keeps its partial reply.
#[tokio::test]
async fn a_stream_that_breaks_keeps_the_pieces_it_streamed() {
    let up = Upstream::start(vec![Reply::Cut(vec![content("We"), content(" open")])]).await;
    let s = Bot::builder(client(&up.base_url()))
        .processor(|| Box::new(SlowPieces))
        .build()
        .open(Observer::new(Bus::default(), 1));
    let r = turn(&s, "hours?").await;
    assert_eq!(r.reply, "We open", "{r:?}");
    assert!(
        matches!(&r.end, Some(TurnEnd::Error(m)) if m.contains("broke before its end")),
        "{:?}",
        r.end
    );
}
