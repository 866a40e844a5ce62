//! The accept loop: one hyper connection per socket (HTTP/1 and HTTP/2, upgrades, graceful
//! shutdown) with deadlines for slow clients on every protocol and at most `max_connections`
//! open at once (503 beyond). It is written here because `axum::serve` gives hyper no timer, so
//! a slow-loris client would hold a socket forever; [`serve`] lists the deadlines.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;

pub use crate::config::DEFAULT_MAX_CONNECTIONS;
/// HTTP/2 keep-alive: a ping after this long without frames from the peer...
const H2_PING_EVERY: Duration = Duration::from_secs(20);
/// ...which must be answered within this long (both shortened to the head deadline when
/// that is shorter, as in tests).
const H2_PING_TIMEOUT: Duration = Duration::from_secs(20);

/// How the loop treats its connections.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    /// For the first bytes (protocol sniffing) and each HTTP/1 request head.
    pub(crate) header_timeout: Duration,
    /// Connections open at once; more are refused.
    pub max_connections: usize,
}

/// Serves `app` on `listener` until `stop`, then waits for open connections to finish
/// (the caller bounds that wait).
///
/// Written here rather than using `axum::serve`, which gives hyper no timer: a client that
/// trickles its request line and headers (slow-loris) would hold a socket and a task forever.
/// This loop is the same shape as axum's (auto HTTP/1 + HTTP/2, upgrades, graceful shutdown)
/// plus:
/// - a deadline on the first bytes ([`FirstBytes`]): hyper-util's protocol sniffing (HTTP/1
///   or the HTTP/2 preface?) has no timeout of its own, so a socket that sends nothing, or the
///   preface and then nothing, would hold a task forever;
/// - the HTTP/1 head deadline (hyper's `header_read_timeout`), which also closes idle
///   keep-alive connections: hyper starts the clock when it waits for the next head;
/// - HTTP/2 keep-alive pings, so a peer that vanished (or never answers) is dropped;
/// - `max_connections` open at once; beyond it a connection gets a 503 and is closed, with a
///   log line saying so.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    stop: CancellationToken,
) {
    let header_timeout = limits.header_timeout;
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(H2_PING_EVERY.min(header_timeout))
        .keep_alive_timeout(H2_PING_TIMEOUT.min(header_timeout));
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Refusals::default();
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    on_accept_error(err).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refusals.refuse(tcp, peer, limits.max_connections);
            continue;
        };
        // Small SSE writes must leave at once; Nagle would hold them ~40 ms.
        let _ = tcp.set_nodelay(true);
        // Each request learns how to close its connection (a stalled `/events` viewer is
        // cut off this way).
        let closer = super::viewers::ConnectionCloser::default();
        let tower = TowerToHyperService::new(app.clone());
        let tag = closer.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
            request.extensions_mut().insert(tag.clone());
            hyper::service::Service::call(&tower, request)
        });
        let io = FirstBytes::new(tcp, header_timeout);
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(io), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // A client that hangs up, times out or speaks garbage ends its own connection
            // only; nothing to report beyond trace level.
            tokio::select! {
                ended = connection => if let Err(err) = ended {
                    tracing::trace!("connection ended: {err}");
                },
                () = closer.0.cancelled() => tracing::debug!("connection closed by the server"),
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Refused connections: each gets a short 503, and the log one line per second at most
/// (with how many were refused since the last line), so a flood cannot flood the log.
#[derive(Default)]
struct Refusals {
    since_line: AtomicU64,
    last_line: std::sync::Mutex<Option<Instant>>,
}

impl Refusals {
    fn refuse(&self, tcp: TcpStream, peer: std::net::SocketAddr, max: usize) {
        let body = format!(
            "turnscope has {max} connections open (server.max_connections); close idle \
             connections or try again later\n"
        );
        let answer = format!(
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
             Connection: close\r\nRetry-After: 1\r\n\r\n{body}",
            body.len()
        );
        // Best effort and never blocking: the socket's buffer takes this at once.
        let _ = tcp.try_write(answer.as_bytes());
        drop(tcp);
        let refused = self.since_line.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = self.last_line.lock().unwrap_or_else(|e| e.into_inner());
        if last.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
            *last = Some(Instant::now());
            self.since_line.store(0, Ordering::Relaxed);
            tracing::warn!(
                "refused a connection from {peer} ({refused} refused since the last such line): \
                 all server.max_connections = {max} are open; raise it, or find the client that \
                 holds so many connections"
            );
        }
    }
}

/// The HTTP/2 connection preface a client opens with.
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The preface and the header of the SETTINGS frame that must follow it.
const H2_OPENING: usize = H2_PREFACE.len() + 9;

pin_project_lite::pin_project! {
    /// A socket whose first bytes must arrive within a deadline: until they show an HTTP/1
    /// request (the first byte that differs from the HTTP/2 preface) or the HTTP/2 preface
    /// and the header of its SETTINGS frame, a read that waits past the deadline fails with
    /// `TimedOut`, which ends the connection. After that hyper's own deadlines apply.
    pub(crate) struct FirstBytes<T> {
        #[pin]
        inner: T,
        deadline: Option<Pin<Box<Sleep>>>,
        seen: usize,
    }
}

impl<T> FirstBytes<T> {
    pub(crate) fn new(inner: T, within: Duration) -> Self {
        Self {
            inner,
            deadline: Some(Box::pin(tokio::time::sleep(within))),
            seen: 0,
        }
    }
}

/// Advances the sniffing state over `bytes`; true when the deadline is no longer needed.
fn opening_done(seen: &mut usize, bytes: &[u8]) -> bool {
    for &byte in bytes {
        if *seen < H2_PREFACE.len() && byte != H2_PREFACE[*seen] {
            return true; // HTTP/1 (or garbage hyper will refuse): its head deadline applies
        }
        *seen += 1;
        if *seen >= H2_OPENING {
            return true;
        }
    }
    false
}

impl<T: AsyncRead> AsyncRead for FirstBytes<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.project();
        let before = buf.filled().len();
        match this.inner.poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if this.deadline.is_some() && opening_done(this.seen, &buf.filled()[before..]) {
                    *this.deadline = None;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                let expired = this
                    .deadline
                    .as_mut()
                    .is_some_and(|deadline| deadline.as_mut().poll(cx).is_ready());
                if expired {
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client sent no complete request opening within \
                         server.header_timeout_seconds",
                    )))
                } else {
                    Poll::Pending
                }
            }
            other => other,
        }
    }
}

impl<T: AsyncWrite> AsyncWrite for FirstBytes<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().inner.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().inner.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opening_is_http1_at_the_first_byte_off_the_preface() {
        let mut seen = 0;
        assert!(!opening_done(&mut seen, b"P"));
        assert!(opening_done(&mut seen, b"OST /mcp HTTP/1.1"));
        let mut seen = 0;
        assert!(opening_done(&mut seen, b"GET / HTTP/1.1\r\n"));
    }

    #[test]
    fn the_http2_opening_needs_the_preface_and_a_frame_header() {
        let mut seen = 0;
        assert!(!opening_done(&mut seen, H2_PREFACE));
        assert!(!opening_done(&mut seen, &[0, 0, 0, 4]));
        assert!(opening_done(&mut seen, &[0, 0, 0, 0, 0]));
    }
}
