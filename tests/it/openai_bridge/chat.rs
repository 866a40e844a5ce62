//! `POST /v1/chat/completions` against a scripted fake model (bridges.md cases 39–44):
//! concurrent calls in order, interleaved deltas, `finish_reason` not trusted alone, the loop
//! cap, client tools handed back, and no orphaned call — whole and streamed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::sync::Barrier;
use turnscope::observe::Bus;
use turnscope::tools::{FnTool, Toolbox, Tools};

use crate::support::fixture::WAIT;
use crate::support::openai::{Served, config, serve, streamed_text};
use crate::support::upstream::{Reply, Upstream, content, finish};

/// The bot's tools for these tests: `left` and `right` only return once both run at the same
/// time; `add` sums and counts its calls.
fn tools(adds: Arc<AtomicUsize>) -> Arc<dyn Tools> {
    let barrier = Arc::new(Barrier::new(2));
    let meet = |name: &'static str, barrier: Arc<Barrier>| {
        FnTool::new(
            name,
            "meets the other one",
            json!({"type": "object"}),
            move |_| {
                let barrier = barrier.clone();
                async move {
                    tokio::time::timeout(WAIT, barrier.wait())
                        .await
                        .map(|_| format!("{name} met its pair"))
                        .map_err(|_| format!("{name} ran alone: calls are not concurrent"))
                }
            },
        )
    };
    Arc::new(
        Toolbox::new()
            .with(meet("left", barrier.clone()))
            .with(meet("right", barrier))
            .with(FnTool::new(
                "add",
                "adds a and b",
                json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
                move |args| {
                    let adds = adds.clone();
                    async move {
                        adds.fetch_add(1, Ordering::SeqCst);
                        let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
                        Ok(sum.to_string())
                    }
                },
            )),
    )
}

async fn start(replies: Vec<Reply>) -> (Served, Upstream, Arc<AtomicUsize>) {
    let model = Upstream::start(replies).await;
    let adds = Arc::new(AtomicUsize::new(0));
    let served = serve(
        config(Some(model.base_url()), Vec::new()),
        Some(tools(adds.clone())),
        Bus::default(),
    )
    .await;
    (served, model, adds)
}

fn user(text: &str) -> Value {
    json!({"model": "anything", "messages": [{"role": "user", "content": text}]})
}

/// The messages the model got in its n-th request.
fn sent(model: &Upstream, n: usize) -> Vec<Value> {
    model.requests()[n]["messages"].as_array().unwrap().clone()
}

/// (role, tool_call_id, content) of each message from `from` on.
fn tail(messages: &[Value], from: usize) -> Vec<(String, String, String)> {
    messages[from..]
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_string(),
                m["tool_call_id"].as_str().unwrap_or("").to_string(),
                m["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Case 39: two calls in one response both run (at the same time), and their results come
/// back as two `tool` messages in the response's order with matching ids. The client's
/// parameters are passed on; its `tool_choice` only to the first request.
#[tokio::test]
async fn calls_of_one_response_run_concurrently_and_results_keep_their_order() {
    let (served, model, _) = start(vec![
        Reply::calls(&[("left", "{}"), ("right", "{}")]),
        Reply::text(&["both", " met"]),
    ])
    .await;
    let mut request = user("meet");
    request["temperature"] = json!(0.5);
    request["tool_choice"] = json!("required");
    let (status, answer) = served.post("/v1/chat/completions", &request).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["choices"][0]["message"]["content"], "both met");
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");

    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["temperature"], 0.5);
    assert_eq!(requests[0]["tool_choice"], "required");
    assert!(
        requests[1].get("tool_choice").is_none(),
        "first request only"
    );
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["left", "right", "add"]);
    let messages = sent(&model, 1);
    let assistant = &messages[1];
    assert_eq!(assistant["role"], "assistant");
    let ids: Vec<&str> = assistant["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c0", "c1"]);
    assert_eq!(
        tail(&messages, 2),
        [
            ("tool".into(), "c0".into(), "left met its pair".into()),
            ("tool".into(), "c1".into(), "right met its pair".into()),
        ]
    );
    served.stop().await;
}

/// Case 40 (streamed to the client): deltas of calls 0 and 1 interleaved are reassembled per
/// index, with the ids of the deltas.
#[tokio::test]
async fn interleaved_call_deltas_are_reassembled_per_index() {
    let delta = |index: usize, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut call = json!({"index": index, "function": {"arguments": args}});
        if let Some(id) = id {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        if let Some(name) = name {
            call["function"]["name"] = json!(name);
        }
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}).to_string()
    };
    let interleaved = Reply::Events {
        data: vec![
            delta(0, Some("x0"), Some("add"), "{\"a\":"),
            delta(1, Some("x1"), Some("add"), "{\"a\":10,"),
            delta(0, None, None, "1,\"b\":2}"),
            delta(1, None, None, "\"b\":20}"),
            finish("tool_calls"),
        ],
        done: true,
        gap: std::time::Duration::ZERO,
    };
    let (served, model, adds) = start(vec![interleaved, Reply::text(&["sums", " done"])]).await;
    let mut request = user("add twice");
    request["stream"] = json!(true);
    let events = served.stream(&request).await;
    assert_eq!(events.last(), Some(&json!("[DONE]")));
    assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(
        events[..events.len() - 1]
            .iter()
            .all(|e| e["object"] == "chat.completion.chunk")
    );
    assert_eq!(
        streamed_text(&events),
        ("sums done".into(), Some("stop".into()))
    );
    assert_eq!(adds.load(Ordering::SeqCst), 2);
    assert_eq!(
        tail(&sent(&model, 1), 2),
        [
            ("tool".into(), "x0".into(), "3".into()),
            ("tool".into(), "x1".into(), "30".into()),
        ]
    );
    served.stop().await;
}

/// Case 41: `finish_reason: "stop"` next to tool calls still runs the tools.
#[tokio::test]
async fn calls_run_even_when_the_finish_reason_says_stop() {
    let stop_with_calls = Reply::Events {
        data: vec![
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "s0", "type": "function",
                "function": {"name": "add", "arguments": "{\"a\":2,\"b\":2}"}}]}}]})
            .to_string(),
            finish("stop"),
        ],
        done: true,
        gap: std::time::Duration::ZERO,
    };
    let (served, model, adds) = start(vec![stop_with_calls, Reply::text(&["four"])]).await;
    let (_, answer) = served.post("/v1/chat/completions", &user("add")).await;
    assert_eq!(answer["choices"][0]["message"]["content"], "four");
    assert_eq!(adds.load(Ordering::SeqCst), 1);
    assert_eq!(
        tail(&sent(&model, 1), 2),
        [("tool".into(), "s0".into(), "4".into())]
    );
    served.stop().await;
}

/// Case 42: a model that keeps calling tools is stopped at the cap (8 rounds) with a final
/// message saying so — whole and streamed.
#[tokio::test]
async fn the_loop_stops_at_the_cap_with_a_message_saying_why() {
    for stream in [false, true] {
        let replies = (0..9)
            .map(|_| Reply::calls(&[("add", "{\"a\":1,\"b\":1}")]))
            .collect();
        let (served, model, adds) = start(replies).await;
        let mut request = user("loop forever");
        request["stream"] = json!(stream);
        let (text, finish) = if stream {
            streamed_text(&served.stream(&request).await)
        } else {
            let (status, answer) = served.post("/v1/chat/completions", &request).await;
            assert_eq!(status, 200);
            (
                answer["choices"][0]["message"]["content"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                answer["choices"][0]["finish_reason"]
                    .as_str()
                    .map(str::to_string),
            )
        };
        assert!(
            text.contains("round 9") && text.contains("allows 8") && text.contains("round_cap"),
            "{text}"
        );
        assert_eq!(finish.as_deref(), Some("stop"));
        assert_eq!(model.requests().len(), 9, "stream: {stream}");
        assert_eq!(adds.load(Ordering::SeqCst), 8, "the ninth round is not run");
        served.stop().await;
    }
}

/// Case 43: the client's tools are offered with the bot's; a call to one comes back to the
/// client unexecuted, and the client's next request finishes the conversation. A client tool
/// named like a bot tool wins; bot calls next to a client call are run, and kept for the
/// client's next request (`bridge::openai::held`).
#[tokio::test]
async fn client_tools_are_merged_and_their_calls_handed_back() {
    let lookup = json!({"type": "function", "function": {"name": "lookup", "description": "client side",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}});
    let (served, model, adds) = start(vec![
        Reply::calls(&[("lookup", "{\"q\":\"paris\"}")]),
        Reply::text(&["Paris", " is", " sunny"]),
        Reply::calls(&[("add", "{\"a\":1,\"b\":1}"), ("lookup", "{\"q\":\"x\"}")]),
    ])
    .await;
    let mut request = user("weather in paris");
    request["tools"] = json!([lookup]);
    let (_, answer) = served.post("/v1/chat/completions", &request).await;
    let choice = &answer["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["id"], "c0");
    assert_eq!(call["function"]["name"], "lookup");
    assert_eq!(call["function"]["arguments"], "{\"q\":\"paris\"}");
    assert_eq!(model.requests().len(), 1, "not run by the bridge");
    let requests = model.requests();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["lookup", "left", "right", "add"]);

    let mut messages = request["messages"].as_array().unwrap().clone();
    messages.push(choice["message"].clone());
    messages.push(json!({"role": "tool", "tool_call_id": "c0", "content": "sunny"}));
    request["messages"] = json!(messages);
    let (_, answer) = served.post("/v1/chat/completions", &request).await;
    assert_eq!(answer["choices"][0]["message"]["content"], "Paris is sunny");
    assert_eq!(
        tail(&sent(&model, 1), 2),
        [("tool".into(), "c0".into(), "sunny".into())]
    );

    // Mixed: the client's call goes back; the bot's `add` in the same response runs, kept
    // for the client's next request (it was dropped, never run: tour M).
    let mut mixed = user("both");
    mixed["tools"] = json!([lookup]);
    mixed["stream"] = json!(true);
    let events = served.stream(&mixed).await;
    let (_, finish) = streamed_text(&events);
    assert_eq!(finish.as_deref(), Some("tool_calls"));
    let calls: Vec<&Value> = events
        .iter()
        .filter_map(|e| e.pointer("/choices/0/delta/tool_calls"))
        .flat_map(|c| c.as_array().unwrap())
        .collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["function"]["name"], "lookup");
    // Under an id of the bridge's own: only this answer's history brings the round back.
    assert!(
        calls[0]["id"].as_str().unwrap().starts_with("call_ts_"),
        "{}",
        calls[0]
    );
    assert_eq!(calls[0]["index"], 0);
    assert_eq!(adds.load(Ordering::SeqCst), 1);
    served.stop().await;

    // A client tool named like a bot tool is the one offered.
    let (served, model, _) = start(vec![Reply::text(&["ok"])]).await;
    let mut shadow = user("add");
    shadow["tools"] =
        json!([{"type": "function", "function": {"name": "add", "description": "client add"}}]);
    served.post("/v1/chat/completions", &shadow).await;
    let requests = model.requests();
    let adds_offered: Vec<&Value> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["function"]["name"] == "add")
        .collect();
    assert_eq!(adds_offered.len(), 1);
    assert_eq!(adds_offered[0]["function"]["description"], "client add");
    served.stop().await;
}

/// Case 44: bad JSON arguments and an unknown tool still get a `tool` message with the
/// error, so the model never sees an orphaned call; calls left unanswered in the client's
/// history get one too.
#[tokio::test]
async fn every_call_gets_a_tool_message_even_when_it_cannot_run() {
    let (served, model, adds) = start(vec![
        Reply::calls(&[("add", "{bad"), ("nope", "{}")]),
        Reply::text(&["sorry"]),
    ])
    .await;
    let mut request = user("go");
    request["messages"] = json!([
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "old", "type": "function", "function": {"name": "add", "arguments": "{}"}}]},
        {"role": "user", "content": "go"},
    ]);
    let (_, answer) = served.post("/v1/chat/completions", &request).await;
    assert_eq!(answer["choices"][0]["message"]["content"], "sorry");
    assert_eq!(adds.load(Ordering::SeqCst), 0);
    let first = sent(&model, 0);
    assert_eq!(
        (first[2]["role"].as_str(), first[2]["tool_call_id"].as_str()),
        (Some("tool"), Some("old")),
        "the orphan in the history was answered before the model saw it"
    );
    let second = sent(&model, 1);
    let results = tail(&second, second.len() - 2);
    assert_eq!(
        (results[0].0.as_str(), results[0].1.as_str()),
        ("tool", "c0")
    );
    assert!(results[0].2.contains("not valid JSON"), "{results:?}");
    assert_eq!(
        (results[1].0.as_str(), results[1].1.as_str()),
        ("tool", "c1")
    );
    assert!(results[1].2.contains("unknown tool `nope`"), "{results:?}");
    served.stop().await;
}

/// A failing model is a 502 with its reason (whole) or an error event before `[DONE]`
/// (streamed); bad requests are 400s; `/v1/models` names the model.
#[tokio::test]
async fn model_failures_bad_requests_and_the_model_list() {
    let (served, model, _) = start(vec![
        Reply::Status(500, r#"{"error":{"message":"overloaded"}}"#.into()),
        Reply::Status(500, r#"{"error":{"message":"overloaded"}}"#.into()),
        Reply::Events {
            data: vec![content("partial")],
            done: false,
            gap: std::time::Duration::ZERO,
        },
    ])
    .await;
    let (status, answer) = served.post("/v1/chat/completions", &user("hi")).await;
    assert_eq!(status, 502);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("overloaded"),
        "{answer}"
    );
    let mut streamed = user("hi");
    streamed["stream"] = json!(true);
    let events = served.stream(&streamed).await;
    assert!(
        events[events.len() - 2]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("overloaded")
    );
    assert_eq!(events.last(), Some(&json!("[DONE]")));
    let cut = served.stream(&streamed).await;
    let (text, _) = streamed_text(&cut);
    assert_eq!(text, "partial", "what came is kept");
    assert!(cut[cut.len() - 2].get("error").is_some(), "{cut:?}");

    let (status, answer) = served
        .post("/v1/chat/completions", &json!({"model": "m"}))
        .await;
    assert_eq!(status, 400);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`messages`")
    );
    let (status, models) = served.get("/v1/models").await;
    assert_eq!(status, 200);
    assert_eq!(
        models["data"][0]["id"], "gpt-4o-mini",
        "the configured model"
    );
    assert_eq!(model.requests().len(), 3);
    served.stop().await;
}

/// Sends on its channel when dropped.
struct DropSignal(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// A client that goes away mid-stream ends the loop: the tool call in flight is dropped,
/// and the request is published as served, not ok.
#[tokio::test]
async fn a_client_that_leaves_mid_stream_stops_the_loop() {
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
    let slots = Arc::new(std::sync::Mutex::new(Some((started_tx, dropped_tx))));
    let block = FnTool::new(
        "block",
        "never ends",
        json!({"type": "object"}),
        move |_| {
            let slots = slots.clone();
            async move {
                let (started, dropped) = slots.lock().unwrap().take().expect("called once");
                let _signal = DropSignal(Some(dropped));
                let _ = started.send(());
                std::future::pending::<()>().await;
                Ok(String::new())
            }
        },
    );
    let model = Upstream::start(vec![Reply::calls(&[("block", "{}")])]).await;
    let bus = Bus::default();
    let mut events = bus.subscribe();
    let served = serve(
        config(Some(model.base_url()), Vec::new()),
        Some(Arc::new(Toolbox::new().with(block))),
        bus,
    )
    .await;
    let mut request = user("block");
    request["stream"] = json!(true);
    let mut response = served
        .http
        .post(served.url("/v1/chat/completions"))
        .json(&request)
        .send()
        .await
        .unwrap();
    let first = tokio::time::timeout(WAIT, response.chunk())
        .await
        .unwrap()
        .unwrap();
    assert!(first.is_some(), "the role chunk comes at once");
    tokio::time::timeout(WAIT, started_rx)
        .await
        .expect("the tool starts")
        .unwrap();
    drop(response);
    tokio::time::timeout(WAIT, dropped_rx)
        .await
        .expect("the call in flight is dropped when the client leaves")
        .unwrap();
    loop {
        let event = tokio::time::timeout(WAIT, events.recv())
            .await
            .expect("a Served event")
            .unwrap();
        if let turnscope::observe::Event::Served { route, ok, .. } = &*event
            && route == "POST /v1/chat/completions"
        {
            assert!(!ok);
            break;
        }
    }
    served.stop().await;
}
