//! Notices when an HTTP caller goes away, so a `chat` handler can end at once: each request gets
//! a `CallerGone` token, cancelled when its response body is dropped or the request is dropped
//! unanswered. The handler watches it only where closing the stream is the cancel (MCP
//! 2026-07-28 on); `watch_caller` says why. It also counts the `POST` exchanges still open
//! ([`Exchanges`]), so a drain and the shutdown wait until the answers handed back have been
//! written, and tells a `chat` handler whether its reply reached the connection whole
//! ([`Delivery`]): a reply whose response body ended is delivered; one whose body was dropped
//! before its end, or that the shutdown gave up waiting for, is not.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body::Frame;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

/// Cancelled when the HTTP exchange that carried a request is over.
#[derive(Clone, Debug)]
pub(crate) struct CallerGone(pub CancellationToken);

/// What runs when a reply is not delivered ([`Delivery::on_lost`]).
type OnLost = Box<dyn FnOnce() + Send>;

/// Where one `POST` exchange's answer is.
enum Fate {
    /// Not yet handed whole to the connection; what to do if it never is.
    Open(Option<OnLost>),
    /// Its response body ended: every byte of it was handed to the connection.
    Delivered,
    /// Its response body was dropped before its end, or the shutdown gave up on it.
    Lost,
}

/// Whether a `POST` exchange's answer reached its connection whole: a request extension the
/// `chat` handler reads (rmcp hands the request's parts to it). A handler that wrote its
/// reply as read registers, with [`Delivery::on_lost`], what undoes that when the answer
/// does not get out.
#[derive(Clone)]
pub(crate) struct Delivery(Arc<Mutex<Fate>>);

impl Delivery {
    fn new() -> Self {
        Self(Arc::new(Mutex::new(Fate::Open(None))))
    }

    fn fate(&self) -> std::sync::MutexGuard<'_, Fate> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `lost` once if this exchange's answer is not handed whole to its connection (its
    /// body dropped before its end, or given up on at shutdown); at once when that already
    /// happened; never when it was delivered. A later registration replaces an earlier one.
    pub(crate) fn on_lost(&self, lost: impl FnOnce() + Send + 'static) {
        let mut fate = self.fate();
        match &mut *fate {
            Fate::Open(slot) => *slot = Some(Box::new(lost)),
            Fate::Delivered => {}
            Fate::Lost => {
                drop(fate);
                lost();
            }
        }
    }

    fn delivered(&self) {
        let mut fate = self.fate();
        if matches!(*fate, Fate::Open(_)) {
            *fate = Fate::Delivered;
        }
    }

    /// Marks the answer lost unless it was delivered, and runs what was registered for that.
    fn lost(&self) {
        let mut fate = self.fate();
        let Fate::Open(slot) = &mut *fate else {
            return;
        };
        let lost = slot.take();
        *fate = Fate::Lost;
        drop(fate);
        if let Some(lost) = lost {
            lost();
        }
    }
}

/// How many `POST` exchanges (requests whose response body is not yet sent or dropped) are
/// open, and when the last `/mcp` request that was not a stream (`GET`) ended; shared by the
/// middleware and whoever drains and shuts the server down.
#[derive(Clone, Default)]
pub struct Exchanges(Arc<Counts>);

struct Counts {
    open: AtomicUsize,
    next: AtomicU64,
    /// The open `POST` exchanges' deliveries, by a number of their own. Behind a lock only
    /// [`Exchanges::abandon`] (at the stop) contends for: each `POST` takes it twice,
    /// uncontended, to put its delivery in and take it out.
    deliveries: Mutex<HashMap<u64, Delivery>>,
    /// What [`Counts::last_ended`] counts from.
    since: Instant,
    /// When the last exchange that was not a `GET` ended, in nanoseconds after `since` plus
    /// one (0: none yet). An atomic, not a lock: every `/mcp` request writes it.
    last_ended: AtomicU64,
}

impl Default for Counts {
    fn default() -> Self {
        Self {
            open: AtomicUsize::new(0),
            next: AtomicU64::new(0),
            deliveries: Mutex::default(),
            since: Instant::now(),
            last_ended: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for Exchanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchanges")
            .field("open", &self.open())
            .finish()
    }
}

impl Exchanges {
    /// `POST` exchanges open now.
    pub fn open(&self) -> usize {
        self.0.open.load(Ordering::Acquire)
    }

    /// Waits until no `POST` exchange is open, at most `bound`; true when none is.
    pub async fn settled(&self, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        while self.open() > 0 {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// Waits while a `POST` exchange is open or an `/mcp` request (not a `GET` stream) ended
    /// less than `quiet` ago, at most `bound`: a client that just read its answer often sends
    /// one more request at once (the Python SDK lists the tools to check the result it got,
    /// and ends its MCP session with a `DELETE`), and fails the whole call when that meets a
    /// closed port. Returns at once when no such request ended within `quiet`.
    pub async fn linger(&self, quiet: Duration, bound: Duration) {
        let deadline = Instant::now() + bound;
        loop {
            let now = Instant::now();
            let busy_until = self.last_ended().map(|at| at + quiet).filter(|t| *t > now);
            let wait_until = match (self.open() > 0, busy_until) {
                (true, _) => now + Duration::from_millis(5),
                (false, Some(until)) => until,
                (false, None) => return,
            };
            if now >= deadline {
                return;
            }
            tokio::time::sleep_until(wait_until.min(deadline)).await;
        }
    }

    /// Gives up on the answers of the `POST` exchanges still open (the server is stopping):
    /// each counts as not delivered ([`Delivery::on_lost`] runs now), even if its body ends
    /// later. Returns how many there were.
    pub fn abandon(&self) -> usize {
        let open: Vec<Delivery> = self
            .0
            .deliveries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, d)| d)
            .collect();
        for delivery in &open {
            delivery.lost();
        }
        open.len()
    }

    fn last_ended(&self) -> Option<Instant> {
        match self.0.last_ended.load(Ordering::Acquire) {
            0 => None,
            n => Some(self.0.since + Duration::from_nanos(n - 1)),
        }
    }

    fn ended_now(&self) {
        let after = Instant::now().saturating_duration_since(self.0.since);
        let nanos = u64::try_from(after.as_nanos()).unwrap_or(u64::MAX - 1);
        // `fetch_max`: two requests ending at once never move the time back.
        self.0.last_ended.fetch_max(nanos + 1, Ordering::AcqRel);
    }
}

/// One open exchange (not a `GET`), until its response body is dropped: a `POST` counted in
/// [`Exchanges::open`] with its delivery tracked, or another request whose end is noted.
struct Open {
    exchanges: Exchanges,
    /// The `POST`'s number among the deliveries, and its delivery.
    post: Option<(u64, Delivery)>,
}

impl Open {
    fn new(exchanges: &Exchanges, post: bool) -> Self {
        let post = post.then(|| {
            let counts = &exchanges.0;
            counts.open.fetch_add(1, Ordering::AcqRel);
            let number = counts.next.fetch_add(1, Ordering::Relaxed);
            let delivery = Delivery::new();
            counts
                .deliveries
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(number, delivery.clone());
            (number, delivery)
        });
        Self {
            exchanges: exchanges.clone(),
            post,
        }
    }

    fn delivery(&self) -> Option<Delivery> {
        self.post.as_ref().map(|(_, d)| d.clone())
    }

    /// Its response body ended: the answer was handed whole to the connection.
    fn delivered(&self) {
        if let Some((_, delivery)) = &self.post {
            delivery.delivered();
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.exchanges.ended_now();
        if let Some((number, delivery)) = self.post.take() {
            self.exchanges
                .0
                .deliveries
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&number);
            self.exchanges.0.open.fetch_sub(1, Ordering::AcqRel);
            // Dropped before its end (the client left, the connection broke, the server
            // stopped): not delivered.
            delivery.lost();
        }
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
        let mut this = self.project();
        let polled = this.inner.as_mut().poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => this.inner.is_end_stream(),
            _ => false,
        };
        if ended && let Some(open) = this.open.as_ref() {
            open.delivered();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The middleware: attaches a [`CallerGone`] token and cancels it when the exchange ends;
/// counts a `POST` in `exchanges` until its response body is sent or dropped, and attaches
/// its [`Delivery`].
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
    let method = request.method().clone();
    let open = (method != axum::http::Method::GET)
        .then(|| Open::new(&exchanges, method == axum::http::Method::POST));
    if let Some(delivery) = open.as_ref().and_then(Open::delivery) {
        request.extensions_mut().insert(delivery);
    }
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

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::routing::post;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// A server whose `POST /` registers a count of lost answers on its [`Delivery`] and
    /// answers `hello`, then (when `endless`) a ping every 20 ms, never ending.
    async fn serve(endless: bool) -> (crate::server::Server, Exchanges, Arc<AtomicUsize>) {
        let lost = Arc::new(AtomicUsize::new(0));
        let exchanges = Exchanges::default();
        let counted = lost.clone();
        let app = Router::new()
            .route(
                "/",
                post(
                    move |axum::Extension(delivery): axum::Extension<Delivery>| {
                        let counted = counted.clone();
                        async move {
                            delivery.on_lost(move || {
                                counted.fetch_add(1, Ordering::SeqCst);
                            });
                            if !endless {
                                return Body::from("hello");
                            }
                            let pings = futures::stream::unfold(true, |first| async move {
                                if !first {
                                    tokio::time::sleep(Duration::from_millis(20)).await;
                                }
                                Some((Ok::<_, std::io::Error>(Bytes::from("hello\n")), false))
                            });
                            Body::from_stream(pings)
                        }
                    },
                ),
            )
            .layer(axum::middleware::from_fn_with_state(
                exchanges.clone(),
                watch_caller,
            ));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = crate::server::Server::start(
            listener,
            app,
            CancellationToken::new(),
            Duration::from_secs(5),
        )
        .unwrap();
        (server, exchanges, lost)
    }

    async fn post_to(server: &crate::server::Server) -> TcpStream {
        let mut tcp = TcpStream::connect(server.addr).await.unwrap();
        tcp.write_all(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        tcp
    }

    /// Reads from `tcp` until `needle` has come (hang guard: 5 s).
    async fn read_until(tcp: &mut TcpStream, needle: &str) -> String {
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        tokio::time::timeout(Duration::from_secs(5), async {
            while !String::from_utf8_lossy(&seen).contains(needle) {
                let n = tcp.read(&mut buf).await.unwrap();
                assert!(n > 0, "closed before {needle:?}");
                seen.extend_from_slice(&buf[..n]);
            }
        })
        .await
        .expect("it came");
        String::from_utf8_lossy(&seen).into_owned()
    }

    #[tokio::test]
    async fn an_answer_whose_body_ended_is_delivered() {
        let (server, exchanges, lost) = serve(false).await;
        let mut tcp = post_to(&server).await;
        read_until(&mut tcp, "hello").await;
        assert!(exchanges.settled(Duration::from_secs(5)).await);
        assert_eq!(exchanges.abandon(), 0, "nothing is open");
        assert_eq!(lost.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn an_answer_whose_body_was_dropped_before_its_end_is_lost_once() {
        let (server, exchanges, lost) = serve(true).await;
        let mut tcp = post_to(&server).await;
        read_until(&mut tcp, "hello").await;
        assert_eq!(exchanges.open(), 1);
        drop(tcp);
        assert!(exchanges.settled(Duration::from_secs(5)).await);
        assert_eq!(lost.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_answer_the_shutdown_gives_up_on_is_lost_at_once_and_only_once() {
        let (server, exchanges, lost) = serve(true).await;
        let mut tcp = post_to(&server).await;
        read_until(&mut tcp, "hello").await;
        assert_eq!(exchanges.abandon(), 1);
        assert_eq!(lost.load(Ordering::SeqCst), 1);
        drop(tcp);
        assert!(exchanges.settled(Duration::from_secs(5)).await);
        assert_eq!(
            lost.load(Ordering::SeqCst),
            1,
            "not again when its body is dropped"
        );
    }

    #[tokio::test]
    async fn a_client_asking_again_keeps_the_server_lingering_until_it_is_quiet() {
        let (server, exchanges, _) = serve(false).await;
        let begun = Instant::now();
        exchanges
            .linger(Duration::from_millis(300), Duration::from_secs(5))
            .await;
        assert!(
            begun.elapsed() < Duration::from_millis(100),
            "nothing came: no wait"
        );
        let mut tcp = post_to(&server).await;
        read_until(&mut tcp, "hello").await;
        assert!(exchanges.settled(Duration::from_secs(5)).await);
        let begun = Instant::now();
        exchanges
            .linger(Duration::from_millis(300), Duration::from_secs(5))
            .await;
        let waited = begun.elapsed();
        assert!(
            waited >= Duration::from_millis(200) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
    }

    #[tokio::test]
    async fn the_last_end_is_none_then_the_latest_of_the_ends() {
        let exchanges = Exchanges::default();
        assert_eq!(exchanges.last_ended(), None);
        let before = Instant::now();
        exchanges.ended_now();
        let first = exchanges.last_ended().expect("an end was noted");
        assert!(first >= before && first <= Instant::now(), "{first:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
        exchanges.ended_now();
        let second = exchanges.last_ended().expect("an end was noted");
        assert!(
            second >= first + Duration::from_millis(5),
            "{first:?} {second:?}"
        );
    }
}
