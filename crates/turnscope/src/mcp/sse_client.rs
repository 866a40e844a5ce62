//! The client transport for legacy HTTP+SSE MCP servers (2024-11-05), which rmcp 3 lacks: a
//! long-lived `GET` on the SSE URL, whose first `endpoint` event names the URL to `POST`
//! messages to (resolved against the SSE URL, same origin only, so headers never leave it);
//! server messages arrive as `message` events (invalid ones skipped with a warning). The end of
//! the stream closes the transport. [`SseClientTransport`] plugs into rmcp like any transport.

use std::{borrow::Cow, fmt, time::Duration};

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{StreamExt, stream::BoxStream};
use reqwest::{
    StatusCode, Url,
    header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue},
};
use rmcp::{
    RoleClient,
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
    transport::Transport,
};

/// How many characters of an unexpected HTTP body or event payload end up in errors and logs.
const SNIPPET_CHARS: usize = 200;

type EventResult = Result<Event, EventStreamError<reqwest::Error>>;

/// An rmcp client transport speaking the legacy (2024-11-05) HTTP+SSE MCP transport.
///
/// Create it with [`SseClientTransport::connect`], then hand it to rmcp's `serve`.
pub struct SseClientTransport {
    http: reqwest::Client,
    headers: HeaderMap,
    sse_url: Url,
    endpoint: Url,
    events: BoxStream<'static, EventResult>,
}

impl fmt::Debug for SseClientTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SseClientTransport")
            .field("sse_url", &self.sse_url.as_str())
            .field("endpoint", &self.endpoint.as_str())
            .finish_non_exhaustive()
    }
}

impl SseClientTransport {
    /// Opens the SSE stream at `url` and waits for the server's `endpoint` event.
    ///
    /// `headers` are sent with the `GET` and with every later `POST` (for example
    /// `Authorization`). `timeout` bounds the whole handshake: getting the response headers
    /// and receiving the `endpoint` event.
    ///
    /// # Errors
    ///
    /// See [`SseConnectError`]: bad URL or header, unreachable server, non-2xx answer, a body
    /// that is not an event stream, no `endpoint` event in time, or an endpoint that is
    /// invalid or on another origin.
    pub async fn connect(
        url: &str,
        headers: &[(String, String)],
        timeout: Duration,
    ) -> Result<Self, SseConnectError> {
        let http = reqwest::Client::builder()
            .connect_timeout(timeout)
            .build()
            .map_err(SseConnectError::Client)?;
        Self::connect_with(http, url, headers, timeout).await
    }

    /// Like [`SseClientTransport::connect`] with an HTTP client of your own (for example one
    /// whose redirect policy enforces a URL allowlist).
    ///
    /// # Errors
    ///
    /// As [`SseClientTransport::connect`].
    pub(crate) async fn connect_with(
        http: reqwest::Client,
        url: &str,
        headers: &[(String, String)],
        timeout: Duration,
    ) -> Result<Self, SseConnectError> {
        let sse_url = parse_sse_url(url)?;
        let headers = build_headers(headers)?;
        let deadline = tokio::time::Instant::now() + timeout;
        let shown = sse_url.to_string();

        let request = http
            .get(sse_url.clone())
            .headers(headers.clone())
            .header(ACCEPT, "text/event-stream");
        let response = match tokio::time::timeout_at(deadline, request.send()).await {
            Err(_) => {
                return Err(SseConnectError::ResponseTimeout {
                    url: shown,
                    waited: timeout,
                });
            }
            Ok(Err(source)) => return Err(SseConnectError::Unreachable { url: shown, source }),
            Ok(Ok(response)) => response,
        };

        let status = response.status();
        if !status.is_success() {
            let body = body_snippet(response).await;
            return Err(SseConnectError::HttpStatus {
                url: shown,
                status,
                body,
            });
        }
        if let Some(content_type) = response.headers().get(CONTENT_TYPE) {
            let content_type = String::from_utf8_lossy(content_type.as_bytes()).into_owned();
            if !content_type
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
            {
                return Err(SseConnectError::NotEventStream {
                    url: shown,
                    content_type,
                });
            }
        }

        let mut events: BoxStream<'static, EventResult> =
            response.bytes_stream().eventsource().boxed();
        let data = match tokio::time::timeout_at(deadline, wait_for_endpoint(&mut events)).await {
            Err(_) => {
                return Err(SseConnectError::NoEndpointEvent {
                    url: shown,
                    waited: timeout,
                });
            }
            Ok(Err(reason)) => return Err(SseConnectError::StreamEnded { url: shown, reason }),
            Ok(Ok(data)) => data,
        };
        let endpoint = resolve_endpoint(&sse_url, &data)?;
        tracing::debug!(sse = %sse_url, endpoint = %endpoint, "legacy SSE MCP session open");

        Ok(Self {
            http,
            headers,
            sse_url,
            endpoint,
            events,
        })
    }

    /// The SSE URL this transport is listening on.
    #[must_use]
    pub fn sse_url(&self) -> &Url {
        &self.sse_url
    }

    /// The message endpoint announced by the server, resolved to an absolute URL.
    #[must_use]
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }

    async fn next_message(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            match self.events.next().await {
                None => {
                    tracing::debug!(sse = %self.sse_url, "SSE stream ended; transport closed");
                    return None;
                }
                Some(Err(error)) => {
                    tracing::warn!(
                        sse = %self.sse_url,
                        %error,
                        "SSE stream failed; transport closed",
                    );
                    return None;
                }
                Some(Ok(event)) if event.event == "message" => {
                    match serde_json::from_str::<ServerJsonRpcMessage>(&event.data) {
                        Ok(message) => return Some(message),
                        Err(error) => tracing::warn!(
                            sse = %self.sse_url,
                            %error,
                            data = %snippet(&event.data),
                            "skipping an SSE `message` event that is not a JSON-RPC message",
                        ),
                    }
                }
                Some(Ok(event)) => {
                    let name = event.event;
                    tracing::debug!(sse = %self.sse_url, event = %name, "ignoring SSE event");
                }
            }
        }
    }
}

impl Transport<RoleClient> for SseClientTransport {
    type Error = SseSendError;

    fn name() -> Cow<'static, str> {
        "legacy-sse".into()
    }

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let http = self.http.clone();
        let endpoint = self.endpoint.clone();
        let headers = self.headers.clone();
        async move {
            let response = http
                .post(endpoint.clone())
                .headers(headers)
                .json(&item)
                .send()
                .await
                .map_err(|source| SseSendError::Post {
                    endpoint: endpoint.to_string(),
                    source,
                })?;
            let status = response.status();
            if status.is_success() {
                return Ok(());
            }
            Err(SseSendError::HttpStatus {
                endpoint: endpoint.to_string(),
                status,
                body: body_snippet(response).await,
            })
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.next_message()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Dropping the event stream drops the GET response, which closes the connection.
        self.events = futures::stream::empty().boxed();
        Ok(())
    }
}

/// Why [`SseClientTransport::connect`] failed. The `Display` text says what happened, what
/// was expected and what to try.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SseConnectError {
    /// Occurs when the SSE URL cannot be parsed or is not `http(s)`.
    #[error(
        "invalid SSE URL {url:?}: {reason}; expected an absolute http:// or https:// URL such as http://host:port/sse"
    )]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Occurs when an extra header has an invalid name or value.
    #[error(
        "invalid header {name:?} for the SSE MCP server: {reason}; fix the name/value in the server's `headers`"
    )]
    InvalidHeader {
        /// The header name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Occurs when the HTTP client cannot be built (TLS setup).
    #[error("could not set up the HTTP client for the SSE MCP server: {0}")]
    Client(#[source] reqwest::Error),
    /// Occurs when the `GET` fails before any response (DNS, refused connection, TLS...).
    #[error("could not reach the SSE MCP server at {url}: {}; check that the server is running and the host/port are right", error_chain(.source))]
    Unreachable {
        /// The SSE URL.
        url: String,
        /// The underlying error.
        source: reqwest::Error,
    },
    /// Occurs when no response headers arrive within the timeout.
    #[error(
        "the SSE MCP server at {url} sent no response headers within {waited:?}; expected an immediate 200 with an event stream. Check the URL, or raise the server's timeout if it is just slow"
    )]
    ResponseTimeout {
        /// The SSE URL.
        url: String,
        /// The timeout that passed.
        waited: Duration,
    },
    /// Occurs when the server answers the `GET` with a non-2xx status.
    #[error("GET {url} answered {status}; expected 200 with a text/event-stream body{}; {}", body_note(.body), get_hint(*.status))]
    HttpStatus {
        /// The SSE URL.
        url: String,
        /// The status received.
        status: StatusCode,
        /// The start of the response body.
        body: String,
    },
    /// Occurs when the response is not `text/event-stream`.
    #[error(
        "GET {url} answered with content type {content_type:?}; expected text/event-stream. This is probably not a legacy SSE endpoint: check the URL, or use transport \"http\" for a streamable HTTP server"
    )]
    NotEventStream {
        /// The SSE URL.
        url: String,
        /// The content type received.
        content_type: String,
    },
    /// Occurs when the stream opens but no `endpoint` event arrives within the timeout.
    #[error(
        "connected to {url} but no `endpoint` event arrived within {waited:?}; a legacy (2024-11-05) SSE MCP server announces its message endpoint right away. Check that the URL is the server's SSE endpoint, or raise the timeout"
    )]
    NoEndpointEvent {
        /// The SSE URL.
        url: String,
        /// The timeout that passed.
        waited: Duration,
    },
    /// Occurs when the stream ends or fails before the `endpoint` event.
    #[error("the SSE stream from {url} ended before the `endpoint` event{}; expected it to stay open and announce the message endpoint. Check the server's logs", reason_note(.reason))]
    StreamEnded {
        /// The SSE URL.
        url: String,
        /// `None` for a clean end of stream, else the stream error.
        reason: Option<String>,
    },
    /// Occurs when the `endpoint` event's data is not a usable URL.
    #[error(
        "the SSE MCP server at {url} announced an unusable message endpoint {data:?}: {reason}; expected a path such as /messages?session=... or a URL on the same host. This is a server bug"
    )]
    InvalidEndpoint {
        /// The SSE URL.
        url: String,
        /// The event data received.
        data: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Occurs when the endpoint is on another origin than the SSE URL (no request goes there).
    #[error(
        "the SSE MCP server at {url} announced message endpoint {endpoint}, which is on a different origin; refusing to send requests (and their headers) there. Expected the same scheme, host and port as the SSE URL; connect to the origin that serves both, or fix the server's endpoint"
    )]
    CrossOrigin {
        /// The SSE URL.
        url: String,
        /// The endpoint, resolved.
        endpoint: String,
    },
}

/// Why sending a message over an [`SseClientTransport`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SseSendError {
    /// Occurs when the `POST` fails before any response (or the message cannot be encoded).
    #[error("POST to the SSE MCP message endpoint {endpoint} failed: {}; the server may have gone away", error_chain(.source))]
    Post {
        /// The message endpoint.
        endpoint: String,
        /// The underlying error.
        source: reqwest::Error,
    },
    /// Occurs when the endpoint answers with a non-2xx status.
    #[error("POST {endpoint} answered {status}; expected 202 Accepted (or another 2xx){}; the server may have dropped this session, so reconnecting may help", body_note(.body))]
    HttpStatus {
        /// The message endpoint.
        endpoint: String,
        /// The status received.
        status: StatusCode,
        /// The start of the response body.
        body: String,
    },
}

/// Reads events until `endpoint`; `Err(None)` is a clean end of stream, `Err(Some(_))` a failure.
async fn wait_for_endpoint(
    events: &mut BoxStream<'static, EventResult>,
) -> Result<String, Option<String>> {
    while let Some(event) = events.next().await {
        let event = event.map_err(|error| Some(error.to_string()))?;
        if event.event == "endpoint" {
            return Ok(event.data);
        }
        tracing::debug!(event = %event.event, "ignoring SSE event before `endpoint`");
    }
    Err(None)
}

fn parse_sse_url(url: &str) -> Result<Url, SseConnectError> {
    let invalid = |reason: String| SseConnectError::InvalidUrl {
        url: url.to_owned(),
        reason,
    };
    let parsed = Url::parse(url.trim()).map_err(|error| invalid(error.to_string()))?;
    match parsed.scheme() {
        "http" | "https" => Ok(parsed),
        other => Err(invalid(format!("unsupported scheme {other:?}"))),
    }
}

fn build_headers(headers: &[(String, String)]) -> Result<HeaderMap, SseConnectError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let invalid = |reason: String| SseConnectError::InvalidHeader {
            name: name.clone(),
            reason,
        };
        let header_name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|error| invalid(format!("bad name: {error}")))?;
        let header_value = HeaderValue::from_str(value.trim())
            .map_err(|error| invalid(format!("bad value: {error}")))?;
        map.append(header_name, header_value);
    }
    Ok(map)
}

/// Resolves the `endpoint` event data against the SSE URL and checks it stays on the same origin.
fn resolve_endpoint(sse_url: &Url, data: &str) -> Result<Url, SseConnectError> {
    let data = data.trim();
    let invalid = |reason: String| SseConnectError::InvalidEndpoint {
        url: sse_url.to_string(),
        data: data.to_owned(),
        reason,
    };
    if data.is_empty() {
        return Err(invalid("the event data is empty".into()));
    }
    let endpoint = sse_url
        .join(data)
        .map_err(|error| invalid(error.to_string()))?;
    if endpoint.origin() != sse_url.origin() {
        return Err(SseConnectError::CrossOrigin {
            url: sse_url.to_string(),
            endpoint: endpoint.to_string(),
        });
    }
    Ok(endpoint)
}

/// Reads the start of an error response body without waiting long for a slow or endless one.
async fn body_snippet(response: reqwest::Response) -> String {
    let mut stream = response.bytes_stream();
    let mut collected = Vec::new();
    let read = async {
        while let Some(Ok(chunk)) = stream.next().await {
            collected.extend_from_slice(&chunk);
            if collected.len() >= SNIPPET_CHARS * 4 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), read).await;
    snippet(String::from_utf8_lossy(&collected).trim())
}

fn snippet(text: &str) -> String {
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(SNIPPET_CHARS).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

/// Formats an error with its causes, since reqwest's top-level message alone is vague.
/// ` (body: "…")` when an error answer had a body.
fn body_note(body: &str) -> String {
    if body.is_empty() {
        String::new()
    } else {
        format!(" (body: {body:?})")
    }
}

/// ` (why)` when a stream failed rather than ended.
fn reason_note(reason: &Option<String>) -> String {
    reason
        .as_ref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default()
}

/// What to check when the SSE `GET` answered `status`.
fn get_hint(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            "check the Authorization (or other) header configured for this server"
        }
        StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED => {
            "check the URL path: legacy SSE servers usually serve /sse; a server \
             that speaks streamable HTTP (usually /mcp) needs transport \"http\""
        }
        _ => "check the URL and the server's logs",
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(base: &str, data: &str) -> Result<String, SseConnectError> {
        resolve_endpoint(&Url::parse(base).unwrap(), data).map(String::from)
    }

    #[test]
    fn endpoint_resolves_relative_paths_and_same_origin_urls() {
        let base = "http://127.0.0.1:8000/api/sse";
        let cases = [
            (
                "/messages?session=abc\n",
                "http://127.0.0.1:8000/messages?session=abc",
            ),
            ("messages?s=1", "http://127.0.0.1:8000/api/messages?s=1"),
            ("http://127.0.0.1:8000/m?x=1", "http://127.0.0.1:8000/m?x=1"),
        ];
        for (data, expected) in cases {
            assert_eq!(resolve(base, data).unwrap(), expected, "{data}");
        }
        let empty = resolve(base, "  ").unwrap_err();
        assert!(matches!(empty, SseConnectError::InvalidEndpoint { .. }));
    }

    #[test]
    fn endpoint_on_another_origin_is_refused() {
        for other in [
            "http://evil.example/messages",
            "http://127.0.0.1:8001/messages",
            "https://127.0.0.1:8000/messages",
            "//evil.example/messages",
        ] {
            let error = resolve("http://127.0.0.1:8000/sse", other).unwrap_err();
            assert!(
                matches!(error, SseConnectError::CrossOrigin { .. }),
                "{other}"
            );
            assert!(error.to_string().contains("different origin"), "{error}");
        }
    }

    #[test]
    fn bad_urls_and_headers_are_reported() {
        for bad in ["ftp://h/sse", "not a url"] {
            let error = parse_sse_url(bad).unwrap_err();
            assert!(matches!(error, SseConnectError::InvalidUrl { .. }), "{bad}");
        }
        let error = build_headers(&[("Bad Name".into(), "v".into())]).unwrap_err();
        assert!(error.to_string().contains("Bad Name"), "{error}");
        let ok = build_headers(&[("Authorization".into(), "Bearer t".into())]).unwrap();
        assert_eq!(ok["authorization"], "Bearer t");
    }

    #[test]
    fn snippet_is_bounded() {
        assert_eq!(snippet("short"), "short");
        let long = "é".repeat(SNIPPET_CHARS + 5);
        assert_eq!(snippet(&long).chars().count(), SNIPPET_CHARS + 1);
    }
}
