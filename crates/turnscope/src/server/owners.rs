//! Which MCP session each response stream belongs to, so a stream is resumed only from the
//! session that opened it (the spec ties a stream to its session).
//!
//! rmcp's [`EventStore`](rmcp::transport::streamable_http_server::session::EventStore) is
//! told a stream's id and events, never its session, and its `resume` passes the store only
//! the `Last-Event-ID`: as shipped, any session that learned an event id could resume
//! another's stream. rmcp offers no hook for this, so [`OwnedStreams`] wraps its
//! `LocalSessionManager` (each method hands on to it) and notes the session of each request
//! stream as its first event (the priming one, whose id names the stream) goes out; the
//! `jsonrpc` layer then refuses a resume from any other session.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use rmcp::transport::worker::WorkerTransport;

use super::resume::ReplayStore;

/// rmcp's local session manager, noting in the replay store which session opened each
/// request stream.
pub(crate) struct OwnedStreams {
    inner: Arc<LocalSessionManager>,
    replay: Arc<ReplayStore>,
}

impl OwnedStreams {
    /// Wraps `inner`, whose event store is `replay`.
    pub(crate) fn new(inner: Arc<LocalSessionManager>, replay: Arc<ReplayStore>) -> Self {
        Self { inner, replay }
    }
}

impl SessionManager for OwnedStreams {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.inner.create_stream(id, message).await?;
        let replay = self.replay.clone();
        let session = id.clone();
        let mut first = true;
        Ok(stream.inspect(move |event| {
            if std::mem::take(&mut first)
                && let Some(event_id) = &event.event_id
            {
                replay.claim(event_id, &session);
            }
        }))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}
