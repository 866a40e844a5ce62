//! Progress of a relayed request, from the MCP server back to the endpoint. rmcp puts its own
//! `progressToken` on every request it sends, so `ProgressRoutes` maps rmcp's token back to the
//! request, and the report reaches the endpoint under the endpoint's own token, only when it gave
//! one (`endpoint_token`, `progress_frame`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use serde_json::Value;
use tokio::sync::mpsc;

use super::jsonrpc;

/// Where a request's progress reports go: the `params` of each `notifications/progress`
/// (`progress`, and `total` / `message` when given), as the server sent them.
pub type ProgressSink = mpsc::Sender<Value>;

/// Reports one request may have queued before the socket writes them; more are dropped
/// (progress is advisory, the result is what counts).
pub(crate) const PROGRESS_QUEUE: usize = 32;

/// Reports kept for a token not registered yet (a server may report before the relay has
/// registered the request it just sent).
const EARLY_KEPT: usize = 16;

#[derive(Default)]
struct Table {
    routes: HashMap<ProgressToken, ProgressSink>,
    early: VecDeque<ProgressNotificationParam>,
}

/// rmcp progress tokens of the requests in flight on one upstream session → their sinks.
#[derive(Clone, Default)]
pub(crate) struct ProgressRoutes {
    table: Arc<Mutex<Table>>,
}

/// Removes its route when dropped (the request ended).
pub(crate) struct Route {
    routes: ProgressRoutes,
    token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes.lock().routes.remove(&self.token);
    }
}

impl ProgressRoutes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends the reports for `token` to `sink` until the returned [`Route`] is dropped;
    /// reports that arrived for `token` before this call are delivered first.
    pub(crate) fn register(&self, token: ProgressToken, sink: ProgressSink) -> Route {
        let mut table = self.lock();
        let early = std::mem::take(&mut table.early);
        for param in early {
            if param.progress_token == token {
                send(&sink, &param);
            } else {
                table.early.push_back(param);
            }
        }
        table.routes.insert(token.clone(), sink);
        Route {
            routes: self.clone(),
            token,
        }
    }

    /// Hands one report from the server to its request's sink (never waits: a full sink
    /// drops it), or keeps it a while if no request holds its token yet.
    pub(crate) fn deliver(&self, param: ProgressNotificationParam) {
        let mut table = self.lock();
        match table.routes.get(&param.progress_token) {
            Some(sink) => send(sink, &param),
            None => {
                if table.early.len() == EARLY_KEPT {
                    table.early.pop_front();
                }
                table.early.push_back(param);
            }
        }
    }
}

fn send(sink: &ProgressSink, param: &ProgressNotificationParam) {
    if let Ok(value) = serde_json::to_value(param) {
        let _ = sink.try_send(value);
    }
}

/// The endpoint's `params._meta.progressToken`, if its request carried one (a string or a
/// number, as MCP allows).
pub(crate) fn endpoint_token(params: Option<&Value>) -> Option<Value> {
    params?
        .get("_meta")?
        .get("progressToken")
        .filter(|t| t.is_string() || t.is_number())
        .cloned()
}

/// The `notifications/progress` frame for the endpoint: the server's report under the
/// endpoint's `token`.
pub(crate) fn progress_frame(token: &Value, report: Value) -> String {
    let mut params = match report {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    params.insert("progressToken".into(), token.clone());
    jsonrpc::notification_frame("notifications/progress", Some(&Value::Object(params)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;
    use serde_json::json;

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    #[tokio::test]
    async fn reports_reach_the_request_that_holds_the_token_even_early_ones() {
        let routes = ProgressRoutes::default();
        routes.deliver(ProgressNotificationParam::new(token(2), 1.0));
        routes.deliver(ProgressNotificationParam::new(token(9), 5.0));
        let (tx, mut rx) = mpsc::channel(PROGRESS_QUEUE);
        let route = routes.register(token(2), tx);
        routes.deliver(ProgressNotificationParam::new(token(2), 2.0).with_total(4.0));
        routes.deliver(ProgressNotificationParam::new(token(3), 7.0));
        assert_eq!(rx.recv().await.unwrap()["progress"], 1.0);
        let second = rx.recv().await.unwrap();
        assert_eq!(
            (second["progress"].clone(), second["total"].clone()),
            (json!(2.0), json!(4.0))
        );
        assert!(
            rx.try_recv().is_err(),
            "other tokens' reports are not this request's"
        );
        drop(route);
        assert!(routes.lock().routes.is_empty());
        assert_eq!(routes.lock().early.len(), 2, "token 9 and 3 wait, bounded");
    }

    #[test]
    fn only_the_endpoints_own_token_is_used() {
        let with = json!({"name": "slow", "_meta": {"progressToken": "p-1", "clientId": "c"}});
        assert_eq!(endpoint_token(Some(&with)), Some(json!("p-1")));
        assert_eq!(
            endpoint_token(Some(&json!({"_meta": {"progressToken": 7}}))),
            Some(json!(7))
        );
        assert_eq!(
            endpoint_token(Some(&json!({"_meta": {"progressToken": null}}))),
            None
        );
        assert_eq!(endpoint_token(Some(&json!({"name": "slow"}))), None);
        assert_eq!(endpoint_token(None), None);
        let frame = progress_frame(
            &json!("p-1"),
            json!({"progressToken": 0, "progress": 100.0, "total": 300.0, "message": "m"}),
        );
        let frame: Value = serde_json::from_str(&frame).unwrap();
        assert_eq!(
            frame,
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": "p-1", "progress": 100.0, "total": 300.0, "message": "m"}})
        );
    }
}
