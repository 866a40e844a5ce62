//! Notices when an HTTP caller goes away, so a `chat` handler can end at once: each request gets
//! a `CallerGone` token, cancelled when its response body is dropped or the request is dropped
//! unanswered. The handler watches it only where closing the stream is the cancel (MCP
//! 2026-07-28 on); `watch_caller` says why. It also counts the `POST` exchanges still open
//! ([`Exchanges`]), so shutdown can wait until the answers handed back have been written.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body::Frame;
use tokio_util::sync::{CancellationToken, DropGuard};

/// Cancelled when the HTTP exchange that carried a request is over.
#[derive(Clone, Debug)]
pub(crate) struct CallerGone(pub CancellationToken);

/// How many `POST` exchanges (requests whose response body is not yet sent or dropped) are
/// open; shared by the middleware and whoever shuts the server down.
#[derive(Clone, Debug, Default)]
pub struct Exchanges(Arc<AtomicUsize>);

impl Exchanges {
    /// `POST` exchanges open now.
    pub fn open(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }

    /// Waits until no `POST` exchange is open, at most `bound`; true when none is.
    pub async fn settled(&self, bound: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + bound;
        while self.open() > 0 {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        true
    }
}

/// One open exchange, counted until dropped.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

pin_project_lite::pin_project! {
    struct WatchedBody {
        #[pin]
        inner: Body,
        guard: DropGuard,
        open: Option<Open>,
    }
}

impl http_body::Body for WatchedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The middleware: attaches a [`CallerGone`] token and cancels it when the exchange ends;
/// counts a `POST` in `exchanges` until its response body is sent or dropped.
///
/// rmcp's stateful streamable HTTP mode keeps a tool handler running when the client closes
/// the response stream (streams are resumable there). That is right up to MCP 2025-11-25,
/// where a disconnect is not a cancel (`notifications/cancelled` is, and the client resumes
/// with `Last-Event-ID`, see `resume`), but from 2026-07-28 closing the stream *is* the
/// cancel. This layer gives each request a token that is cancelled when the response body is
/// dropped (sent, or abandoned by the client) or when the request is dropped before
/// answering; rmcp hands the request's extensions to the handler, which watches it when the
/// request speaks a revision where that is the cancel (`mcp::closing_the_stream_cancels`).
pub(crate) async fn watch_caller(
    axum::extract::State(exchanges): axum::extract::State<Exchanges>,
    mut request: Request,
    next: Next,
) -> Response {
    let open = (request.method() == axum::http::Method::POST).then(|| {
        exchanges.0.fetch_add(1, Ordering::AcqRel);
        Open(exchanges.0.clone())
    });
    let token = CancellationToken::new();
    request.extensions_mut().insert(CallerGone(token.clone()));
    let guard = token.drop_guard();
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        Body::new(WatchedBody {
            inner: body,
            guard,
            open,
        }),
    )
}
