//! A model server that misbehaves without failing: it rate-limits or is overloaded (429, 503,
//! with or without `Retry-After`), streams an error page that never ends, or loops and never
//! ends its answer; or breaks off mid-answer. Each ends its turn with words that say which, in
//! bounded time and memory; every turn but a busy server's is rolled back from the history.

use std::time::Duration;

use serde_json::Value;
use turnscope::bot::{Bot, BotSession, TurnEnd, TurnRecord};
use turnscope::model::{ModelClient, ModelConfig};
use turnscope::observe::{Bus, Event};
use turnscope::pipeline::Observer;

use crate::support::upstream::{Reply, Upstream, content};

const WAIT: Duration = Duration::from_secs(20);

/// A session on `up` whose client `tune` adjusts (timeouts short, as the fault tests use).
fn session(up: &Upstream, tune: impl FnOnce(&mut ModelConfig)) -> BotSession {
    session_on(up, tune, &Bus::default())
}

fn session_on(up: &Upstream, tune: impl FnOnce(&mut ModelConfig), bus: &Bus) -> BotSession {
    let mut config = ModelConfig::new(up.base_url(), "test-model");
    config.first_byte_timeout = Duration::from_millis(400);
    config.idle_timeout = Duration::from_millis(400);
    tune(&mut config);
    Bot::builder(ModelClient::new(config))
        .system_prompt("be brief")
        .build()
        .open(Observer::new(bus.clone(), 1))
}

async fn turn(session: &BotSession, line: &str) -> TurnRecord {
    let t = session.say(line).await;
    tokio::time::timeout(WAIT, t.done())
        .await
        .expect("the turn ends");
    t.snapshot()
}

fn error_of(r: &TurnRecord) -> &str {
    match &r.end {
        Some(TurnEnd::Error(m)) => m,
        other => panic!("expected an error end, got {other:?}"),
    }
}

fn busy(code: u16, retry_after: Option<&str>) -> Reply {
    Reply::Busy {
        code,
        retry_after: retry_after.map(str::to_string),
        message: "Rate limit reached for requests".into(),
    }
}

/// The user lines a request sent.
fn user_lines(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_rate_limit_with_a_short_retry_after_is_waited_out_once() {
    let up = Upstream::start(vec![busy(429, Some("0.3")), Reply::text(&["ok"])]).await;
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let s = session_on(&up, |_| {}, &bus);
    let r = turn(&s, "hello").await;
    assert_eq!(
        (r.reply.as_str(), &r.end),
        ("ok", &Some(TurnEnd::Completed))
    );
    assert_eq!(up.requests().len(), 2, "sent once more after the wait");
    let waited = loop {
        let event = tokio::time::timeout(WAIT, events.recv())
            .await
            .expect("the model request's event")
            .expect("the bus is open");
        if let Event::ModelRequest { response, .. } = &*event {
            break response.waited_ms;
        }
    };
    assert_eq!(waited, Some(300));
}

#[tokio::test]
async fn rate_limiting_and_overload_are_named_and_keep_the_line() {
    let up = Upstream::start(vec![
        busy(429, Some("0.2")),
        busy(429, Some("0.2")),
        busy(503, Some("3600")),
        busy(503, None),
        Reply::text(&["back"]),
    ])
    .await;
    let s = session(&up, |c| c.max_response_time = Duration::from_secs(60));
    let twice = turn(&s, "first").await;
    let m = error_of(&twice);
    for words in [
        "rate limiting requests (HTTP 429: Rate limit reached",
        "waited the 0.2 s its Retry-After asked and sent the request again",
        "nothing is wrong with the line, the key or the [model] parameters",
        "The line stays in the history",
    ] {
        assert!(m.contains(words), "{words:?} in {m}");
    }
    assert!(
        !m.contains("left out of the history") && !m.contains("check what the server refused"),
        "{m}"
    );
    let too_long = turn(&s, "second").await;
    let m = error_of(&too_long);
    assert!(
        m.contains("overloaded or unavailable (HTTP 503")
            && m.contains("asked to wait 3600.0 s, more than this response may take ([model] max_response_seconds, 60 s)"),
        "{m}"
    );
    let none = turn(&s, "third").await;
    assert!(error_of(&none).contains("said no Retry-After"), "{none:?}");
    assert_eq!(turn(&s, "fourth").await.reply, "back");
    // One wait in all (the 3600 s one did not fit), and no line was rolled back: the last
    // request carries every line.
    let requests = up.requests();
    assert_eq!(requests.len(), 5);
    assert_eq!(
        user_lines(&requests[4]),
        ["first", "second", "third", "fourth"]
    );
}

/// A server that broke off mid-answer (a cut stream, a silent one) or sent nothing: the turn
/// is rolled back and says so, so the line sent again does not follow itself and the cut
/// reply is not handed to the model as its own words (tour J: the next request carried
/// "user, cut assistant, user").
#[tokio::test]
async fn a_server_breaking_off_rolls_the_turn_back_and_says_so() {
    let up = Upstream::start(vec![
        Reply::Cut(vec![content("The history of bread is")]),
        Reply::StallAfter(vec![content("Once upon")]),
        Reply::Hang,
        Reply::text(&["fine"]),
    ])
    .await;
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let s = session_on(&up, |_| {}, &bus);
    for line in ["bread", "story", "anyone"] {
        let r = turn(&s, line).await;
        let m = error_of(&r);
        assert!(
            m.contains("were left out of the history: send the line again"),
            "{line}: {m}"
        );
    }
    assert_eq!(turn(&s, "again").await.reply, "fine");
    let requests = up.requests();
    let last = &requests[3];
    assert_eq!(user_lines(last), ["again"], "{last}");
    assert!(
        !last.to_string().contains("The history of bread")
            && !last.to_string().contains("Once upon"),
        "no cut reply: {last}"
    );
    // The failed requests' records keep what they streamed before they failed (the wire
    // inspector said "answer (nothing)" of one that streamed 83 pieces).
    let mut answers = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::ModelRequest {
            error: Some(_),
            answer: Some(answer),
            ..
        } = &*event
        {
            answers.push(answer.content.clone());
        }
    }
    assert_eq!(answers, ["The history of bread is", "Once upon", ""]);
}

#[tokio::test]
async fn an_endless_error_body_is_read_to_a_bound() {
    let up = Upstream::start(vec![Reply::EndlessError(500), Reply::text(&["fine"])]).await;
    let s = session(&up, |_| {});
    let r = turn(&s, "hello").await;
    let m = error_of(&r);
    assert!(
        m.contains("HTTP 500") && m.contains("the error page of a server gone wrong: xxx"),
        "{m}"
    );
    assert_eq!(turn(&s, "again").await.reply, "fine");
}

#[tokio::test]
async fn a_looping_model_is_ended_at_its_byte_bound_and_left_out_of_the_history() {
    let up = Upstream::start(vec![
        Reply::Endless {
            gap: Duration::ZERO,
        },
        Reply::text(&["fresh"]),
    ])
    .await;
    let s = session(&up, |c| c.max_response_bytes = 64 * 1024);
    let r = turn(&s, "tell me a story").await;
    let m = error_of(&r);
    assert!(
        m.contains("passed [model] max_response_kib (64 KiB)") && m.contains("max_tokens"),
        "{m}"
    );
    assert!(
        r.reply.starts_with("and again"),
        "the reply so far is kept in the record"
    );
    assert!(r.reply.len() < 64 * 1024, "{} bytes", r.reply.len());
    assert_eq!(turn(&s, "hello").await.reply, "fresh");
    // The looping turn (its line and its partial reply) is not sent again.
    let last = &up.requests()[1];
    assert_eq!(user_lines(last), ["hello"]);
    assert!(!last.to_string().contains("and again"), "{last}");
}

#[tokio::test]
async fn a_looping_model_is_ended_at_its_time_bound() {
    let up = Upstream::start(vec![Reply::Endless {
        gap: Duration::from_millis(20),
    }])
    .await;
    let s = session(&up, |c| c.max_response_time = Duration::from_secs(1));
    let r = turn(&s, "tell me a story").await;
    let m = error_of(&r);
    assert!(
        m.contains("passed [model] max_response_seconds (1 s)"),
        "{m}"
    );
    assert!(r.reply.starts_with("and again"), "{r:?}");
}
