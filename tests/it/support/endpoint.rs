//! A fake Xiaozhi MCP endpoint: a tokio-tungstenite server on 127.0.0.1 that behaves like
//! the official broker (it is the MCP client: `initialize` with id 0 first, then
//! `notifications/initialized`, then `tools/list` with id 1), and can refuse tokens.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Message, http};

/// How long a test waits for anything from the bridge.
pub const WAIT: Duration = Duration::from_secs(15);

/// The broker's opening `initialize`, as it sends it.
pub const BROKER_INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{"sampling":{},"roots":{"listChanged":false}},"clientInfo":{"name":"xz-mcp-broker","version":"0.0.1"}}}"#;

/// A running fake endpoint.
pub struct FakeEndpoint {
    addr: std::net::SocketAddr,
    accepted: mpsc::UnboundedReceiver<Conn>,
    refuse: Arc<Mutex<Option<u16>>>,
    task: tokio::task::JoinHandle<()>,
}

/// One accepted socket.
pub struct Conn {
    /// The request path and query the bridge dialled.
    pub path: String,
    ws: WebSocketStream<TcpStream>,
}

impl FakeEndpoint {
    /// Listens on a free loopback port.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        // Unbounded: one message per connection the test's bridge opens, a handful.
        let (tx, accepted) = mpsc::unbounded_channel();
        let refuse: Arc<Mutex<Option<u16>>> = Arc::default();
        let refusing = refuse.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let tx = tx.clone();
                let refusing = refusing.clone();
                tokio::spawn(async move {
                    let seen = Arc::new(Mutex::new(String::new()));
                    let seen_cb = seen.clone();
                    // tungstenite's callback type fixes the error type; its size is not ours to pick.
                    #[allow(clippy::result_large_err)]
                    let callback =
                        move |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
                            *seen_cb.lock().unwrap() = req.uri().to_string();
                            match *refusing.lock().unwrap() {
                                Some(code) => Err(http::Response::builder()
                                    .status(code)
                                    .body(Some("token refused".to_string()))
                                    .unwrap()),
                                None => Ok(resp),
                            }
                        };
                    if let Ok(ws) = tokio_tungstenite::accept_hdr_async(tcp, callback).await {
                        let path = seen.lock().unwrap().clone();
                        let _ = tx.send(Conn { path, ws });
                    }
                });
            }
        });
        Self {
            addr,
            accepted,
            refuse,
            task,
        }
    }

    /// The endpoint URL with `token`.
    pub fn url(&self, token: &str) -> String {
        format!("ws://{}/mcp/?token={token}", self.addr)
    }

    /// From now on, refuse upgrades with this HTTP status (`None`: accept).
    pub fn refuse_with(&self, status: Option<u16>) {
        *self.refuse.lock().unwrap() = status;
    }

    /// The next accepted socket.
    pub async fn next(&mut self) -> Conn {
        tokio::time::timeout(WAIT, self.accepted.recv())
            .await
            .expect("the bridge did not connect in time")
            .expect("endpoint stopped")
    }
}

impl Drop for FakeEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Conn {
    /// Sends one text frame.
    pub async fn send(&mut self, text: &str) {
        self.ws.send(Message::text(text)).await.expect("send");
    }

    /// Sends one binary frame.
    pub async fn send_binary(&mut self, bytes: Vec<u8>) {
        self.ws
            .send(Message::binary(bytes))
            .await
            .expect("send binary");
    }

    /// The next text frame from the bridge (pings and pongs skipped).
    pub async fn recv(&mut self) -> String {
        loop {
            let msg = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("no frame from the bridge in time")
                .expect("socket ended")
                .expect("socket error");
            match msg {
                Message::Text(t) => return t.to_string(),
                Message::Ping(_) | Message::Pong(_) => continue,
                other => panic!("unexpected frame {other:?}"),
            }
        }
    }

    /// The next text frame, parsed.
    pub async fn recv_json(&mut self) -> Value {
        let text = self.recv().await;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("bridge sent non-JSON {text:?}: {e}"))
    }

    /// Sends a request and returns the next frame's text.
    pub async fn ask(&mut self, text: &str) -> String {
        self.send(text).await;
        self.recv().await
    }

    /// Sends a request and returns the next frame, parsed.
    pub async fn ask_json(&mut self, text: &str) -> Value {
        self.send(text).await;
        self.recv_json().await
    }

    /// The broker's opening: `initialize` id 0, `notifications/initialized`, `tools/list`
    /// id 1. Returns the initialize reply's text and the tool names listed.
    pub async fn broker_handshake(&mut self) -> (String, Vec<String>) {
        let init = self.ask(BROKER_INITIALIZE).await;
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        let list = self
            .ask_json(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#)
            .await;
        assert_eq!(list["id"], json!(1), "{list}");
        (init, tool_names(&list))
    }

    /// Calls a tool and returns the reply, parsed.
    pub async fn call(&mut self, id: Value, name: &str, arguments: Value) -> Value {
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                           "params": {"name": name, "arguments": arguments}});
        self.ask_json(&frame.to_string()).await
    }

    /// Closes cleanly with `code`, finishing the close handshake.
    pub async fn close(mut self, code: u16) {
        let frame = CloseFrame {
            code: CloseCode::from(code),
            reason: "bye".into(),
        };
        let _ = self.ws.close(Some(frame)).await;
        let _ = tokio::time::timeout(WAIT, async {
            while let Some(Ok(_)) = self.ws.next().await {}
        })
        .await;
    }

    /// Drops the TCP connection without a close frame (what a network failure looks like).
    pub fn drop_abruptly(self) {
        drop(self.ws.into_inner());
    }

    /// Waits for the bridge to close the socket and returns its close frame.
    pub async fn closed_by_bridge(&mut self) -> Option<CloseFrame> {
        loop {
            let msg = tokio::time::timeout(WAIT, self.ws.next())
                .await
                .expect("the bridge did not close in time");
            match msg {
                Some(Ok(Message::Close(frame))) => return frame,
                Some(Ok(_)) => continue,
                Some(Err(e)) => panic!("socket error before a close frame: {e}"),
                None => return None,
            }
        }
    }
}

/// The names in a `tools/list` reply, sorted.
pub fn tool_names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("not a tools/list reply: {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}
