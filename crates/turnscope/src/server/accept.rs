//! The accept loop: one hyper connection per socket, with a deadline on request headers.
//!
//! Written here rather than using `axum::serve`, which gives hyper no timer: a client that
//! trickles its request line and headers (slow-loris) would hold a socket and a task forever.
//! This loop is the same shape as axum's (auto HTTP/1 + HTTP/2, upgrades, graceful shutdown)
//! plus that deadline. It also covers idle keep-alive connections: hyper starts the clock when
//! it begins waiting for the next request's head.

use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Serves `app` on `listener` until `stop`, then waits for open connections to finish
/// (the caller bounds that wait).
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    header_timeout: Duration,
    stop: CancellationToken,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    builder.http2().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _peer)) => tcp,
                Err(err) => {
                    on_accept_error(err).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        // Small SSE writes must leave at once; Nagle would hold them ~40 ms.
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(tcp), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // A client that hangs up, times out or speaks garbage ends its own connection
            // only; nothing to report beyond trace level.
            if let Err(err) = connection.await {
                tracing::trace!("connection ended: {err}");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Per-connection failures (the peer reset before we took it) are skipped at once; anything
/// else, such as running out of file descriptors, is reported and retried after a pause so
/// the loop does not spin.
async fn on_accept_error(err: std::io::Error) {
    use std::io::ErrorKind::*;
    if matches!(
        err.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted
    ) {
        return;
    }
    tracing::warn!(
        "accepting a connection failed: {err}; retrying in 100 ms (if this is 'too many open \
         files', raise the limit with `ulimit -n` or lower server.sessions)"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
}
