//! Real model servers' wire behaviour, one test per defect, against a llama-like server on a
//! real socket (`support::llama_like`): connections the server closes while announcing
//! keep-alive, usage chunks, `finish_reason: "length"`, a 400 for an over-long prompt, a
//! mid-stream error event, reasoning deltas, a server refusing `stream_options`, the `[model]`
//! parameters on the wire, and the round cap's last answer.

use std::sync::Arc;
use std::time::Duration;

use crate::support::llama_like::{Answer, Close, LlamaLike, REFUSE_STREAM_OPTIONS_MODEL};
use crate::support::upstream::{Reply, Upstream};
use serde_json::json;
use turnscope::bot::{Bot, BotSession, Message, TurnEnd, TurnLimits, TurnRecord};
use turnscope::config::Config;
use turnscope::model::{ModelClient, ModelConfig};
use turnscope::observe::{Bus, Event, ModelResponseInfo, Subscription, TokenUsage};
use turnscope::pipeline::Observer;
use turnscope::tools::{Toolbox, Tools};

const WAIT: Duration = Duration::from_secs(10);

fn echo_tools() -> Arc<dyn Tools> {
    Arc::new(Toolbox::new().with(turnscope::tools::builtin::echo()))
}

fn open(
    config: ModelConfig,
    tools: Arc<dyn Tools>,
    limits: TurnLimits,
) -> (BotSession, Subscription) {
    let bus = Bus::default();
    let events = bus.subscribe();
    let s = Bot::builder(ModelClient::new(config))
        .tools(tools)
        .limits(limits)
        .build()
        .open(Observer::new(bus, 1));
    (s, events)
}

fn session(base_url: &str, model: &str) -> (BotSession, Subscription) {
    open(
        ModelConfig::new(base_url, model),
        echo_tools(),
        TurnLimits::default(),
    )
}

async fn turn(session: &BotSession, line: &str) -> TurnRecord {
    let t = session.say(line).await;
    tokio::time::timeout(WAIT, t.done())
        .await
        .expect("turn ends");
    t.snapshot()
}

/// The model-request events published so far.
fn model_requests(events: &mut Subscription) -> Vec<(Option<String>, ModelResponseInfo)> {
    let mut out = Vec::new();
    while let Some(e) = events.try_recv() {
        if let Event::ModelRequest {
            error, response, ..
        } = &*e
        {
            out.push((error.clone(), response.clone()));
        }
    }
    out
}

#[tokio::test]
async fn a_reused_connection_the_server_closed_is_sent_again_on_a_fresh_one() {
    // Every connection is dropped when a second request comes on it: the round after the
    // tool call always finds the pooled connection dead, as it does against llama-server.
    let server = LlamaLike::start(
        Close::OnNextRequest,
        vec![
            Answer::Call("echo".into(), r#"{"text":"ping"}"#.into()),
            Answer::text(&["The echo tool says: ping."]),
        ],
    )
    .await;
    let (s, mut events) = session(&server.base_url(), "m");
    let r = turn(&s, "echo ping").await;
    assert_eq!(r.end, Some(TurnEnd::Completed), "{:?}", r.end);
    assert_eq!(r.reply, "The echo tool says: ping.");
    assert_eq!(
        server.dropped(),
        1,
        "the second request met the dead connection"
    );
    let requests = model_requests(&mut events);
    assert_eq!(requests.len(), 2);
    assert!(
        !requests[0].1.retried && requests[1].1.retried,
        "{requests:?}"
    );
    assert_eq!(requests[1].0, None);
}

#[tokio::test]
async fn twenty_quick_turns_on_a_server_closing_after_each_response_lose_none() {
    let answers = (0..20)
        .flat_map(|i| {
            [
                Answer::Call("echo".into(), format!(r#"{{"text":"n{i}"}}"#)),
                Answer::text(&["done ", &format!("{i}")]),
            ]
        })
        .collect();
    let server = LlamaLike::start(Close::AfterResponse, answers).await;
    let (s, _events) = session(&server.base_url(), "m");
    for i in 0..20 {
        let r = turn(&s, &format!("echo n{i}")).await;
        assert_eq!(r.end, Some(TurnEnd::Completed), "turn {i}: {:?}", r.end);
        assert_eq!(r.reply, format!("done {i}"));
    }
    assert_eq!(server.requests().len(), 40);
}

#[tokio::test]
async fn a_server_closing_every_connection_unanswered_is_not_called_unreachable() {
    let server = LlamaLike::start(Close::Unanswered, vec![]).await;
    let (s, _events) = session(&server.base_url(), "m");
    let r = turn(&s, "hi").await;
    let Some(TurnEnd::Error(m)) = r.end else {
        panic!("expected an error, got {:?}", r.end)
    };
    assert!(
        m.contains("closed the connection before answering, twice") && !m.contains("unreachable"),
        "{m}"
    );
    assert_eq!(
        server.connections(),
        2,
        "sent once more, on a fresh connection, and no more"
    );
}

#[tokio::test]
async fn usage_finish_reason_model_and_id_are_recorded_per_request() {
    let server =
        LlamaLike::start(Close::AfterResponse, vec![Answer::text(&["Hi", " there."])]).await;
    let (s, mut events) = session(&server.base_url(), "m");
    let r = turn(&s, "hello").await;
    assert_eq!(
        server.requests()[0]["stream_options"],
        json!({"include_usage": true})
    );
    let usage = r.usage.expect("usage recorded in the turn");
    assert!(
        usage.prompt_tokens > 0 && usage.completion_tokens == 2,
        "{usage:?}"
    );
    assert_eq!(usage.cached_tokens, usage.prompt_tokens / 2);
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    let (error, info) = model_requests(&mut events).remove(0);
    assert_eq!(error, None);
    assert_eq!(info.usage, Some(usage));
    assert_eq!(info.finish_reason.as_deref(), Some("stop"));
    assert_eq!(info.model.as_deref(), Some("/models/smollm2.gguf"));
    assert_eq!(info.response_id.as_deref(), Some("chatcmpl-llama"));
    assert_eq!(info.status, Some(200));
    assert!(info.headers_us.is_some());
    // The event reads back from a recorded line with the same fields.
    let line = serde_json::to_string(&Event::ModelRequest {
        session: 1,
        turn: 1,
        first_piece_us: None,
        total_us: 5,
        error: None,
        at_us: 0,
        response: info.clone(),
        request: None,
        answer: None,
    })
    .unwrap();
    assert!(line.contains(r#""finish_reason":"stop""#), "{line}");
    match serde_json::from_str::<Event>(&line).unwrap() {
        Event::ModelRequest { response, .. } => assert_eq!(response, info),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_reply_cut_by_the_token_limit_ends_the_turn_with_length() {
    let server = LlamaLike::start(
        Close::AfterResponse,
        vec![Answer::Text(
            vec!["Once".into(), " upon".into(), " a".into()],
            "length",
        )],
    )
    .await;
    let (s, _events) = session(&server.base_url(), "m");
    let r = turn(&s, "tell me a story").await;
    assert_eq!(r.end, Some(TurnEnd::Length));
    assert_eq!(r.end.as_ref().map(TurnEnd::label), Some("length"));
    assert_eq!(
        serde_json::to_value(TurnEnd::Length).unwrap(),
        json!("length")
    );
    assert_eq!(r.reply, "Once upon a");
    // The cut reply is still the bot's: the next request sees it.
    turn(&s, "go on").await;
    let sent = &server.requests()[1]["messages"];
    assert_eq!(
        sent[1],
        json!({"role": "assistant", "content": "Once upon a"})
    );
}

#[tokio::test]
async fn an_over_long_line_is_refused_and_rolled_back_so_the_next_line_works() {
    let server = LlamaLike::start(Close::AfterResponse, vec![]).await;
    let (s, _events) = session(&server.base_url(), "m");
    assert_eq!(turn(&s, "hello").await.end, Some(TurnEnd::Completed));
    let long = "word ".repeat(5000);
    let r = turn(&s, &long).await;
    let Some(TurnEnd::Error(m)) = r.end else {
        panic!("expected an error, got {:?}", r.end)
    };
    assert!(
        m.contains("HTTP 400") && m.contains("exceeds the available context size"),
        "{m}"
    );
    assert!(
        m.contains("left out of the history")
            && m.contains("-c N")
            && m.contains("bot.history_messages"),
        "{m}"
    );
    let history = s.context().messages;
    assert!(
        !history
            .iter()
            .any(|m| matches!(m, Message::User(l) if l.len() > 1000)),
        "the refused line is not kept"
    );
    for line in ["and now?", "still fine?"] {
        let r = turn(&s, line).await;
        assert_eq!(r.end, Some(TurnEnd::Completed), "{line}: {:?}", r.end);
    }
    let last = server.requests().pop().unwrap();
    assert_eq!(last["messages"].as_array().unwrap().len(), 5, "{last}");
}

#[tokio::test]
async fn a_mid_stream_error_event_fails_the_turn_with_the_servers_words() {
    let server = LlamaLike::start(
        Close::AfterResponse,
        vec![Answer::ErrorAfter(
            vec!["Par".into()],
            "the model crashed".into(),
        )],
    )
    .await;
    let (s, mut events) = session(&server.base_url(), "m");
    let r = turn(&s, "hi").await;
    let Some(TurnEnd::Error(m)) = r.end else {
        panic!("expected an error, got {:?}", r.end)
    };
    assert!(
        m.contains("mid-stream") && m.contains("the model crashed"),
        "{m}"
    );
    assert!(model_requests(&mut events)[0].0.is_some());
    assert_eq!(turn(&s, "again").await.end, Some(TurnEnd::Completed));
}

#[tokio::test]
async fn reasoning_deltas_are_kept_apart_from_the_reply_and_the_history() {
    let server = LlamaLike::start(
        Close::AfterResponse,
        vec![Answer::Reasoning(
            vec!["The user greets.".into(), " Greet back.".into()],
            vec!["Hello!".into()],
        )],
    )
    .await;
    let (s, mut events) = session(&server.base_url(), "m");
    let r = turn(&s, "hi").await;
    assert_eq!(r.reply, "Hello!");
    assert_eq!(r.reasoning, "The user greets. Greet back.");
    assert_eq!(model_requests(&mut events)[0].1.reasoning_bytes, 28);
    turn(&s, "and?").await;
    let sent = server.requests()[1]["messages"].to_string();
    assert!(
        !sent.contains("greets"),
        "reasoning went back to the model: {sent}"
    );
}

#[tokio::test]
async fn a_server_refusing_stream_options_is_asked_again_without_it() {
    let server = LlamaLike::start(Close::AfterResponse, vec![]).await;
    let (s, mut events) = session(&server.base_url(), REFUSE_STREAM_OPTIONS_MODEL);
    for line in ["one", "two"] {
        assert_eq!(turn(&s, line).await.end, Some(TurnEnd::Completed));
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "one refusal, then two plain requests");
    assert!(requests[0].get("stream_options").is_some());
    assert!(
        requests[1..]
            .iter()
            .all(|r| r.get("stream_options").is_none())
    );
    let infos = model_requests(&mut events);
    assert!(infos[0].1.usage_refused && !infos[1].1.usage_refused);
    assert_eq!(infos[0].1.usage, None);
}

#[tokio::test]
async fn model_parameters_from_the_config_reach_the_server_unchanged() {
    let server = LlamaLike::start(Close::AfterResponse, vec![]).await;
    let config = Config::parse(&format!(
        "[model]\nurl = \"{}\"\nname = \"smol\"\nmax_tokens = 64\ntemperature = 0.2\nseed = 3\n\
         stop = [\"User:\"]\ntool_choice = \"auto\"\nparallel_tool_calls = false\ninclude_usage = false\n\
         [model.extra]\ntop_k = 40\n",
        server.base_url()
    ))
    .unwrap();
    let (info, _) = turnscope::app::pick_model(&config).await.unwrap();
    let client = turnscope::app::model_client(&config, &info);
    let s = Bot::builder(client)
        .tools(echo_tools())
        .build()
        .open(Observer::new(Bus::default(), 1));
    turn(&s, "hi").await;
    let sent = &server.requests()[0];
    for (key, value) in [
        ("model", json!("smol")),
        ("max_tokens", json!(64)),
        ("temperature", json!(0.2)),
        ("seed", json!(3)),
        ("stop", json!(["User:"])),
        ("tool_choice", json!("auto")),
        ("parallel_tool_calls", json!(false)),
        ("top_k", json!(40)),
    ] {
        assert_eq!(sent[key], value, "{key} in {sent}");
    }
    assert!(
        sent.get("stream_options").is_none(),
        "include_usage = false"
    );
}

#[tokio::test]
async fn at_the_round_cap_the_model_answers_once_more_without_tools() {
    let call = || Reply::calls(&[("echo", r#"{"text":"again"}"#)]);
    let up = Upstream::start(vec![
        call(),
        call(),
        call(),
        Reply::text(&["Here is what I found."]),
    ])
    .await;
    let limits = TurnLimits {
        round_cap: 2,
        ..TurnLimits::default()
    };
    let (s, _events) = open(ModelConfig::new(up.base_url(), "m"), echo_tools(), limits);
    let r = turn(&s, "loop").await;
    assert_eq!(r.end, Some(TurnEnd::Completed), "{:?}", r.end);
    assert_eq!(r.reply, "Here is what I found.");
    let refused = r.tool_calls.last().unwrap();
    assert!(
        refused.outcome.is_error && refused.outcome.text.contains("round cap"),
        "{refused:?}"
    );
    let requests = up.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests[2].get("tools").is_some());
    assert!(
        requests[3].get("tools").is_none(),
        "the last request offers no tools"
    );
    assert!(
        requests[3]["messages"]
            .to_string()
            .contains("not run: this turn reached its round cap")
    );
}

/// A URL given without `/v1` (as people type Ollama's address): the real 404 is rolled back
/// and its advice names the path and the model, not the key or the parameters.
#[tokio::test]
async fn a_model_url_without_v1_fails_with_a_404_that_names_the_path() {
    let model = turnscope::model::EmbeddedModel::start(0, Default::default())
        .await
        .unwrap();
    let root = model.base_url().trim_end_matches("/v1").to_string();
    let (s, _events) = session(&root, "turnscope-scripted");
    let r = turn(&s, "hello").await;
    let Some(TurnEnd::Error(m)) = r.end else {
        panic!("expected an error, got {:?}", r.end)
    };
    assert!(m.contains("HTTP 404"), "{m}");
    assert!(
        m.contains("serve under /v1") && m.contains("--model"),
        "the advice names the path and the model: {m}"
    );
    assert!(!m.contains("the key"), "{m}");
    assert!(s.context().messages.is_empty(), "the line is rolled back");
}

#[tokio::test]
async fn scripted_model_counts_usage_and_honours_max_tokens() {
    let model = turnscope::model::EmbeddedModel::start(
        0,
        turnscope::model::ScriptSettings {
            pace: 0.0,
            words: None,
        },
    )
    .await
    .unwrap();
    let mut config = ModelConfig::new(model.base_url(), "m");
    config.params.insert("max_tokens".into(), json!(3));
    let (s, mut events) = open(config, Arc::new(Toolbox::new()), TurnLimits::default());
    let r = turn(&s, "one two three four five").await;
    assert_eq!(r.reply, "You said: one");
    assert_eq!(r.end, Some(TurnEnd::Length));
    assert_eq!(
        r.usage,
        Some(TokenUsage {
            prompt_tokens: 5,
            completion_tokens: 3,
            cached_tokens: 0,
            reasoning_tokens: 0
        })
    );
    assert_eq!(
        model_requests(&mut events)[0].1.finish_reason.as_deref(),
        Some("length")
    );
}

#[tokio::test]
async fn headless_mode_warns_once_per_failed_model_request_and_caps_a_flood() {
    use crate::support::binary::{ready_line, serving, terminate, url_in};
    use crate::support::mcp::Client;
    use tokio::io::AsyncReadExt;

    // A port nothing listens on: every model request is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = crate::support::scratch::Scratch::new("warn");
    let config = dir.file(
        "turnscope.toml",
        &format!("[server]\ndrain_seconds = 0\n[model]\nurl = \"http://127.0.0.1:{port}/v1\"\n"),
    );
    let mut child = serving(&["--headless", "--port", "0", "--config"])
        .arg(&config)
        .env_remove("TURNSCOPE_LOG")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ready = ready_line(&mut child).await;
    let client = Client::connect(&url_in(&ready, "/mcp")).await;
    let handle = client.start().await;
    for i in 0..8 {
        let o = client.chat(&handle, &format!("line {i}")).await;
        assert!(o.is_error, "{}", o.text);
    }
    assert!(terminate(&mut child).await.success());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .await
        .unwrap();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("model request failed"))
        .collect();
    assert_eq!(warnings.len(), 5, "at most 5 lines per 10 s:\n{stderr}");
    assert!(
        warnings[0].contains(" warn: ")
            && warnings[0].contains("(session 1, turn 1)")
            && warnings[0].contains("unreachable")
            && warnings[0].contains("the turn was rolled back from the history"),
        "{}",
        warnings[0]
    );
}

#[tokio::test]
async fn over_mcp_a_cut_turn_reads_length_with_its_usage_on_the_embedded_model() {
    use crate::support::binary::{ready_line, serving, terminate, url_in};
    use crate::support::mcp::Client;

    let dir = crate::support::scratch::Scratch::new("length");
    let config = dir.file(
        "turnscope.toml",
        "[server]\ndrain_seconds = 0\n[model]\npace = 0.0\nmax_tokens = 2\n",
    );
    let mut child = serving(&["--headless", "--port", "0", "--config"])
        .arg(&config)
        .spawn()
        .unwrap();
    let client = Client::connect(&url_in(&ready_line(&mut child).await, "/mcp")).await;
    let handle = client.start().await;
    let o = client.chat(&handle, "one two three").await;
    assert!(!o.is_error, "{}", o.text);
    let record = &o.record;
    assert_eq!(record["end_reason"], "length", "{record}");
    assert_eq!(record["reply"], "You said:");
    assert_eq!(record["finish_reason"], "length");
    assert_eq!(record["usage"]["completion_tokens"], 2, "{record}");
    assert!(
        record["usage"]["prompt_tokens"].as_u64().unwrap() >= 3,
        "{record}"
    );
    assert!(terminate(&mut child).await.success());
}
