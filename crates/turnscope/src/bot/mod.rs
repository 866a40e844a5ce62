//! Bots: the standard pipeline (input → user aggregator → model → [your processors] →
//! output → assistant aggregator) around a model client and a set of tools, and the
//! [`BotSession`] that runs one conversation on it.

pub(crate) mod aggregators;
pub(crate) mod collector;
pub mod context;
mod fault_log;
pub(crate) mod llm;
pub mod session;
pub mod settings;
pub mod turn;
pub(crate) mod wire;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

pub use collector::TurnBoard;
pub use context::{Context, Message};
pub use session::BotSession;
pub use settings::BotSettings;
pub use settings::TurnLimits;
pub use turn::{Turn, TurnEnd, TurnRecord, TurnSignal};

use crate::model::ModelClient;
use crate::pipeline::{Frame, Link, Observer, Pipeline, Processor};
use crate::tools::{SessionControl, Toolbox, Tools, ToolsFactory};
use settings::SharedSettings;

/// Makes a fresh instance of a user processor for each session.
pub(crate) type ProcessorFactory = Arc<dyn Fn() -> Box<dyn Processor> + Send + Sync>;

/// A bot definition: cheap to clone, opens any number of sessions.
#[derive(Clone)]
pub struct Bot {
    inner: Arc<BotInner>,
}

struct BotInner {
    /// What turns run on; a reload replaces it (see [`settings`]).
    settings: SharedSettings,
    name: Option<String>,
    description: Option<String>,
    tools: Arc<dyn Tools>,
    tools_factory: Option<Arc<dyn ToolsFactory>>,
    after_model: Vec<ProcessorFactory>,
}

/// Builds a [`Bot`].
pub struct BotBuilder {
    settings: BotSettings,
    inner: BotParts,
}

/// What a bot is made of besides its settings.
struct BotParts {
    name: Option<String>,
    description: Option<String>,
    tools: Arc<dyn Tools>,
    tools_factory: Option<Arc<dyn ToolsFactory>>,
    after_model: Vec<ProcessorFactory>,
}

impl BotBuilder {
    /// The system prompt sent first on every request.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.settings.system_prompt = Some(prompt.into());
        self
    }

    /// A greeting the bot opens each session with (returned by `start`, kept in the history).
    pub fn greeting(mut self, greeting: impl Into<String>) -> Self {
        self.settings.greeting = Some(greeting.into());
        self
    }

    /// What the bot is called and what it is for, as MCP clients show it (`start`/`chat`
    /// descriptions, the server's instructions), so two bots in one client are told apart.
    pub fn identity(mut self, name: Option<String>, description: Option<String>) -> Self {
        self.inner.name = name;
        self.inner.description = description;
        self
    }

    /// The tools the bot can call.
    pub fn tools(mut self, tools: Arc<dyn Tools>) -> Self {
        self.inner.tools = tools;
        self
    }

    /// Makes each session its own tools (for sources that must not be shared between
    /// sessions); sessions it gives `None` use the shared tools.
    pub fn tools_factory(mut self, factory: Arc<dyn ToolsFactory>) -> Self {
        self.inner.tools_factory = Some(factory);
        self
    }

    /// Round cap and tool timeout.
    pub fn limits(mut self, limits: TurnLimits) -> Self {
        self.settings.limits = limits;
        self
    }

    /// Keeps at most `messages` history messages per session, forgetting whole turns from the
    /// front (0, the default, keeps everything).
    pub(crate) fn history_window(mut self, messages: usize) -> Self {
        self.settings.history_window = messages;
        self
    }

    /// Adds a processor of your own between the model and the output, made fresh per session.
    pub fn processor(
        mut self,
        make: impl Fn() -> Box<dyn Processor> + Send + Sync + 'static,
    ) -> Self {
        self.inner.after_model.push(Arc::new(make));
        self
    }

    /// The bot.
    pub fn build(self) -> Bot {
        let BotParts {
            name,
            description,
            tools,
            tools_factory,
            after_model,
        } = self.inner;
        Bot {
            inner: Arc::new(BotInner {
                settings: settings::shared(self.settings),
                name,
                description,
                tools,
                tools_factory,
                after_model,
            }),
        }
    }
}

impl Bot {
    /// Starts building a bot that talks to `model`; it has no tools until given some.
    pub fn builder(model: ModelClient) -> BotBuilder {
        BotBuilder {
            settings: BotSettings::new(model),
            inner: BotParts {
                name: None,
                description: None,
                tools: Arc::new(Toolbox::new()),
                tools_factory: None,
                after_model: Vec::new(),
            },
        }
    }

    /// The bot's tools.
    pub fn tools(&self) -> &Arc<dyn Tools> {
        &self.inner.tools
    }

    /// The greeting a session opened now starts with, if there is one.
    pub fn greeting(&self) -> Option<String> {
        self.inner.settings.load().greeting.clone()
    }

    /// The bot's configured name (`[bot] name`), if it has one.
    pub fn name(&self) -> Option<&str> {
        self.inner.name.as_deref()
    }

    /// What the bot is for (`[bot] description`), if configured.
    pub fn description(&self) -> Option<&str> {
        self.inner.description.as_deref()
    }

    /// The model client a turn started now uses.
    pub fn model(&self) -> ModelClient {
        self.inner.settings.load().model.clone()
    }

    /// The round cap and tool timeout of a turn started now.
    pub fn limits(&self) -> TurnLimits {
        self.inner.settings.load().limits
    }

    /// The settings a turn started now runs on.
    pub fn settings(&self) -> Arc<BotSettings> {
        self.inner.settings.load_full()
    }

    /// Replaces the settings: every session's next turn runs on `settings` (a turn in flight
    /// finishes on the ones it started with); sessions opened from now on greet with its
    /// greeting.
    pub fn set_settings(&self, settings: BotSettings) {
        self.inner.settings.store(Arc::new(settings));
    }

    /// Opens one conversation: builds and starts its pipeline.
    pub fn open(&self, observer: Observer) -> BotSession {
        self.open_with(observer, None)
    }

    /// Opens a conversation that continues a stored one: its history (the greeting is in it
    /// when not forgotten) and its turn numbering, on a fresh pipeline.
    pub fn reopen(&self, observer: Observer, restored: Restored) -> BotSession {
        self.open_with(observer, Some(restored))
    }

    fn open_with(&self, observer: Observer, restored: Option<Restored>) -> BotSession {
        let inner = &self.inner;
        let settings = inner.settings.load_full();
        let control = SessionControl::new();
        let own_tools = inner
            .tools_factory
            .as_ref()
            .and_then(|f| f.open(observer.session));
        let tools = own_tools.clone().unwrap_or_else(|| inner.tools.clone());
        let mut context =
            Context::new(settings.system_prompt.clone()).with_window(settings.history_window);
        let (next_turn, greeting) = match restored {
            Some(restored) => {
                context.restore(restored.messages, restored.forgotten);
                (restored.next_turn, restored.greeting)
            }
            None => {
                if let Some(greeting) = &settings.greeting {
                    context.push_assistant(greeting.clone());
                }
                (1, settings.greeting.clone())
            }
        };
        // The session's cell starts on the same settings (no copy of the prompt per session).
        let turn_settings = Arc::new(arc_swap::ArcSwap::new(settings.clone()));
        let context = Arc::new(Mutex::new(context));
        let board = Arc::new(TurnBoard::default());
        let mut processors: Vec<Box<dyn Processor>> = vec![
            Box::new(Input),
            Box::new(aggregators::UserAggregator::new(context.clone())),
            Box::new(
                llm::ModelProcessor::new(turn_settings.clone(), tools, context.clone())
                    .with_control(control.clone()),
            ),
        ];
        processors.extend(inner.after_model.iter().map(|make| make()));
        processors.push(Box::new(collector::TurnCollector::new(board.clone())));
        processors.push(Box::new(aggregators::AssistantAggregator::new(
            context.clone(),
        )));
        let pipeline = Pipeline::start(processors, observer.clone());
        BotSession::new(pipeline, board, context, observer, next_turn)
            .with_control(control, own_tools)
            .with_settings(inner.settings.clone(), turn_settings, greeting)
    }
}

/// What a reopened conversation continues from (see [`Bot::reopen`]).
#[derive(Debug, Clone, Default)]
pub struct Restored {
    /// The history messages still in the window, oldest first.
    pub messages: Vec<Message>,
    /// How many messages before them the window had forgotten.
    pub forgotten: u64,
    /// The id of the next turn.
    pub next_turn: u64,
    /// The greeting the stored session opened with.
    pub greeting: Option<String>,
}

/// The pipeline's first stage: where lines enter. It passes every frame on.
struct Input;

#[async_trait]
impl Processor for Input {
    fn name(&self) -> &'static str {
        "input"
    }

    async fn process(&mut self, frame: Frame, link: &Link) {
        link.push(frame);
    }
}
