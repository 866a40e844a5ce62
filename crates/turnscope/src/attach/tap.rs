//! The attached console's MCP exchanges as the client saw them: rmcp's streamable HTTP client
//! (reqwest) wrapped so each `POST`, `GET` and `DELETE` becomes one [`McpExchange`] on the
//! local bus, the MCP pane's food, the same shape the server side records for `/mcp`
//! (`server::wire`). Handles are masked; bodies are cut by the bus's wire limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde_json::Value;

use super::side::ClientSide;
use crate::observe::event::now_us;
use crate::observe::wire::{
    JsonText, McpExchange, McpMessage, ProgressTally, cut_json, mask_handles,
};
use crate::observe::{Bus, Event};
use crate::server::mcp_text::{REPLICA_META, START_META};

/// The client name every attached console gives in `initialize`.
pub const CLIENT_NAME: &str = "turnscope attach";

/// reqwest's client, with every exchange published on `bus`.
#[derive(Clone)]
pub struct Tapped {
    inner: reqwest::Client,
    bus: Bus,
    path: Arc<str>,
    host: Option<Arc<str>>,
    calls: Option<(Handles, Tokens)>,
    side: Arc<ClientSide>,
}

/// The handles of `chat` calls in flight → their sessions (filled by the target).
pub(crate) type Handles = Arc<Mutex<HashMap<String, u64>>>;
/// Progress tokens of `chat` calls in flight → their sessions (filled here: rmcp picks the
/// token, and only the request on the wire shows which call got which).
pub(crate) type Tokens = Arc<Mutex<HashMap<String, u64>>>;

impl Tapped {
    /// Taps `inner`'s exchanges with the target at `url` onto `bus`.
    pub fn new(inner: reqwest::Client, bus: Bus, url: &str) -> Self {
        let parsed = reqwest::Url::parse(url).ok();
        let path = parsed
            .as_ref()
            .map_or_else(|| "/mcp".to_string(), |u| u.path().to_string());
        let host = parsed.as_ref().and_then(|u| {
            u.host_str()
                .map(|h| match u.port() {
                    Some(p) => format!("{h}:{p}"),
                    None => h.to_string(),
                })
                .map(Arc::from)
        });
        Self {
            inner,
            bus,
            path: path.into(),
            host,
            calls: None,
            side: Arc::default(),
        }
    }

    /// Notes the MCP session in `side`, and publishes nothing while `side` says the watched
    /// server's stream carries this client's exchanges (with every other client's).
    pub(crate) fn with_side(mut self, side: Arc<ClientSide>) -> Self {
        self.side = side;
        self
    }

    fn note_session(&self, id: Option<&str>) {
        if let Some(id) = id {
            self.side.session_used(id);
        }
    }

    /// Notes the replica a turnscope names in an answer: `initialize`'s (the one the MCP
    /// session lives on, again after rmcp opened a new session) or `start`'s.
    fn note_replica(&self, message: &Value) {
        let meta = &message["result"]["_meta"];
        let id = meta[REPLICA_META]["id"]
            .as_str()
            .or_else(|| meta[START_META]["replica"].as_str());
        if let Some(id) = id {
            self.side.own_replica(id);
        }
    }

    /// Also notes which progress token each `chat` call of a handle in `handles` got.
    pub(crate) fn with_calls(mut self, handles: Handles, tokens: Tokens) -> Self {
        self.calls = Some((handles, tokens));
        self
    }

    /// Notes the progress token of a `chat` call; returns it (to forget when the call ends).
    fn note_token(&self, body: &Value) -> Option<String> {
        let (handles, tokens) = self.calls.as_ref()?;
        let params = &body["params"];
        let token = match &params["_meta"]["progressToken"] {
            Value::Null => return None,
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let handle = params["arguments"]["handle"].as_str()?;
        let session = *handles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(handle)?;
        tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token.clone(), session);
        Some(token)
    }

    fn forget_token(&self, token: Option<String>) {
        if let (Some(token), Some((_, tokens))) = (token, &self.calls) {
            tokens
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&token);
        }
    }

    fn exchange(
        &self,
        http_method: &str,
        session: Option<&str>,
        request: Option<&Value>,
        authorized: bool,
    ) -> McpExchange {
        let limit = self.bus.wire().bytes();
        let mut exchange = McpExchange {
            client: Some(CLIENT_NAME.into()),
            mcp_session: session.map(|s| s.chars().take(8).collect()),
            http_method: http_method.into(),
            path: self.path.to_string(),
            host: self.host.as_deref().map(str::to_string),
            authorized,
            at_us: now_us(),
            ..McpExchange::default()
        };
        if let Some(body) = request {
            exchange.method = body["method"].as_str().map(str::to_string);
            if exchange.method.as_deref() == Some("tools/call") {
                exchange.tool = body["params"]["name"].as_str().map(str::to_string);
            }
            exchange.request = Some(match serde_json::to_vec(body) {
                Ok(bytes) => cut_json(&bytes, limit),
                Err(_) => JsonText::from_value(&Value::Null),
            });
        }
        exchange
    }

    fn message(&self, value: &Value, started: Instant) -> McpMessage {
        let limit = self.bus.wire().bytes();
        let message = match serde_json::to_vec(value) {
            Ok(bytes) => cut_json(&bytes, limit),
            Err(_) => {
                let mut v = value.clone();
                mask_handles(&mut v);
                JsonText::from_value(&v)
            }
        };
        McpMessage {
            after_us: started.elapsed().as_micros() as u64,
            message,
        }
    }

    fn publish(&self, mut exchange: McpExchange, started: Instant, complete: bool) {
        if self.side.stream_carries_own() {
            return;
        }
        exchange.total_us = started.elapsed().as_micros() as u64;
        exchange.complete = complete;
        self.bus.publish(Event::Mcp(Box::new(exchange)));
    }
}

impl StreamableHttpClient for Tapped {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let started = Instant::now();
        let body = serde_json::to_value(&message).unwrap_or(Value::Null);
        // Read from the whole body: the recorded one may be cut past its id (the bus's wire
        // limit), and its stream was then taken as owing no answer.
        let request = body.get("id").is_some();
        let mut exchange = self.exchange(
            "POST",
            session_id.as_deref(),
            Some(&body),
            auth_header.is_some(),
        );
        let token = self.note_token(&body);
        self.note_session(session_id.as_deref());
        let answer = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        exchange.first_byte_us = Some(started.elapsed().as_micros() as u64);
        let short = |s: Option<&String>| s.map(|s| s.chars().take(8).collect::<String>());
        match answer {
            Ok(StreamableHttpPostResponse::Accepted) => {
                exchange.status = 202;
                self.forget_token(token);
                self.publish(exchange, started, true);
                Ok(StreamableHttpPostResponse::Accepted)
            }
            Ok(StreamableHttpPostResponse::Json(reply, session)) => {
                self.note_session(session.as_deref());
                exchange.status = 200;
                exchange.content_type = Some("application/json".into());
                exchange.mcp_session = exchange.mcp_session.or(short(session.as_ref()));
                let value = serde_json::to_value(&reply).unwrap_or(Value::Null);
                self.note_replica(&value);
                exchange.messages.push(self.message(&value, started));
                self.forget_token(token);
                self.publish(exchange, started, true);
                Ok(StreamableHttpPostResponse::Json(reply, session))
            }
            Ok(StreamableHttpPostResponse::Sse(stream, session)) => {
                self.note_session(session.as_deref());
                exchange.status = 200;
                exchange.content_type = Some("text/event-stream".into());
                exchange.mcp_session = exchange.mcp_session.or(short(session.as_ref()));
                Ok(StreamableHttpPostResponse::Sse(
                    self.tap_stream(stream, exchange, started, token, request),
                    session,
                ))
            }
            Ok(other) => {
                exchange.status = 200;
                self.forget_token(token);
                self.publish(exchange, started, true);
                Ok(other)
            }
            Err(e) => {
                exchange.status = status_of(&e);
                exchange.text = Some(e.to_string());
                self.forget_token(token);
                self.publish(exchange, started, false);
                Err(e)
            }
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let started = Instant::now();
        let mut exchange = self.exchange("DELETE", Some(&session_id), None, auth_header.is_some());
        let done = self
            .inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await;
        exchange.status = if done.is_ok() {
            200
        } else {
            status_of_ref(&done)
        };
        self.publish(exchange, started, done.is_ok());
        done
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, StreamableHttpError<Self::Error>> {
        let started = Instant::now();
        let mut exchange = self.exchange("GET", session_id.as_deref(), None, auth_header.is_some());
        let opened = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        match opened {
            Ok(stream) => {
                exchange.status = 200;
                exchange.content_type = Some("text/event-stream".into());
                // The standalone stream (or a resumed one) owes no answer of its own.
                Ok(self.tap_stream(stream, exchange, started, None, false))
            }
            Err(e) => {
                exchange.status = status_of(&e);
                exchange.text = Some(e.to_string());
                self.publish(exchange, started, false);
                Err(e)
            }
        }
    }
}

impl Tapped {
    /// `stream`, each message it carries added to `exchange`, published when it ends; the
    /// stream of a `request` (not a notification) is whole only once it carried the answer.
    fn tap_stream(
        &self,
        stream: BoxedSseResponse,
        exchange: McpExchange,
        started: Instant,
        token: Option<String>,
        awaits_answer: bool,
    ) -> BoxedSseResponse {
        let tap = Recorder {
            tapped: self.clone(),
            exchange: Some(exchange),
            started,
            token,
            awaits_answer,
            progress: ProgressTally::default(),
            run: None,
        };
        stream
            .scan(tap, |tap, item| {
                match &item {
                    Ok(sse) => {
                        if let Some(data) = sse.data.as_deref()
                            && let Ok(value) = serde_json::from_str::<Value>(data)
                        {
                            tap.tapped.note_replica(&value);
                            if value.get("id").is_some()
                                && (value.get("result").is_some() || value.get("error").is_some())
                            {
                                tap.awaits_answer = false;
                            }
                            let message = tap.tapped.message(&value, tap.started);
                            let progress = value["method"] == "notifications/progress";
                            tap.keep(message, progress, data.len());
                        }
                    }
                    Err(_) => tap.finish(false),
                }
                futures::future::ready(Some(item))
            })
            .boxed()
    }
}

/// Publishes its exchange once, when the stream ends or is dropped.
struct Recorder {
    tapped: Tapped,
    exchange: Option<McpExchange>,
    started: Instant,
    token: Option<String>,
    /// Whether the stream still owes its request's answer: one that ends owing it was cut
    /// off (the server went away mid-reply), not written to its end.
    awaits_answer: bool,
    /// Progress notifications seen, and how many `messages` leaves out.
    progress: ProgressTally,
    /// Where in `messages` the current run of progress notifications keeps its first and its
    /// latest (the next one in the run takes the latest's place).
    run: Option<(usize, usize)>,
}

impl Recorder {
    /// Adds a message to the exchange. Of a run of progress notifications (one per reply
    /// piece: hundreds for a long reply) the first and the latest are kept and the others
    /// counted, as the server's own record keeps them, so a long reply is not hundreds of
    /// rows in the MCP pane, nor that many records in memory.
    fn keep(&mut self, message: McpMessage, progress: bool, bytes: usize) {
        let Some(x) = self.exchange.as_mut() else {
            return;
        };
        if !progress {
            self.run = None;
            x.messages.push(message);
            return;
        }
        self.progress.count += 1;
        self.progress.bytes += bytes as u64;
        let last = x.messages.len().checked_sub(1);
        match self.run {
            // The run's latest (not its first) is the last message: this one replaces it.
            Some((first, latest)) if Some(latest) == last && latest != first => {
                x.messages[latest] = message;
                self.progress.left_out += 1;
            }
            Some((first, _)) => {
                x.messages.push(message);
                self.run = Some((first, x.messages.len() - 1));
            }
            None => {
                x.messages.push(message);
                let at = x.messages.len() - 1;
                self.run = Some((at, at));
            }
        }
    }

    fn finish(&mut self, complete: bool) {
        if let Some(mut exchange) = self.exchange.take() {
            if self.progress.count > 0 {
                exchange.progress = Some(self.progress);
            }
            self.tapped.forget_token(self.token.take());
            self.tapped.publish(exchange, self.started, complete);
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.finish(!self.awaits_answer);
    }
}

fn status_of(e: &StreamableHttpError<reqwest::Error>) -> u16 {
    match e {
        StreamableHttpError::UnexpectedServerResponse(text) => text
            .split_whitespace()
            .find_map(|w| w.parse::<u16>().ok().filter(|s| (100..600).contains(s)))
            .unwrap_or(0),
        _ => 0,
    }
}

fn status_of_ref<T>(r: &Result<T, StreamableHttpError<reqwest::Error>>) -> u16 {
    r.as_ref().err().map_or(0, status_of)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ClientRequest, NumberOrString, PingRequest};

    /// A server that answers every POST with an event stream carrying one progress
    /// notification and then ends it cleanly, without the request's answer: what
    /// pipecat-mcp-transport's server does when the bot is stopped mid-reply.
    async fn ends_streams_unanswered() -> String {
        let app = axum::Router::new().route(
            "/mcp",
            axum::routing::post(|| async {
                let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
                (
                    [("content-type", "text/event-stream")],
                    format!("event: message\ndata: {progress}\n\n"),
                )
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        url
    }

    /// A request whose recorded body is cut past its id (a small wire limit) still owes its
    /// answer: a stream that ends without it is recorded cut off (it was recorded whole).
    #[tokio::test]
    async fn a_stream_that_ends_without_the_answer_is_cut_off_even_when_the_body_was_cut() {
        let url = ends_streams_unanswered().await;
        for limit in [0, 16, 1 << 20] {
            let bus = Bus::default();
            bus.wire().set(limit);
            let mut seen = bus.subscribe();
            let tapped = Tapped::new(reqwest::Client::new(), bus.clone(), &url);
            let ping = ClientJsonRpcMessage::request(
                ClientRequest::PingRequest(PingRequest {
                    method: Default::default(),
                    extensions: Default::default(),
                }),
                NumberOrString::Number(7),
            );
            let answer = tapped
                .post_message(url.clone().into(), ping, None, None, HashMap::new())
                .await
                .expect("the server answers");
            let StreamableHttpPostResponse::Sse(stream, _) = answer else {
                panic!("an event stream")
            };
            let carried: Vec<_> = stream.collect().await;
            assert_eq!(carried.len(), 1, "the progress notification");
            let Event::Mcp(x) = &*seen.recv().await.unwrap() else {
                panic!("an exchange")
            };
            assert!(!x.complete, "limit {limit}: recorded as whole: {x:?}");
        }
    }
}
