//! The Host/Origin guard in front of every HTTP route (DNS-rebinding protection).
//!
//! A foreign `Host` gets 421 (rmcp's own check would answer 403, so this guard sits in front
//! of it and rmcp's is turned off); a foreign `Origin` gets 403. The default allow list is
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

/// The middleware: 421 for a foreign Host, 403 for a foreign Origin, else the route.
pub async fn guard(
    State(config): State<Arc<GuardConfig>>,
    request: Request,
    next: Next,
) -> Response {
    if config.enabled {
        let host = host_of(&request).unwrap_or_default();
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
    if let Some(token) = &config.auth_token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "This server requires `Authorization: Bearer <token>` on every request (the token given to \
                 turnscope with --auth-token or TURNSCOPE_AUTH_TOKEN). Send that header.\n",
            )
                .into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::allowed;

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
