//! Tools a bot can call: the [`Tools`] trait the model processor uses, tool specs and call
//! records, Rust function tools ([`FnTool`]) and a [`Toolbox`] that holds them. Other sources are
//! submodules: [`registry`] merges built-ins, own tools and MCP servers ([`mcp_source`]);
//! [`policy`] decides which servers may be reached at all.

pub mod builtin;
pub mod context;
pub mod hand;
pub mod limits;
pub(crate) mod mcp_content;
pub mod mcp_source;
pub mod merge;
pub mod openai_shape;
pub mod policy;
pub mod portability;
pub mod reconfigure;
pub mod registry;
pub mod timed;
pub mod unanswered;
pub mod validate;

pub use context::{CallContext, SessionControl};
pub use unanswered::Unanswered;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool as the model sees it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolSpec {
    /// Unique name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments (an object schema).
    pub input_schema: Value,
    /// Where it comes from: `builtin`, `rust`, or an MCP server's name.
    pub source: String,
}

/// One function call the model asked for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolCall {
    /// The model's id for the call (echoed in the tool result message).
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as the JSON text the model streamed.
    pub arguments: String,
}

#[cfg(test)]
impl ToolCall {
    /// A call `id` of `name` with no arguments (`{}`), for tests.
    pub(crate) fn bare(id: &str, name: &str) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
        }
    }
}

/// What a tool call gave back, as the model will read it.
///
/// `text` is what the model reads. Tools that return more than text (MCP servers: images,
/// resources, several blocks, `structuredContent`) also keep it typed in `parts` and
/// `structured`, for callers that can use it (the OpenAI bridge's `/v1/execute`); the model
/// path reads only `text`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolOutcome {
    /// The result text (or the error message).
    pub text: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// The result's content blocks as MCP JSON (`{"type":"image","mimeType":..,"data":..}`),
    /// when `text` alone does not say everything; empty for plain text results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Value>,
    /// The result's `structuredContent`, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// Set when the tool never answered and `text` was written on its behalf (boxed: rare,
    /// and an outcome travels on every call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unanswered: Option<Box<Unanswered>>,
}

impl ToolOutcome {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
            parts: Vec::new(),
            structured: None,
            unanswered: None,
        }
    }

    /// A failed call, with a message for the model.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
            parts: Vec::new(),
            structured: None,
            unanswered: None,
        }
    }

    /// A call the tool never answered (`why`), with `text` for the model.
    pub fn unanswered(why: Unanswered, text: impl Into<String>) -> Self {
        Self {
            unanswered: Some(Box::new(why)),
            ..Self::error(text)
        }
    }

    /// The same outcome carrying typed content: `parts` (MCP content blocks) and
    /// `structured` (`structuredContent`).
    pub(crate) fn with_content(mut self, parts: Vec<Value>, structured: Option<Value>) -> Self {
        self.parts = parts;
        self.structured = structured;
        self
    }
}

/// A finished call: what was asked, what came back, how long it took.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolCallRecord {
    /// The call.
    pub call: ToolCall,
    /// Its outcome.
    pub outcome: ToolOutcome,
    /// How long it ran.
    pub duration: Duration,
}

impl ToolCallRecord {
    /// The call as the event the bus carries, of turn `turn` of session `session`: started at
    /// `started_us` (0 when unknown), `retold` when told again with its kept turn (a viewer's
    /// welcome, an export) rather than as it finished.
    pub fn event(
        &self,
        session: u64,
        turn: u64,
        started_us: u64,
        retold: bool,
    ) -> crate::observe::event::ToolCallEvent {
        let failed = self.outcome.is_error;
        crate::observe::event::ToolCallEvent {
            session,
            turn,
            name: self.call.name.clone(),
            duration_us: self.duration.as_micros() as u64,
            result_bytes: self.outcome.text.len(),
            error: failed.then(|| self.outcome.text.clone()),
            arguments: self.call.arguments.clone(),
            result: if failed {
                String::new()
            } else {
                crate::observe::event::carried(&self.outcome.text)
            },
            started_us,
            retold,
            by_hand: false,
        }
    }

    /// One line for the console: `name(args) -> 12 B in 3 ms` or `... -> error: msg`.
    pub fn summary(&self) -> String {
        let took = self.duration.as_secs_f64() * 1000.0;
        if self.outcome.is_error {
            format!(
                "{}({}) -> error: {} ({took:.1} ms)",
                self.call.name, self.call.arguments, self.outcome.text
            )
        } else {
            format!(
                "{}({}) -> {} B ({took:.1} ms)",
                self.call.name,
                self.call.arguments,
                self.outcome.text.len()
            )
        }
    }

    /// A record for the library's unit tests.
    #[cfg(test)]
    pub(crate) fn for_test(name: &str) -> Self {
        Self {
            call: ToolCall {
                id: "call_0".into(),
                name: name.into(),
                arguments: "{}".into(),
            },
            outcome: ToolOutcome::ok("ok"),
            duration: Duration::ZERO,
        }
    }
}

/// The tools one bot can call. The model processor lists them on every request and calls
/// them by name; later sources (MCP servers) implement this too.
#[async_trait]
pub trait Tools: Send + Sync + 'static {
    /// Every tool, in a stable order.
    fn specs(&self) -> Arc<[ToolSpec]>;

    /// Calls tool `name` with parsed arguments. Unknown tools and failures are error outcomes,
    /// never panics.
    async fn call(&self, name: &str, arguments: Value) -> ToolOutcome;

    /// Calls tool `name` inside a session: `cx` says which session and turn, and lets a tool
    /// such as `end_session` act on the session. The default ignores `cx`.
    async fn call_in(&self, name: &str, arguments: Value, cx: &CallContext) -> ToolOutcome {
        let _ = cx;
        self.call(name, arguments).await
    }

    /// Waits until tools still being discovered for this set are there, or given up on (a
    /// bounded wait). The model processor calls it before each turn; the default is ready.
    async fn ready(&self) {}

    /// Releases what this set holds (connections opened for one session). Called once, when
    /// the session that owns the set ends; the default does nothing.
    async fn close(&self) {}

    /// A signal that moves whenever the tool list may have changed (a server's list was
    /// refreshed), for those who push changes on (the Xiaozhi bridge's `list_changed`).
    /// Compare [`specs`](Tools::specs) before and after: a move need not change them. The
    /// default, `None`, is a set that never changes.
    fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }

    /// The tools as they are now, fixed: what one turn offers and calls from its first model
    /// request to its end, so a source added, changed or removed meanwhile (a config reload, a
    /// server's new list) applies from the next turn and a removed one stays callable until
    /// then. The default, `None`, is a set that is its own fixed view.
    fn pinned(&self) -> Option<Arc<dyn Tools>> {
        None
    }

    /// Why each of its tool sources that offers nothing now is not serving (an MCP server
    /// still connecting, or down and being retried), for the answer to a name no tool has:
    /// its tool may be one of theirs. The default, a set with no such sources, says nothing.
    fn not_serving(&self) -> Vec<String> {
        Vec::new()
    }

    /// The tools of the MCP servers named in `sources` alone, as a set of their own: merged
    /// among themselves only, so no built-in or other server takes a name from them (what a
    /// bridge relaying those servers offers). The default, `None`, is a set that cannot say
    /// (its caller then filters [`specs`](Tools::specs) by source).
    fn of_sources(&self, sources: &std::collections::BTreeSet<String>) -> Option<Arc<dyn Tools>> {
        let _ = sources;
        None
    }
}

/// Makes the tools of each new session, for tool sources that must not be shared between
/// sessions (MCP servers with `scope = "session"`).
pub trait ToolsFactory: Send + Sync + 'static {
    /// Tools for session `session`; `None` = the bot's shared tools. The session calls
    /// [`Tools::close`] on what this returns when it ends.
    fn open(&self, session: u64) -> Option<Arc<dyn Tools>>;
}

/// The future a [`FnTool`] returns.
pub(crate) type ToolFuture = Pin<Box<dyn Future<Output = Result<String, String>> + Send>>;

/// A tool written as a Rust function.
pub struct FnTool {
    spec: ToolSpec,
    run: Box<dyn Fn(Value, CallContext) -> ToolFuture + Send + Sync>,
}

impl FnTool {
    /// A tool named `name` whose arguments follow `input_schema`; `run` gets the arguments and
    /// returns the result text or an error message.
    pub fn new<F, Fut>(name: &str, description: &str, input_schema: Value, run: F) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, String>> + Send + 'static,
    {
        Self::with_context(name, description, input_schema, move |args, _| run(args))
    }

    /// Like [`FnTool::new`], for a tool that needs to know the session it runs in (see
    /// [`CallContext`]).
    pub fn with_context<F, Fut>(name: &str, description: &str, input_schema: Value, run: F) -> Self
    where
        F: Fn(Value, CallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, String>> + Send + 'static,
    {
        Self {
            spec: ToolSpec {
                name: name.into(),
                description: description.into(),
                input_schema,
                source: "rust".into(),
            },
            run: Box::new(move |args, cx| Box::pin(run(args, cx))),
        }
    }

    /// Runs the tool: the result text, or its error message as an error outcome.
    pub async fn run(&self, arguments: Value, cx: &CallContext) -> ToolOutcome {
        match (self.run)(arguments, cx.clone()).await {
            Ok(text) => ToolOutcome::ok(text),
            Err(message) => ToolOutcome::error(message),
        }
    }

    /// Marks where the tool comes from (`builtin`, `rust`, ...).
    pub(crate) fn with_source(mut self, source: &str) -> Self {
        self.spec.source = source.into();
        self
    }

    /// The tool's spec.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

/// A fixed set of tools: function tools keyed by name, first one registered wins.
#[derive(Default)]
pub struct Toolbox {
    tools: Vec<FnTool>,
    by_name: HashMap<String, usize>,
    specs: Arc<[ToolSpec]>,
    skipped: Vec<String>,
}

impl Toolbox {
    /// An empty toolbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; a name already taken is skipped (and remembered in [`Toolbox::skipped`]).
    pub fn add(&mut self, tool: FnTool) -> &mut Self {
        let name = tool.spec.name.clone();
        if self.by_name.contains_key(&name) {
            tracing::warn!(tool = %name, source = %tool.spec.source, "tool name already taken; skipped");
            self.skipped
                .push(format!("{name} (from {})", tool.spec.source));
            return self;
        }
        self.by_name.insert(name, self.tools.len());
        self.tools.push(tool);
        self.specs = self.tools.iter().map(|t| t.spec.clone()).collect();
        self
    }

    /// Builder form of [`Toolbox::add`].
    pub fn with(mut self, tool: FnTool) -> Self {
        self.add(tool);
        self
    }

    /// Tools that were skipped because their name was taken.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }
}

#[async_trait]
impl Tools for Toolbox {
    fn specs(&self) -> Arc<[ToolSpec]> {
        self.specs.clone()
    }

    async fn call(&self, name: &str, arguments: Value) -> ToolOutcome {
        self.call_in(name, arguments, &CallContext::detached())
            .await
    }

    async fn call_in(&self, name: &str, arguments: Value, cx: &CallContext) -> ToolOutcome {
        let Some(&i) = self.by_name.get(name) else {
            let known: Vec<&str> = self.tools.iter().map(|t| t.spec.name.as_str()).collect();
            return ToolOutcome::error(format!(
                "unknown tool `{name}`; the tools offered here are: {}. Call one of those.",
                if known.is_empty() {
                    "no tools".to_string()
                } else {
                    known.join(", ")
                }
            ));
        };
        self.tools[i].run(arguments, cx).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn echo(name: &str) -> FnTool {
        FnTool::new(name, "echo", json!({"type": "object"}), |args| async move {
            Ok(args.to_string())
        })
    }

    #[tokio::test]
    async fn first_registered_name_wins_and_unknown_names_are_errors() {
        let tools = Toolbox::new()
            .with(echo("a"))
            .with(echo("b"))
            .with(echo("a").with_source("late"));
        assert_eq!(tools.specs().len(), 2);
        assert_eq!(tools.skipped(), ["a (from late)"]);
        assert_eq!(
            tools.call("a", json!({"x": 1})).await,
            ToolOutcome::ok("{\"x\":1}")
        );
        let unknown = tools.call("zzz", json!({})).await;
        assert!(unknown.is_error);
        assert!(unknown.text.contains("unknown tool `zzz`") && unknown.text.contains("a, b"));
    }
}
