//! The Host/Origin guard in front of every HTTP route (DNS-rebinding protection).
//!
//! A foreign `Host` gets 421 (rmcp's own check would answer 403, so this guard sits in front
//! of it and rmcp's is turned off), a request without one 400 (RFC 9112 §3.2); a foreign
//! `Origin` gets 403. The default allow list is
//! loopback on any port: `127.0.0.1:*`, `localhost:*`, `[::1]:*` and their `http` origins.
//! With an auth token configured, every request must also carry it as a bearer token (401).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

/// Which hosts and origins may reach the server.
#[derive(Debug, Clone)]
pub struct GuardConfig {
    /// Whether checks run at all.
    pub(crate) enabled: bool,
    /// Allowed `Host` values: `name`, `name:port`, or `name:*` for any port.
    pub(crate) hosts: Vec<String>,
    /// Allowed `Origin` values: `scheme://name[:port]`, or `scheme://name:*` for any port.
    pub(crate) origins: Vec<String>,
    /// When set, every request must carry `Authorization: Bearer <token>`.
    pub auth_token: Option<String>,
}

impl Default for GuardConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            hosts: vec!["127.0.0.1:*".into(), "localhost:*".into(), "[::1]:*".into()],
            origins: vec![
                "http://127.0.0.1:*".into(),
                "http://localhost:*".into(),
                "http://[::1]:*".into(),
            ],
            auth_token: None,
        }
    }
}

/// Whether `value` (a host, or an origin) matches one of `patterns`, with `:*` = any port.
fn allowed(value: &str, patterns: &[String]) -> bool {
    let value = value.to_ascii_lowercase();
    patterns.iter().any(|p| {
        let p = p.to_ascii_lowercase();
        match p.strip_suffix(":*") {
            Some(base) => {
                value == base
                    || value
                        .strip_prefix(base)
                        .and_then(|rest| rest.strip_prefix(':'))
                        .is_some_and(|port| {
                            !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
                        })
            }
            None => value == p,
        }
    })
}

fn host_of(request: &Request) -> Option<String> {
    request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| request.uri().authority().map(|a| a.to_string()))
}

fn origin_of(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::ORIGIN)
        .map(|o| o.to_str().unwrap_or("<not ASCII>"))
}

/// The token of an `Authorization` value whose scheme is `Bearer` in any case (RFC 9110
/// §11.1: the scheme is case-insensitive), with the spaces after the scheme skipped; `None`
/// for another scheme or a value without a token.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    let token = rest.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("Bearer") && !token.is_empty()).then_some(token)
}

/// Why a request does not carry `token` (the text of its 401), or `None` when it does. Neither
/// the token sent nor the expected one is ever part of the text.
fn refused_token(headers: &HeaderMap, token: &str) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION);
    let given = value.and_then(|v| v.to_str().ok()).and_then(bearer_token);
    match given {
        Some(given) if bool::from(given.as_bytes().ct_eq(token.as_bytes())) => None,
        Some(_) => Some(
            "The bearer token in this request's Authorization header does not match the one \
             this server was started with (--auth-token or TURNSCOPE_AUTH_TOKEN). Check the \
             token given to the server and the Authorization header your client is configured \
             to send; they must be the same.\n"
                .to_string(),
        ),
        None if value.is_some() => Some(
            "This request's Authorization header is not `Bearer <token>` (another scheme, or \
             no token after it). This server requires `Authorization: Bearer <token>` on every \
             request, with the token given to turnscope with --auth-token or \
             TURNSCOPE_AUTH_TOKEN. Send that header.\n"
                .to_string(),
        ),
        None => Some(
            "This server requires `Authorization: Bearer <token>` on every request (the token \
             given to turnscope with --auth-token or TURNSCOPE_AUTH_TOKEN). Send that header.\n"
                .to_string(),
        ),
    }
}

/// The middleware: 400 for no Host, 421 for a foreign Host, 403 for a foreign Origin, 401
/// without the token when one is configured, else the route.
pub async fn guard(
    State(config): State<Arc<GuardConfig>>,
    request: Request,
    next: Next,
) -> Response {
    if config.enabled {
        let Some(host) = host_of(&request) else {
            tracing::warn!("request refused: no Host header");
            return (
                StatusCode::BAD_REQUEST,
                format!(
                    "This request has no Host header. HTTP/1.1 clients must send one (RFC 9112 \
                     §3.2), and this server checks it against its allow list (DNS-rebinding \
                     protection). Send the host:port you dialled, e.g. `Host: 127.0.0.1:PORT`; \
                     allowed: {}.\n",
                    config.hosts.join(", ")
                ),
            )
                .into_response();
        };
        if !allowed(&host, &config.hosts) {
            tracing::warn!(%host, "request refused: Host not allowed");
            return (
                StatusCode::MISDIRECTED_REQUEST,
                format!(
                    "Host '{host}' is not allowed here (DNS-rebinding protection). Allowed: {}. \
                     Dial one of those, or start turnscope with --allowed-host '{host}'.\n",
                    config.hosts.join(", ")
                ),
            )
                .into_response();
        }
        if let Some(origin) = origin_of(request.headers())
            && !allowed(origin, &config.origins)
        {
            tracing::warn!(%origin, "request refused: Origin not allowed");
            return (
                StatusCode::FORBIDDEN,
                format!(
                    "Origin '{origin}' is not allowed here. Allowed: {}. \
                     Start turnscope with --allowed-origin '{origin}' if this page should reach it.\n",
                    config.origins.join(", ")
                ),
            )
                .into_response();
        }
    }
    if let Some(token) = &config.auth_token
        && let Some(refusal) = refused_token(request.headers(), token)
    {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            refusal,
        )
            .into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::{allowed, bearer_token};

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_token("Bearer t0k"), Some("t0k"));
        assert_eq!(bearer_token("bearer t0k"), Some("t0k"));
        assert_eq!(bearer_token("BEARER  t0k"), Some("t0k"));
        assert_eq!(bearer_token("Basic t0k"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
    }

    #[test]
    fn port_wildcards_and_exact_names() {
        let p = vec!["localhost:*".to_string(), "bot.example.com".to_string()];
        assert!(allowed("localhost", &p));
        assert!(allowed("localhost:7870", &p));
        assert!(allowed("LOCALHOST:1", &p));
        assert!(!allowed("localhost.evil.com", &p));
        assert!(!allowed("localhost:", &p));
        assert!(!allowed("localhost:80x", &p));
        assert!(allowed("bot.example.com", &p));
        assert!(!allowed("bot.example.com:8080", &p));
        let o = vec!["http://[::1]:*".to_string()];
        assert!(allowed("http://[::1]:3000", &o));
        assert!(!allowed("https://[::1]:3000", &o));
        assert!(!allowed("null", &o));
    }
}
