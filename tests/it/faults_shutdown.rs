//! Shutdown during load, on the real binary: many sessions mid-turn, several callers queued
//! on each handle, then SIGTERM. Every caller is answered, every turn that started ends with
//! a reason, the `--events` file is complete JSONL, and the process exits 0.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::headless_bin::{Headless, WAIT};
use crate::support::mcp::{Client, params};
use serde_json::{Value, json};

const CLIENTS: usize = 8;
const HANDLES_PER_CLIENT: usize = 2;
const CALLERS_PER_HANDLE: usize = 3;

/// Parses every line; panics naming the first that is not JSON.
fn parse_jsonl(text: &str) -> Vec<Value> {
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("line {} is not JSON ({e}): {l:?}", i + 1))
        })
        .collect()
}

#[tokio::test]
async fn sigterm_under_load_ends_every_turn_with_a_reason_and_completes_the_jsonl() {
    // Turns of 3000 words at 10 ms a word: every one is mid-flight when the signal comes.
    let mut bin = Headless::start(
        "shutdown-load",
        // No drain: the signal ends the turns in flight (draining: tests/it/replicas.rs).
        "[server]\nsessions = 64\ndrain_seconds = 0\n[model]\npace = 0.01\nwords = 3000\n",
        &[],
    )
    .await;
    let mut callers = Vec::new();
    let mut handles = 0;
    for _ in 0..CLIENTS {
        let client = Arc::new(Client::connect(&bin.url).await);
        for _ in 0..HANDLES_PER_CLIENT {
            let handle = client.start().await;
            handles += 1;
            for k in 0..CALLERS_PER_HANDLE {
                let client = client.clone();
                let handle = handle.clone();
                callers.push(tokio::spawn(async move {
                    let args = json!({"handle": handle, "line": format!("caller {k} speaking")});
                    client.service.call_tool(params("chat", args)).await
                }));
            }
        }
    }
    // Wait (hang guard only) until every handle has a turn in flight, as the events show.
    let deadline = tokio::time::Instant::now() + WAIT;
    while bin
        .events_text()
        .matches(r#""type":"turn_started""#)
        .count()
        < handles
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "turns never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    bin.terminate();
    let status = bin.exit().await;
    assert!(status.success(), "exit status {status:?}");

    // Every caller was answered before the server went: with the turn it waited on
    // (ended as session_ended), or, if it was still queued, with the draining error.
    let callers_total = callers.len();
    let mut answers: HashMap<String, usize> = HashMap::new();
    for caller in callers {
        let result = tokio::time::timeout(WAIT, caller)
            .await
            .expect("no caller hangs")
            .unwrap()
            .expect("every caller gets a JSON-RPC answer");
        let outcome: crate::support::mcp::Outcome = result.into();
        let kind = if outcome.is_error {
            // Queued behind the turn the shutdown ended: the server says it is going, and,
            // alone, talks of no balancer nor other replica (tour K).
            assert!(
                outcome.text.contains("this server is shutting down")
                    && !outcome.text.contains("load balancer"),
                "{}",
                outcome.text
            );
            "no_session".to_string()
        } else {
            outcome.record["end_reason"]
                .as_str()
                .unwrap_or("?")
                .to_string()
        };
        *answers.entry(kind).or_default() += 1;
    }
    let ended = answers.get("session_ended").copied().unwrap_or(0);
    let refused = answers.get("no_session").copied().unwrap_or(0);
    assert!(
        ended >= handles && ended + refused == callers_total,
        "each handle's turn in flight ended by the shutdown, the queued callers refused: {answers:?}"
    );

    // The events file: complete lines only, each one JSON; every turn started has ended
    // once with a reason; every session opened was closed by the shutdown.
    let text = bin.events_text();
    assert!(text.ends_with('\n'), "the last line is complete");
    let events = parse_jsonl(&text);
    let mut turns: HashMap<(u64, u64), (usize, Vec<String>)> = HashMap::new();
    for e in &events {
        let key = || (e["session"].as_u64().unwrap(), e["turn"].as_u64().unwrap());
        match e["type"].as_str() {
            Some("turn_started") => turns.entry(key()).or_default().0 += 1,
            Some("turn_ended") => turns
                .entry(key())
                .or_default()
                .1
                .push(e["reason"].as_str().unwrap_or_default().to_string()),
            _ => {}
        }
    }
    assert!(turns.len() >= handles, "{} turns", turns.len());
    for ((session, turn), (started, ended)) in &turns {
        assert_eq!(*started, 1, "session {session} turn {turn} started once");
        assert_eq!(
            ended.len(),
            1,
            "session {session} turn {turn} ends exactly once: {ended:?}"
        );
        assert!(
            !ended[0].is_empty(),
            "session {session} turn {turn}: no reason"
        );
    }
    let opened = events
        .iter()
        .filter(|e| e["type"] == "session" && e["closed"].is_null())
        .count();
    let closed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "session" && !e["closed"].is_null())
        .collect();
    assert_eq!(opened, handles);
    assert_eq!(closed.len(), handles, "every session closed once");
    assert!(closed.iter().all(|e| e["closed"] == "server shut down"));
}

/// The window the shutdown test can only hit by chance, made certain: a line said to a bot
/// session that has ended (a queued caller getting the lock as its session closes) gets a
/// turn that ends at once as `session_ended`, published like any other, never one that
/// waits forever.
#[tokio::test]
async fn a_line_said_after_the_session_ended_ends_at_once() {
    use turnscope::bot::{Bot, TurnEnd};
    use turnscope::model::{EmbeddedModel, ModelClient, ModelConfig, ScriptSettings};
    use turnscope::observe::{Bus, Event};
    use turnscope::pipeline::Observer;

    let model = EmbeddedModel::start(
        0,
        ScriptSettings {
            pace: 0.0,
            words: None,
        },
    )
    .await
    .unwrap();
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let bot = Bot::builder(ModelClient::new(ModelConfig::new(model.base_url(), "m"))).build();
    let session = bot.open(Observer::new(bus.clone(), 7));
    session.end().await;
    let turn = session.say("anyone there?").await;
    tokio::time::timeout(WAIT, turn.done())
        .await
        .expect("the turn ends");
    assert_eq!(turn.snapshot().end, Some(TurnEnd::SessionEnded));
    let mut ended = 0;
    while let Some(e) = events.try_recv() {
        if let Event::TurnEnded(t) = &*e {
            assert_eq!((t.session, t.turn), (7, turn.id));
            ended += 1;
        }
    }
    assert_eq!(ended, 1, "its end is published once");
}
