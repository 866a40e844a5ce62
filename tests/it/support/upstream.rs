//! A model server for fault tests: each request gets the next scripted [`Reply`], over a
//! real loopback socket.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::channel::mpsc;
use serde_json::{Value, json};

/// What the fake model does with one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// An HTTP error status with this body.
    Status(u16, String),
    /// These SSE `data:` payloads (each followed by a blank line), then `[DONE]` if `done`;
    /// `gap` between events.
    Events {
        data: Vec<String>,
        done: bool,
        gap: Duration,
    },
    /// These payloads, then the connection is broken mid-stream.
    Cut(Vec<String>),
    /// Answers headers, sends these payloads, then stays silent forever.
    StallAfter(Vec<String>),
    /// Never answers at all.
    Hang,
    /// A rate-limited or overloaded answer: `code` (429, 503) with this `Retry-After` header
    /// value, when given, and an OpenAI error body saying `message`.
    Busy {
        code: u16,
        retry_after: Option<String>,
        message: String,
    },
    /// A model that never stops: the same content chunk forever, `gap` apart.
    Endless { gap: Duration },
    /// An error status whose body never ends (an error page streamed without end).
    EndlessError(u16),
}

impl Reply {
    /// A plain streamed text answer, one event per piece.
    pub fn text(pieces: &[&str]) -> Self {
        let mut data: Vec<String> = pieces.iter().map(|p| content(p)).collect();
        data.push(finish("stop"));
        Reply::Events {
            data,
            done: true,
            gap: Duration::ZERO,
        }
    }

    /// A response asking for these calls (name, arguments JSON), one event each.
    pub fn calls(calls: &[(&str, &str)]) -> Self {
        let mut data: Vec<String> = calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| {
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "id": format!("c{i}"),
                    "type": "function", "function": {"name": name, "arguments": args}}]}}]})
                .to_string()
            })
            .collect();
        data.push(finish("tool_calls"));
        Reply::Events {
            data,
            done: true,
            gap: Duration::ZERO,
        }
    }
}

/// One content chunk.
pub fn content(piece: &str) -> String {
    json!({"choices": [{"index": 0, "delta": {"content": piece}}]}).to_string()
}

/// A finish chunk.
pub fn finish(reason: &str) -> String {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string()
}

#[derive(Clone, Default)]
struct Script {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Value>>>,
}

/// A running fake model.
pub struct Upstream {
    /// Where it listens.
    pub addr: SocketAddr,
    script: Script,
    task: tokio::task::JoinHandle<()>,
}

impl Upstream {
    /// Starts with these replies, served in order (then 500s).
    pub async fn start(replies: Vec<Reply>) -> Self {
        Self::start_at("127.0.0.1:0".parse().unwrap(), replies).await
    }

    /// Starts on a given address (to come back where a stopped one was).
    pub async fn start_at(addr: SocketAddr, replies: Vec<Reply>) -> Self {
        let script = Script::default();
        script.replies.lock().unwrap().extend(replies);
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .with_state(script.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, script, task }
    }

    /// Base URL ending in /v1.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues more replies.
    pub fn push(&self, reply: Reply) {
        self.script.replies.lock().unwrap().push_back(reply);
    }

    /// The request bodies received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.script.requests.lock().unwrap().clone()
    }

    /// Stops listening (connections are then refused).
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(State(script): State<Script>, body: Bytes) -> Response {
    if let Ok(v) = serde_json::from_slice::<Value>(&body) {
        script.requests.lock().unwrap().push(v);
    }
    let reply = script.replies.lock().unwrap().pop_front();
    let reply = reply.unwrap_or(Reply::Status(
        500,
        r#"{"error":{"message":"no scripted reply left"}}"#.into(),
    ));
    match reply {
        Reply::Status(code, body) => (StatusCode::from_u16(code).unwrap(), body).into_response(),
        Reply::Hang => {
            std::future::pending::<()>().await;
            unreachable!()
        }
        Reply::Events { data, done, gap } => {
            stream(data, if done { End::Done } else { End::Close }, gap)
        }
        Reply::Busy {
            code,
            retry_after,
            message,
        } => {
            let mut answer = Response::builder().status(code);
            if let Some(wait) = retry_after {
                answer = answer.header(header::RETRY_AFTER, wait);
            }
            answer
                .body(Body::from(
                    json!({"error": {"message": message}}).to_string(),
                ))
                .unwrap()
        }
        Reply::Endless { gap } => {
            let chunk = Bytes::from(format!(
                "data: {}\n\n",
                content("and again and again and again ")
            ));
            endless(StatusCode::OK, chunk, gap, "text/event-stream")
        }
        Reply::EndlessError(code) => {
            let head = r#"{"error": {"message": "the error page of a server gone wrong: "#;
            let (mut tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
            tokio::spawn(async move {
                use futures::SinkExt;
                if tx
                    .send(Ok(Bytes::from_static(head.as_bytes())))
                    .await
                    .is_err()
                {
                    return;
                }
                let filler = Bytes::from(vec![b'x'; 16 * 1024]);
                while tx.send(Ok(filler.clone())).await.is_ok() {}
            });
            Response::builder()
                .status(code)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from_stream(rx))
                .unwrap()
        }
        Reply::Cut(data) => stream(data, End::Break, Duration::ZERO),
        Reply::StallAfter(data) => stream(data, End::Stall, Duration::ZERO),
    }
}

/// `chunk` again and again, `gap` apart, until the client goes away.
fn endless(status: StatusCode, chunk: Bytes, gap: Duration, content_type: &str) -> Response {
    let (mut tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::spawn(async move {
        use futures::SinkExt;
        loop {
            if !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            if tx.send(Ok(chunk.clone())).await.is_err() {
                return;
            }
        }
    });
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from_stream(rx))
        .unwrap()
}

enum End {
    Done,
    Close,
    Break,
    Stall,
}

fn stream(data: Vec<String>, end: End, gap: Duration) -> Response {
    let (mut tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    tokio::spawn(async move {
        use futures::SinkExt;
        for d in data {
            if !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            if tx
                .send(Ok(Bytes::from(format!("data: {d}\n\n"))))
                .await
                .is_err()
            {
                return;
            }
        }
        match end {
            End::Done => {
                let _ = tx.send(Ok(Bytes::from_static(b"data: [DONE]\n\n"))).await;
            }
            End::Close => {}
            End::Break => {
                // Let the pieces reach the client first, as a real mid-stream cut would.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = tx
                    .send(Err(std::io::Error::other("connection cut by the test")))
                    .await;
            }
            End::Stall => {
                std::future::pending::<()>().await;
            }
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(rx))
        .unwrap()
}
