//! What crossed the wire, as the console keeps it: each model request of a turn (its delta,
//! the answer, usage, finish reason, status), the book that puts requests together again,
//! the tokens per session and in all, and every `/mcp` exchange with its messages.
//!
//! Folded from events alone (live and in replay). Bounded: [`REQUESTS_KEPT`] model requests,
//! [`EXCHANGES_KEPT`] MCP exchanges, and the book's own bounds.

use std::collections::{BTreeMap, VecDeque};

use turnscope::observe::rebuild::RequestBook;
use turnscope::observe::wire::{McpExchange, WireAnswer, WireRequest};
use turnscope::observe::{ModelResponseInfo, TokenUsage};

/// Model requests kept (the oldest is forgotten first).
pub const REQUESTS_KEPT: usize = 2_000;
/// MCP exchanges kept.
pub const EXCHANGES_KEPT: usize = 1_000;

/// One model request as recorded.
#[derive(Debug, Clone)]
pub struct ModelCall {
    /// Session number.
    pub session: u64,
    /// Turn id.
    pub turn: u64,
    /// When it started, µs since the epoch.
    pub at_us: u64,
    /// Its whole time, µs.
    pub total_us: u64,
    /// Time to the first piece of text, µs.
    pub first_piece_us: Option<u64>,
    /// The error, when it failed.
    pub error: Option<String>,
    /// Status, usage, finish reason, model, id.
    pub info: ModelResponseInfo,
    /// The request's delta (none when recording was off).
    pub request: Option<Box<WireRequest>>,
    /// What the model answered.
    pub answer: Option<Box<WireAnswer>>,
}

/// The console's record of the wire.
#[derive(Debug, Default)]
pub struct Wire {
    /// Messages and tool sets, to put requests together again.
    pub book: RequestBook,
    calls: VecDeque<ModelCall>,
    exchanges: VecDeque<McpExchange>,
    tokens: BTreeMap<u64, TokenUsage>,
    /// Tokens of every request seen.
    pub total: TokenUsage,
    /// µs spent streaming completions that reported usage (first piece to end), for tokens/s.
    streaming_us: u64,
    /// Completion tokens of those requests.
    streamed_tokens: u64,
}

impl Wire {
    /// Takes in one model request.
    pub fn on_model_request(&mut self, call: ModelCall) {
        if let Some(request) = &call.request {
            self.book.fold(call.session, request);
        }
        if let Some(usage) = &call.info.usage {
            self.tokens.entry(call.session).or_default().add(usage);
            self.total.add(usage);
            let streaming = call
                .total_us
                .saturating_sub(call.first_piece_us.unwrap_or(0));
            if usage.completion_tokens > 0 && streaming > 0 {
                self.streaming_us += streaming;
                self.streamed_tokens += usage.completion_tokens;
            }
        }
        if self.calls.len() >= REQUESTS_KEPT {
            self.calls.pop_front();
        }
        self.calls.push_back(call);
    }

    /// Takes in one MCP exchange.
    pub fn on_mcp(&mut self, exchange: &McpExchange) {
        if self.exchanges.len() >= EXCHANGES_KEPT {
            self.exchanges.pop_front();
        }
        self.exchanges.push_back(exchange.clone());
    }

    /// The model requests of one turn, in order.
    pub fn calls_of(&self, session: u64, turn: u64) -> Vec<&ModelCall> {
        self.calls
            .iter()
            .filter(|c| c.session == session && c.turn == turn)
            .collect()
    }

    /// Tokens of one turn's requests (none when no request reported usage).
    pub fn turn_tokens(&self, session: u64, turn: u64) -> Option<TokenUsage> {
        let mut sum = None::<TokenUsage>;
        for c in self.calls_of(session, turn) {
            if let Some(u) = &c.info.usage {
                sum.get_or_insert_with(TokenUsage::default).add(u);
            }
        }
        sum
    }

    /// Tokens of one session's requests.
    pub fn session_tokens(&self, session: u64) -> Option<&TokenUsage> {
        self.tokens.get(&session)
    }

    /// Completion tokens per second while streaming, over every request that reported usage.
    pub fn completion_rate(&self) -> Option<f64> {
        (self.streaming_us > 0)
            .then(|| self.streamed_tokens as f64 * 1e6 / self.streaming_us as f64)
    }

    /// The MCP exchanges kept, oldest first.
    pub fn exchanges(&self) -> impl DoubleEndedIterator<Item = &McpExchange> {
        self.exchanges.iter()
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
