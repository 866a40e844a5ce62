//! The supervisor task of an [`McpSource`](super::mcp_source::McpSource): connect, watch
//! the connection (`tools/list_changed` → list again; connection lost → reconnect or
//! respawn), retry with exponential backoff until the source is closed.
//!
//! It owns the retry loop only; what a connection is lives in
//! [`mcp_connect`](super::mcp_connect), what callers see in
//! [`mcp_source`](super::mcp_source).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::service::QuitReason;
use rmcp::{Peer, RoleClient};
use tokio_util::sync::CancellationToken;

use super::mcp_connect::{self, Connection, SourceClient};
use super::mcp_source::{
    FIRST_BACKOFF, Inner, Link, MAX_BACKOFF, REPEAT_MARK, STABLE_AFTER, SourceStatus,
};
use crate::config::TransportKind;
use crate::observe::ToolSourceState;

/// How a connection ended.
enum End {
    Stopped,
    Lost(String),
}

/// Runs until the source's stop token is cancelled.
pub(super) async fn supervise(inner: Arc<Inner>) {
    let mut delay = FIRST_BACKOFF;
    let mut attempts = 0u32;
    let mut last_error: Option<String> = None;
    loop {
        let client = SourceClient {
            server: inner.name.clone(),
            list_changed: inner.list_changed.clone(),
        };
        let ct = inner.stop.child_token();
        let attempt = tokio::select! {
            result = tokio::time::timeout(inner.attempt_timeout, mcp_connect::connect(&inner.target, client, ct.clone())) => result,
            () = inner.stop.cancelled() => break,
        };
        let error = match attempt {
            Ok(Ok(connection)) => {
                attempts = 0;
                let up_since = Instant::now();
                match run_connection(&inner, connection, &ct).await {
                    End::Stopped => break,
                    End::Lost(reason) => {
                        if up_since.elapsed() >= STABLE_AFTER {
                            delay = FIRST_BACKOFF;
                        }
                        inner.publish(
                            ToolSourceState::Disconnected,
                            inner.read().tools.len(),
                            format!(
                                "{reason}; {} in {:.2} s",
                                if inner.transport == TransportKind::Stdio {
                                    "respawning"
                                } else {
                                    "reconnecting"
                                },
                                delay.as_secs_f64()
                            ),
                        );
                        reason
                    }
                }
            }
            Ok(Err(error)) => {
                ct.cancel();
                attempts += 1;
                let again = if last_error.as_deref() == Some(error.as_str()) {
                    REPEAT_MARK
                } else {
                    ""
                };
                inner.publish(
                    ToolSourceState::Failed,
                    0,
                    format!("{again}{error}; retrying in {:.2} s", delay.as_secs_f64()),
                );
                error
            }
            Err(_) => {
                ct.cancel();
                attempts += 1;
                let error = format!(
                    "no answer within {:.1} s",
                    inner.attempt_timeout.as_secs_f64()
                );
                let again = if last_error.as_deref() == Some(error.as_str()) {
                    REPEAT_MARK
                } else {
                    ""
                };
                inner.publish(
                    ToolSourceState::Failed,
                    0,
                    format!("{again}{error}; retrying in {:.2} s", delay.as_secs_f64()),
                );
                error
            }
        };
        last_error = Some(error.clone());
        inner.write().status = SourceStatus::Down { error, attempts };
        inner.first_attempt.cancel();
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = inner.stop.cancelled() => break,
        }
        delay = (delay * 2).min(MAX_BACKOFF);
    }
    {
        let mut state = inner.write();
        state.status = SourceStatus::Closed;
        state.link = None;
    }
    inner.first_attempt.cancel();
    inner.publish(ToolSourceState::Closed, 0, "closed".into());
}

/// Serves one live connection until it ends or the source is closed.
async fn run_connection(inner: &Arc<Inner>, connection: Connection, ct: &CancellationToken) -> End {
    let Connection {
        service,
        pid,
        tools,
        rejected,
    } = connection;
    for reason in &rejected {
        tracing::warn!(server = %inner.name, "tool left out, its schema cannot be used: {reason}");
    }
    let alive = CancellationToken::new();
    let count = tools.len();
    let peer = service.peer().clone();
    {
        let mut state = inner.write();
        state.status = SourceStatus::Up { tools: count, pid };
        state.link = Some(Link {
            peer: peer.clone(),
            alive: alive.clone(),
        });
    }
    inner.set_tools(tools);
    // Only now: whoever waited for the first attempt sees the server up with its tools.
    inner.first_attempt.cancel();
    let server_name = peer
        .peer_info()
        .and_then(|i| i.server_info.clone())
        .map(|i| format!("{} {}", i.name, i.version))
        .unwrap_or_else(|| "unknown server".into());
    inner.publish(
        ToolSourceState::Connected,
        count,
        format!(
            "{server_name}{}",
            pid.map(|p| format!(", pid {p}")).unwrap_or_default()
        ),
    );
    let waiting = service.waiting();
    tokio::pin!(waiting);
    let end = loop {
        tokio::select! {
            quit = &mut waiting => {
                let reason = match quit {
                    Ok(QuitReason::Cancelled) if inner.stop.is_cancelled() => break End::Stopped,
                    Ok(QuitReason::Closed) => if inner.transport == TransportKind::Stdio {
                        "the server process exited (or closed its stdout)".to_string()
                    } else {
                        "the server closed the connection".to_string()
                    },
                    Ok(other) => format!("the connection ended ({other:?})"),
                    Err(e) => format!("the connection task failed ({e})"),
                };
                break End::Lost(reason);
            }
            () = inner.stop.cancelled() => {
                ct.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(5), &mut waiting).await;
                break End::Stopped;
            }
            () = inner.list_changed.notified() => refresh(inner, &peer).await,
        }
    };
    alive.cancel();
    inner.write().link = None;
    end
}

/// Lists the tools again after `notifications/tools/list_changed`.
async fn refresh(inner: &Inner, peer: &Peer<RoleClient>) {
    match tokio::time::timeout(inner.attempt_timeout, peer.list_all_tools()).await {
        Ok(Ok(listed)) => {
            let (tools, rejected) =
                mcp_connect::prepare_tools(&listed, inner.target.config.tool_filter.as_ref());
            for reason in &rejected {
                tracing::warn!(server = %inner.name, "tool left out, its schema cannot be used: {reason}");
            }
            let count = tools.len();
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            let detail = names.join(", ");
            {
                let mut state = inner.write();
                if let SourceStatus::Up { tools, .. } = &mut state.status {
                    *tools = count;
                }
            }
            inner.set_tools(tools);
            inner.publish(ToolSourceState::Refreshed, count, detail);
        }
        Ok(Err(e)) => {
            tracing::warn!(server = %inner.name, error = %e, "tools/list after list_changed failed; keeping the old list")
        }
        Err(_) => {
            tracing::warn!(server = %inner.name, "tools/list after list_changed timed out; keeping the old list")
        }
    }
}
