//! The Xiaozhi endpoint as a place to dial: its URL (kept secret, shown masked), the
//! WebSocket upgrade with a frame-size limit, and what a failed dial or a close frame means
//! for the reconnect policy.

use std::time::Duration;

use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, http::StatusCode};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::mcp::backoff::SessionEnd;
use crate::observe::redact::redact;

/// The largest frame (and message) accepted from the endpoint or sent to it: 2 MiB (what
/// Xiaozhi MCP bridges accept, so a reply they would take is never refused here).
pub(crate) const MAX_FRAME_BYTES: usize = 2 * 1024 * 1024;

/// How long the TCP + TLS + WebSocket handshake may take.
pub(crate) const DIAL_TIMEOUT: Duration = Duration::from_secs(20);

/// The open socket type.
pub(crate) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// An endpoint URL. `Debug` and [`Endpoint::shown`] mask the token.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    url: String,
    shown: String,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Endpoint").field(&self.shown).finish()
    }
}

/// Why an endpoint URL is refused (the URL shown with its token masked).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// Occurs when the URL is not `ws://` or `wss://`.
    #[error(
        "endpoint {shown}: expected a ws:// or wss:// URL such as wss://api.xiaozhi.me/mcp/?token=…"
    )]
    NotWebSocket {
        /// The URL, token masked.
        shown: String,
    },
    /// Occurs when the URL does not parse as a WebSocket request.
    #[error("endpoint {shown}: not a valid URL: {message}")]
    Invalid {
        /// The URL, token masked.
        shown: String,
        /// The parser's message, token masked.
        message: String,
    },
}

impl Endpoint {
    /// Checks a `ws://` or `wss://` URL.
    ///
    /// # Errors
    ///
    /// The URL is not a WebSocket URL (the message shows it with its token masked).
    pub fn parse(url: &str) -> Result<Self, EndpointError> {
        let url = url.trim();
        let shown = redact(url).into_owned();
        if !(url.starts_with("ws://") || url.starts_with("wss://")) {
            return Err(EndpointError::NotWebSocket { shown });
        }
        if let Err(e) = url.into_client_request() {
            let message = redact(&e.to_string()).into_owned();
            return Err(EndpointError::Invalid { shown, message });
        }
        Ok(Self {
            url: url.to_string(),
            shown,
        })
    }

    /// The URL with its token masked, for logs and status.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The URL itself (a secret: never log it).
    pub fn secret_url(&self) -> &str {
        &self.url
    }
}

/// Why a dial failed, and how the reconnect policy should treat it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DialError {
    /// Abnormal, or Rejected for HTTP 401/403.
    pub end: SessionEnd,
    /// What happened (secrets masked).
    pub message: String,
}

/// Dials `endpoint` with a `max_frame`-byte limit on incoming frames and messages.
///
/// # Errors
///
/// See [`DialError`].
pub(crate) async fn dial(endpoint: &Endpoint, max_frame: usize) -> Result<Socket, DialError> {
    let abnormal = |message: String| DialError {
        end: SessionEnd::Abnormal,
        message,
    };
    let request = endpoint
        .url
        .as_str()
        .into_client_request()
        .map_err(|e| abnormal(format!("bad endpoint URL: {}", redact(&e.to_string()))))?;
    let config = WebSocketConfig::default()
        .max_message_size(Some(max_frame))
        .max_frame_size(Some(max_frame));
    let dialing = tokio_tungstenite::connect_async_with_config(request, Some(config), true);
    match tokio::time::timeout(DIAL_TIMEOUT, dialing).await {
        Err(_) => Err(abnormal(format!(
            "no WebSocket handshake with {} within {} s",
            endpoint.shown,
            DIAL_TIMEOUT.as_secs()
        ))),
        Ok(Ok((socket, _response))) => Ok(socket),
        Ok(Err(tungstenite::Error::Http(response))) => {
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
                Err(DialError {
                    end: SessionEnd::Rejected,
                    message: format!(
                        "bad token: {} refused the WebSocket upgrade with HTTP {status}; check the endpoint's token",
                        endpoint.shown
                    ),
                })
            } else {
                Err(abnormal(format!(
                    "{} answered the WebSocket upgrade with HTTP {status}",
                    endpoint.shown
                )))
            }
        }
        Ok(Err(e)) => Err(abnormal(format!(
            "cannot reach {}: {}",
            endpoint.shown,
            redact(&e.to_string())
        ))),
    }
}

/// What a close frame from the endpoint means: 1000/1001 (or no code) is clean, 1008 is a
/// refused token, anything else is abnormal.
pub(crate) fn classify_close(frame: Option<&CloseFrame>) -> (SessionEnd, String) {
    let Some(frame) = frame else {
        return (SessionEnd::Clean, "the endpoint closed the socket".into());
    };
    let code = u16::from(frame.code);
    let reason = redact(frame.reason.as_str()).into_owned();
    let said = if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    };
    match frame.code {
        CloseCode::Normal | CloseCode::Away => (
            SessionEnd::Clean,
            format!("the endpoint closed the socket ({code}{said})"),
        ),
        CloseCode::Policy => (
            SessionEnd::Rejected,
            format!(
                "bad token: the endpoint closed with 1008 (policy violation{said}); check the endpoint's token"
            ),
        ),
        _ => (
            SessionEnd::Abnormal,
            format!("the endpoint closed the socket with {code}{said}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_must_be_websocket_urls_and_hide_their_token() {
        let e = Endpoint::parse("wss://api.xiaozhi.me/mcp/?token=abc.def").unwrap();
        assert_eq!(e.shown(), "wss://api.xiaozhi.me/mcp/?token=***");
        assert!(!format!("{e:?}").contains("abc"));
        let err = Endpoint::parse("https://h/mcp/?token=abc")
            .unwrap_err()
            .to_string();
        assert!(err.contains("ws://") && !err.contains("abc"), "{err}");
    }

    #[test]
    fn close_codes() {
        let frame = |code: u16, reason: &str| CloseFrame {
            code: CloseCode::from(code),
            reason: reason.to_string().into(),
        };
        assert_eq!(classify_close(None).0, SessionEnd::Clean);
        assert_eq!(classify_close(Some(&frame(1000, ""))).0, SessionEnd::Clean);
        assert_eq!(
            classify_close(Some(&frame(1001, "bye"))).0,
            SessionEnd::Clean
        );
        let (end, msg) = classify_close(Some(&frame(1008, "token=xyz invalid")));
        assert_eq!(end, SessionEnd::Rejected);
        assert!(msg.contains("bad token") && !msg.contains("xyz"), "{msg}");
        assert_eq!(
            classify_close(Some(&frame(1011, ""))).0,
            SessionEnd::Abnormal
        );
    }
}
