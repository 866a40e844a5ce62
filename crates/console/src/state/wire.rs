//! What crossed the wire, as the console keeps it: each model request of a turn (its delta,
//! the answer, usage, finish reason, status), the book that puts requests together again,
//! the tokens per session and in all, and every `/mcp` exchange with its messages.
//!
//! Folded from events alone (live and in replay), sharing each event with the bus rather than
//! copying it. Bounded by counts ([`REQUESTS_KEPT`], [`EXCHANGES_KEPT`], the book's own) and
//! by the console's byte budget (its shares for exchanges, requests and their messages), the
//! oldest dropped first and counted; a turn's requests are found through an index, never by
//! walking every request kept.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use turnscope::observe::Event;
use turnscope::observe::rebuild::RequestBook;
use turnscope::observe::wire::{McpExchange, WireAnswer, WireRequest};
use turnscope::observe::{ModelResponseInfo, TokenUsage};

use super::TurnView;
use super::budget::{Budget, Part};
use super::kept::Kept;

/// Model requests kept (the oldest is forgotten first).
pub const REQUESTS_KEPT: usize = 2_000;
/// MCP exchanges kept.
pub const EXCHANGES_KEPT: usize = 1_000;
/// Sessions whose token tallies are kept past the sessions listed (a replay's events may name
/// sessions it never opened); the lowest-numbered is forgotten first.
pub const TALLIES_KEPT: usize = 4_096;

/// One model request as recorded: its figures, and the event it came in (shared with the
/// bus), which holds the request, the answer and what the response reported.
#[derive(Debug, Clone)]
pub struct ModelCall {
    /// Session number.
    pub session: u64,
    /// Turn id.
    pub turn: u64,
    event: Arc<Event>,
}

impl ModelCall {
    /// A call for a `ModelRequest` event; `None` for any other event.
    pub fn new(event: Arc<Event>) -> Option<ModelCall> {
        match &*event {
            Event::ModelRequest { session, turn, .. } => Some(ModelCall {
                session: *session,
                turn: *turn,
                event,
            }),
            _ => None,
        }
    }

    fn parts(&self) -> Parts<'_> {
        match &*self.event {
            Event::ModelRequest {
                at_us,
                total_us,
                first_piece_us,
                error,
                response,
                request,
                answer,
                ..
            } => Parts {
                at_us: *at_us,
                total_us: *total_us,
                first_piece_us: *first_piece_us,
                error: error.as_deref(),
                info: response,
                request: request.as_deref(),
                answer: answer.as_deref(),
            },
            // `new` admits model requests only.
            _ => Parts {
                at_us: 0,
                total_us: 0,
                first_piece_us: None,
                error: None,
                info: &NO_INFO,
                request: None,
                answer: None,
            },
        }
    }

    /// When it started, µs since the epoch.
    pub fn at_us(&self) -> u64 {
        self.parts().at_us
    }

    /// Its whole time, µs.
    pub fn total_us(&self) -> u64 {
        self.parts().total_us
    }

    /// Time to the first piece of text, µs.
    pub fn first_piece_us(&self) -> Option<u64> {
        self.parts().first_piece_us
    }

    /// The error, when it failed.
    pub fn error(&self) -> Option<&str> {
        self.parts().error
    }

    /// Status, usage, finish reason, model, id.
    pub fn info(&self) -> &ModelResponseInfo {
        self.parts().info
    }

    /// The request's delta (none when recording was off).
    pub fn request(&self) -> Option<&WireRequest> {
        self.parts().request
    }

    /// What the model answered.
    pub fn answer(&self) -> Option<&WireAnswer> {
        self.parts().answer
    }

    /// About how many bytes it holds.
    pub fn bytes(&self) -> usize {
        let p = self.parts();
        std::mem::size_of::<Event>()
            + p.error.map_or(0, str::len)
            + p.info.model.as_ref().map_or(0, String::len)
            + p.info.response_id.as_ref().map_or(0, String::len)
            + p.info.finish_reason.as_ref().map_or(0, String::len)
            + p.request.map_or(0, WireRequest::heap_bytes)
            + p.answer.map_or(0, WireAnswer::heap_bytes)
    }
}

struct Parts<'a> {
    at_us: u64,
    total_us: u64,
    first_piece_us: Option<u64>,
    error: Option<&'a str>,
    info: &'a ModelResponseInfo,
    request: Option<&'a WireRequest>,
    answer: Option<&'a WireAnswer>,
}

static NO_INFO: std::sync::LazyLock<ModelResponseInfo> =
    std::sync::LazyLock::new(ModelResponseInfo::default);

/// One `/mcp` exchange kept, sharing the bus's event.
#[derive(Debug, Clone)]
pub struct ExchangeRow {
    event: Arc<Event>,
}

impl ExchangeRow {
    /// A row for an `Mcp` event; `None` for any other event.
    pub fn new(event: Arc<Event>) -> Option<ExchangeRow> {
        matches!(*event, Event::Mcp(_)).then_some(ExchangeRow { event })
    }

    /// The exchange.
    pub fn exchange(&self) -> &McpExchange {
        match &*self.event {
            Event::Mcp(x) => x,
            // `new` admits MCP exchanges only.
            _ => &NO_EXCHANGE,
        }
    }
}

static NO_EXCHANGE: std::sync::LazyLock<McpExchange> =
    std::sync::LazyLock::new(McpExchange::default);

/// The console's record of the wire.
#[derive(Debug, Clone)]
pub struct Wire {
    /// Messages and tool sets, to put requests together again.
    pub book: RequestBook,
    calls: Kept<ModelCall>,
    /// The numbers of each turn's calls, in order.
    calls_by_turn: BTreeMap<(u64, u64), VecDeque<u64>>,
    exchanges: Kept<ExchangeRow>,
    tokens: BTreeMap<u64, TokenUsage>,
    /// Per session reopened from the store, the last of its kept turns whose tokens (from its
    /// record: their requests ran in an earlier process) are in its tally.
    restored_tallied: BTreeMap<u64, u64>,
    /// Tokens of every request seen.
    pub total: TokenUsage,
    /// µs spent streaming completions that reported usage (first piece to end), for tokens/s.
    streaming_us: u64,
    /// Completion tokens of those requests.
    streamed_tokens: u64,
}

impl Default for Wire {
    fn default() -> Self {
        Self::new(Budget::default())
    }
}

impl Wire {
    /// An empty record within `budget`'s shares.
    pub fn new(budget: Budget) -> Self {
        Self {
            book: RequestBook::with_max_bytes(budget.share(Part::Messages)),
            calls: Kept::new(REQUESTS_KEPT, budget.share(Part::Requests)),
            calls_by_turn: BTreeMap::new(),
            exchanges: Kept::new(EXCHANGES_KEPT, budget.share(Part::Exchanges)),
            tokens: BTreeMap::new(),
            restored_tallied: BTreeMap::new(),
            total: TokenUsage::default(),
            streaming_us: 0,
            streamed_tokens: 0,
        }
    }

    /// Takes in one model request (a `ModelRequest` event).
    pub fn on_model_request(&mut self, event: Arc<Event>) {
        let Some(call) = ModelCall::new(event) else {
            return;
        };
        if let Some(request) = call.request() {
            self.book.fold(call.session, request);
        }
        if let Some(usage) = &call.info().usage {
            self.tally_session(call.session, usage);
            self.total.add(usage);
            let streaming = call
                .total_us()
                .saturating_sub(call.first_piece_us().unwrap_or(0));
            if usage.completion_tokens > 0 && streaming > 0 {
                self.streaming_us = self.streaming_us.saturating_add(streaming);
                self.streamed_tokens = self.streamed_tokens.saturating_add(usage.completion_tokens);
            }
        }
        let key = (call.session, call.turn);
        let size = call.bytes();
        let (number, gone) = self.calls.push(call, size);
        self.calls_by_turn.entry(key).or_default().push_back(number);
        for old in gone {
            self.unindex(&old);
        }
    }

    fn unindex(&mut self, old: &ModelCall) {
        let key = (old.session, old.turn);
        if let Some(numbers) = self.calls_by_turn.get_mut(&key) {
            numbers.pop_front();
            if numbers.is_empty() {
                self.calls_by_turn.remove(&key);
            }
        }
    }

    /// Takes in one MCP exchange (an `Mcp` event).
    pub fn on_mcp(&mut self, event: Arc<Event>) {
        if let Some(row) = ExchangeRow::new(event) {
            let size = row.exchange().heap_bytes();
            self.exchanges.push(row, size);
        }
    }

    /// Keeps within `budget`'s shares (dropping the oldest when it shrank).
    pub fn set_budget(&mut self, budget: Budget) {
        for old in self.calls.set_max_bytes(budget.share(Part::Requests)) {
            self.unindex(&old);
        }
        self.exchanges.set_max_bytes(budget.share(Part::Exchanges));
        self.book.set_max_bytes(budget.share(Part::Messages));
    }

    /// The model requests of one turn, in order.
    pub fn calls_of(&self, session: u64, turn: u64) -> Vec<&ModelCall> {
        self.calls_by_turn
            .get(&(session, turn))
            .into_iter()
            .flatten()
            .filter_map(|n| self.calls.by_number(*n))
            .collect()
    }

    /// Model requests dropped to stay within the bounds.
    pub fn calls_dropped(&self) -> u64 {
        self.calls.dropped()
    }

    /// Bytes of the model requests kept.
    pub fn calls_bytes(&self) -> usize {
        self.calls.bytes()
    }

    /// Sessions with a token tally.
    pub fn sessions_tallied(&self) -> usize {
        self.tokens.len()
    }

    /// Tokens of one turn's requests (none when no request reported usage).
    pub fn turn_tokens(&self, session: u64, turn: u64) -> Option<TokenUsage> {
        let mut sum = None::<TokenUsage>;
        for c in self.calls_of(session, turn) {
            if let Some(u) = &c.info().usage {
                sum.get_or_insert_with(TokenUsage::default).add(u);
            }
        }
        sum
    }

    /// Adds tokens to a session's tally (a request's, or those of a turn told again, whose
    /// requests were not seen), not to the overall figures.
    pub fn tally_session(&mut self, session: u64, usage: &TokenUsage) {
        if !self.tokens.contains_key(&session) && self.tokens.len() >= TALLIES_KEPT {
            self.tokens.pop_first();
        }
        self.tokens.entry(session).or_default().add(usage);
    }

    /// Adds to `session`'s tally, once each, the tokens of its turns reopened from the store
    /// (the first `restored_turns`, whose records `turns` shows): their requests ran in an
    /// earlier process, so the row counted only the turns since the reopen (tour N).
    pub fn tally_restored(&mut self, session: u64, restored_turns: u64, turns: &[TurnView]) {
        let done = self.restored_tallied.get(&session).copied().unwrap_or(0);
        if restored_turns <= done {
            return;
        }
        for turn in turns
            .iter()
            .filter(|t| t.id > done && t.id <= restored_turns)
        {
            if let Some(usage) = &turn.usage {
                self.tally_session(session, usage);
            }
        }
        if !self.restored_tallied.contains_key(&session)
            && self.restored_tallied.len() >= TALLIES_KEPT
        {
            self.restored_tallied.pop_first();
        }
        self.restored_tallied.insert(session, restored_turns);
    }

    /// Tokens of one session's requests.
    pub fn session_tokens(&self, session: u64) -> Option<&TokenUsage> {
        self.tokens.get(&session)
    }

    /// Forgets what is kept per session of `session` (its row was forgotten): its token
    /// tally and its messages.
    pub fn forget(&mut self, session: u64) {
        self.tokens.remove(&session);
        self.restored_tallied.remove(&session);
        self.book.forget_session(session);
    }

    /// Completion tokens per second while streaming, over every request that reported usage.
    pub fn completion_rate(&self) -> Option<f64> {
        (self.streaming_us > 0)
            .then(|| self.streamed_tokens as f64 * 1e6 / self.streaming_us as f64)
    }

    /// The MCP exchanges kept, oldest first, numbered.
    pub fn exchanges(&self) -> &Kept<ExchangeRow> {
        &self.exchanges
    }
}

/// `prompt→completion` tokens in a few characters: `1.2k→340 tok`.
pub fn tokens_label(u: &TokenUsage) -> String {
    let mut s = format!(
        "{}→{} tok",
        crate::text::count(u.prompt_tokens),
        crate::text::count(u.completion_tokens)
    );
    if u.cached_tokens > 0 {
        s.push_str(&format!(
            " ({} cached)",
            crate::text::count(u.cached_tokens)
        ));
    }
    if u.reasoning_tokens > 0 {
        s.push_str(&format!(
            " ({} reasoning)",
            crate::text::count(u.reasoning_tokens)
        ));
    }
    s
}
